"""Greedy baseline (seed Algorithm 2, docs/design.md §3.9).

Starting from ``X = ∅`` and ``p_prev = p_orig``, each iteration ranks ``C \\ X`` with the
strategy δ, evaluates ``X ∪ {ε}`` for the ``l`` best-ranked events in one batched oracle call,
and takes ``ε_best = argmax Δ(p_orig, ·)`` (ties → the better-ranked event). Its evaluation is
reused as ``p_cur`` (not repeated). If ``Δ(p_orig, p_cur) > Δ(p_orig, p_prev)`` the event joins
``X``; the search stops when ``X`` is a counterfactual (confirmed exactly), when no sampled event
improves, or when every candidate is in ``X``. The returned ``found`` flag says whether a
counterfactual was reached; the fallback answer is the ``X`` built so far.

Two options change the improvement test (defaults keep the seed's): ``tolerance`` counts a
gain of at most that much as no improvement (``Δ(p_cur) > Δ(p_prev) + tolerance``), so float
noise cannot decide it; ``like_with_like`` starts from the search mode's own logit of the
empty set instead of the exact ``p_orig``, so the first comparison is not approximate against
exact.

It draws from the removable events ``R`` only and stops when ``X`` reaches the oracle's
``max_size`` (user constraints).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.params import BudgetParams, option
from cftgnn.explain.strategies import SelectionStrategy
from cftgnn.oracle.oracle import Oracle, delta


@dataclass(frozen=True)
class GreedyParams(BudgetParams):
    """Greedy's parameters (``conf/explainer/greedy.yaml``); ``max_iterations`` caps the
    events added (default: until ``R`` is exhausted)."""

    sample_size: int = option(10, "l, best-ranked events evaluated per iteration", low=1)
    trace: bool = option(False, "record a per-iteration trace")
    tolerance: float = option(0.0, "a gain in Δ of at most this is no improvement (0: the "
                                   "seed's strict test)", low=0)
    like_with_like: bool = option(False, "compare the first candidate with the search mode's "
                                         "logit of the empty set, not the exact p_orig")


class GreedyExplainer(Explainer):
    """Greedy counterfactual search.

    Args:
        strategy: Selection strategy δ that ranks the events to sample (default: recent).
        post: The steps after the search.
        **options: [``GreedyParams``][cftgnn.explain.GreedyParams] (``sample_size``, ``tolerance``,
            ...) and the budget keys.
    """

    name = "greedy"
    Params = GreedyParams
    params: GreedyParams

    def largest_call(self, removable: int) -> int:
        """The ``sample_size`` sets of a step (``Explainer.largest_call``)."""
        return max(min(self.params.sample_size, removable), super().largest_call(removable))

    def _search(self, oracle: Oracle, budget: BudgetMeter) -> SearchOutcome:
        p = self.params
        p_start = oracle(frozenset()) if p.like_with_like else oracle.original_logit
        return descend(oracle, self.strategy, (), p_start, p.sample_size, budget,
                       p.tolerance, p.trace)


def descend(
    oracle: Oracle,
    strategy: SelectionStrategy,
    start: tuple[int, ...],
    p_start: float,
    sample_size: int,
    budget: BudgetMeter | None = None,
    tolerance: float = 0.0,
    trace: bool = False,
) -> SearchOutcome:
    """The greedy loop of Algorithm 2, from any starting set.

    Args:
        oracle: Oracle of the explained event.
        strategy: Ranks the remaining removable events; the ``sample_size`` best are tried.
        start: The starting set (in the order its events were added); ``()`` for greedy.
        p_start: The logit the first candidate must improve on.
        sample_size: ``l``.
        budget: The meter asked before each iteration (None: no cap).
        tolerance: Gains of at most this are no improvement.
        trace: Record a per-iteration trace.

    Returns:
        The set reached (``start`` plus the events added), iterations, whether it is a
        confirmed counterfactual, and the trace.
    """
    p0 = oracle.original_logit
    cand = np.asarray(oracle.removable, dtype=np.int64)
    limit = oracle.size_limit()
    chosen: list[int] = list(start)
    p_prev = p_start
    found = False
    it = 0
    steps: list[dict[str, object]] = []
    while len(chosen) < limit:
        if budget is not None and not budget.proceed(
                it, cost=min(sample_size, len(cand) - len(chosen))):
            break
        it += 1
        remaining = cand[~np.isin(cand, chosen)]
        sample = strategy.rank(remaining)[:sample_size]
        base = frozenset(chosen)
        logits = oracle.batch([base | {int(e)} for e in sample])
        gains = [delta(p0, float(p)) for p in logits]
        j = int(np.argmax(gains))  # first maximum = best-ranked among ties
        best, p_cur = int(sample[j]), float(logits[j])
        improved = delta(p0, p_cur) > delta(p0, p_prev) + tolerance
        if improved:
            chosen.append(best)
            found = oracle.is_counterfactual(frozenset(chosen))
        if trace:
            steps.append({
                "iteration": it,
                "sample": [int(e) for e in sample],
                "best": best,
                "logit": p_cur,
                "improved": improved,
                "counterfactual": found,
            })
        if not improved or found:
            break
        p_prev = p_cur
    return SearchOutcome(
        explanation=tuple(chosen),
        iterations=it,
        found=found,
        trace=tuple(steps) if trace else None,
    )


__all__ = ["GreedyExplainer", "GreedyParams", "descend"]
