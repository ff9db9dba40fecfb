"""The field's curve metrics over kept top-ranked events, as pure functions (docs/design.md §8).

Every explainer's record holds a ranking ``r = (e_1, …, e_m)`` of its removable candidates
``R``, most important first. The curve metrics keep a share ``s`` of that ranking and remove
the rest, then ask how the prediction moves:

* **T-GNNExplainer's family** (Xia et al., "Explaining Temporal Graph Models through an
  Explorer-Navigator Framework", ICLR 2023): the fidelity of the kept top events at the kept
  shares ``0, 0.05, …, 1`` (``FID_SHARES``); per event its best-so-far curve; **Best-FID**
  (``best_fid``) and **AUFSC** (``aufsc_keep``, named apart from the seed's AUFSC±
  of ``cftgnn.scoring.metrics``).
* **TempME's ACC-AUC** (Chen & Ying, "TempME: Towards the Explainability of Temporal Graph
  Neural Networks via Motif Discovery", NeurIPS 2023): the share of events whose prediction
  keeps its sign with only the top events kept, at 16 shares in ``[0, 0.3]``
  (``ACC_SHARES``), and the normalised area under that curve (``acc_auc``).

The T-GNNExplainer family (its kept sets, ``fidelity``, ``best_fid``, ``aufsc_keep``) is
defined in ``cftgnn.explain.fidelity_curve``, where the explainers' training selects its
epoch by the same AUFSC, and imported here; the rest of this module builds on it.

The logits come from the exact oracle, one batched call per event (the pipeline evaluates
``curve_removal_plan``'s sets and records them as ``fid_curve_logits`` [21] and
``acc_curve_logits`` [16]). Here everything takes those logits: a row per event, ``float``
``[N, S]``. An event without a curve (not explained, no ranking: records older than schema 4,
or an empty ranking) has an empty row; it is left out of the means, and a metric over no event
at all is NaN.

Ties in importance are resolved by the ranking's own order (the explainer's tie-break, e.g.
``rank_by_importance``: the more recent event first); the curves
do not average over the orders of tied events.

The other protocols' rules (T-GNNExplainer's, TempME's, TemGX's) are in
``cftgnn.scoring.protocols``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

# the T-GNNExplainer family, defined beside the explainers (their training selects by AUFSC)
from cftgnn.explain.fidelity_curve import (
    FID_SHARES,
    Curves,
    FloatArray,
    aufsc_keep,
    best_fid,
    best_so_far,
    curve_rows,
    fidelity,
    fidelity_curves,
    kept_count,
    kept_removal_sets,
    mean_fidelity_curve,
)

BoolArray = npt.NDArray[np.bool_]

#: TempME's sparsity levels: 16 evenly spaced shares in [0, 0.3] (0, 0.02, …, 0.3).
ACC_SHARES: tuple[float, ...] = tuple(round(0.3 * i / 15, 10) for i in range(16))

_NAN = float("nan")


# --------------------------------------------------------------------------- kept sets


def curve_removal_plan(ranking: Sequence[int], removable: Sequence[int] | None = None
                       ) -> tuple[list[tuple[int, ...]], npt.NDArray[np.int64],
                                  npt.NDArray[np.int64]]:
    """The distinct removal sets of both grids, for one batched exact call per event.

    Args:
        ranking: The explainer's ranking of ``R``, ``int [m]`` (``m > 0``).
        removable: ``R`` when the ranking may leave some of it out.

    Returns:
        ``(sets, fid_index, acc_index)``: the distinct removal sets in order of first use;
        ``fid_index`` ``int [21]`` and ``acc_index`` ``int [16]`` point into them for
        ``FID_SHARES`` and ``ACC_SHARES``.
    """
    sets: list[tuple[int, ...]] = []
    where: dict[tuple[int, ...], int] = {}

    def index(grid: Sequence[float]) -> npt.NDArray[np.int64]:
        out = []
        for s in kept_removal_sets(ranking, grid, True, removable):
            if s not in where:
                where[s] = len(sets)
                sets.append(s)
            out.append(where[s])
        return np.asarray(out, dtype=np.int64)

    fid_index = index(FID_SHARES)
    acc_index = index(ACC_SHARES)
    return sets, fid_index, acc_index


# --------------------------------------------------------------------------- TempME


def agreement(p_orig: npt.ArrayLike, p: npt.ArrayLike) -> BoolArray:
    """Whether a kept-subgraph logit keeps the sign of the original: ``p_orig · p > 0``.

    A logit of exactly 0 (probability ½) agrees with neither side. This differs on purpose
    from the flip test of fid+/fid− ([``is_flip``][cftgnn.oracle.is_flip], where 0 is no
    flip): a prediction that stays is one that still has the original's sign.
    """
    return np.asarray(p_orig, dtype=np.float64) * np.asarray(p, dtype=np.float64) > 0


def acc_curve(original: npt.ArrayLike,
              kept: Curves) -> FloatArray:
    """TempME's accuracy at each share of ``ACC_SHARES``: the share of events whose
    kept-subgraph logit agrees in sign with the original (``agreement``), ``float [16]``
    (all NaN without an event with a curve)."""
    p0, logits = curve_rows(original, kept, len(ACC_SHARES))
    if not len(p0):
        return np.full(len(ACC_SHARES), _NAN)
    return agreement(p0[:, None], logits).mean(axis=0)


def acc_auc(original: npt.ArrayLike,
            kept: Curves) -> float:
    """TempME's **ACC-AUC**: the area under ``acc_curve`` over ``s ∈ [0, 0.3]``
    (trapezoid rule), divided by the grid's width 0.3, so it lies in ``[0, 1]``.

    ``ACC-AUC = (1 / 0.3) ∫₀^0.3 acc(s) ds`` (Chen & Ying, NeurIPS 2023, Table 1; the
    prediction with the top ``s`` of the explanation kept compared with the original
    prediction). TempME's code averages the 16 accuracies (``np.mean``) over its levels
    instead of integrating; on an evenly spaced grid the two differ only by the half weight
    of the two ends. Higher is better; NaN without an event with a curve.
    """
    acc = acc_curve(original, kept)
    if np.isnan(acc).all():
        return _NAN
    grid = np.asarray(ACC_SHARES)
    return float(np.trapezoid(acc, grid) / (grid[-1] - grid[0]))


__all__ = ["ACC_SHARES", "FID_SHARES", "acc_auc", "acc_curve", "agreement", "aufsc_keep",
           "best_fid", "best_so_far", "curve_removal_plan", "curve_rows", "fidelity",
           "fidelity_curves", "kept_count", "kept_removal_sets", "mean_fidelity_curve"]
