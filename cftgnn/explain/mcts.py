"""CF-TGNN: Monte-Carlo tree search over sets of removed past events (seed Algorithms 1–7).

Each iteration selects a node (UCB descent, ties broken by the strategy δ), simulates it (one
oracle call, or a cache hit), expands it (own score, counterfactual check, children) and
backpropagates from the selected node to the root. The search stops after ``it_max`` iterations
(``max_iterations`` when set), when the budget's oracle calls or seconds are spent (the
[``BudgetMeter``][cftgnn.explain.BudgetMeter] asks before each iteration; a batched prefetch of
children is truncated to the calls left), or when the root is no longer selectable (tree
exhausted).

Resolved ambiguities (docs/design.md §3):

* Selections start at 1 for every node; backpropagation starts at the selected node, so a
  childless node is marked non-selectable in the iteration that expands it.
* Scores use [``BackpropRule``][cftgnn.explain.BackpropRule] (weighted mean by default, the seed's
  literal formula as an option). Unexpanded children count as score 0 in the selection score.
* Ties on the selection score (always the case among unexpanded siblings) are broken by δ
  ranking the events the tied children add.
* Dynamic constraint: once a counterfactual of size ``d`` is known, nodes with ``|s| > d`` are
  marked non-selectable and nodes with ``|s| = d`` get no children, while unexpanded nodes of
  size ``d`` may still be evaluated (a same-size counterfactual with a larger margin can win).
* The root's prediction is the oracle's original logit (no call). A node whose search-mode
  logit flips is confirmed exactly; its prediction then is the exact logit, and only confirmed
  flips count as counterfactual.
* User constraints: children add removable events only, and nodes of the oracle's
  ``max_size`` get no children.
* Options beyond the seed (defaults off, so ``explainer=cftgnn`` reproduces it):
  *progressive widening* (``widening = a``, ``widening_k = c``): an expanded node gets its
  children one at a time in the strategy's order, at most ``max(1, ⌊c·n^a⌋)`` after ``n``
  selections (and one more whenever all of its current children are exhausted), instead of
  all ``|R|`` at once, so UCB does not spread its visits over 64 children; and a *deep phase*
  (``deep_phase``): when the tree holds no counterfactual after the search, greedy descends
  (``descend``, ``deep_sample_size`` events per step) from the
  evaluated node with the largest Δ.
* ``select_best``: smallest counterfactual, ties → highest score, then first found; without a
  counterfactual, the evaluated node with the largest Δ (ties → smaller, then first found).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from cftgnn.errors import ExplainerError
from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.greedy import descend
from cftgnn.explain.params import BudgetParams, option
from cftgnn.explain.strategies import SelectionStrategy
from cftgnn.explain.tree import BackpropRule, SearchNode
from cftgnn.oracle.oracle import Oracle, delta, node_score

#: Selection scores closer than this are ties (unexpanded siblings tie exactly).
_TIE_TOL = 1e-12


@dataclass(frozen=True)
class CFTGNNParams(BudgetParams):
    """CF-TGNN's parameters (``conf/explainer/cftgnn.yaml`` lists them with these defaults).

    The iteration cap has the seed's name, ``it_max``; the shared key ``max_iterations``, when
    set, replaces it. ``max_oracle_calls`` caps the search-mode evaluations of the search
    itself (a strategy's preparation, e.g. 1-best's ``|R|`` calls, is counted in the result
    but not charged, and so is the deep phase's descent); exact confirmations are not capped.
    """

    own_cap: ClassVar[str | None] = "it_max"

    it_max: int = option(300, "MCTS iterations (the seed's name of max_iterations)", low=0)
    alpha: float = option(2.0 / 3.0, "weight of the exploitation score", low=0)
    beta: float = option(1.0 / 3.0, "weight of the UCB exploration term", low=0)
    batch_children: bool = option(False, "evaluate all children of an expanded node in one "
                                         "batched call (same decisions, other call counts)")
    backprop: BackpropRule = option(BackpropRule.WEIGHTED, "score rule of backpropagation")
    trace: bool = option(False, "record a per-iteration trace")
    widening: float | None = option(None, "exponent a of progressive widening (null: every "
                                          "child at once, the seed's rule)", low=0, high=1)
    widening_k: float = option(1.0, "factor c of progressive widening", low=0, low_open=True)
    deep_phase: bool = option(False, "no counterfactual in the tree: greedy descent from the "
                                     "node with the largest Δ")
    deep_sample_size: int = option(10, "l of that descent", low=1)


class CFTGNNExplainer(Explainer):
    """The CF-TGNN search.

    Args:
        strategy: Selection strategy δ for ties (default: recent).
        post: The steps after the search.
        **options: [``CFTGNNParams``][cftgnn.explain.CFTGNNParams] (``it_max``, ``alpha``, ``beta``,
            ``widening``, ..., and the budget keys).
    """

    name = "cftgnn"
    Params = CFTGNNParams
    params: CFTGNNParams

    def largest_call(self, removable: int) -> int:
        """One set a call; a node's children with ``batch_children``, a descent step's
        ``deep_sample_size`` with ``deep_phase`` (``Explainer.largest_call``)."""
        p = self.params
        own = (removable if p.batch_children
               else min(p.deep_sample_size, removable) if p.deep_phase else 1)
        return max(own, super().largest_call(removable))

    def _search(self, oracle: Oracle, budget: BudgetMeter) -> SearchOutcome:
        return _Run(self.params, self.strategy, oracle, budget).run()


class _Run:
    """State of one CF-TGNN search (the explainer itself stays stateless and reusable)."""

    def __init__(self, cfg: CFTGNNParams, strategy: SelectionStrategy, oracle: Oracle,
                 budget: BudgetMeter) -> None:
        self.cfg = cfg
        self.oracle = oracle
        self.strategy = strategy
        self.budget = budget
        self.p0 = oracle.original_logit
        self.cand_ids = [int(e) for e in oracle.removable]
        self.size_limit = oracle.size_limit()
        self.root = SearchNode(path=())
        self.cf_nodes: list[SearchNode] = []
        self.evaluated: list[SearchNode] = []
        self.best_cf_size: int | None = None
        self.calls0 = oracle.stats.search_calls
        self.trace: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ main loop
    def run(self) -> SearchOutcome:
        it = 0
        while self.root.selectable and self.budget.proceed(it, cost=1):
            before = self._selectable_paths() if self.cfg.trace else set()
            node = self.select(self.root)
            self.simulate(node)
            self.expand(node)
            self.backpropagate(node)
            it += 1
            if self.cfg.trace:
                self._record(it, node, before)
        best = self.select_best()
        if self.cfg.deep_phase and not best.counterfactual and self.size_limit > best.depth:
            p_start = self.p0 if best.prediction is None else best.prediction
            deep = descend(self.oracle, self.strategy, best.path, p_start,
                           self.cfg.deep_sample_size)
            if deep.found:
                return SearchOutcome(explanation=deep.explanation,
                                     iterations=it + deep.iterations, found=True,
                                     trace=tuple(self.trace) if self.cfg.trace else None)
        return SearchOutcome(
            explanation=best.path,
            iterations=it,
            found=best.counterfactual,
            trace=tuple(self.trace) if self.cfg.trace else None,
        )

    # ------------------------------------------------------------------ steps
    def select(self, node: SearchNode) -> SearchNode:
        """Algorithm 3: descend by selection score until an unexpanded node is reached."""
        while node.expanded:
            options = [c for c in node.children if c.selectable]
            if not options:
                raise ExplainerError(  # unreachable: backprop keeps selectability consistent
                    f"selectable node {node.path} has no selectable child")
            scores = [c.selection_score(self.cfg.alpha, self.cfg.beta) for c in options]
            top = max(scores)
            tied = [c for c, s in zip(options, scores, strict=True) if top - s <= _TIE_TOL]
            if len(tied) == 1:
                node = tied[0]
            else:
                pick = self.strategy.best(np.array([c.added for c in tied], dtype=np.int64))
                node = next(c for c in tied if c.added == pick)
        return node

    def simulate(self, node: SearchNode) -> None:
        """Algorithm 4 plus the two-stage check: the node's logit and counterfactual status."""
        if node.parent is None:
            node.prediction = self.p0
            node.counterfactual = False
            return
        conf = self.oracle.confirm(node.removed)
        node.prediction = conf.logit
        node.counterfactual = conf.is_counterfactual

    def expand(self, node: SearchNode) -> None:
        """Algorithm 5 with the dynamic constraint."""
        assert node.prediction is not None
        node.expanded = True
        node.own_score = node_score(self.p0, node.prediction)
        node.score = node.own_score
        self.evaluated.append(node)
        if node.counterfactual:
            node.selectable = False
            self.cf_nodes.append(node)
            if self.best_cf_size is None or node.depth < self.best_cf_size:
                self.best_cf_size = node.depth
                self._apply_constraint()
            return
        if self.best_cf_size is not None and node.depth >= self.best_cf_size:
            return  # children would be larger than a known counterfactual
        if node.depth >= self.size_limit:
            return  # children would exceed the constraints' max_size
        remaining = [e for e in self.cand_ids if e not in node.removed]
        if self.cfg.widening is None:
            node.children = [SearchNode(path=(*node.path, e), parent=node) for e in remaining]
            if self.cfg.batch_children:
                self._prefetch(node.children)
            return
        order = self.strategy.rank(np.asarray(remaining, dtype=np.int64)).tolist()
        node.pending = [int(e) for e in reversed(order)]
        self._widen(node)

    def backpropagate(self, node: SearchNode | None) -> None:
        """Algorithm 6, starting at the selected node."""
        while node is not None:
            node.selections += 1
            if node.pending:
                self._widen(node)
            node.update_score(self.cfg.backprop)
            if not node.any_selectable_child():
                node.selectable = False
            node = node.parent

    def select_best(self) -> SearchNode:
        """Algorithm 7 (smallest counterfactual, else largest Δ)."""
        if self.cf_nodes:
            cfs = self.cf_nodes
            i = min(range(len(cfs)), key=lambda j: (cfs[j].depth, -(cfs[j].score or 0.0), j))
            return cfs[i]
        nodes = self.evaluated or [self.root]
        gains = [delta(self.p0, self.p0 if n.prediction is None else n.prediction)
                 for n in nodes]
        i = min(range(len(nodes)), key=lambda j: (-gains[j], nodes[j].depth, j))
        return nodes[i]

    # ------------------------------------------------------------------ helpers
    def _widen(self, node: SearchNode) -> None:
        """Progressive widening: add pending children up to the node's allowance, and one
        more while none of its children is selectable."""
        assert self.cfg.widening is not None
        allowed = max(1, math.floor(self.cfg.widening_k * node.selections ** self.cfg.widening))
        new: list[SearchNode] = []
        while node.pending and (len(node.children) < allowed
                                or not node.any_selectable_child()):
            child = SearchNode(path=(*node.path, node.pending.pop()), parent=node)
            node.children.append(child)
            new.append(child)
        if new and self.cfg.batch_children:
            self._prefetch(new)

    def _apply_constraint(self) -> None:
        """Mark nodes larger than the best counterfactual non-selectable, then refresh."""
        assert self.best_cf_size is not None
        post: list[SearchNode] = []
        for n in self.root.walk():
            if n.depth > self.best_cf_size:
                n.selectable = False
            if n.depth >= self.best_cf_size:
                n.pending.clear()  # its children would be larger than the counterfactual
            post.append(n)
        for n in reversed(post):  # children before parents
            if n.expanded and n.selectable and n.pending and not n.any_selectable_child():
                self._widen(n)
            if n.expanded and n.selectable and not n.any_selectable_child():
                n.selectable = False

    def _prefetch(self, children: list[SearchNode]) -> None:
        todo = [c.removed for c in children if self.oracle.cached_search(c.removed) is None]
        left = self.budget.calls_left()
        if left < len(todo):
            todo = todo[: int(left)]
        if todo:
            self.oracle.batch(todo)

    def _selectable_paths(self) -> set[tuple[int, ...]]:
        return {n.path for n in self.root.walk() if n.selectable}

    def _record(self, it: int, node: SearchNode, before: set[tuple[int, ...]]) -> None:
        after = self._selectable_paths()
        self.trace.append({
            "iteration": it,
            "path": list(node.path),
            "logit": node.prediction,
            "own_score": node.own_score,
            "counterfactual": node.counterfactual,
            "children": len(node.children),
            "unselectable": sorted(list(p) for p in before - after),
            "search_calls": self.oracle.stats.search_calls - self.calls0,
        })


__all__ = ["CFTGNNExplainer", "CFTGNNParams"]
