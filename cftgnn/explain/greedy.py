"""Greedy baseline (seed Algorithm 2, DESIGN.md §3.9).

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

from typing import Any

import numpy as np

from cftgnn.errors import ExplainerError
from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.strategies import SelectionStrategy
from cftgnn.oracle.contract import Oracle, delta


class GreedyExplainer(Explainer):
    """Greedy counterfactual search.

    Args:
        strategy: Selection strategy δ that ranks the events to sample (default: recent).
        sample_size: ``l``, the number of best-ranked events evaluated per iteration.
        max_iterations: Optional cap on iterations (default: until ``C`` is exhausted).
        trace: Record a per-iteration trace in the result.
        tolerance: A gain in Δ of at most this counts as no improvement (default 0: the
            seed's strict test).
        like_with_like: Compare the first candidate with the search mode's logit of the empty
            set (one more search-mode call in approximate mode) instead of ``p_orig``.
        **post: ``prune``, ``certify``, ``certify_max_time_s``, ``ceiling`` (see
            :class:`Explainer`).
    """

    name = "greedy"

    def __init__(
        self,
        strategy: SelectionStrategy | None = None,
        sample_size: int = 10,
        max_iterations: int | None = None,
        trace: bool = False,
        tolerance: float = 0.0,
        like_with_like: bool = False,
        **post: Any,
    ) -> None:
        super().__init__(strategy, **post)
        if not tolerance >= 0:
            raise ExplainerError(f"tolerance must be >= 0, got {tolerance}")
        if sample_size < 1:
            raise ExplainerError(f"sample_size must be >= 1, got {sample_size}")
        if max_iterations is not None and max_iterations < 0:
            raise ExplainerError(f"max_iterations must be >= 0, got {max_iterations}")
        self.sample_size = int(sample_size)
        self.max_iterations = max_iterations
        self.trace = bool(trace)
        self.tolerance = float(tolerance)
        self.like_with_like = bool(like_with_like)

    def _search(self, oracle: Oracle) -> SearchOutcome:
        p_start = oracle(frozenset()) if self.like_with_like else oracle.original_logit
        return descend(oracle, self.strategy, (), p_start, self.sample_size,
                       self.max_iterations, self.tolerance, self.trace)


def descend(
    oracle: Oracle,
    strategy: SelectionStrategy,
    start: tuple[int, ...],
    p_start: float,
    sample_size: int,
    max_iterations: int | None = None,
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
        max_iterations: Optional cap on iterations.
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
        if max_iterations is not None and it >= max_iterations:
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


__all__ = ["GreedyExplainer", "descend"]
