"""The exact checks after a search: the logit with only the answer kept (fidelity−) and each
protocol's curve logits, one batched call per event (``after_search``; ``explain.py`` and the
memory benchmark make them alike)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cftgnn.explain.result import (
    ExplanationResult,
    ExplanationStatus,
)
from cftgnn.oracle.oracle import Oracle
from cftgnn.scoring.curves import (
    curve_removal_plan,
)
from cftgnn.scoring.protocols import (
    CurveSet,
    Protocol,
    ordered_protocols,
    single_removal_sets,
    temgx_removal_sets,
    tempme_removal_sets,
    tgx_coalition_removal_sets,
    tgx_removal_sets,
)


@dataclass(frozen=True)
class Checks:
    """The exact checks after an explanation, and their seconds (``after_search``): record
    columns (``cftgnn.runs.records.EventContext`` holds one; a field's metadata names the
    record schema that added it, ``since``, and the value older records read back as, ``old``).

    Attributes:
        keep_logit: The logit with only the explanation kept among the removable events
            (fidelity−; NaN when the event was not explained).
        keep_time_s: Seconds of that call (NaN when not made).
        fid_curve_logits: ``curve_logits``'s first part (empty when not made).
        acc_curve_logits: Its second part.
        curve_time_s: Seconds of every protocol's curve calls (NaN when none was made).
        curve_protocols: The protocols whose curves were computed (values, in
            ``Protocol``'s order).
        tgnnexplainer_curve_logits: ``tgx_curve_logits`` (empty when not made).
        tempme_curve_logits: ``tempme_curve_logits``'s explained pair's logits.
        tempme_neg_dst: Its negative destination (None when not made).
        tempme_neg_logit: The negative pair's logit with nothing removed.
        tempme_neg_curve_logits: The negative pair's logits.
        temgx_curve_logits: ``temgx_curve_logits`` (empty when not made).
        single_removal_logits: Each ranked event's single-removal logit, in the ranking's
            order (the ``temgx`` protocol's; empty when not made).
    """

    keep_logit: float = float("nan")
    keep_time_s: float = field(default=float("nan"), metadata={"since": 6, "old": float("nan")})
    fid_curve_logits: tuple[float, ...] = field(default=(), metadata={"since": 4, "old": ()})
    acc_curve_logits: tuple[float, ...] = field(default=(), metadata={"since": 4, "old": ()})
    curve_time_s: float = field(default=float("nan"), metadata={"since": 6, "old": float("nan")})
    curve_protocols: tuple[str, ...] = field(default=(), metadata={"since": 7, "old": None})
    tgnnexplainer_curve_logits: tuple[float, ...] = field(default=(),
                                                          metadata={"since": 7, "old": ()})
    tempme_curve_logits: tuple[float, ...] = field(default=(), metadata={"since": 7, "old": ()})
    tempme_neg_dst: int | None = field(default=None, metadata={"since": 7, "old": None})
    tempme_neg_logit: float = field(default=float("nan"),
                                    metadata={"since": 7, "old": float("nan")})
    tempme_neg_curve_logits: tuple[float, ...] = field(default=(),
                                                       metadata={"since": 7, "old": ()})
    temgx_curve_logits: tuple[float, ...] = field(default=(), metadata={"since": 9, "old": ()})
    single_removal_logits: tuple[float, ...] = field(default=(),
                                                     metadata={"since": 9, "old": ()})


def after_search(oracle: Oracle, result: ExplanationResult,
                 curves: CurveSet | Sequence[Protocol], slots: int | None = None,
                 negative_dst: int | None = None) -> Checks:
    """The exact calls ``explain.py`` makes after each explanation (and the memory
    benchmark, to time what a run costs): ``keep_logit``, then each protocol's curve logits
    (``curve_logits``, ``tgx_curve_logits``, ``tempme_curve_logits``); none for an event that
    was not explained. Protected events stay, as everywhere.

    Args:
        oracle: The event's oracle.
        result: Its explanation.
        curves: The protocols whose curves to compute, or a ``CurveSet`` (``none``: none,
            ``common``: the common protocol's, ``all``: every protocol's).
        slots: The model's sampled slots (``sampled_slots``), for ``tempme``.
        negative_dst: The negative pair's destination, for ``tempme``
            (``negative_destination``).

    Raises:
        ValueError: ``tempme`` without ``slots`` or ``negative_dst``.
    """
    protocols = ordered_protocols(curves)
    if Protocol.TEMPME in protocols and (slots is None or negative_dst is None):
        raise ValueError("the tempme protocol needs the model's slots and a negative "
                         "destination")
    if result.status is not ExplanationStatus.OK:
        return Checks()
    start = time.perf_counter()
    keep = keep_logit(oracle, result)
    keep_time = time.perf_counter() - start
    if not protocols:
        return Checks(keep, keep_time)
    start = time.perf_counter()
    out = protocol_columns(oracle, result, protocols, slots, negative_dst)
    return Checks(keep, keep_time, curve_time_s=time.perf_counter() - start,
                  curve_protocols=tuple(p.value for p in protocols), **out)


def keep_logit(oracle: Oracle, result: ExplanationResult) -> float:
    """The exact logit with only the explanation kept among the removable events
    (fidelity−): ``after_search``'s first call."""
    return oracle.exact(set(oracle.removable.tolist()) - set(result.explanation))


def protocol_columns(oracle: Oracle, result: ExplanationResult, protocols: Sequence[Protocol],
                     slots: int | None = None, negative_dst: int | None = None
                     ) -> dict[str, Any]:
    """The record columns of each protocol's curve logits (``curve_logits``,
    ``tgx_curve_logits``, ``tempme_curve_logits``): what ``after_search`` computes after an
    explanation and ``rescore.py`` adds to a finished run's records.

    Args:
        oracle: The event's oracle.
        result: Its explanation (status ``ok``).
        protocols: The protocols whose columns to compute.
        slots: The model's sampled slots (``sampled_slots``), for ``tempme``.
        negative_dst: The negative pair's destination, for ``tempme``.

    Raises:
        ValueError: ``tempme`` without ``slots`` or ``negative_dst``.
    """
    out: dict[str, Any] = {}
    if Protocol.COMMON in protocols:
        out["fid_curve_logits"], out["acc_curve_logits"] = curve_logits(oracle, result.ranking)
    if Protocol.TGNNEXPLAINER in protocols:
        out["tgnnexplainer_curve_logits"] = tgx_curve_logits(oracle, result)
    if Protocol.TEMPME in protocols:
        if slots is None or negative_dst is None:
            raise ValueError("the tempme protocol needs the model's slots and a negative "
                             "destination")
        pos, neg0, neg = tempme_curve_logits(oracle, result.ranking, slots, negative_dst)
        out.update(tempme_curve_logits=pos, tempme_neg_dst=int(negative_dst),
                   tempme_neg_logit=neg0, tempme_neg_curve_logits=neg)
    if Protocol.TEMGX in protocols:
        out["temgx_curve_logits"], out["single_removal_logits"] = temgx_curve_logits(
            oracle, result.ranking)
    return out


def _exact_logits(oracle: Oracle, sets: Sequence[tuple[int, ...]]) -> tuple[float, ...]:
    """Exact logits of ``sets`` in one batched call of their distinct sets, in order."""
    distinct = list(dict.fromkeys(sets))
    logits = oracle.exact_batch(distinct)
    where = {s: float(x) for s, x in zip(distinct, logits, strict=True)}
    return tuple(where[s] for s in sets)


def curve_logits(oracle: Oracle, ranking: Sequence[int]
                 ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The exact logits of the common protocol's kept sets, in one batched exact call.

    After the explanation is packaged, like ``keep_logit``: the result's oracle counters are
    already fixed, so this call does not count as the explainer's.

    Args:
        oracle: The event's oracle.
        ranking: The explainer's ranking of the removable events.

    Returns:
        ``(fid_curve_logits [21], acc_curve_logits [16])``
        (``curve_removal_plan``); both empty without a ranking.
    """
    if not len(ranking):
        return (), ()
    sets, fid_index, acc_index = curve_removal_plan(ranking, oracle.removable.tolist())
    logits = oracle.exact_batch(sets)
    return (tuple(float(x) for x in logits[fid_index]),
            tuple(float(x) for x in logits[acc_index]))


def tgx_curve_logits(oracle: Oracle, result: ExplanationResult) -> tuple[float, ...]:
    """The ``tgnnexplainer`` protocol's exact logits at its 21 levels, in one batched call:
    a search explainer (``result.coalitions`` not None) by its best coalition per level
    (``tgx_coalition_removal_sets``), any other by the prefix of its ranking among the 20 most
    recent removable events (``tgx_removal_sets``); empty without a ranking or coalitions."""
    removable = oracle.removable.tolist()
    if result.coalitions is not None:
        sets = tgx_coalition_removal_sets(result.coalitions, removable)
    elif len(result.ranking):
        sets = tgx_removal_sets(result.ranking, removable)
    else:
        return ()
    return _exact_logits(oracle, sets)


def tempme_curve_logits(oracle: Oracle, ranking: Sequence[int], slots: int, negative_dst: int
                        ) -> tuple[tuple[float, ...], float, tuple[float, ...]]:
    """The ``tempme`` protocol's exact logits: the explained pair's at its 16 ratios (one
    batched call), the negative pair's with nothing removed and at the same ratios
    (``Oracle.pair``: one batched call of the distinct sets, ``EventReplay.pair_logits``).

    Returns:
        ``(pair [16], negative original, negative [16])``; ``((), NaN, ())`` without a
        ranking, and the negative part ``(NaN, ())`` for an oracle without ``pair``.
    """
    if not len(ranking):
        return (), float("nan"), ()
    sets = tempme_removal_sets(ranking, oracle.removable.tolist(), slots)
    pos = _exact_logits(oracle, sets)
    if oracle.pair is None:
        return pos, float("nan"), ()
    distinct = list(dict.fromkeys([(), *sets]))
    logits = np.asarray(oracle.pair([frozenset(s) for s in distinct], int(negative_dst)),
                        dtype=np.float64).reshape(-1)
    where = {s: float(x) for s, x in zip(distinct, logits, strict=True)}
    return pos, where[()], tuple(where[s] for s in sets)


def temgx_curve_logits(oracle: Oracle, ranking: Sequence[int]
                       ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The ``temgx`` protocol's exact logits in one batched call: the top ``round(s·m)`` of
    the ranking removed at the 21 shares (``temgx_removal_sets``), and each ranked event
    removed alone (``single_removal_sets``, the benchmark's monotonicity).

    Returns:
        ``(curve [21], single [m])``; both empty without a ranking.
    """
    if not len(ranking):
        return (), ()
    curve, single = temgx_removal_sets(ranking), single_removal_sets(ranking)
    logits = _exact_logits(oracle, [*curve, *single])
    return logits[:len(curve)], logits[len(curve):]


__all__ = ["Checks", "after_search", "curve_logits", "keep_logit", "protocol_columns",
           "temgx_curve_logits", "tempme_curve_logits", "tgx_curve_logits"]
