"""Greedy baseline: Algorithm 2's stopping rules, batching, reuse, flag."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cftgnn.errors import ExplainerError
from cftgnn.explain import (
    ClosestStrategy,
    ExplanationStatus,
    GreedyExplainer,
    RecentStrategy,
    SelectionStrategy,
)
from cftgnn.oracle import Oracle, is_flip
from cftgnn.testing import AdditiveBackend, ShiftedBackend, ToyProblem, make_candidates

F = frozenset


def _oracle(base: float, w: dict[int, float], hops: list[int] | None = None,
            ) -> tuple[Oracle, AdditiveBackend]:
    backend = AdditiveBackend(base, w)
    return Oracle(make_candidates(list(w), hops), base, exact=backend), backend


def test_stops_at_counterfactual_and_reuses_best() -> None:
    oracle, backend = _oracle(3.0, {0: 0.4, 1: 1.6, 2: 0.2, 3: 1.5})
    r = GreedyExplainer(sample_size=10, trace=True).explain(oracle)
    assert r.explanation == (1, 3) and r.is_counterfactual and r.iterations == 2
    # one batch per iteration (4 + 3 sets); ε_best is never re-evaluated; the confirmation
    # and the final exact check are cache hits
    assert backend.batches == 2 and backend.calls == 7 and r.oracle_calls == 7
    assert [t["counterfactual"] for t in r.trace or ()] == [False, True]


def test_stops_without_improvement() -> None:
    oracle, backend = _oracle(3.0, {0: 0.5, 1: -1.0, 2: -0.2})
    r = GreedyExplainer(sample_size=3, trace=True).explain(oracle)
    # it. 1 adds 0 (Δ 0.5); it. 2's best, 2, gives Δ 0.3 < 0.5 -> stop
    assert r.explanation == (0,) and not r.is_counterfactual and r.iterations == 2
    assert [t["improved"] for t in r.trace or ()] == [True, False]
    assert backend.calls == 5


def test_equal_delta_is_no_improvement() -> None:
    oracle, _ = _oracle(3.0, {0: 0.5, 1: 0.0})
    r = GreedyExplainer().explain(oracle)
    assert r.explanation == (0,) and r.iterations == 2


def test_stops_when_candidates_exhausted() -> None:
    oracle, _ = _oracle(3.0, {0: 0.5, 1: 0.5})
    r = GreedyExplainer(sample_size=1).explain(oracle)
    assert r.explanation == (1, 0)  # recent first; l = 1 evaluates only the top-ranked event
    assert not r.is_counterfactual and r.iterations == 2


def test_sample_follows_strategy() -> None:
    # closest samples by hop: with l = 1, event 0 (hop 0) is taken before the heavier 1
    oracle, _ = _oracle(3.0, {0: 1.0, 1: 2.5, 2: 0.1}, hops=[0, 2, 1])
    r = GreedyExplainer(strategy=ClosestStrategy(), sample_size=1, trace=True).explain(oracle)
    assert [t["sample"] for t in r.trace or ()] == [[0], [2], [1]]
    assert r.explanation == (0, 2, 1) and r.is_counterfactual


def test_negative_original_logit() -> None:
    oracle, _ = _oracle(-1.0, {0: -0.6, 1: -0.7, 2: 0.3})
    r = GreedyExplainer().explain(oracle)
    assert r.explanation == (1, 0) and r.is_counterfactual and r.final_logit > 0


def test_approximate_flip_is_confirmed() -> None:
    # {1} looks like a flip to the approximation (0.1 - 0.3) but is not; greedy continues.
    exact = AdditiveBackend(3.0, {1: 2.9, 2: 0.2, 3: 0.05})
    oracle = Oracle(make_candidates([1, 2, 3]), 3.0, exact=exact,
                    approximate=ShiftedBackend(exact, shift=-0.3), mode="approximate")
    r = GreedyExplainer(trace=True).explain(oracle)
    assert r.explanation == (1, 2) and r.is_counterfactual
    assert [t["counterfactual"] for t in r.trace or ()] == [False, True]
    assert r.exact_calls == 2 and r.agreement == 0.5


@pytest.mark.parametrize("name", ["random", "recent", "closest", "one_best"])
def test_flag_matches_exact(name: str, make_strategy: Callable[[str], SelectionStrategy],
                            problem: ToyProblem, mode: str) -> None:
    r = GreedyExplainer(strategy=make_strategy(name), sample_size=4).explain(
        problem.oracle(mode))
    assert r.is_counterfactual == is_flip(problem.p_orig, problem.exact.logit(F(r.explanation)))
    if r.is_counterfactual:
        assert r.size >= len(next(iter(problem.minimal)))


def test_statuses_and_args() -> None:
    zero = Oracle(make_candidates([1]), 0.0, exact=AdditiveBackend(0.0, {1: 1.0}))
    assert GreedyExplainer().explain(zero).status is ExplanationStatus.ZERO_LOGIT
    empty = Oracle(make_candidates([]), 1.0, exact=AdditiveBackend(1.0, {}))
    assert GreedyExplainer().explain(empty).status is ExplanationStatus.NO_CANDIDATES
    with pytest.raises(ExplainerError):
        GreedyExplainer(sample_size=0)
    r = GreedyExplainer(strategy=RecentStrategy(), max_iterations=1).explain(
        _oracle(3.0, {0: 1.0, 1: 1.0, 2: 1.5})[0])
    assert r.iterations == 1 and r.explanation == (2,)


def test_tolerance_treats_tiny_gains_as_no_improvement() -> None:
    from cftgnn.explain import RecentStrategy
    from cftgnn.oracle import Oracle
    from cftgnn.testing import AdditiveBackend, make_candidates

    backend = AdditiveBackend(1.0, {1: 0.6, 2: 1e-9, 3: 0.6})
    # recent: 3 first (gain 0.6), then 2 (gain 1e-9 with l = 1), then 1 would flip
    plain = GreedyExplainer(RecentStrategy(), sample_size=1).explain(
        Oracle(make_candidates([1, 2, 3]), 1.0, exact=backend))
    assert plain.explanation == (3, 2, 1) and plain.is_counterfactual
    tol = GreedyExplainer(RecentStrategy(), sample_size=1, tolerance=1e-6).explain(
        Oracle(make_candidates([1, 2, 3]), 1.0, exact=backend))
    assert tol.explanation == (3,) and not tol.is_counterfactual


def test_like_with_like_starts_from_the_search_modes_own_empty_logit() -> None:
    from cftgnn.explain import RecentStrategy
    from cftgnn.oracle import Oracle
    from cftgnn.testing import AdditiveBackend, ScriptedBackend, make_candidates

    exact = AdditiveBackend(1.0, {1: 0.5, 2: 2.0})
    # the approximation is biased upwards: every removal looks worse than p_orig
    approx = ScriptedBackend({(): 1.5, (1,): 1.2, (2,): 1.1, (1, 2): -0.5})

    def oracle() -> Oracle:
        return Oracle(make_candidates([1, 2]), 1.0, exact=exact, approximate=approx,
                      mode="approximate")

    seed_rule = GreedyExplainer(RecentStrategy(), sample_size=2).explain(oracle())
    assert seed_rule.explanation == () and seed_rule.iterations == 1  # 1.1 > p_orig = 1.0
    like = GreedyExplainer(RecentStrategy(), sample_size=2, like_with_like=True).explain(oracle())
    assert like.is_counterfactual and set(like.explanation) == {1, 2}


def test_bad_tolerance() -> None:
    import pytest

    from cftgnn.errors import ExplainerError

    with pytest.raises(ExplainerError):
        GreedyExplainer(tolerance=-1.0)
