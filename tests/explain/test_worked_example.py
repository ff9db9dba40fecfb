"""The seed's worked example ("An Example of the Search"), replayed iteration by iteration.

Choices (the seed's figure gives no numbers besides the root logit 3.179):

* Candidates ε1, ε2, ε3 are event ids 1, 2, 3.
* Scripted logits (α = 2/3, β = 1/3, weighted backprop): {ε2} → 2.4 and {ε2, ε3} → 2.05 are
  promising enough that n2 and then n5 win on the selection score in iterations 3 and 4;
  {ε1, ε2, ε3} → 2.9 keeps n2's backpropagated score low enough (0.246 < 0.317) that the
  unexplored root children win in iteration 5; {ε1} → −0.5 is the only counterfactual;
  {ε3} → 3.0 is not. {ε1, ε2} and {ε1, ε3} are never evaluated (the scripted backend would
  raise).
* δ: the text picks ε2 from {ε1, ε2, ε3}, then ε3 over ε1 (n5 over n4), then ε1 over ε3 (n1 over
  n3). No fixed ranking of single events does both of the last two, so δ is a
  ``ScriptedStrategy`` playing back exactly these three tie-breaks.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from cftgnn.explain import BackpropRule, CFTGNNExplainer, ExplanationResult
from cftgnn.oracle import Oracle
from cftgnn.testing import ScriptedBackend, ScriptedStrategy, make_candidates

F = frozenset
P_ORIG = 3.179
TABLE = {F({2}): 2.4, F({2, 3}): 2.05, F({1, 2, 3}): 2.9, F({1}): -0.5, F({3}): 3.0}
SCRIPT = [[2, 1, 3], [3, 1], [1, 3]]


def _run(**kwargs: Any) -> tuple[ExplanationResult, ScriptedBackend, ScriptedStrategy]:
    backend = ScriptedBackend(TABLE)
    oracle = Oracle(make_candidates([1, 2, 3]), P_ORIG, exact=backend)
    strategy = ScriptedStrategy(SCRIPT)
    result = CFTGNNExplainer(strategy=strategy, trace=True, **kwargs).explain(oracle)
    return result, backend, strategy


def test_worked_example_answer() -> None:
    result, backend, _ = _run()
    assert result.explanation == (1,)
    assert result.is_counterfactual
    assert result.final_logit == -0.5
    assert result.iterations == 6
    assert result.search_calls == 5  # the root costs no call
    assert backend.calls == 5


def test_worked_example_iterations() -> None:
    result, _, strategy = _run()
    trace = result.trace
    assert trace is not None
    # Selected node per iteration: root, n2, n5, n6, n1, n3.
    assert [t["path"] for t in trace] == [[], [2], [2, 3], [2, 3, 1], [1], [3]]
    assert trace[0]["logit"] == P_ORIG and trace[0]["children"] == 3
    assert trace[1]["children"] == 2  # s4 = {ε1, ε2}, s5 = {ε2, ε3}
    assert trace[2]["children"] == 1  # s6 = {ε1, ε2, ε3}
    # Nodes newly marked non-selectable per iteration.
    assert [t["unselectable"] for t in trace] == [
        [], [], [],
        [[2, 3], [2, 3, 1]],  # it. 4: n6 has no children, so n6 and its parent n5
        [[1], [2], [2, 1]],  # it. 5: n1 counterfactual; constraint drops n4, hence n2
        [[], [3]],  # it. 6: n3 evaluated, gets no children; the root is exhausted
    ]
    assert [t["counterfactual"] for t in trace] == [False] * 4 + [True, False]
    # δ was consulted exactly for the three ties of the text.
    # the search's three rankings, then the record's ranking of R after the answer {ε1}
    assert strategy.calls == [[1, 2, 3], [1, 3], [1, 3], [2, 3]]


def test_worked_example_scores() -> None:
    """Iteration 5's choice: n2's selection score is below that of the unexplored siblings."""
    o2 = (P_ORIG - 2.4) / P_ORIG
    o5 = (P_ORIG - 2.05) / P_ORIG
    o6 = (P_ORIG - 2.9) / P_ORIG
    score5 = (3 * o5 + 2 * o6) / 5
    score2 = (4 * o2 + 3 * score5) / 7
    n2 = 2 / 3 * score2 + 1 / 3 * math.sqrt(math.log(5) / 4)
    unexplored = 1 / 3 * math.sqrt(math.log(5) / 1)
    assert n2 < unexplored
    # and in iteration 3 n2 beat its unexplored siblings
    assert 2 / 3 * o2 + 1 / 3 * math.sqrt(math.log(3) / 2) > 1 / 3 * math.sqrt(math.log(3))


@pytest.mark.parametrize("batch_children", [False, True])
def test_worked_example_batched_children_same_answer(batch_children: bool) -> None:
    backend = ScriptedBackend({**TABLE, F({1, 2}): 2.2, F({1, 3}): 1.0})
    oracle = Oracle(make_candidates([1, 2, 3]), P_ORIG, exact=backend)
    result = CFTGNNExplainer(strategy=ScriptedStrategy(SCRIPT), trace=True,
                             batch_children=batch_children).explain(oracle)
    assert [t["path"] for t in result.trace or ()] == [[], [2], [2, 3], [2, 3, 1], [1], [3]]
    assert result.explanation == (1,)


def test_thesis_rule_runs_on_example() -> None:
    result, _, _ = _run(backprop=BackpropRule.THESIS)
    assert result.is_counterfactual
    assert result.size == 1
