"""Factual explainers: a ranking of R with importances, and the shortest flipping prefix as
their counterfactual answer; counterfactual explainers' rankings (answer first, then the
strategy's order)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cftgnn.errors import ExplainerError
from cftgnn.explain import (
    ExplanationResult,
    GreedyExplainer,
    PerturbOneExplainer,
    RandomExplainer,
    RecentStrategy,
)
from cftgnn.explain.factual import rank_by_importance, shortest_flipping_prefix
from cftgnn.oracle import Oracle
from cftgnn.testing import AdditiveBackend, HashedBackend, make_candidates, make_oracle

WEIGHTS = {3: 0.1, 5: 0.2, 7: 0.5, 9: 0.4}  # p_orig = 1; removing e lowers it by w[e]


def _oracle(weights: dict[int, float] = WEIGHTS, base: float = 1.0) -> Oracle:
    return make_oracle(make_candidates(sorted(weights)), AdditiveBackend(base, weights))


def test_rank_by_importance_breaks_ties_by_recency() -> None:
    ranking, importance = rank_by_importance([4, 8, 6, 2], [0.5, 0.5, 1.0, -1.0])
    assert ranking == (6, 8, 4, 2)
    assert importance == (1.0, 0.5, 0.5, -1.0)


def test_rank_by_importance_refuses_bad_input() -> None:
    with pytest.raises(ExplainerError, match="importances"):
        rank_by_importance([1, 2], [0.5])
    with pytest.raises(ExplainerError, match="finite"):
        rank_by_importance([1, 2], [0.5, np.nan])


@pytest.mark.parametrize(("logits", "want"), [
    ([0.5, 0.2, -0.1, -0.3], 3), ([-0.1], 1), ([0.5, 0.0, 0.1], 0), ([], 0)])
def test_shortest_flipping_prefix(logits: list[float], want: int) -> None:
    assert shortest_flipping_prefix(1.0, logits) == want


def test_shortest_flipping_prefix_of_a_negative_prediction() -> None:
    assert shortest_flipping_prefix(-1.0, [-0.5, 0.0, 0.2]) == 3  # 0 is not a flip


def test_perturb_one_ranks_by_the_single_removal_shift() -> None:
    result = PerturbOneExplainer().explain(_oracle())
    assert result.ranking == (7, 9, 5, 3)
    assert result.importance == pytest.approx((0.5, 0.4, 0.2, 0.1))
    # prefixes {7} 0.5, {7, 9} 0.1, {7, 9, 5} -0.1: the shortest flip
    assert result.is_counterfactual and result.explanation == (7, 9, 5)
    assert result.final_logit == pytest.approx(-0.1)


@pytest.mark.parametrize("seed", range(6))
def test_the_prefix_answer_equals_a_brute_force_scan(seed: int) -> None:
    """On a non-monotone toy oracle, the answer is the first prefix of the ranking (scanned
    one by one) that flips, or nothing."""
    ids = [2, 4, 6, 8, 10, 12]
    backend = HashedBackend(0.4, spread=0.6, seed=seed)
    result = RandomExplainer(seed=seed).explain(make_oracle(make_candidates(ids), backend))
    want: tuple[int, ...] = ()
    for j in range(1, len(ids) + 1):
        if backend.logit(frozenset(result.ranking[:j])) < 0:
            want = result.ranking[:j]
            break
    assert result.explanation == want
    assert result.is_counterfactual == bool(want)
    assert sorted(result.ranking) == ids


def test_random_ranking_is_seeded_per_event() -> None:
    a = RandomExplainer(seed=1).explain(_oracle()).ranking
    assert a == RandomExplainer(seed=1).explain(_oracle()).ranking
    rankings = {RandomExplainer(seed=s).explain(_oracle()).ranking for s in range(8)}
    assert len(rankings) > 1


def test_no_prefix_flips_gives_no_answer() -> None:
    result = PerturbOneExplainer().explain(_oracle({1: 0.1, 2: 0.1}))
    assert not result.is_counterfactual and result.explanation == ()
    assert result.ranking == (2, 1)  # a tie: the more recent first


def test_prefixes_stop_at_max_size() -> None:
    oracle = Oracle(make_candidates(sorted(WEIGHTS)), 1.0, exact=AdditiveBackend(1.0, WEIGHTS),
                    max_size=2)
    result = PerturbOneExplainer().explain(oracle)
    assert not result.is_counterfactual  # the flip needs three events
    assert result.exact_calls == 5  # four single removals, then the prefix {7, 9} ({7} cached)


def test_a_counterfactual_search_ranks_its_answer_first() -> None:
    result = GreedyExplainer(RecentStrategy()).explain(_oracle())
    assert result.explanation == (7, 9, 5)
    assert result.ranking == (7, 9, 5, 3)  # the answer in the order found, then "recent"
    assert result.importance == (1.0, 0.75, 0.5, 0.25)


def test_no_search_no_ranking() -> None:
    result = PerturbOneExplainer().explain(_oracle(base=0.0))  # a zero logit: no search
    assert result.ranking == () and result.importance == ()


def test_the_ranking_survives_the_record() -> None:
    result = PerturbOneExplainer().explain(_oracle())
    back = ExplanationResult.from_record(result.to_record())
    assert back.ranking == result.ranking and back.importance == result.importance


@pytest.mark.parametrize(("ranking", "importance", "match"), [
    ((7, 9), (0.5,), "importances"), ((7, 7), (0.5, 0.4), "twice"),
    ((7, 11), (0.5, 0.4), "not candidates"), ((7, 9), (0.4, 0.5), "increase")])
def test_a_bad_ranking_is_refused(ranking: tuple[int, ...], importance: tuple[float, ...],
                                  match: str) -> None:
    result = PerturbOneExplainer().explain(_oracle())
    record = {**result.to_record(), "ranking": list(ranking), "importance": list(importance)}
    with pytest.raises(ExplainerError, match=match):
        ExplanationResult.from_record(record)


def test_every_pair_of_equal_scores_is_ordered_the_same_way() -> None:
    for perm in itertools.permutations([1, 2, 3]):
        assert rank_by_importance(perm, [0.0, 0.0, 0.0])[0] == (3, 2, 1)
