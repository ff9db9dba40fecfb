"""The rank target's scalar (``cftgnn.oracle.target``): TGB's rank against a hand computation,
and the margin's sign equal to TGB's hits@k on crafted ties and on random scores drawn from a
few values (so that ties are everywhere), for every k; refusals of k."""

from __future__ import annotations

import numpy as np
import pytest

from cftgnn.data.tgb_negatives import TGBNegatives
from cftgnn.errors import ConfigError, OracleError
from cftgnn.oracle.target import TIE_MARGIN, RankTarget, RankTargets, rank_margin
from cftgnn.training.metrics import tgb_ranks


def hits_at(pos, neg, k):
    return tgb_ranks(np.asarray(pos, dtype=float), np.asarray(neg, dtype=float)) <= k


def test_tgb_rank_by_hand():
    neg = np.array([[3.0, 1.0, 2.0, 2.0], [0.0, 0.0, 0.0, 0.0], [5.0, 5.0, 5.0, 1.0]])
    pos = np.array([2.0, 1.0, 5.0])
    # row 0: one above, two tied -> 0.5 (1 + 3) + 1 = 3; row 1: all below -> 1;
    # row 2: three tied, none above -> 0.5 (0 + 3) + 1 = 2.5
    np.testing.assert_array_equal(tgb_ranks(pos, neg), [3.0, 1.0, 2.5])  # the one rule
    np.testing.assert_array_equal(hits_at(pos, neg, 2), [False, True, False])
    np.testing.assert_array_equal(hits_at(pos, neg, 3), [True, True, True])


@pytest.mark.parametrize(("pos", "neg", "k", "hit"), [
    (1.0, [1.0, 0.0, 0.0], 1, False),          # tied with the best: rank 1.5 > 1
    (1.0, [1.0, 1.0, 1.0], 2, False),          # three tied at the top: rank 2.5 > 2
    (1.0, [1.0, 1.0, 1.0], 3, True),           # ... 2.5 <= 3, although tied with the 3rd
    (1.0, [2.0, 1.0, 1.0, 0.0], 2, False),     # one above, two tied: rank 3 > 2
    (1.0, [2.0, 1.0, 1.0, 0.0], 3, True),      # ... 3 <= 3
    (1.0, [2.0, 1.0, 0.0], 2, False),          # one above, one tied: rank 2.5 > 2
])
def test_the_margin_s_sign_is_hits_at_k_on_ties(pos, neg, k, hit):
    assert bool(hits_at([pos], [neg], k)[0]) is hit  # TGB's rule, by hand
    q = float(rank_margin([pos], [neg], k)[0])
    assert (q > 0) is hit and abs(q) == TIE_MARGIN  # every case is a tie with the k-th


def test_the_margin_is_the_distance_to_the_kth_negative_away_from_ties():
    q = rank_margin([3.0, 0.5], [[4.0, 2.0, 1.0], [4.0, 2.0, 1.0]], 2)
    np.testing.assert_allclose(q, [1.0, -1.5])


def test_the_margin_s_sign_is_hits_at_k_on_random_tied_scores():
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 9):
        neg = rng.integers(0, 4, size=(400, n)).astype(float)
        pos = rng.integers(0, 4, size=400).astype(float)
        for k in range(1, n + 1):
            q = rank_margin(pos, neg, k)
            assert (q != 0).all()
            np.testing.assert_array_equal(q > 0, tgb_ranks(pos, neg) <= k)


def test_k_outside_the_negatives_is_refused():
    with pytest.raises(OracleError, match="k must be in"):
        rank_margin([1.0], [[0.0, 1.0]], 3)
    with pytest.raises(OracleError, match="k must be in"):
        RankTarget(np.array([1, 2]), k=0)
    negs = TGBNegatives.from_lists("test", {10: [1, 2, 3], 11: [4, 5]})
    RankTargets((negs,), 2).check([10, 11])
    np.testing.assert_array_equal(RankTargets((negs,), 3).eligible(), [10])
    with pytest.raises(ConfigError, match="more than the 2 negatives of event 11"):
        RankTargets((negs,), 3).check([10, 11])
    with pytest.raises(ConfigError, match="event 5 has no TGB negatives"):
        RankTargets((negs,), 1).check([5])
    with pytest.raises(ConfigError, match="target_k"):
        RankTargets((negs,), 0)
    val = TGBNegatives.from_lists("val", {3: [7]})
    both = RankTargets((val, negs), 1)
    np.testing.assert_array_equal(both.of(3).negatives, [7])
    np.testing.assert_array_equal(both.of(11).negatives, [4, 5])
