"""Beam search over removal sets: greedy with ``w`` sets kept per level.

Level ``d`` holds up to ``w`` sets of ``d`` removed events (level 0: the empty set). Each level
extends every set of the beam by every removable event it lacks, in the strategy δ's order
(parents in beam order; a set reached twice is kept once, from its first parent), and
evaluates all of them in **one** batched search-mode call. A child *improves* when its
``Δ(p_orig, ·)`` exceeds its parent's (the parent's Δ is 0 for the root, as greedy compares
with ``p_orig``). The ``w`` improving children with the largest Δ (ties: the earlier one) form
the next beam; each of them that flips in the search mode is confirmed exactly, and the search
stops at the first level with a confirmed counterfactual, answering the one with the largest
margin. It also stops when no child improves or the size limit is reached; the fallback is
the kept set with the largest Δ.

With ``w = 1`` this is the greedy baseline with ``l = |R|`` (every remaining event sampled):
the same sets, in the same order, with the same answer (a test asserts it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.params import BudgetParams, option
from cftgnn.oracle.oracle import Oracle, delta, margin


@dataclass(frozen=True)
class BeamParams(BudgetParams):
    """Beam search's parameters (``conf/explainer/beam.yaml``); ``max_iterations`` caps the
    levels, and a level whose sets would exceed ``max_oracle_calls`` is not evaluated."""

    width: int = option(5, "w, sets kept per level", low=1)


class BeamExplainer(Explainer):
    """Beam search with ``width`` sets per level and one batched oracle call per level.

    Args:
        strategy: Orders the events each set is extended by (ties on Δ go to the earlier).
        post: The steps after the search.
        **options: [``BeamParams``][cftgnn.explain.BeamParams] (``width``) and the budget keys.
    """

    name = "beam"
    Params = BeamParams
    params: BeamParams

    def largest_call(self, removable: int) -> int:
        """A level's children: ``width`` sets, each with one more event
        (``Explainer.largest_call``)."""
        return max(self.params.width * removable, super().largest_call(removable))

    def _search(self, oracle: Oracle, budget: BudgetMeter) -> SearchOutcome:
        p0 = oracle.original_logit
        removable = np.asarray(oracle.removable, dtype=np.int64)
        limit = oracle.size_limit()
        beam: list[tuple[tuple[int, ...], float]] = [((), 0.0)]  # (set in order added, Δ)
        best: tuple[tuple[int, ...], float] = ((), -math.inf)
        level = 0
        while beam and level < limit:
            children: list[tuple[int, ...]] = []
            parent_gain: list[float] = []
            seen: set[frozenset[int]] = set()
            for path, gain in beam:
                rest = removable[~np.isin(removable, path)]
                for e in self.strategy.rank(rest).tolist():
                    key = frozenset((*path, e))
                    if key not in seen:
                        seen.add(key)
                        children.append((*path, int(e)))
                        parent_gain.append(gain)
            if not children:
                break
            fresh = (0 if budget.max_oracle_calls is None
                     else sum(oracle.cached_search(c) is None for c in children))
            if not budget.proceed(level, cost=fresh):
                break
            level += 1
            logits = oracle.batch([frozenset(c) for c in children])
            gains = np.array([delta(p0, float(p)) for p in logits])
            improving = [j for j in np.argsort(-gains, kind="stable").tolist()
                         if gains[j] > parent_gain[j]]
            kept = improving[: self.params.width]
            if not kept:
                break
            beam = [(children[j], float(gains[j])) for j in kept]
            if beam[0][1] > best[1]:
                best = beam[0]
            found = [(margin(p0, conf.logit), c) for c, _ in beam
                     if (conf := oracle.confirm(frozenset(c))).is_counterfactual]
            if found:
                top = max(m for m, _ in found)
                answer = next(c for m, c in found if m == top)
                return SearchOutcome(explanation=answer, iterations=level, found=True)
        return SearchOutcome(explanation=best[0], iterations=level, found=False)


__all__ = ["BeamExplainer", "BeamParams"]
