"""Exhaustive search over small removal sets, with a minimality certificate (seed 001, UFCE).

UFCE checks every one-, two- and three-feature change inside the features a user allows.
Here the changes are removals of past events: every removable set of size 1, 2, …,
``max_size`` goes through the batched **exact** oracle (chunked, so memory stays bounded),
sizes in increasing order, within a size in the order of the strategy δ's ranking. It stops
after the first size that holds a counterfactual and answers the one with the largest margin
there (ties → the better-ranked set). That answer is cardinality-minimal among the removable
events, and the result says so (``certified_minimal``).

Without a counterfactual it answers nothing (``is_counterfactual = False``, an empty
explanation) and its ``min_size_lower_bound`` is ``max_size + 1``: no counterfactual of size
``≤ max_size`` exists. An optional call or time budget may cut the search short; the result then
has ``cut_short = True`` and the bound covers only the sizes completed.
"""

from __future__ import annotations

import time
from typing import Any

from cftgnn.errors import ExplainerError
from cftgnn.explain.base import Explainer, SearchOutcome, call_budget, time_budget
from cftgnn.explain.exact_search import DEFAULT_CHUNK, search_by_size
from cftgnn.explain.strategies import SelectionStrategy
from cftgnn.oracle.contract import Oracle


class ExhaustiveExplainer(Explainer):
    """Every removable set up to ``max_size`` events, exactly, smallest first.

    Args:
        strategy: Ranks the removable events; sets of one size are enumerated in that order
            (default: recent).
        max_size: Largest set size evaluated (``K``); the oracle's ``max_size`` constraint
            lowers it further.
        chunk_size: Sets per batched exact oracle call (bounds memory).
        max_oracle_calls: Optional cap on exact backend evaluations of the search.
        max_time_s: Optional cap on the search's seconds.
        **post: ``prune``, ``certify``, ``certify_max_time_s``, ``ceiling`` (see
            :class:`Explainer`).

    Raises:
        ExplainerError: On ``max_size < 1``, ``chunk_size < 1`` or negative budgets.
    """

    name = "exhaustive"

    def __init__(
        self,
        strategy: SelectionStrategy | None = None,
        max_size: int = 3,
        chunk_size: int = DEFAULT_CHUNK,
        max_oracle_calls: int | None = None,
        max_time_s: float | None = None,
        **post: Any,
    ) -> None:
        super().__init__(strategy, **post)
        if isinstance(max_size, bool) or int(max_size) != max_size or max_size < 1:
            raise ExplainerError(f"max_size must be an integer >= 1, got {max_size!r}")
        if chunk_size < 1:
            raise ExplainerError(f"chunk_size must be >= 1, got {chunk_size}")
        self.max_size = int(max_size)
        self.chunk_size = int(chunk_size)
        self.max_oracle_calls = call_budget(max_oracle_calls)
        self.max_time_s = time_budget(max_time_s)

    def _search(self, oracle: Oracle) -> SearchOutcome:
        deadline = None if self.max_time_s is None else time.perf_counter() + self.max_time_s
        result = search_by_size(
            oracle,
            self.strategy.rank(oracle.removable),
            oracle.size_limit(self.max_size),
            chunk_size=self.chunk_size,
            max_calls=self.max_oracle_calls,
            deadline=deadline,
        )
        return SearchOutcome(
            explanation=result.explanation or (),
            iterations=result.sizes_done + int(result.cut_short),
            found=result.explanation is not None,
            cut_short=result.cut_short,
        )


__all__ = ["ExhaustiveExplainer"]
