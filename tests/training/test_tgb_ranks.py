"""TGB's ranks, MRR and hits@k against hand computations and py-tgb's own Evaluator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cftgnn.training.metrics import hits_at, mrr, tgb_ranks


def test_ranks_with_ties_by_hand() -> None:
    pos = np.array([0.5, 0.5, 2.0, -1.0])
    neg = np.array([[0.9, 0.5, 0.1],    # 1 above, 1 tied: (1 + 2) / 2 + 1 = 2.5
                    [0.5, 0.5, 0.5],    # 3 tied: (0 + 3) / 2 + 1 = 2.5
                    [0.1, 0.2, 0.3],    # first: 1
                    [0.0, 1.0, 3.0]])   # last: 4
    ranks = tgb_ranks(pos, neg)
    np.testing.assert_array_equal(ranks, [2.5, 2.5, 1.0, 4.0])
    assert math.isclose(mrr(ranks), (1 / 2.5 + 1 / 2.5 + 1 + 1 / 4) / 4)
    assert hits_at(ranks, 1) == 0.25
    assert hits_at(ranks, 2) == 0.25  # 2.5 is not within the top 2
    assert hits_at(ranks, 3) == 0.75
    assert hits_at(ranks, 10) == 1.0


def test_ragged_negatives_equal_each_row_alone() -> None:
    pos = np.array([1.0, 0.0, 3.0])
    rows = [np.array([2.0, 1.0, 0.0, 1.0]), np.array([]), np.array([3.0, 4.0])]
    indptr = np.r_[0, np.cumsum([len(r) for r in rows])]
    ranks = tgb_ranks(pos, np.concatenate(rows), indptr)
    # row 0: 1 above, 2 tied -> 3; row 1: none -> 1; row 2: 1 tied, 1 above -> 2.5
    np.testing.assert_array_equal(ranks, [3.0, 1.0, 2.5])
    for q, row in enumerate(rows):
        assert tgb_ranks(pos[q:q + 1], row[None, :])[0] == ranks[q]


def test_nan_ranks_nan_and_bad_shapes_are_refused() -> None:
    ranks = tgb_ranks(np.array([np.nan, 1.0, 1.0]),
                      np.array([[0.0, 1.0], [np.nan, 0.0], [0.0, 0.0]]))
    assert np.isnan(ranks[:2]).all() and ranks[2] == 1.0
    assert math.isnan(mrr(ranks)) and math.isnan(hits_at(ranks, 10))
    assert math.isnan(mrr([])) and math.isnan(hits_at([], 10))
    with pytest.raises(ValueError, match="indptr"):
        tgb_ranks(np.zeros(2), np.zeros(3), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="shape"):
        tgb_ranks(np.zeros(2), np.zeros((3, 4)))


def test_equal_to_py_tgb_evaluator_on_random_scores() -> None:
    evaluate = pytest.importorskip("tgb.linkproppred.evaluate")
    evaluator = evaluate.Evaluator(name="tgbl-wiki")  # k_value 10, its default
    rng = np.random.default_rng(0)
    for trial in range(20):
        q, n = int(rng.integers(1, 40)), int(rng.integers(1, 60))
        # coarse scores: many ties, as float32 logits of a weak model have
        pos = rng.integers(0, 8, q).astype(np.float32) / 4
        neg = rng.integers(0, 8, (q, n)).astype(np.float32) / 4
        if trial % 2:
            pos, neg = rng.normal(size=q).astype(np.float32), rng.normal(size=(q, n))
        theirs = evaluator.eval({"y_pred_pos": pos, "y_pred_neg": neg,
                                 "eval_metric": ["mrr"]})
        ranks = tgb_ranks(pos, neg)
        assert math.isclose(mrr(ranks), float(theirs["mrr"]), rel_tol=1e-6)
        assert math.isclose(hits_at(ranks, 10), float(theirs["hits@10"]), rel_tol=1e-6)
        # TGB's example ranks one positive at a time and averages the MRRs
        one_by_one = [float(evaluator.eval({"y_pred_pos": pos[i:i + 1],
                                            "y_pred_neg": neg[i:i + 1],
                                            "eval_metric": ["mrr"]})["mrr"])
                      for i in range(q)]
        assert math.isclose(mrr(ranks), float(np.mean(one_by_one)), rel_tol=1e-6)
