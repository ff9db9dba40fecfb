"""Link-prediction metrics as pure numpy functions (no scikit-learn dependency): AP, ROC
AUC, and TGB's ranks of positives among negatives (MRR, hits@k)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def average_precision(y_true: npt.ArrayLike, y_score: npt.ArrayLike) -> float:
    """Average precision ``AP = Σ_n (R_n − R_{n−1}) P_n`` over the distinct score thresholds.

    Same definition as scikit-learn's ``average_precision_score`` (tied scores form one
    threshold). Returns NaN when there is no positive.

    Args:
        y_true: Binary labels, ``[M]``.
        y_score: Scores (higher = more positive), ``[M]``.
    """
    y = np.asarray(y_true, dtype=np.float64).reshape(-1)
    s = np.asarray(y_score, dtype=np.float64).reshape(-1)
    if y.sum() == 0:
        return float("nan")
    order = np.argsort(-s, kind="mergesort")
    y, s = y[order], s[order]
    last = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # last index of each threshold
    tps = np.cumsum(y)[last]
    precision = tps / (last + 1)
    recall = tps / tps[-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def roc_auc(y_true: npt.ArrayLike, y_score: npt.ArrayLike) -> float:
    """Area under the ROC curve, the Mann–Whitney statistic with tied scores counted as ½.

    Returns NaN unless both classes are present.

    Args:
        y_true: Binary labels, ``[M]``.
        y_score: Scores, ``[M]``.
    """
    y = np.asarray(y_true, dtype=bool).reshape(-1)
    s = np.asarray(y_score, dtype=np.float64).reshape(-1)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    s_sorted = s[order]
    ranks = np.empty(len(s), dtype=np.float64)
    # average rank (1-based) of each group of tied scores
    starts = np.r_[0, np.flatnonzero(np.diff(s_sorted)) + 1]
    ends = np.r_[starts[1:], len(s)]
    avg = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(avg, ends - starts)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def tgb_ranks(pos: npt.ArrayLike, neg: npt.ArrayLike,
              indptr: npt.ArrayLike | None = None) -> npt.NDArray[np.float64]:
    """The rank of each positive among its negatives, as TGB's ``Evaluator`` computes it.

    With ``opt_q = #{j : neg_qj > pos_q}`` (the optimistic rank: the positive first among
    the scores it ties with) and ``pess_q = #{j : neg_qj >= pos_q}`` (the pessimistic one:
    last among them), ``rank_q = (opt_q + pess_q) / 2 + 1``: a positive tied with ``m``
    negatives and below ``o`` others ranks ``o + m/2 + 1``. Huang et al. 2023, "Temporal
    Graph Benchmark for Machine Learning on Temporal Graphs" (NeurIPS Datasets and
    Benchmarks); ``tgb/linkproppred/evaluate.py`` (py-tgb 2.3.0), after OGB's.

    Departure: TGB compares NaN scores as False, so a NaN positive would rank first; here a
    NaN positive or a NaN among its negatives gives a NaN rank (a diverged model's MRR is
    NaN, not perfect). A positive without negatives ranks 1, as in TGB.

    Args:
        pos: Score of each positive, ``[Q]``.
        neg: The negatives' scores: ``[Q, N]`` (N per positive), or ragged, ``[M]``, the
            negatives of positive ``q`` at ``neg[indptr[q]:indptr[q + 1]]``.
        indptr: ``int [Q + 1]`` for ragged ``neg`` (CSR, as ``TGBNegatives``), else None.

    Returns:
        ``float64 [Q]`` ranks, each in ``[1, N_q + 1]``.
    """
    p = np.asarray(pos).reshape(-1)
    n = np.asarray(neg)
    if indptr is None:
        if n.ndim != 2 or n.shape[0] != len(p):
            raise ValueError(f"neg must be [Q, N] with Q = {len(p)} positives (or give "
                             f"indptr for ragged negatives), not of shape {n.shape}")
        opt = (n > p[:, None]).sum(axis=1)
        pess = (n >= p[:, None]).sum(axis=1)
        bad = np.isnan(n).any(axis=1) if n.dtype.kind == "f" else np.zeros(len(p), bool)
    else:
        ptr = np.asarray(indptr, dtype=np.int64).reshape(-1)
        n = n.reshape(-1)
        if ptr.size != len(p) + 1 or ptr[0] != 0 or ptr[-1] != n.size or np.any(np.diff(ptr) < 0):
            raise ValueError(f"indptr must run from 0 to {n.size} in {len(p) + 1} "
                             "non-decreasing entries")
        row = np.repeat(np.arange(len(p)), np.diff(ptr))  # the positive of each negative
        opt = np.bincount(row, weights=n > p[row], minlength=len(p))
        pess = np.bincount(row, weights=n >= p[row], minlength=len(p))
        bad = (np.bincount(row, weights=np.isnan(n), minlength=len(p)) > 0
               if n.dtype.kind == "f" else np.zeros(len(p), bool))
    ranks = 0.5 * (opt + pess).astype(np.float64) + 1.0
    if p.dtype.kind == "f":
        bad = bad | np.isnan(p)
    ranks[bad] = np.nan
    return ranks


def mrr(ranks: npt.ArrayLike) -> float:
    """Mean reciprocal rank ``MRR = (1/Q) Σ_q 1 / rank_q`` (TGB's headline link metric, Huang
    et al. 2023; the ranks of ``tgb_ranks``). NaN for no positive."""
    r = np.asarray(ranks, dtype=np.float64).reshape(-1)
    return float(np.mean(1.0 / r)) if r.size else float("nan")


def hits_at(ranks: npt.ArrayLike, k: int) -> float:
    """``hits@k = (1/Q) Σ_q [rank_q <= k]``, the share of positives ranked within the top
    ``k`` (TGB's Evaluator, Huang et al. 2023; its default ``k_value`` is 10). A half rank
    from ties counts as TGB counts it (``5.5 <= 5`` is false). NaN for no positive, and for
    a NaN rank among them."""
    r = np.asarray(ranks, dtype=np.float64).reshape(-1)
    if r.size == 0 or np.isnan(r).any():
        return float("nan")
    return float(np.mean(r <= k))
