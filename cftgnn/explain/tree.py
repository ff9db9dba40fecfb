"""Search-tree nodes of CF-TGNN and the score rules that act on them (seed §"Search Framework").

A node is the seed's tuple ``(s_j, prediction_j, parent_j, children_j, selections_j, score_j,
selectable_j)`` plus bookkeeping: the path of events in the order they were added (``s_j`` as a
set is ``frozenset(path)``), the node's own score, and flags for "expanded" and "counterfactual".
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum


class BackpropRule(str, Enum):
    """How backpropagation recomputes a node's score.

    * ``weighted`` (default, docs/design.md §3.3): a weighted mean of the node's own score (weight
      ``selections_j``) and the scores of its *expanded* children (weight ``selections_k``):
      ``(own·n_j + Σ score_k·n_k) / (n_j + Σ n_k)``.
    * ``thesis``: the seed's literal formula ``(own + Σ_children score_k·n_k) / n_j`` over all
      children, unexpanded ones contributing 0.
    """

    WEIGHTED = "weighted"
    THESIS = "thesis"


@dataclass(eq=False)
class SearchNode:
    """One node of the CF-TGNN search tree.

    Attributes:
        path: Removed events in the order they were added along the path from the root.
        parent: Parent node (None for the root).
        children: Child nodes, one per candidate not yet in ``path`` (empty until expanded).
        prediction: Logit of the perturbation (None until simulated).
        own_score: ``max(0, Δ/|p_orig|)`` of this node (None until expanded).
        score: Backpropagated exploitation score (None until expanded).
        selections: Times selected; starts at 1 (docs/design.md §3.1).
        selectable: Whether the node may still be selected.
        expanded: Whether the node has been simulated and expanded.
        counterfactual: Whether the node's perturbation is a confirmed counterfactual.
        pending: With progressive widening, the events still to become children, the next
            one last (empty otherwise).
    """

    path: tuple[int, ...]
    parent: SearchNode | None = None
    children: list[SearchNode] = field(default_factory=list)
    prediction: float | None = None
    own_score: float | None = None
    score: float | None = None
    selections: int = 1
    selectable: bool = True
    expanded: bool = False
    counterfactual: bool = False
    pending: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.removed: frozenset[int] = frozenset(self.path)

    @property
    def depth(self) -> int:
        """``|s_j|``."""
        return len(self.path)

    @property
    def added(self) -> int:
        """The event this node adds to its parent's set (undefined for the root)."""
        return self.path[-1]

    def exploration(self) -> float:
        """UCB term ``sqrt(ln(selections_parent) / selections_j)`` (0 for the root)."""
        if self.parent is None:
            return 0.0
        return math.sqrt(math.log(self.parent.selections) / self.selections)

    def selection_score(self, alpha: float, beta: float) -> float:
        """``α·score + β·exploration``; an unexpanded node's score counts as 0."""
        return alpha * (self.score or 0.0) + beta * self.exploration()

    def update_score(self, rule: BackpropRule) -> None:
        """Recompute [``score``][cftgnn.explain.SearchNode.score] from the own score and the
        children (backpropagation)."""
        own = self.own_score or 0.0
        if rule is BackpropRule.THESIS:
            total = own + sum((c.score or 0.0) * c.selections for c in self.children)
            self.score = total / self.selections
            return
        num = own * self.selections
        den = float(self.selections)
        for c in self.children:
            if c.expanded:
                num += (c.score or 0.0) * c.selections
                den += c.selections
        self.score = num / den

    def any_selectable_child(self) -> bool:
        """Whether at least one child is selectable (False for a childless node)."""
        return any(c.selectable for c in self.children)

    def walk(self) -> Iterator[SearchNode]:
        """All nodes of the subtree, pre-order (iterative)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


__all__ = ["BackpropRule", "SearchNode"]
