"""T-GNNExplainer's fidelity over kept top-ranked events, as pure functions: the kept sets of
a ranking, the fidelity curve over the kept shares ``0, 0.05, …, 1`` (``FID_SHARES``),
**Best-FID** (``best_fid``) and **AUFSC** (``aufsc_keep``).

``explain.py`` records these curves (``cftgnn.scoring.curves``, which imports them from here
and holds the other protocols); the trained explainers' training
(``cftgnn.explain.training``) selects its epoch by the same AUFSC, so the definitions live on
the floor of the explainers, once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: T-GNNExplainer's kept shares: 0, 0.05, …, 1 (21 points).
FID_SHARES: tuple[float, ...] = tuple(round(i / 20, 10) for i in range(21))

#: Kept logits of several events: a row per event (empty or None: no curve), or a 2-D array.
Curves = Sequence[Sequence[float] | None] | npt.NDArray[np.float64]

_NAN = float("nan")


# --------------------------------------------------------------------------- kept sets


def kept_count(share: float, m: int, at_least_one: bool = True) -> int:
    """How many top-ranked events a share keeps: ``⌈s·m⌉``, at least one when asked, at most
    ``m``.

    ``s·m`` is rounded to 9 decimals before the ceiling, so that a share written in decimals
    keeps what it says (``0.15 · 20`` is ``3.0000000000000004`` in floating point, 3 kept).

    Args:
        share: The kept share ``s`` in ``[0, 1]``.
        m: Length of the ranking.
        at_least_one: Keep at least one event when ``m > 0`` (both families do, see
            ``kept_removal_sets``).

    Raises:
        ValueError: A share outside ``[0, 1]`` or a negative ``m``.
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"a kept share must lie in [0, 1], got {share}")
    if m < 0:
        raise ValueError(f"a ranking has m >= 0 events, got {m}")
    k = math.ceil(round(share * m, 9))
    if at_least_one and m > 0:
        k = max(k, 1)
    return min(k, m)


def kept_removal_sets(ranking: Sequence[int], shares: Sequence[float],
                      at_least_one: bool = True,
                      removable: Sequence[int] | None = None) -> list[tuple[int, ...]]:
    """The removal set of each kept share: keep the top ``⌈s·m⌉`` of the ranking, remove the
    rest of ``R``.

    ``m = len(ranking)``. Events of ``removable`` that the ranking leaves out count as ranked
    last (always removed); candidates outside ``R`` (protected ones) are never removed.

    Both families keep at least one event. T-GNNExplainer (docs/design.md §8) says so; its
    published evaluator keeps ``⌊s·m⌋ + 1`` (``candidates[:int(s·m) + 1]``), one more than
    ``⌈s·m⌉`` where ``s·m`` is whole, which the design replaced by the ceiling. TempME's
    paper reads sparsity 0 as "no explanation kept", but its evaluation code keeps
    ``min(max(⌈s·n⌉, 1), n)`` events at every level (``threshold_test`` in its
    ``temp_exp_main.py``), so its share 0 keeps the top event; we follow the code.

    Args:
        ranking: The explainer's ranking of ``R``, most important first, ``int [m]``.
        shares: Kept shares in ``[0, 1]``, ``float [S]``.
        at_least_one: Keep at least one event at every share (``m > 0``).
        removable: ``R`` when the ranking may leave some of it out; None: the ranking is ``R``.

    Returns:
        ``S`` removal sets, each sorted ascending (an empty ranking: every set is what of
        ``removable`` there is, nothing kept).
    """
    ranked = [int(e) for e in ranking]
    unranked = sorted(set(int(e) for e in removable or ()) - set(ranked))
    m = len(ranked)
    return [tuple(sorted(ranked[kept_count(s, m, at_least_one):] + unranked)) for s in shares]


# --------------------------------------------------------------------------- rows of logits


def curve_rows(original: npt.ArrayLike, kept: Curves,
               width: int) -> tuple[FloatArray, FloatArray]:
    """The events that have a curve: ``(p_orig [n], kept logits [n, width])``.

    Args:
        original: Original logits, ``float [N]``.
        kept: Per event the kept logits along a grid (``width`` of them), or an empty row /
            None for an event without a curve; a 2-D array is taken as it is.
        width: The grid's length.

    Raises:
        ValueError: Lengths that differ, or a row neither empty nor ``width`` long.
    """
    p0 = np.asarray(original, dtype=np.float64).reshape(-1)
    rows: list[Any] = (list(kept.reshape(len(kept), -1)) if isinstance(kept, np.ndarray)
                       else list(kept))
    if len(rows) != len(p0):
        raise ValueError(f"{len(p0)} original logits but {len(rows)} curves")
    keep, values = [], []
    for i, row in enumerate(rows):
        r = np.asarray([] if row is None else row, dtype=np.float64).reshape(-1)
        if r.size == 0:
            continue
        if r.size != width:
            raise ValueError(f"curve {i} has {r.size} points, the grid {width}")
        if np.isnan(r).any() or math.isnan(p0[i]):
            continue
        keep.append(i)
        values.append(r)
    if not keep:
        return np.empty(0), np.empty((0, width))
    return p0[keep], np.vstack(values)


# --------------------------------------------------------------------------- T-GNNExplainer


def fidelity(p_orig: npt.ArrayLike, p: npt.ArrayLike) -> FloatArray:
    """T-GNNExplainer's fidelity: the signed move of a logit towards the original side.

    ``fid = p − p_orig`` if ``p_orig ≥ 0``, else ``p_orig − p`` (Xia et al., ICLR 2023,
    "fidelity_inv" of its evaluator, on logits as docs/design.md §8 fixes): positive when
    the kept events alone make the model surer of its original prediction, negative when
    the prediction moves towards (or past) the other side. Higher is better.

    Args:
        p_orig: Original logits, broadcastable against ``p``.
        p: Logits with only the kept events (of ``R``) left.

    Returns:
        The fidelities, broadcast shape, ``float``.
    """
    p0 = np.asarray(p_orig, dtype=np.float64)
    pk = np.asarray(p, dtype=np.float64)
    return np.where(p0 >= 0, pk - p0, p0 - pk)


def fidelity_curves(original: npt.ArrayLike,
                    kept: Curves) -> FloatArray:
    """Per event its fidelity at each kept share of ``FID_SHARES``, ``float [n, 21]``
    (events without a curve left out; see ``curve_rows``)."""
    p0, logits = curve_rows(original, kept, len(FID_SHARES))
    return fidelity(p0[:, None], logits)


def best_so_far(curves: npt.ArrayLike) -> FloatArray:
    """The running maximum along the kept shares, ``float [n, S]``.

    T-GNNExplainer's evaluator reports ``fid_inv_best``, the best fidelity among the kept
    sets up to each share (its ``array_best``); Best-FID and AUFSC are taken over that curve.
    """
    c = np.asarray(curves, dtype=np.float64)
    return np.maximum.accumulate(c, axis=-1) if c.size else c


def mean_fidelity_curve(original: npt.ArrayLike,
                        kept: Curves) -> FloatArray:
    """The mean fidelity at each share of ``FID_SHARES`` over the events with a curve,
    ``float [21]`` (all NaN without one); what the report plots."""
    f = fidelity_curves(original, kept)
    return f.mean(axis=0) if len(f) else np.full(len(FID_SHARES), _NAN)


def best_fid(original: npt.ArrayLike,
             kept: Curves) -> float:
    """T-GNNExplainer's **Best-FID**: per event the best fidelity over the kept shares, then the
    mean over events.

    ``Best-FID = mean_i max_s fid_i(s)`` over ``FID_SHARES`` (Xia et al., ICLR 2023,
    Table 2; its ``Results._compute_metric(metric="fid_best")`` takes the maximum of each
    event's ``fid_inv_best`` curve and averages over events). Higher is better; NaN without
    an event with a curve.
    """
    f = fidelity_curves(original, kept)
    return float(f.max(axis=1).mean()) if len(f) else _NAN


def aufsc_keep(original: npt.ArrayLike,
               kept: Curves) -> float:
    """T-GNNExplainer's **AUFSC**: the area under each event's best-so-far fidelity curve over
    kept shares ``s ∈ [0, 1]`` (trapezoid rule), mean over events.

    ``AUFSC = mean_i ∫₀¹ max_{s' ≤ s} fid_i(s') ds`` (Xia et al., ICLR 2023; its evaluator
    integrates ``fid_inv_best`` against sparsity with ``sklearn.metrics.auc``). Named apart
    from the seed's ``aufsc_plus`` / ``aufsc_minus`` (areas under fidelity–sparsity curves of
    the counterfactual answers). The grid spans 1, so the area is also the curve's mean
    height. Higher is better; NaN without an event with a curve.
    """
    f = fidelity_curves(original, kept)
    if not len(f):
        return _NAN
    return float(np.trapezoid(best_so_far(f), np.asarray(FID_SHARES), axis=1).mean())


__all__ = ["FID_SHARES", "Curves", "FloatArray", "aufsc_keep", "best_fid", "best_so_far",
           "curve_rows", "fidelity", "fidelity_curves", "kept_count", "kept_removal_sets",
           "mean_fidelity_curve"]
