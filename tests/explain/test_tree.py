"""Search-node score rules with hand-computed values."""

from __future__ import annotations

import math

import pytest

from cftgnn.explain import BackpropRule, SearchNode


def _tree() -> tuple[SearchNode, SearchNode, SearchNode]:
    root = SearchNode(path=(), own_score=0.1, selections=4, expanded=True)
    a = SearchNode(path=(1,), parent=root, own_score=0.5, score=0.6, selections=3, expanded=True)
    b = SearchNode(path=(2,), parent=root)  # unexpanded: score None, selections 1
    root.children = [a, b]
    return root, a, b


def test_weighted_rule() -> None:
    root, _, _ = _tree()
    root.update_score(BackpropRule.WEIGHTED)
    assert root.score == pytest.approx((0.1 * 4 + 0.6 * 3) / (4 + 3))


def test_thesis_rule() -> None:
    root, _, _ = _tree()
    root.update_score(BackpropRule.THESIS)
    assert root.score == pytest.approx((0.1 + 0.6 * 3 + 0.0 * 1) / 4)


def test_selection_score_and_walk() -> None:
    root, a, b = _tree()
    assert b.selection_score(2 / 3, 1 / 3) == pytest.approx(math.sqrt(math.log(4)) / 3)
    assert a.selection_score(2 / 3, 1 / 3) == pytest.approx(
        0.4 + math.sqrt(math.log(4) / 3) / 3)
    assert root.exploration() == 0.0 and a.depth == 1 and a.added == 1
    assert [n.path for n in root.walk()] == [(), (1,), (2,)]
    assert root.any_selectable_child()
    a.selectable = b.selectable = False
    assert not root.any_selectable_child()
