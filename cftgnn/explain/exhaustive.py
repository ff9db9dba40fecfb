"""Exhaustive search over small removal sets, with a minimality certificate (seed 001, UFCE).

UFCE checks every one-, two- and three-feature change inside the features a user allows.
Here the changes are removals of past events: every removable set of size 1, 2, …,
``max_size`` goes through the batched **exact** oracle (chunked, so memory stays bounded),
sizes in increasing order, within a size in time order
([``search_by_size``][cftgnn.explain.search_by_size]). It stops after the first size that
holds a counterfactual and answers the one with the largest margin there (ties → the set
the strategy δ ranks first). That answer is cardinality-minimal among the removable events,
and the result says so (``certified_minimal``).

Without a counterfactual it answers nothing (``is_counterfactual = False``, an empty
explanation) and its ``min_size_lower_bound`` is ``max_size + 1``: no counterfactual of size
``≤ max_size`` exists. An optional call or time budget may cut the search short; the result then
has ``cut_short = True``, the bound covers only the sizes completed and ``next_size_share`` says
how much of the next size was evaluated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.exact_search import DEFAULT_CHUNK, largest_chunk, search_by_size
from cftgnn.explain.params import BudgetParams, option
from cftgnn.oracle.oracle import Oracle


@dataclass(frozen=True)
class ExhaustiveParams(BudgetParams):
    """The exhaustive search's parameters (``conf/explainer/exhaustive.yaml``).

    ``max_iterations`` caps the sizes evaluated (as ``max_size`` does); ``max_oracle_calls``
    counts **exact** evaluations here (the search calls the exact backend only).
    """

    max_size: int = option(3, "K, largest set size evaluated", low=1)
    chunk_size: int = option(DEFAULT_CHUNK, "sets per batched exact call (bounds memory)",
                             low=1)


class ExhaustiveExplainer(Explainer):
    """Every removable set up to ``max_size`` events, exactly, smallest first.

    Args:
        strategy: Ranks the removable events; among counterfactuals of equal margin the
            better-ranked set wins (default: recent).
        post: The steps after the search.
        **options: [``ExhaustiveParams``][cftgnn.explain.ExhaustiveParams] (``max_size``,
            ``chunk_size``) and the budget keys.
    """

    name = "exhaustive"
    Params = ExhaustiveParams
    params: ExhaustiveParams
    budget_counts_exact = True

    def largest_call(self, removable: int) -> int:
        """Its chunks (``largest_chunk``) (``Explainer.largest_call``)."""
        own = largest_chunk(removable, self.params.max_size, self.params.chunk_size)
        return max(own, super().largest_call(removable))

    def _search(self, oracle: Oracle, budget: BudgetMeter) -> SearchOutcome:
        p = self.params
        sizes = p.max_size if budget.max_iterations is None else min(p.max_size,
                                                                      budget.max_iterations)
        left = budget.calls_left()
        result = search_by_size(
            oracle,
            self.strategy.rank(oracle.removable),
            oracle.size_limit(sizes),
            chunk_size=p.chunk_size,
            max_calls=None if math.isinf(left) else int(left),
            deadline=budget.deadline,
        )
        budget.cut(result.cut_short)
        return SearchOutcome(
            explanation=result.explanation or (),
            iterations=result.sizes_done + int(result.cut_short),
            found=result.explanation is not None,
            enumeration_cut=result.cut_short,
        )


__all__ = ["ExhaustiveExplainer", "ExhaustiveParams"]
