"""Explainer base class: the public ``explain`` does the bookkeeping, subclasses search.

Explainers see only the :class:`~cftgnn.explain.oracle.Oracle`, never a model. Use one fresh
oracle per explanation run: the oracle's cache is shared by everything that uses it, so a
second explainer on the same oracle would profit from the first one's evaluations.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from cftgnn.explain.oracle import Oracle, is_flip
from cftgnn.explain.result import ExplanationResult, ExplanationStatus
from cftgnn.explain.strategies import RecentStrategy, SelectionStrategy


@dataclass(frozen=True)
class SearchOutcome:
    """What a search method hands back to :meth:`Explainer.explain`.

    Attributes:
        explanation: Removed event ids, in the order the search added them.
        iterations: Iterations the search ran.
        found: Whether the search itself found a (confirmed) counterfactual.
        trace: Optional per-iteration trace.
    """

    explanation: tuple[int, ...]
    iterations: int
    found: bool
    trace: tuple[dict[str, Any], ...] | None = None


class Explainer(ABC):
    """Base class of all explainers.

    Args:
        strategy: Selection strategy δ (default: :class:`RecentStrategy`).
    """

    #: Short name written into results.
    name: str = "explainer"

    def __init__(self, strategy: SelectionStrategy | None = None) -> None:
        self.strategy: SelectionStrategy = strategy if strategy is not None else RecentStrategy()

    def explain(self, oracle: Oracle) -> ExplanationResult:
        """Explain the event the oracle is bound to.

        Handles the special statuses (original logit 0, no candidates), prepares the strategy
        (whose oracle calls are counted), runs :meth:`_search`, confirms the explanation with
        the exact oracle and packages everything with the counters as an
        :class:`ExplanationResult`.

        Args:
            oracle: Oracle of the explained event.

        Returns:
            The explanation.
        """
        start = time.perf_counter()
        stats0 = oracle.stats
        p0 = oracle.original_logit
        if p0 == 0:
            status = ExplanationStatus.ZERO_LOGIT
        elif len(oracle.candidates) == 0:
            status = ExplanationStatus.NO_CANDIDATES
        else:
            status = ExplanationStatus.OK
        if status is ExplanationStatus.OK:
            self.strategy.prepare(oracle)
            outcome = self._search(oracle)
        else:
            outcome = SearchOutcome(explanation=(), iterations=0, found=False)
        final = oracle.exact(frozenset(outcome.explanation))
        stats = oracle.stats - stats0
        agree, compared = oracle.agreement()
        return ExplanationResult(
            explainer=self.name,
            event_id=oracle.event_id,
            original_logit=p0,
            candidate_ids=tuple(int(e) for e in oracle.candidates.ids),
            explanation=outcome.explanation,
            final_logit=final,
            is_counterfactual=is_flip(p0, final),
            iterations=outcome.iterations,
            search_calls=stats.search_calls,
            exact_calls=stats.exact_calls,
            cache_hits=stats.cache_hits,
            agreement=agree / compared if compared else None,
            agreement_n=compared,
            wall_time_s=time.perf_counter() - start,
            oracle_time_s=stats.time_s,
            status=status,
            oracle_mode=oracle.mode.value,
            strategy=repr(self.strategy),
            trace=outcome.trace,
        )

    @abstractmethod
    def _search(self, oracle: Oracle) -> SearchOutcome:
        """Search for a counterfactual (called only with ``p_orig != 0`` and ``|C| > 0``).

        Args:
            oracle: Oracle of the explained event; the strategy is already prepared.

        Returns:
            The search's answer; :meth:`explain` confirms it exactly.
        """


__all__ = ["Explainer", "SearchOutcome"]
