"""Link-prediction metrics as pure numpy functions (no scikit-learn dependency)."""

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
