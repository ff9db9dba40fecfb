"""Ground-truth metrics: how well an explanation finds the planted cause of an event.

On a planted stream (``dataset=planted``, [`EventCauses`][cftgnn.data.EventCauses]) the cause
of an explained event is known: the set ``C`` of earlier events that produced it. These pure
functions compare an explainer's output with ``C``:

* ranking explainers (a score per candidate event, e.g. perturb-one, attention,
  T-GNNExplainer): ``cause_auc`` (the ROC AUC of the scores at telling the causes from the
  other candidates) and ``cause_precision_at_k`` (the share of causes among the top
  ``|C ∩ candidates|``);
* counterfactual explainers (a set ``S`` whose removal flips the prediction):
  ``cause_set_relation`` / ``cause_set_shares`` (does ``S`` contain ``C``, is it contained in
  ``C``, is it equal to ``C``);
* the model itself: ``cause_flip_rate``, the share of events whose prediction flips when
  exactly ``C`` is removed. A model that ignores the cause scores low here, so a low
  recovery rate of an explainer can be told apart from a model that never learned the rule.

Only the causes among the candidates can be found: the functions take the candidates (the
events the explainer could choose from) and compare against ``C ∩ candidates``; an event with
no cause among its candidates gives NaN for every score (it measures nothing).

Sources: explanation AUC against ground-truth edges is the synthetic-data metric of
GNNExplainer (Ying et al., NeurIPS 2019, arXiv:1903.03894) and of T-GNNExplainer (Xia et al.,
ICLR 2023, arXiv:2209.14576); the AUC with ties counted one half is the Mann–Whitney statistic
(Hanley and McNeil, Radiology 1982); precision at ``|C|`` is R-precision (Manning, Raghavan
and Schütze, *Introduction to Information Retrieval*, 2008, §8.4). The functions keep no state and
do no I/O (``cftgnn.analysis.planted.score_run`` reads a run directory); bad input raises
``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from cftgnn.data.stream import EventCauses
from cftgnn.explain.result import ExplanationStatus
from cftgnn.scoring.metrics import flip_mask, mean_or_nan

if TYPE_CHECKING:
    from cftgnn.explain.result import ExplanationResult
    from cftgnn.oracle.oracle import Oracle

_NAN = float("nan")

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def _ids(x: Any, name: str) -> IntArray:
    """``x`` (array, sequence, set or other iterable of ids) as a flat ``int64`` array."""
    if isinstance(x, set | frozenset):
        x = sorted(x)
    elif not isinstance(x, np.ndarray | Sequence):
        x = list(x)
    arr = np.asarray(x).reshape(-1)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be integer event ids, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _ranked(events: npt.ArrayLike, scores: npt.ArrayLike,
            cause: Iterable[int]) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """``(scores, is_cause)`` over the candidates, checked."""
    ids = _ids(events, "events")
    score = np.asarray(scores, dtype=np.float64).reshape(-1)
    if ids.size != score.size:
        raise ValueError(f"{ids.size} events but {score.size} scores")
    if not np.all(np.isfinite(score)):
        raise ValueError("scores must be finite")
    if np.unique(ids).size != ids.size:
        raise ValueError("events must be distinct")
    return score, np.isin(ids, _ids(cause, "cause"))


def cause_auc(events: npt.ArrayLike, scores: npt.ArrayLike, cause: Iterable[int]) -> float:
    """ROC AUC of ``scores`` at ranking the cause events above the other candidates.

    The probability that a random cause candidate scores higher than a random non-cause
    candidate, a tie counting one half: the Mann–Whitney ``U`` over ``n_cause * n_other``
    (Hanley and McNeil, 1982), computed from mid-ranks. 1 is a perfect ranking, 0.5 a random
    (or constant) one, 0 the reverse.

    Args:
        events: The candidate event ids, distinct, ``int [m]``.
        scores: Their importances, larger is more important, ``float [m]`` (finite).
        cause: The cause event ids (those outside ``events`` are ignored).

    Returns:
        The AUC; NaN when no candidate is a cause or every candidate is one (no pair to
        compare).

    Raises:
        ValueError: On lengths that differ, repeated events or a non-finite score.
    """
    score, positive = _ranked(events, scores, cause)
    n_pos = int(positive.sum())
    n_neg = score.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return _NAN
    values, inverse, counts = np.unique(score, return_inverse=True, return_counts=True)
    below = np.cumsum(counts) - counts  # candidates strictly below each distinct score
    midrank = below + (counts + 1) / 2.0  # 1-based average rank of a tie group
    rank_sum = float(midrank[inverse.reshape(-1)][positive].sum())
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def cause_precision_at_k(events: npt.ArrayLike, scores: npt.ArrayLike, cause: Iterable[int],
                         k: int | None = None) -> float:
    """Share of cause events among the ``k`` highest-scored candidates (R-precision for the
    default ``k = |cause ∩ events|``).

    Ties at the cut are broken uniformly at random, in expectation: if ``a`` candidates score
    above the ``k``-th score and the tie group at it has ``g`` members of which ``c`` are causes,
    the ``k - a`` places left hold ``(k - a) * c / g`` causes on average. So the value does not
    depend on the order of ``events`` (a constant scorer gets the base rate).

    Args:
        events: The candidate event ids, distinct, ``int [m]``.
        scores: Their importances, larger is more important, ``float [m]`` (finite).
        cause: The cause event ids (those outside ``events`` are ignored).
        k: How many top candidates to look at (default: the number of causes among the
            candidates); at most ``m``.

    Returns:
        The precision in ``[0, 1]``; NaN when no candidate is a cause (default ``k``) or
        ``k`` is 0.

    Raises:
        ValueError: On lengths that differ, repeated events, a non-finite score or ``k``
            outside ``[0, m]``.
    """
    score, positive = _ranked(events, scores, cause)
    if k is None:
        k = int(positive.sum())
    if not 0 <= k <= score.size:
        raise ValueError(f"k must be in [0, {score.size}], got {k}")
    if k == 0:
        return _NAN
    cut = np.sort(score)[::-1][k - 1]  # the k-th largest score
    above = score > cut
    tied = score == cut
    found = float(positive[above].sum())
    found += (k - int(above.sum())) * float(positive[tied].sum()) / float(tied.sum())
    return found / k


def _target(cause: Iterable[int], candidates: Iterable[int] | None) -> set[int]:
    """The cause ids, restricted to ``candidates`` when given."""
    target = set(_ids(cause, "cause").tolist())
    if candidates is not None:
        target &= set(_ids(candidates, "candidates").tolist())
    return target


def cause_set_relation(answer: Iterable[int] | None, cause: Iterable[int],
                       candidates: Iterable[int] | None = None) -> dict[str, bool] | None:
    """How a counterfactual answer ``S`` relates to the cause set ``C``.

    Args:
        answer: The explainer's removal set, or None for no answer (nothing flipped).
        cause: The cause event ids.
        candidates: When given, ``C`` is first restricted to them (an explainer cannot choose
            a cause outside its candidates).

    Returns:
        ``{"contains": S ⊇ C, "contained": S ⊆ C, "equal": S == C}``; None when there is no
        answer or no cause (among the candidates).
    """
    target = _target(cause, candidates)
    if answer is None or not target:
        return None
    found = set(_ids(answer, "answer").tolist())
    return {"contains": found >= target, "contained": found <= target,
            "equal": found == target}


def cause_set_shares(answers: Sequence[Iterable[int] | None], causes: Sequence[Iterable[int]],
                     candidates: Sequence[Iterable[int]] | None = None) -> dict[str, float]:
    """Shares of the answers that contain, are contained in, and equal their event's cause.

    Args:
        answers: One removal set per explained event (None: no answer).
        causes: The cause set of each event.
        candidates: Optionally the candidates of each event (see ``cause_set_relation``).

    Returns:
        ``contains``, ``contained``, ``equal``: shares over the events with an answer and a
        cause among their candidates (NaN when there is none); ``answered``: the number of
        those events; ``no_answer`` and ``no_cause``: the events left out for either reason.

    Raises:
        ValueError: When the sequences differ in length.
    """
    if len(answers) != len(causes) or (candidates is not None
                                        and len(candidates) != len(answers)):
        raise ValueError("answers, causes and candidates must have one entry per event")
    rows: list[dict[str, bool]] = []
    no_answer = no_cause = 0
    for i, (answer, cause) in enumerate(zip(answers, causes, strict=True)):
        pool = None if candidates is None else candidates[i]
        relation = cause_set_relation(answer, cause, pool)
        if relation is not None:
            rows.append(relation)
        elif not _target(cause, pool):
            no_cause += 1
        else:
            no_answer += 1
    out: dict[str, float] = {
        key: mean_or_nan(np.array([r[key] for r in rows], dtype=np.float64))
        for key in ("contains", "contained", "equal")
    }
    out.update(answered=float(len(rows)), no_answer=float(no_answer), no_cause=float(no_cause))
    return out


def cause_flip_rate(original: npt.ArrayLike, without_cause: npt.ArrayLike) -> float:
    """Share of events whose prediction flips when exactly their cause set is removed.

    The model-side check: on a stream whose rule a model has learned, removing the cause of an
    event should flip its prediction (the logit changes sign; ``metrics.flip_mask``). A rate
    near 0 says the model ignores the cause, so no explainer can be expected to find it.

    Args:
        original: Logits with the full history, ``float [n]``.
        without_cause: Logits with the event's cause set removed, ``float [n]``.

    Returns:
        The share in ``[0, 1]``; NaN for no events.

    Raises:
        ValueError: On lengths that differ or a NaN logit.
    """
    return mean_or_nan(flip_mask(original, without_cause))


def ground_truth_row(ranking: Sequence[int], importance: Sequence[float],
                     explanation: Iterable[int] | None, cause: Iterable[int],
                     candidates: Iterable[int] | None = None) -> dict[str, Any]:
    """The ground-truth scores of one explained event, for one record row.

    Args:
        ranking: The ranked candidates of a ranking explainer (empty for one that only gives
            a set).
        importance: Their importances, aligned with ``ranking``.
        explanation: The counterfactual answer (None: none).
        cause: The event's cause ids (``EventCauses.of(event)``).
        candidates: The events the explainer chose from (default: ``ranking``).

    Returns:
        ``cause_size`` (causes among the candidates), ``cause_auc`` and ``cause_precision``
        (NaN without a ranking), ``cause_contains``, ``cause_contained``, ``cause_equal``
        (None without an answer or a cause).
    """
    pool = _ids(candidates if candidates is not None else ranking, "candidates")
    inside = np.intersect1d(_ids(cause, "cause"), pool)
    has_ranking = len(ranking) > 0
    relation = cause_set_relation(explanation, inside)
    return {
        "cause_size": int(inside.size),
        "cause_auc": cause_auc(ranking, importance, inside) if has_ranking else _NAN,
        "cause_precision": (cause_precision_at_k(ranking, importance, inside)
                            if has_ranking and inside.size else _NAN),
        "cause_contains": None if relation is None else relation["contains"],
        "cause_contained": None if relation is None else relation["contained"],
        "cause_equal": None if relation is None else relation["equal"],
    }


#: The record columns of an explained event on a stream with causes (``cause_columns``; null
#: on other streams), with their types: ``cftgnn.runs.records.GROUND_TRUTH_COLUMNS``.
CAUSE_COLUMNS: tuple[str, ...] = (
    "cause_total", "cause_size", "cause_auc", "cause_precision", "cause_contains",
    "cause_contained", "cause_equal", "cause_logit", "cause_flip",
)


def cause_columns(result: ExplanationResult, cause: Iterable[int],
                  oracle: Oracle | None = None) -> dict[str, Any]:
    """The ground-truth columns of one explained event's record (``CAUSE_COLUMNS``).

    ``ground_truth_row`` of the result against the causes among the removable events (the
    events the explainer chose from), plus ``cause_total`` (all causes of the event, so a
    record tells whether its whole cause was a candidate) and the model-side check of
    ``cause_flip_rate``: ``cause_logit``, the exact logit with exactly those causes removed
    (one more exact call, after the explanation, like ``keep_logit``), and ``cause_flip``,
    whether it has the other sign than the original logit.

    Args:
        result: The explanation.
        cause: The event's causes (``stream.causes.of(event)``).
        oracle: The event's oracle; None (or an event that was not explained, or no cause
            among the removable events) leaves ``cause_logit`` NaN and ``cause_flip`` None.

    Returns:
        ``{column: value}`` for every name of ``CAUSE_COLUMNS``.
    """
    ids = _ids(cause, "cause")
    pool = (oracle.removable if oracle is not None
            else _ids(result.candidate_ids, "candidates"))
    inside = np.intersect1d(ids, pool)
    answer = list(result.explanation) if result.is_counterfactual else None
    row = ground_truth_row(list(result.ranking), list(result.importance), answer, inside, pool)
    logit, flip = _NAN, None
    if oracle is not None and inside.size and result.status is ExplanationStatus.OK:
        logit = oracle.exact(inside.tolist())
        flip = bool(flip_mask([oracle.original_logit], [logit])[0])
    return {"cause_total": int(np.unique(ids).size), **row, "cause_logit": float(logit),
            "cause_flip": flip}


def _listed(value: Any) -> list[Any]:
    """A record cell (list, tuple, array or None) as a list."""
    return [] if value is None else list(value)


def score_records(records: Iterable[Mapping[str, Any]],
                  causes: EventCauses) -> list[dict[str, Any]]:
    """``ground_truth_row`` of every record of a run on a planted stream.

    Args:
        records: Rows with the record columns ``event_id``, ``explainer``, ``ranking``,
            ``importance``, ``explanation``, ``is_counterfactual`` and ``candidate_ids``
            (e.g. ``read_records(run_dir).to_dict("records")``); a row that is not a
            counterfactual counts as no answer.
        causes: The stream's ``causes``.

    Returns:
        One dict per record: ``event_id``, ``explainer`` and the ``ground_truth_row`` values.
    """
    out = []
    for row in records:
        event = int(row["event_id"])
        ranking = _listed(row.get("ranking"))
        importance = _listed(row.get("importance"))
        answer = list(row["explanation"]) if bool(row.get("is_counterfactual")) else None
        pool = row.get("candidate_ids")
        out.append({"event_id": event, "explainer": str(row.get("explainer", "")),
                    **ground_truth_row(ranking, importance, answer, causes.of(event),
                                       None if pool is None else list(pool))})
    return out


def summarize_ground_truth(scored: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per explainer, the means of ``score_records``' values over the events where each is
    defined (NaN and None left out; NaN when none is), and ``events``, the rows seen.

    Keys: ``cause_auc``, ``cause_precision``, ``cause_contains``, ``cause_contained``,
    ``cause_equal``, ``events``.
    """
    keys = ("cause_auc", "cause_precision", "cause_contains", "cause_contained", "cause_equal")
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in scored:
        groups.setdefault(str(row.get("explainer", "")), []).append(row)
    summary: dict[str, dict[str, float]] = {}
    for name, rows in groups.items():
        entry: dict[str, float] = {}
        for key in keys:
            values = [float(r[key]) for r in rows
                      if r.get(key) is not None and not np.isnan(float(r[key]))]
            entry[key] = mean_or_nan(np.array(values, dtype=np.float64))
        entry["events"] = float(len(rows))
        summary[name] = entry
    return summary


__all__ = ["CAUSE_COLUMNS", "cause_auc", "cause_columns", "cause_flip_rate",
           "cause_precision_at_k", "cause_set_relation", "cause_set_shares",
           "ground_truth_row", "score_records", "summarize_ground_truth"]
