"""The protocols of the field's papers: whose rules a curve follows (``explain.py
protocol=``).

**Protocols** (``Protocol``, docs/metrics.md). The ``common`` protocol is
``cftgnn.scoring.curves``: one rule for every explainer, over all of ``R``. Each paper
also scored explanations its own way, and ``explain.py protocol=...`` computes those beside it:

* ``tgnnexplainer`` (T-GNNExplainer's evaluator, ``EvaluatorAttenTG`` / ``EvaluatorMCTSTG`` of
  its code): only the ``m = 20`` most recent events of ``R`` are candidates
  (``tgx_candidates``), the rest of the computation graph stays; at the kept shares
  ``0, 0.05, …, 1`` a ranking explainer keeps its top ``⌊s·m⌋ + 1`` candidates
  (``tgx_kept_count``), a search explainer (one that hands back its scored ``coalitions``)
  the best-rewarded coalition of at most ``s·m`` candidates (``tgx_best_coalitions``);
  Best-FID and AUFSC are then taken as above (``best_fid``, ``aufsc_keep``, on the
  ``tgnnexplainer_curve_logits``).
* ``tempme`` (TempME's ``threshold_test``): at the ratios ``0.01, 0.02, 0.04, …, 0.30``
  (``TEMPME_RATIOS``) of the model's sampled slots (``sampled_slots``) the top
  ``min(max(⌈r·S⌉, 1), S)`` of the ranking are kept (``tempme_kept_count``), and the
  explained pair **and a negative pair** (the explained source with a random destination,
  scored under the same removals) are counted: the accuracy is the share of the ``2n`` pairs
  whose label (``logit > 0``) stays the original's, ACC-AUC its mean over the ratios
  (``tempme_acc_auc``).
* ``temgx`` (TemGX's ``temgxlib/explain/metrics.py`` as the benchmark repository
  ``juliawenkmann/time_to_explain`` applies it, ``TemGXAufscMetric`` of its
  ``src/metrics/_fidelity_extra_metrics.py``): at the shares ``0, 0.05, …, 1`` the top
  ``round(s·m)`` of the ranking are **removed** (``temgx_removed_count``), the fidelity is the
  probability's move ``|σ(p_orig) − σ(p)|`` (``temgx_fidelity``) and AUFSC the trapezoid
  over the (share, fidelity) points (``temgx_aufsc``); beside it each removable event's
  single-removal logit, for the benchmark's monotonicity
  (``cftgnn.scoring.benchmark_metrics``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt

from cftgnn.scoring.curves import FID_SHARES, Curves, FloatArray, curve_rows


class Protocol(str, Enum):
    """Whose rules a curve follows (``explain.py protocol=``; docs/metrics.md).

    * ``common`` — this module's curves over all of ``R`` (``kept_removal_sets``);
    * ``tgnnexplainer`` — T-GNNExplainer's evaluator (``tgx_removal_sets``);
    * ``tempme`` — TempME's ACC-AUC with negative pairs (``tempme_removal_sets``,
      ``tempme_acc_auc``);
    * ``temgx`` — TemGX's fidelity and AUFSC over removed shares (``temgx_removal_sets``,
      ``temgx_aufsc``) and the benchmark's monotonicity (``single_removal_sets``).
    """

    COMMON = "common"
    TGNNEXPLAINER = "tgnnexplainer"
    TEMPME = "tempme"
    TEMGX = "temgx"



class CurveSet(str, Enum):
    """Which curve metrics ``explain.py`` computes for each explained event (their exact
    logits, one batched call after the search; ``cftgnn.scoring.curves``).

    * ``none`` — none: ``fid_curve_logits`` and ``acc_curve_logits`` stay empty and
      ``best_fid``, ``aufsc_keep`` and ``acc_auc`` are NaN (the explanation, fidelity± and
      every other column are unchanged);
    * ``common`` — the curves of the ``protocol`` option's protocols (``common`` by default:
      T-GNNExplainer's fidelity over kept shares, 21 logits, and TempME's ACC-AUC, 16 logits),
      whatever the stream's length (the name is from when ``common`` was the only protocol);
    * ``all`` — every protocol's curves (``Protocol``), whatever ``protocol`` says.

    The option also takes ``auto`` (the default, ``cftgnn.runs.options.curves_choice``).
    """

    NONE = "none"
    COMMON = "common"
    ALL = "all"


def run_protocols(curves: CurveSet, protocols: tuple[Protocol, ...]) -> tuple[Protocol, ...]:
    """The protocols whose curves a run computes: none with ``curves=none`` (also what
    ``auto`` resolves to on a long stream), every one with ``curves=all``, else
    ``protocols`` (the ``protocol`` option's)."""
    if curves is CurveSet.NONE:
        return ()
    return tuple(Protocol) if curves is CurveSet.ALL else tuple(protocols)


def ordered_protocols(curves: CurveSet | Sequence[Protocol]) -> tuple[Protocol, ...]:
    """A ``CurveSet`` (every protocol for ``all``, the common one for ``common``, none for
    ``none``) or the protocols themselves, in ``Protocol``'s order, each once."""
    if isinstance(curves, CurveSet):
        return run_protocols(curves, (Protocol.COMMON,))
    return tuple(p for p in Protocol if p in set(curves))


#: T-GNNExplainer's candidates: its ``threshold_num``, the most recent events of the
#: computation graph that an explanation may drop (``find_candidates`` of its code).
TGX_CANDIDATES = 20
#: TempME's ratios of the sampled slots (``args.ratios`` of its ``temp_exp_main.py``).
TEMPME_RATIOS: tuple[float, ...] = (0.01, 0.02, 0.04, 0.06, 0.08, 0.10, 0.12, 0.14, 0.16,
                                    0.18, 0.2, 0.22, 0.24, 0.26, 0.28, 0.30)


def tgx_candidates(removable: Sequence[int], m: int = TGX_CANDIDATES) -> list[int]:
    """The ``m`` most recent events of ``R`` (the largest ids), ascending: T-GNNExplainer's
    candidates (``candidate_events[-threshold_num:]``). The other events of the model's
    computation graph (the rest of the candidates ``C``) are its *base events*: kept at every
    level, never removed."""
    return sorted(int(e) for e in removable)[-m:] if m > 0 else []


def tgx_kept_count(share: float, m: int) -> int:
    """How many top-ranked candidates T-GNNExplainer's evaluator keeps at a level:
    ``⌊s·m⌋ + 1`` (``candidates[:int(s·m) + 1]``), at most ``m``.

    ``s·m`` is rounded to 9 decimals first: for every ``m ≤ 20`` this gives the counts of the
    authors' float grid ``np.arange(0, 1.05, 0.05)`` (a test checks it).
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"a kept share must lie in [0, 1], got {share}")
    return min(math.floor(round(share * m, 9)) + 1, m)


def tgx_coalition_size_limit(share: float, m: int) -> int:
    """The largest coalition ``EvaluatorMCTSTG`` admits at a level: ``|c| / m ≤ s``, i.e.
    ``⌊s·m⌋`` candidates (one fewer than a ranking keeps, ``tgx_kept_count``)."""
    return math.floor(round(share * m, 9))


def tgx_ranked(ranking: Sequence[int], candidates: Sequence[int]) -> list[int]:
    """The ranking restricted to the candidates; candidates it leaves out follow, the most
    recent first."""
    cand = set(int(e) for e in candidates)
    ranked = [int(e) for e in ranking if int(e) in cand]
    rest = sorted(cand - set(ranked), reverse=True)
    return ranked + rest


def tgx_removal_sets(ranking: Sequence[int], removable: Sequence[int],
                     shares: Sequence[float] = FID_SHARES,
                     m: int = TGX_CANDIDATES) -> list[tuple[int, ...]]:
    """T-GNNExplainer's protocol for a **ranking** explainer: at each level keep the top
    ``⌊s·m⌋ + 1`` of the ranking restricted to the ``m`` most recent events of ``R``, remove the
    other candidates; nothing outside them is ever removed (``EvaluatorAttenTG``).

    Returns:
        One removal set per share, ascending (empty without candidates).
    """
    cand = tgx_candidates(removable, m)
    order = tgx_ranked(ranking, cand)
    n = len(cand)
    return [tuple(sorted(order[tgx_kept_count(s, n):])) if n else () for s in shares]


def tgx_best_coalitions(coalitions: Sequence[tuple[Sequence[int], float]],
                        removable: Sequence[int], shares: Sequence[float] = FID_SHARES,
                        m: int = TGX_CANDIDATES) -> list[tuple[int, ...]]:
    """T-GNNExplainer's protocol for a **search** explainer (``EvaluatorMCTSTG``): at each
    level the best-rewarded scored coalition of at most ``⌊s·m⌋`` candidates, as the kept
    candidates.

    The authors sort the scored tree nodes by sparsity ``|c| / m`` and take, at each level,
    the running best reward over the nodes with sparsity ``≤ s``; so the coalition kept at a
    level is the best of those. Ties: the smaller coalition, then the first scored. A coalition
    is read as its events among the candidates (the search's own candidates are the same ``m``
    most recent events of ``R`` by default). A level that no scored coalition fits (the
    authors' code fails there; a search whose rollouts reach the empty coalition never leaves
    one) keeps the empty coalition: nothing of the candidates.

    Args:
        coalitions: ``(kept, reward)`` pairs in the order scored
            (``ExplanationResult.coalitions``).
        removable: ``R``.
        shares: The levels.
        m: The number of candidates.

    Returns:
        The kept candidates at each level, ascending.
    """
    cand = set(tgx_candidates(removable, m))
    n = len(cand)
    scored = [(tuple(sorted(cand & {int(e) for e in kept})), float(reward), i)
              for i, (kept, reward) in enumerate(coalitions)]
    out: list[tuple[int, ...]] = []
    for s in shares:
        limit = tgx_coalition_size_limit(s, n)
        fit = [c for c in scored if len(c[0]) <= limit]
        out.append(max(fit, key=lambda c: (c[1], -len(c[0]), -c[2]))[0] if fit else ())
    return out


def tgx_coalition_removal_sets(coalitions: Sequence[tuple[Sequence[int], float]],
                               removable: Sequence[int], shares: Sequence[float] = FID_SHARES,
                               m: int = TGX_CANDIDATES) -> list[tuple[int, ...]]:
    """The removal sets of ``tgx_best_coalitions``: the candidates each level's coalition
    does not keep."""
    cand = tgx_candidates(removable, m)
    return [tuple(e for e in cand if e not in set(kept))
            for kept in tgx_best_coalitions(coalitions, removable, shares, m)]


def temgx_removed_count(share: float, m: int) -> int:
    """How many top-ranked events the ``temgx`` protocol removes at a share: Python's
    ``round(s·m)`` (half to even, the benchmark's ``_k_from_level``), within ``[0, m]``."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"a removed share must lie in [0, 1], got {share}")
    return max(0, min(int(round(float(share) * float(m))), m))


def temgx_removal_sets(ranking: Sequence[int], shares: Sequence[float] = FID_SHARES
                       ) -> list[tuple[int, ...]]:
    """The ``temgx`` protocol's removal sets: the top ``temgx_removed_count`` of the ranking
    at each share (everything else stays), ascending; share 0 removes nothing."""
    ranked = [int(e) for e in ranking]
    m = len(ranked)
    return [tuple(sorted(ranked[:temgx_removed_count(s, m)])) for s in shares]


def _sigmoid(x: npt.ArrayLike) -> FloatArray:
    z = np.asarray(x, dtype=np.float64)
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)), dtype=np.float64)


def temgx_fidelity(p_orig: npt.ArrayLike, p: npt.ArrayLike) -> FloatArray:
    """TemGX's ``fidelity_minus(z_full, z_removed) = |z_full − z_removed|`` on probabilities
    (``temgxlib/explain/metrics.py``): ``|σ(p_orig) − σ(p)|`` of the logits, broadcast."""
    return np.asarray(np.abs(_sigmoid(p_orig) - _sigmoid(p)), dtype=np.float64)


#: TemGX's counterfactual test: a probability drop above it (``is_counterfactual =
#: fidelity_minus > 0.01`` of its ``scripts/temgx.py``).
TEMGX_THRESHOLD = 0.01


def temgx_answer_fidelity(p_orig: npt.ArrayLike, keep: npt.ArrayLike) -> FloatArray:
    """TemGX's fid− of an answer (its ``scripts/temgx.py``): ``max(0, σ(p_orig) − σ(p_keep))``
    with ``p_keep`` the logit keeping only the answer among the removable events; the answer
    is counterfactual by TemGX's rule where it exceeds ``TEMGX_THRESHOLD``."""
    return np.asarray(np.maximum(0.0, _sigmoid(p_orig) - _sigmoid(keep)), dtype=np.float64)


def trapezoid_aufsc(points: Sequence[tuple[float, float]]) -> float:
    """TemGX's ``aufsc(points)``: the points sorted by sparsity, then
    ``Σ ½ (f_j + f_{j+1}) (s_{j+1} − s_j)``; 0 for fewer than two points."""
    pts = sorted((float(a), float(b)) for a, b in points)
    return float(sum(0.5 * (f0 + f1) * (s1 - s0)
                     for (s0, f0), (s1, f1) in zip(pts[:-1], pts[1:], strict=True)))


def temgx_aufsc(original: npt.ArrayLike, removed: Curves) -> float:
    """The ``temgx`` protocol's **AUFSC**: per event ``trapezoid_aufsc`` of
    ``(s, temgx_fidelity(p_orig, p_s))`` over ``FID_SHARES`` (the top ``round(s·m)``
    removed), mean over the events with a curve; NaN without one. Higher is better."""
    p0, logits = curve_rows(original, removed, len(FID_SHARES))
    if not len(p0):
        return math.nan
    fid = temgx_fidelity(p0[:, None], logits)
    return float(np.mean([trapezoid_aufsc(list(zip(FID_SHARES, row, strict=True)))
                          for row in fid]))


def single_removal_sets(ranking: Sequence[int]) -> list[tuple[int, ...]]:
    """Each ranked event alone, in the ranking's order (the benchmark's monotonicity removes
    one candidate at a time)."""
    return [(int(e),) for e in ranking]


def sampled_slots(num_neighbors: int, num_layers: int) -> int:
    """The slots of a model's sampled computation graph of one pair: ``2 · Σ_{l=1}^{L} n^l``
    (each endpoint's ``n`` neighbours per node and layer, TempME's ``num_edge`` per endpoint,
    ``n + n²`` for two layers), whether or not a slot holds an event."""
    if num_neighbors < 1 or num_layers < 1:
        raise ValueError(f"a model samples n >= 1 neighbours in L >= 1 layers, got "
                         f"n={num_neighbors}, L={num_layers}")
    return 2 * sum(int(num_neighbors) ** layer for layer in range(1, int(num_layers) + 1))


def tempme_kept_count(ratio: float, slots: int) -> int:
    """TempME's kept count at a ratio: ``min(max(⌈r·S⌉, 1), S)`` slots, in its own float
    arithmetic (``math.ceil(ratio * num_edge)``)."""
    return min(max(math.ceil(ratio * slots), 1), slots)


def tempme_removal_sets(ranking: Sequence[int], removable: Sequence[int], slots: int,
                        ratios: Sequence[float] = TEMPME_RATIOS) -> list[tuple[int, ...]]:
    """TempME's protocol: at each ratio keep the top ``tempme_kept_count`` of the ranking (all
    of it when that exceeds ``|R|``), remove the rest of ``R`` (unranked events of ``R``
    always)."""
    ranked = [int(e) for e in ranking]
    unranked = sorted(set(int(e) for e in removable) - set(ranked))
    return [tuple(sorted(ranked[tempme_kept_count(r, slots):] + unranked)) for r in ratios]


def tempme_accuracy(original: npt.ArrayLike, kept: Curves, neg_original: npt.ArrayLike,
                    neg_kept: Curves) -> FloatArray:
    """TempME's accuracy at each ratio: the share of the explained pairs **and** their
    negative pairs whose label (``logit > 0``, its ``sigmoid > 0.5``) with the kept events
    equals the label without removal, ``float [16]`` (all NaN without a pair).

    An event counts when both its rows are complete (``curve_rows`` on each; an event whose
    negative row is empty is left out entirely), so every counted event adds two pairs.
    """
    width = len(TEMPME_RATIOS)
    p0 = np.asarray(original, dtype=np.float64).reshape(-1)
    n0 = np.asarray(neg_original, dtype=np.float64).reshape(-1)
    pos = list(kept.reshape(len(kept), -1)) if isinstance(kept, np.ndarray) else list(kept)
    neg = (list(neg_kept.reshape(len(neg_kept), -1)) if isinstance(neg_kept, np.ndarray)
           else list(neg_kept))
    if not len(p0) == len(n0) == len(pos) == len(neg):
        raise ValueError(f"{len(p0)}, {len(n0)}, {len(pos)} and {len(neg)} rows: one per event "
                         "in each")

    def complete(row: Any, base: float) -> bool:
        r = np.asarray([] if row is None else row, dtype=np.float64).reshape(-1)
        if r.size not in (0, width):
            raise ValueError(f"a curve has {r.size} points, the grid {width}")
        return r.size == width and not np.isnan(r).any() and not math.isnan(base)

    keep = [i for i in range(len(p0)) if complete(pos[i], p0[i]) and complete(neg[i], n0[i])]
    if not keep:
        return np.full(width, math.nan)
    base = np.r_[p0[keep], n0[keep]] > 0
    logits = np.vstack([np.asarray(pos[i], dtype=np.float64) for i in keep]
                       + [np.asarray(neg[i], dtype=np.float64) for i in keep])
    return ((logits > 0) == base[:, None]).mean(axis=0)


def tempme_acc_auc(original: npt.ArrayLike, kept: Curves, neg_original: npt.ArrayLike,
                   neg_kept: Curves) -> float:
    """TempME's **ACC-AUC** as its code computes it: the mean of ``tempme_accuracy`` over the
    16 ratios (``np.mean(AUC_acc)``); NaN without a pair."""
    acc = tempme_accuracy(original, kept, neg_original, neg_kept)
    return math.nan if np.isnan(acc).all() else float(acc.mean())


def negative_destination(pool: npt.ArrayLike, event_id: int, seed: int) -> int:
    """The negative destination of an explained event for the ``tempme`` protocol: one node
    drawn uniformly from ``pool`` (the stream's destination nodes, as TempME's
    ``RandEdgeSampler`` and this project's training draw them; the true destination is not
    excluded), reproducible from ``(seed, event_id)``."""
    nodes = np.asarray(pool, dtype=np.int64).reshape(-1)
    if nodes.size == 0:
        raise ValueError("no destination node to draw a negative from")
    rng = np.random.default_rng([int(seed), int(event_id)])
    return int(nodes[rng.integers(0, nodes.size)])


__all__ = ["CurveSet", "Protocol", "TEMGX_THRESHOLD", "TEMPME_RATIOS", "TGX_CANDIDATES",
           "negative_destination", "ordered_protocols", "run_protocols", "sampled_slots",
           "single_removal_sets", "temgx_answer_fidelity", "temgx_aufsc", "temgx_fidelity",
           "temgx_removal_sets", "temgx_removed_count", "tempme_acc_auc", "tempme_accuracy",
           "tempme_kept_count", "tempme_removal_sets", "tgx_best_coalitions", "tgx_candidates",
           "tgx_coalition_removal_sets", "tgx_coalition_size_limit", "tgx_kept_count",
           "tgx_ranked", "tgx_removal_sets", "trapezoid_aufsc"]
