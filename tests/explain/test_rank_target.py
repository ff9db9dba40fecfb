"""The rank target on a toy model whose ranks are known (``AdditivePairsBackend``): the
exhaustive search finds the smallest set that takes the true destination out of (or into)
TGB's top k, certified, equal to brute force over the ranks computed by hand; greedy, CF-TGNN
with prune and certify, and constraints read the same margins."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cftgnn.explain import CFTGNNExplainer, ExhaustiveExplainer, GreedyExplainer, PostProcessing
from cftgnn.oracle.oracle import Oracle
from cftgnn.oracle.target import RankScores, RankTarget
from cftgnn.testing import AdditivePairsBackend, make_candidates
from cftgnn.training.metrics import tgb_ranks

# the true destination (column 0) scores 3.0 and ranks first among four negatives; removing
# event 11 lowers it by 1.0 (a tie with the best negative: rank 1.5), 12 raises negative 1 by
# 0.2, 13 lowers it by 0.6 more (with 11: below 2.6 -> rank 2 or 3), 14 raises negatives 2, 3
BASE = [3.0, 2.0, 1.5, 1.0, 0.5]
WEIGHTS = {10: [0.0, 0.0, 0.0, 0.0, 0.0], 11: [1.0, 0.0, 0.0, 0.0, 0.0],
           12: [0.0, -0.2, 0.0, 0.0, 0.0], 13: [0.6, 0.0, 0.0, 0.0, 0.0],
           14: [0.0, 0.0, -1.2, -1.9, 0.0], 15: [0.0, 0.0, 0.0, 0.0, -0.1]}
IDS = sorted(WEIGHTS)


def oracle_for(k: int, backend: AdditivePairsBackend, **kw) -> Oracle:
    scores = RankScores(RankTarget(np.arange(1, 5), k), backend, backend)
    cands = make_candidates(IDS)
    return Oracle(cands, float(scores.exact([frozenset()])[0]), exact=scores.exact,
                  approximate=scores.approximate, mode="exact", target=scores, **kw)


def hand_rank(removed: frozenset[int]) -> float:
    """TGB's rank from the additive scores, counted by hand."""
    s = np.array(BASE) - sum((np.array(WEIGHTS[e]) for e in removed), np.zeros(5))
    above = sum(n > s[0] for n in s[1:])
    tied = sum(n == s[0] for n in s[1:])
    return above + 0.5 * tied + 1.0


def brute_force(k: int, allowed: list[int]) -> list[frozenset[int]]:
    hit0 = hand_rank(frozenset()) <= k
    for size in range(1, len(allowed) + 1):
        found = [frozenset(c) for c in itertools.combinations(allowed, size)
                 if (hand_rank(frozenset(c)) <= k) != hit0]
        if found:
            return found
    return []


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_exhaustive_finds_the_smallest_set_out_of_the_top_k_certified(k):
    backend = AdditivePairsBackend(BASE, WEIGHTS)
    oracle = oracle_for(k, backend)
    assert oracle.target is not None and oracle.target.rank(frozenset()) == 1.0
    result = ExhaustiveExplainer(max_size=len(IDS)).explain(oracle)
    minimal = brute_force(k, IDS)
    if k == 4:  # nothing takes it below all four negatives: none, certified so
        assert not minimal and not result.is_counterfactual
        assert result.min_size_lower_bound == len(IDS) + 1
        return
    assert result.is_counterfactual and result.certified_minimal
    assert frozenset(result.explanation) in minimal
    assert result.min_size_lower_bound == len(minimal[0])
    after = oracle.target.rank(result.explanation)
    assert after == hand_rank(frozenset(result.explanation)) and after > k
    # the margins' ranks are TGB's (the scores by hand)
    for s in ([], [11], [11, 13], [14], [12, 14]):
        assert oracle.target.rank(s) == hand_rank(frozenset(s))


def test_k1_is_a_tie_decided_by_tgb_s_rule():
    oracle = oracle_for(1, AdditivePairsBackend(BASE, WEIGHTS))
    # removing 11 ties the true destination with the best negative: rank 1.5, out of top 1
    assert oracle.target is not None and oracle.target.rank([11]) == 1.5
    assert oracle.exact([11]) < 0 < oracle.original_logit
    assert ExhaustiveExplainer(max_size=3).explain(oracle).explanation == (11,)


def test_into_the_top_k_for_an_event_outside_it():
    # the true destination starts below two negatives: a counterfactual brings it into the top 2
    base = [1.0, 2.0, 1.5, 0.5, 0.2]
    weights = {10: [-0.4, 0.0, 0.0, 0.0, 0.0], 11: [0.0, 0.0, 0.8, 0.0, 0.0],
               12: [0.0, 1.5, 0.0, 0.0, 0.0]}
    scores = RankScores(RankTarget(np.arange(1, 5), 1), AdditivePairsBackend(base, weights))
    oracle = Oracle(make_candidates([10, 11, 12]), float(scores.exact([frozenset()])[0]),
                    exact=scores.exact, mode="exact", target=scores)
    assert oracle.original_logit < 0 and scores.rank([]) == 3.0
    result = ExhaustiveExplainer(max_size=3).explain(oracle)
    # into the top 1: both better negatives must fall below it (11 and 12), or 10 and 12
    # (1.4 against 1.5 is not enough): {11, 12} gives 1.0 against 0.7, 0.5: rank 1
    assert result.is_counterfactual and result.certified_minimal
    assert set(result.explanation) == {11, 12}
    assert scores.rank(result.explanation) == 1.0


def test_greedy_cftgnn_prune_certify_and_constraints_on_the_rank_margin():
    post = PostProcessing(prune=True, certify=3)
    for explainer in (GreedyExplainer(post=post), CFTGNNExplainer(post=post)):
        oracle = oracle_for(2, AdditivePairsBackend(BASE, WEIGHTS))
        result = explainer.explain(oracle)
        minimal = brute_force(2, IDS)
        assert result.is_counterfactual
        assert frozenset(result.explanation) in minimal and result.certified_minimal
    # event 14 protected: the answer avoids it and is brute force's over the rest
    allowed = [e for e in IDS if e != 14]
    oracle = oracle_for(2, AdditivePairsBackend(BASE, WEIGHTS), removable=allowed)
    result = ExhaustiveExplainer(max_size=len(IDS)).explain(oracle)
    assert 14 not in result.explanation
    assert frozenset(result.explanation) in brute_force(2, allowed)
    assert tgb_ranks(np.array([1.0]), np.array([[1.0]]))[0] == 1.5
