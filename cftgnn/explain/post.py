"""The steps after a search, as one stage configured in one place:
[``PostProcessing``][cftgnn.explain.PostProcessing].

Given the search's confirmed answer, [``PostProcessing.apply``][cftgnn.explain.PostProcessing.apply]

1. falls back on the **ceiling** (``ceiling=True``): when the search found no counterfactual,
   the set of every removable event is evaluated exactly and answered if it flips (the oracle
   is not monotone, so this may find a counterfactual that no improving path reaches, and
   its failure proves nothing);
2. **prunes** a counterfactual to 1-minimality (``prune=True``), then
3. **certifies** (``certify=K``): every removable set smaller than the answer, up to size
   ``K``, is evaluated exactly, smallest first (for at most ``certify_max_time_s`` seconds);
   a smaller counterfactual replaces the answer;
4. lists the **counterfactuals** handed back (the answer, then the search's alternatives) and,
   for explainers of several answers, their **consequences**
   ([``Oracle.consequence``][cftgnn.oracle.Oracle.consequence]).

The four options sit together at the top level of ``conf/explain.yaml`` (``ceiling``,
``prune``, ``certify``, ``certify_max_time_s``) for every explainer; the stage runs only on
events a search ran on (status ``ok``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from cftgnn.errors import ExplainerError
from cftgnn.explain.exact_search import DEFAULT_CHUNK, largest_chunk, prune, search_by_size
from cftgnn.explain.params import Params, option
from cftgnn.explain.strategies import SelectionStrategy
from cftgnn.oracle.oracle import Oracle, is_flip

Sets = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Processed:
    """The answer after post-processing, with what the record says about the steps.

    Attributes:
        explanation: The answer (removed event ids).
        final_logit: Its exact logit.
        found: Whether it is a counterfactual.
        size_before_prune: Size of the answer before pruning and ``certify`` (after the
            ceiling).
        certify_replaced: ``certify`` found a smaller counterfactual, now the answer.
        cut_short: ``certify`` ran out of ``certify_max_time_s``.
        counterfactuals: Every distinct counterfactual handed back, the answer first.
        counterfactual_logits: Their exact logits.
        counterfactual_consequences: Their consequences, or None when not measured.
    """

    explanation: tuple[int, ...]
    final_logit: float
    found: bool
    size_before_prune: int
    certify_replaced: bool = False
    cut_short: bool = False
    counterfactuals: Sets = ()
    counterfactual_logits: tuple[float, ...] = ()
    counterfactual_consequences: tuple[int, ...] | None = None


@dataclass(frozen=True)
class PostProcessing(Params):
    """What happens to a search's answer before it is recorded (see the module docstring).

    Attributes:
        ceiling: Nothing found: try removing every removable event (one exact call; only
            when ``max_size`` allows ``|R|`` events) and answer that set if it flips.
        prune: Shrink a counterfactual found to a 1-minimal one (batched exact checks).
        certify: ``K``: evaluate exactly every removable set smaller than the answer up to
            size ``K`` (up to ``K`` when nothing was found); 0 turns it off.
        certify_max_time_s: Cap on the seconds ``certify`` may spend; when it runs out, the
            record's ``min_size_lower_bound`` covers only the sizes completed.
    """

    ceiling: bool = option(False, "nothing found: answer every removable event if that flips")
    prune: bool = option(False, "shrink a counterfactual to a 1-minimal one")
    certify: int = option(0, "check every removable set smaller than the answer up to this "
                             "size exactly", low=0)
    certify_max_time_s: float | None = option(None, "cap on certify's seconds per event", low=0)

    def apply(self, oracle: Oracle, strategy: SelectionStrategy, answer: tuple[int, ...],
              final: float, found: bool, several: bool = False,
              alternatives: tuple[tuple[tuple[int, ...], float], ...] = ()) -> Processed:
        """Ceiling, prune, certify, counterfactuals and consequences of one searched event.

        Args:
            oracle: Oracle of the explained event (status ``ok``).
            strategy: The explainer's strategy (orders ``certify``'s sets).
            answer: The search's answer.
            final: Its exact logit.
            found: Whether it flips.
            several: The explainer hands back several counterfactuals (their consequences
                are measured when the oracle has the measure).
            alternatives: The search's further confirmed counterfactuals, ``(set, logit)``.
        """
        if self.ceiling and not found:
            answer, final, found = self._try_ceiling(oracle, answer, final)
        size_before_prune = len(answer)
        if self.prune and found:
            answer, final = prune(oracle, answer)
        replaced = cut_short = False
        if self.certify:
            top = oracle.size_limit(self.certify if not found
                                    else min(self.certify, len(answer) - 1))
            deadline = (None if self.certify_max_time_s is None
                        else time.perf_counter() + self.certify_max_time_s)
            smaller = search_by_size(oracle, strategy.rank(oracle.removable), top,
                                     chunk_size=DEFAULT_CHUNK, deadline=deadline)
            cut_short = smaller.cut_short
            if smaller.explanation is not None and smaller.logit is not None:
                answer, final, found, replaced = smaller.explanation, smaller.logit, True, True
        sets, logits = counterfactuals(oracle, answer, final, found, alternatives)
        consequences = None
        if several and sets and oracle.has_consequence:
            consequences = tuple(int(c) for c in oracle.consequence([frozenset(c)
                                                                     for c in sets]))
        return Processed(answer, final, found, size_before_prune, replaced, cut_short, sets,
                         logits, consequences)

    def largest_call(self, removable: int) -> int:
        """Sets in the stage's largest exact call on an event of ``removable`` removable
        events: ``certify``'s chunks (``largest_chunk``; 0 without ``certify``). The
        ceiling's one set and prune's few (the answer's size) are left out."""
        return largest_chunk(removable, self.certify) if self.certify else 0

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

    @classmethod
    def from_config(cls, cfg: Any) -> PostProcessing:
        """The stage of a run's config (its top-level ``ceiling``, ``prune``, ``certify`` and
        ``certify_max_time_s``; absent keys keep their defaults).

        Raises:
            ExplainerError: On a bad value, naming the option.
        """
        names = cls.defaults()
        return cls(**{k: cfg.get(k, v) for k, v in names.items()})


def check_answer(oracle: Oracle, answer: tuple[int, ...]) -> None:
    """An answer outside ``R`` or above ``max_size`` is a bug of the explainer.

    Raises:
        ExplainerError: Naming the events or the size.
    """
    outside = set(answer) - oracle.removable_ids
    if outside:
        raise ExplainerError(f"explainer answered protected or non-candidate events "
                             f"{sorted(outside)}")
    if oracle.max_size is not None and len(answer) > oracle.max_size:
        raise ExplainerError(f"explainer answered {len(answer)} events, more than "
                             f"max_size = {oracle.max_size}")


def counterfactuals(oracle: Oracle, answer: tuple[int, ...], final: float, found: bool,
                    alternatives: tuple[tuple[tuple[int, ...], float], ...],
                    ) -> tuple[Sets, tuple[float, ...]]:
    """The answer (when it flips), then the search's other counterfactuals, each set once; an
    alternative that breaks the constraints is a bug (one that does not flip is refused by
    [``ExplanationResult``][cftgnn.explain.ExplanationResult])."""
    if not found:
        return (), ()
    sets, logits, seen = [answer], [final], {frozenset(answer)}
    for c, p in alternatives:
        key = frozenset(c)
        if key in seen:
            continue
        check_answer(oracle, tuple(c))
        seen.add(key)
        sets.append(tuple(c))
        logits.append(float(p))
    return tuple(sets), tuple(logits)


__all__ = ["PostProcessing", "Processed", "check_answer", "counterfactuals"]
