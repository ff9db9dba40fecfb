"""Beam search: width 1 is greedy with l = |C|; wider beams find what greedy misses."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cftgnn.errors import ExplainerError
from cftgnn.explain import (
    BeamExplainer,
    GreedyExplainer,
    RandomStrategy,
    RecentStrategy,
    SelectionStrategy,
)
from cftgnn.oracle import Oracle
from cftgnn.testing import (
    AdditiveBackend,
    HashedBackend,
    InteractionBackend,
    ToyProblem,
    make_candidates,
)

F = frozenset


def test_width_one_equals_greedy_with_every_event_sampled(
    problem: ToyProblem, strategy_name: str, mode: str,
    make_strategy: Callable[[str], SelectionStrategy],
) -> None:
    n = len(problem.candidates)
    greedy = GreedyExplainer(make_strategy(strategy_name), sample_size=n).explain(
        problem.oracle(mode))
    beam = BeamExplainer(make_strategy(strategy_name), width=1).explain(problem.oracle(mode))
    assert beam.explanation == greedy.explanation
    assert beam.final_logit == greedy.final_logit
    assert beam.iterations == greedy.iterations
    assert beam.search_calls == greedy.search_calls


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(0, 10_000), st.sampled_from(["exact", "approximate"]))
def test_width_one_equals_greedy_on_non_monotone_oracles(n: int, seed: int, mode: str) -> None:
    ids = list(range(n))
    backend = HashedBackend(1.0, spread=0.7, seed=seed)

    def oracle() -> Oracle:
        return Oracle(make_candidates(ids), 1.0, exact=backend, mode=mode,
                      approximate=HashedBackend(1.0, spread=0.7, seed=seed + 1))

    greedy = GreedyExplainer(RandomStrategy(seed), sample_size=n).explain(oracle())
    beam = BeamExplainer(RandomStrategy(seed), width=1).explain(oracle())
    assert (beam.explanation, beam.iterations) == (greedy.explanation, greedy.iterations)


def test_a_wider_beam_finds_the_pair_greedy_misses() -> None:
    # 1 looks best alone but leads nowhere; {2, 3} flips only together
    backend = InteractionBackend(1.0, {1: 0.4, 2: 0.1, 3: 0.1, 4: -0.5},
                                 {F({2, 3}): 1.0, F({1, 2}): -1.0, F({1, 3}): -1.0})
    ids = [1, 2, 3, 4]

    def oracle() -> Oracle:
        return Oracle(make_candidates(ids), 1.0, exact=backend)

    assert not GreedyExplainer(RecentStrategy(), sample_size=4).explain(oracle()).is_counterfactual
    result = BeamExplainer(RecentStrategy(), width=3).explain(oracle())
    assert result.is_counterfactual and F(result.explanation) == F({2, 3})


def test_one_batched_call_per_level_and_the_budget() -> None:
    backend = AdditiveBackend(3.0, dict.fromkeys(range(6), 0.1))
    oracle = Oracle(make_candidates(list(range(6))), 3.0, exact=backend)
    result = BeamExplainer(RecentStrategy(), width=2).explain(oracle)
    assert not result.is_counterfactual and result.size == 6
    assert oracle.stats.exact_batches - 1 <= result.iterations  # + the final check (cached)
    budget = BeamExplainer(RecentStrategy(), width=2, max_oracle_calls=10).explain(
        Oracle(make_candidates(list(range(6))), 3.0, exact=AdditiveBackend(
            3.0, dict.fromkeys(range(6), 0.1))))
    assert budget.cut_short and budget.search_calls <= 10


@pytest.mark.parametrize("kwargs", [{"width": 0}, {"width": 1.5}, {"max_oracle_calls": -1}])
def test_bad_options(kwargs: dict[str, float]) -> None:
    with pytest.raises(ExplainerError):
        BeamExplainer(**kwargs)  # type: ignore[arg-type]
