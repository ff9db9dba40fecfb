"""CF-TGNN on toy oracles with known minimal counterfactuals (brute force)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cftgnn.explain import CFTGNNExplainer, ExplanationStatus, RecentStrategy, SelectionStrategy
from cftgnn.oracle import Oracle, is_flip
from cftgnn.testing import AdditiveBackend, ShiftedBackend, ToyProblem, make_candidates

F = frozenset
MakeStrategy = Callable[[str], SelectionStrategy]


def test_finds_minimal_counterfactual(
    problem: ToyProblem, strategy_name: str, mode: str, make_strategy: MakeStrategy
) -> None:
    explainer = CFTGNNExplainer(strategy=make_strategy(strategy_name), it_max=300)
    result = explainer.explain(problem.oracle(mode))
    assert result.status is ExplanationStatus.OK
    assert result.is_counterfactual
    assert F(result.explanation) in problem.minimal
    assert is_flip(problem.p_orig, problem.exact.logit(F(result.explanation)))
    assert result.final_logit == pytest.approx(problem.exact.logit(F(result.explanation)))
    # never larger than any counterfactual it evaluated exactly
    flips = [s for s in problem.exact.log if is_flip(problem.p_orig, problem.exact.logit(s))]
    assert flips and result.size <= min(len(s) for s in flips)
    assert result.iterations <= 300
    assert result.oracle_calls == problem.exact.calls + (
        0 if mode == "exact" else result.search_calls)
    if mode == "exact":
        assert result.agreement == 1.0


def test_deterministic(problem: ToyProblem, strategy_name: str,
                       make_strategy: MakeStrategy) -> None:
    def run() -> dict[str, object]:
        res = CFTGNNExplainer(strategy=make_strategy(strategy_name), it_max=40,
                              trace=True).explain(problem.oracle("approximate"))
        rec = res.to_record(include_trace=True)
        return {k: v for k, v in rec.items() if not k.endswith("time_s")}

    assert run() == run()


@pytest.mark.parametrize("it_max", [0, 1, 3, 7])
def test_iteration_budget(problem: ToyProblem, strategy_name: str, it_max: int,
                          make_strategy: MakeStrategy) -> None:
    result = CFTGNNExplainer(strategy=make_strategy(strategy_name),
                             it_max=it_max).explain(problem.oracle())
    assert result.iterations <= it_max
    assert result.search_calls - (8 if strategy_name == "one_best" else 0) <= max(0, it_max - 1)
    if it_max == 0:
        assert result.explanation == () and not result.is_counterfactual


@pytest.mark.parametrize("batch_children", [False, True])
@pytest.mark.parametrize("budget", [0, 1, 5, 12])
def test_call_budget(problem: ToyProblem, strategy_name: str, mode: str, budget: int,
                     batch_children: bool, make_strategy: MakeStrategy) -> None:
    result = CFTGNNExplainer(strategy=make_strategy(strategy_name), max_oracle_calls=budget,
                             batch_children=batch_children).explain(problem.oracle(mode))
    prep = 8 if strategy_name == "one_best" else 0
    assert result.search_calls - prep <= budget
    assert result.iterations <= 300


def test_batched_children_same_result(
    problem: ToyProblem, strategy_name: str, mode: str, make_strategy: MakeStrategy
) -> None:
    out = []
    for batch in (False, True):
        res = CFTGNNExplainer(strategy=make_strategy(strategy_name), it_max=60, trace=True,
                              batch_children=batch).explain(problem.oracle(mode))
        out.append(res)
    a, b = out
    assert a.explanation == b.explanation and a.final_logit == b.final_logit
    assert a.iterations == b.iterations and a.is_counterfactual == b.is_counterfactual
    strip = ("search_calls",)
    assert [{k: v for k, v in t.items() if k not in strip} for t in a.trace or ()] == [
        {k: v for k, v in t.items() if k not in strip} for t in b.trace or ()]
    assert b.search_calls >= a.search_calls


def test_approximate_only_flip_rejected() -> None:
    # {1}: exact 0.1 (no flip), approximate -0.2 (flip). True minimal CFs have size 2.
    exact = AdditiveBackend(3.0, {1: 2.9, 2: 0.2, 3: 0.3})
    approx = ShiftedBackend(exact, shift=-0.3)
    oracle = Oracle(make_candidates([1, 2, 3]), 3.0, exact=exact, approximate=approx,
                    mode="approximate")
    result = CFTGNNExplainer(strategy=RecentStrategy(), trace=True).explain(oracle)
    assert result.is_counterfactual and result.size == 2
    assert F(result.explanation) in {F({1, 2}), F({1, 3})}
    assert result.agreement is not None and result.agreement < 1.0
    # node {1} was evaluated, judged a flip by the approximation, rejected exactly, expanded
    step = next(t for t in result.trace or () if t["path"] == [1])
    assert not step["counterfactual"] and step["children"] == 2
    assert step["logit"] == pytest.approx(0.1)


def test_fallback_without_counterfactual() -> None:
    exact = AdditiveBackend(3.0, {1: 0.5, 2: -0.4, 3: 0.7})
    oracle = Oracle(make_candidates([1, 2, 3]), 3.0, exact=exact)
    result = CFTGNNExplainer(strategy=RecentStrategy()).explain(oracle)
    assert not result.is_counterfactual
    assert F(result.explanation) == F({1, 3})  # largest Δ over the evaluated nodes
    assert result.final_logit == pytest.approx(1.8)
    # the whole tree (8 subsets, reached along several paths) is exhausted
    assert exact.calls == 7


def test_fallback_all_negative_returns_empty() -> None:
    oracle = Oracle(make_candidates([1, 2]), 1.0, exact=AdditiveBackend(1.0, {1: -1, 2: -2}))
    result = CFTGNNExplainer().explain(oracle)
    assert result.explanation == () and result.final_logit == 1.0


def test_same_size_counterfactual_with_larger_margin_wins() -> None:
    # The recent strategy visits {3} first: a narrow flip (logit -0.1). The unexpanded
    # same-size node {1} stays evaluable after the constraint and flips widely (logit -4).
    exact = AdditiveBackend(1.0, {1: 5.0, 2: 0.1, 3: 1.1})
    oracle = Oracle(make_candidates([1, 2, 3]), 1.0, exact=exact)
    result = CFTGNNExplainer(strategy=RecentStrategy(), trace=True).explain(oracle)
    paths = [t["path"] for t in result.trace or ()]
    assert paths[:2] == [[], [3]]
    assert [1] in paths
    assert result.explanation == (1,)


def test_statuses() -> None:
    zero = Oracle(make_candidates([1, 2]), 0.0, exact=AdditiveBackend(0.0, {1: 1.0}))
    r = CFTGNNExplainer().explain(zero)
    assert r.status is ExplanationStatus.ZERO_LOGIT and r.oracle_calls == 0
    assert r.explanation == () and not r.is_counterfactual
    empty = Oracle(make_candidates([]), 2.0, exact=AdditiveBackend(2.0, {}))
    r = CFTGNNExplainer().explain(empty)
    assert r.status is ExplanationStatus.NO_CANDIDATES and r.oracle_calls == 0
    assert r.final_logit == 2.0 and r.iterations == 0


def test_bad_arguments() -> None:
    from cftgnn.errors import ExplainerError

    with pytest.raises(ExplainerError):
        CFTGNNExplainer(it_max=-1)
    with pytest.raises(ExplainerError):
        CFTGNNExplainer(max_oracle_calls=-2)
    with pytest.raises(ValueError):
        CFTGNNExplainer(backprop="nope")
