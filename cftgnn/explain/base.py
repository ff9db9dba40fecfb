"""Explainer base class: the public ``explain`` does the bookkeeping, subclasses search.

Explainers see only the :class:`~cftgnn.oracle.contract.Oracle`, never a model. Use one fresh
oracle per explanation run: the oracle's cache is shared by everything that uses it, so a
second explainer on the same oracle would profit from the first one's evaluations.

Every explainer searches the oracle's removable events ``R`` only and answers at most
``oracle.max_size`` events (user constraints, DESIGN.md §7). After its search, ``explain``
optionally

1. falls back on the **ceiling** (``ceiling=True``): when the search found no counterfactual,
   the set of every removable event is evaluated exactly and answered if it flips (the oracle
   is not monotone, so this may find a counterfactual that no improving path reaches, and
   its failure proves nothing);
2. **prunes** a counterfactual to 1-minimality (``prune=True``), then
3. **certifies** (``certify=K``): every removable set smaller than the answer, up to size
   ``K``, is evaluated exactly, smallest first; a smaller counterfactual replaces the answer,

and puts the certificate on the result: ``min_size_lower_bound`` (from every exact evaluation
made for this event, :meth:`Oracle.certificate`) and ``certified_minimal``.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from cftgnn.errors import ExplainerError
from cftgnn.explain.exact_search import DEFAULT_CHUNK, prune, search_by_size
from cftgnn.explain.result import ExplanationResult, ExplanationStatus
from cftgnn.explain.strategies import RecentStrategy, SelectionStrategy
from cftgnn.oracle.contract import Oracle, is_flip


@dataclass(frozen=True)
class SearchOutcome:
    """What a search method hands back to :meth:`Explainer.explain`.

    Attributes:
        explanation: Removed event ids, in the order the search added them.
        iterations: Iterations the search ran.
        found: Whether the search itself found a (confirmed) counterfactual.
        trace: Optional per-iteration trace.
        cut_short: The search's call or time budget stopped it early.
        alternatives: Further counterfactuals the search found, each ``(set, exact logit)``
            and confirmed exactly (explainers of several answers, e.g. a Pareto set).
    """

    explanation: tuple[int, ...]
    iterations: int
    found: bool
    trace: tuple[dict[str, Any], ...] | None = None
    cut_short: bool = False
    alternatives: tuple[tuple[tuple[int, ...], float], ...] = ()


def call_budget(max_oracle_calls: int | None) -> int | None:
    """A search's optional cap on oracle evaluations, checked (``>= 0``) and as an int.

    Raises:
        ExplainerError: On a negative cap.
    """
    if max_oracle_calls is None:
        return None
    if max_oracle_calls < 0:
        raise ExplainerError(f"max_oracle_calls must be >= 0, got {max_oracle_calls}")
    return int(max_oracle_calls)


def time_budget(seconds: float | None, name: str = "max_time_s") -> float | None:
    """A search's optional cap on seconds, checked (``>= 0``, not NaN) and as a float.

    Raises:
        ExplainerError: On a negative or NaN cap.
    """
    if seconds is None:
        return None
    if not seconds >= 0:
        raise ExplainerError(f"{name} must be >= 0, got {seconds}")
    return float(seconds)


class Explainer(ABC):
    """Base class of all explainers.

    Args:
        strategy: Selection strategy δ (default: :class:`RecentStrategy`).
        prune: Shrink a counterfactual found to a 1-minimal one (batched exact checks).
        certify: ``K``: after the search (and pruning), evaluate exactly every removable set
            smaller than the answer up to size ``K`` (up to ``K`` when nothing was found); a
            smaller counterfactual replaces the answer. 0 turns it off.
        certify_max_time_s: Optional cap on the seconds ``certify`` may spend; when it runs
            out, the record's ``min_size_lower_bound`` covers only the sizes completed.
        ceiling: When the search found no counterfactual, try removing every removable event
            (one exact call; only when ``max_size`` allows ``|R|`` events) and answer that set
            if it flips (``prune`` then shrinks it). The record's ``size_before_prune`` is
            then ``num_removable``.

    Raises:
        ExplainerError: If ``certify < 0`` or ``certify_max_time_s < 0``.
    """

    #: Short name written into results.
    name: str = "explainer"
    #: Whether the explainer hands back several counterfactuals; their consequences
    #: (:meth:`Oracle.consequence`) are then measured when the oracle has the measure.
    several: bool = False

    def __init__(
        self,
        strategy: SelectionStrategy | None = None,
        prune: bool = False,
        certify: int = 0,
        certify_max_time_s: float | None = None,
        ceiling: bool = False,
    ) -> None:
        self.strategy: SelectionStrategy = strategy if strategy is not None else RecentStrategy()
        if isinstance(certify, bool) or int(certify) != certify or certify < 0:
            raise ExplainerError(f"certify must be an integer >= 0, got {certify!r}")
        if not isinstance(ceiling, bool):
            raise ExplainerError(f"ceiling must be true or false, got {ceiling!r}")
        self.prune = bool(prune)
        self.ceiling = ceiling
        self.certify = int(certify)
        self.certify_max_time_s = time_budget(certify_max_time_s, "certify_max_time_s")

    def explain(self, oracle: Oracle) -> ExplanationResult:
        """Explain the event the oracle is bound to.

        Handles the special statuses (original logit 0, no candidates, no removable
        candidate), prepares the strategy (whose oracle calls are counted), runs
        :meth:`_search`, confirms the explanation with the exact oracle, prunes and certifies
        it when asked, and packages everything with the counters and the certificate as an
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
        elif len(oracle.removable) == 0:
            status = ExplanationStatus.NO_REMOVABLE
        else:
            status = ExplanationStatus.OK
        ok = status is ExplanationStatus.OK
        if ok:
            self.strategy.prepare(oracle)
            outcome = self._search(oracle)
        else:
            outcome = SearchOutcome(explanation=(), iterations=0, found=False)
        answer = outcome.explanation
        self._check_answer(oracle, answer)
        final = oracle.exact(frozenset(answer))
        found = is_flip(p0, final)
        if ok and self.ceiling and not found:
            answer, final, found = self._try_ceiling(oracle, answer, final)
        size_before_prune = len(answer)
        if ok and self.prune and found:
            answer, final = prune(oracle, answer)
        replaced = False
        cut_short = outcome.cut_short
        if ok and self.certify:
            top = oracle.size_limit(self.certify if not found else min(self.certify,
                                                                       len(answer) - 1))
            deadline = (None if self.certify_max_time_s is None
                        else time.perf_counter() + self.certify_max_time_s)
            smaller = search_by_size(oracle, self.strategy.rank(oracle.removable), top,
                                     chunk_size=DEFAULT_CHUNK, deadline=deadline)
            cut_short = cut_short or smaller.cut_short
            if smaller.explanation is not None and smaller.logit is not None:
                answer, final, found, replaced = smaller.explanation, smaller.logit, True, True
        sets, logits = self._counterfactuals(oracle, answer, final, found, outcome.alternatives)
        consequences = None
        if self.several and sets and oracle.has_consequence:
            consequences = tuple(int(c) for c in oracle.consequence([frozenset(c)
                                                                     for c in sets]))
        bound = oracle.certificate() if ok else 0
        stats = oracle.stats - stats0
        agree, compared = oracle.agreement()
        return ExplanationResult(
            explainer=self.name,
            event_id=oracle.event_id,
            original_logit=p0,
            candidate_ids=tuple(int(e) for e in oracle.candidates.ids),
            explanation=answer,
            final_logit=final,
            is_counterfactual=found,
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
            min_size_lower_bound=bound,
            certified_minimal=found and len(answer) == bound,
            cut_short=cut_short,
            num_removable=len(oracle.removable),
            size_before_prune=size_before_prune,
            prune=self.prune,
            certify=self.certify,
            certify_replaced=replaced,
            counterfactuals=sets,
            counterfactual_logits=logits,
            counterfactual_consequences=consequences,
        )

    @staticmethod
    def _counterfactuals(
        oracle: Oracle, answer: tuple[int, ...], final: float, found: bool,
        alternatives: tuple[tuple[tuple[int, ...], float], ...],
    ) -> tuple[tuple[tuple[int, ...], ...], tuple[float, ...]]:
        """The answer (when it flips), then the search's other counterfactuals, each set once;
        an alternative that breaks the constraints is a bug (one that does not flip is refused
        by :class:`ExplanationResult`)."""
        if not found:
            return (), ()
        sets, logits, seen = [answer], [final], {frozenset(answer)}
        for c, p in alternatives:
            key = frozenset(c)
            if key in seen:
                continue
            Explainer._check_answer(oracle, tuple(c))
            seen.add(key)
            sets.append(tuple(c))
            logits.append(float(p))
        return tuple(sets), tuple(logits)

    @staticmethod
    def _try_ceiling(oracle: Oracle, answer: tuple[int, ...],
                     final: float) -> tuple[tuple[int, ...], float, bool]:
        """Every removable event removed: ``(that set, its exact logit, True)`` when it flips
        and ``max_size`` allows it, else the search's ``(answer, final, False)``."""
        everything = tuple(int(e) for e in oracle.removable)
        if oracle.size_limit() < len(everything):
            return answer, final, False
        logit = oracle.exact(frozenset(everything))
        if is_flip(oracle.original_logit, logit):
            return everything, logit, True
        return answer, final, False

    @staticmethod
    def _check_answer(oracle: Oracle, answer: tuple[int, ...]) -> None:
        """An answer outside ``R`` or above ``max_size`` is a bug of the explainer."""
        outside = set(answer) - oracle.removable_ids
        if outside:
            raise ExplainerError(f"explainer answered protected or non-candidate events "
                                 f"{sorted(outside)}")
        if oracle.max_size is not None and len(answer) > oracle.max_size:
            raise ExplainerError(f"explainer answered {len(answer)} events, more than "
                                 f"max_size = {oracle.max_size}")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(strategy={self.strategy!r}, prune={self.prune}, "
                f"certify={self.certify}, ceiling={self.ceiling})")

    @abstractmethod
    def _search(self, oracle: Oracle) -> SearchOutcome:
        """Search for a counterfactual (called only with ``p_orig != 0`` and ``|C| > 0``).

        Args:
            oracle: Oracle of the explained event; the strategy is already prepared.

        Returns:
            The search's answer; :meth:`explain` confirms it exactly.
        """


__all__ = ["Explainer", "SearchOutcome", "call_budget", "time_budget"]
