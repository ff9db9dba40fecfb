"""AP and AUC against hand-computed values."""

from __future__ import annotations

import math

import numpy as np

from cftgnn.training.metrics import average_precision, roc_auc


def test_hand_computed_values_with_ties() -> None:
    y = np.array([1, 0, 1, 1, 0, 0, 1])
    s = np.array([0.9, 0.9, 0.3, 0.5, 0.1, 0.5, 0.8])
    # thresholds .9 (P=1/2, R=1/4), .8 (2/3, 1/2), .5 (3/5, 3/4), .3 (4/6, 1)
    assert math.isclose(average_precision(y, s), 0.25 * (1 / 2 + 2 / 3 + 3 / 5 + 4 / 6))
    assert math.isclose(roc_auc(y, s), 7 / 12)


def test_perfect_and_degenerate() -> None:
    assert average_precision([1, 0], [2.0, 1.0]) == 1.0
    assert roc_auc([1, 0], [2.0, 1.0]) == 1.0
    assert roc_auc([0, 1], [2.0, 1.0]) == 0.0
    assert math.isnan(roc_auc([1, 1], [2.0, 1.0]))
    assert math.isnan(average_precision([0, 0], [2.0, 1.0]))
