"""Property: run to exhaustion, CF-TGNN returns the best minimal counterfactual (brute force).

When the tree is exhausted (the root becomes non-selectable), every set no larger than the best
counterfactual found has been evaluated, so the answer is a minimum-size counterfactual, and
among those the one with the largest margin (select_best breaks ties by score); without any
counterfactual, the fallback is the subset with the largest Δ.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from cftgnn.explain import CFTGNNExplainer, RandomStrategy
from cftgnn.oracle import Oracle, delta
from cftgnn.testing import InteractionBackend, brute_force_minimal, make_candidates

F = frozenset


@st.composite
def toy(draw: st.DrawFn) -> tuple[float, dict[int, float], dict[frozenset[int], float]]:
    n = draw(st.integers(1, 5))
    ids = sorted(draw(st.sets(st.integers(0, 30), min_size=n, max_size=n)))
    sign = draw(st.sampled_from([1.0, -1.0]))
    base = sign * draw(st.floats(0.5, 3.0))
    weights = {e: sign * draw(st.floats(-1.0, 2.0)) for e in ids}
    pairs = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)), max_size=2))
    groups = {F(p): sign * draw(st.floats(0.0, 3.0)) for p in pairs if p[0] != p[1]}
    return base, weights, groups


@settings(max_examples=40, deadline=None)
@given(toy(), st.integers(0, 3))
def test_exhaustive_search_is_exact(
    problem: tuple[float, dict[int, float], dict[frozenset[int], float]], seed: int
) -> None:
    base, weights, groups = problem
    backend = InteractionBackend(base, weights, groups)
    ids = list(weights)
    minimal = brute_force_minimal(backend, ids, base)
    oracle = Oracle(make_candidates(ids), base, exact=backend)
    result = CFTGNNExplainer(strategy=RandomStrategy(seed), it_max=10_000).explain(oracle)
    assert result.iterations < 10_000  # exhausted, not stopped by the budget
    if not minimal:
        # fallback: with the tree exhausted, the largest Δ over all subsets
        subsets = [F(c) for k in range(len(ids) + 1) for c in itertools.combinations(ids, k)]
        assert not result.is_counterfactual
        assert delta(base, result.final_logit) == max(
            delta(base, backend.logit(x)) for x in subsets)
        return
    assert result.is_counterfactual and F(result.explanation) in minimal
    best = max(delta(base, backend.logit(s)) for s in minimal)
    assert delta(base, result.final_logit) == best
