"""Explainer base class: the public ``explain`` does the bookkeeping, subclasses search.

Explainers see only the [``Oracle``][cftgnn.oracle.Oracle], never a model. Use one fresh
oracle per explanation run: the oracle's cache is shared by everything that uses it, so a
second explainer on the same oracle would profit from the first one's evaluations.

Every explainer searches the oracle's removable events ``R`` only and answers at most
``oracle.max_size`` events (user constraints). An explainer is

* a parameter declaration (``Params``, a frozen dataclass deriving from
  [``BudgetParams``][cftgnn.explain.BudgetParams]: its options, checked, plus the three budget
  keys ``max_iterations``, ``max_oracle_calls``, ``max_time_s`` that every explainer shares),
* a ``_search(oracle, budget)`` that asks its [``BudgetMeter``][cftgnn.explain.BudgetMeter]
  before each iteration.

[``Explainer.explain``][cftgnn.explain.Explainer.explain] runs the same five steps for all of them:
the status check, the search, the exact confirmation of its answer, the post-processing stage
([``PostProcessing``][cftgnn.explain.PostProcessing]: ceiling, prune, certify, consequences) and the
packaging as an [``ExplanationResult``][cftgnn.explain.ExplanationResult] with the counters and the
certificate (``min_size_lower_bound`` from every exact evaluation made for this event,
[``Oracle.certificate``][cftgnn.oracle.Oracle.certificate], and ``certified_minimal``).

Running an explainer over a replay engine's events is here too: ``explain_event`` builds one
event's oracle with the engine (``cftgnn.oracle.engine``, which only builds oracles) and runs
the explainer on it, ``explain_events`` many with one explainer (built once: the search's
per-event state lives in the search, the strategy is prepared per oracle); ``explain.py``'s
pipeline wraps the latter with its checks and records. The engine is a lower stage and never
calls up into this one.
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from cftgnn.data.index import M_MAX
from cftgnn.errors import ConfigError
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.params import BudgetParams
from cftgnn.explain.post import PostProcessing, Processed, check_answer
from cftgnn.explain.result import ExplanationResult, ExplanationStatus
from cftgnn.explain.strategies import RecentStrategy, SelectionStrategy
from cftgnn.oracle.constraints import NO_CONSTRAINTS, Constraints
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.oracle.history import History
from cftgnn.oracle.oracle import Oracle, OracleMode, is_flip
from cftgnn.oracle.target import RankTarget, RankTargets

if TYPE_CHECKING:  # the engine (torch, the models) loads only where a run builds one
    from cftgnn.oracle.engine import ReplayEngine


@dataclass(frozen=True)
class SearchOutcome:
    """What a search method hands back to [``Explainer.explain``][cftgnn.explain.Explainer.explain].

    Attributes:
        explanation: Removed event ids, in the order the search added them.
        iterations: Iterations the search ran.
        found: Whether the search itself found a (confirmed) counterfactual.
        trace: Optional per-iteration trace.
        alternatives: Further counterfactuals the search found, each ``(set, exact logit)``
            and confirmed exactly (explainers of several answers, e.g. a Pareto set).
        ranking: A factual explainer's ranking of the removable events, most important
            first, with ``importance`` (non-increasing); empty for a counterfactual search,
            whose ranking [``Explainer.explain``][cftgnn.explain.Explainer.explain] builds from its
            answer and strategy.
        importance: The importance of each ranked event.
        coalitions: A search explainer's scored coalitions, ``(kept, reward)`` each (the
            result's ``coalitions``); None for the others.
        enumeration_cut: The search was an exact enumeration by size
            ([``search_by_size``][cftgnn.explain.search_by_size]) that its budget cut short
            (the result's ``next_size_share`` then says how far it got).

    Whether the budget cut the search short is the [``BudgetMeter``][cftgnn.explain.BudgetMeter]'s
    to say.
    """

    explanation: tuple[int, ...]
    iterations: int
    found: bool
    trace: tuple[dict[str, Any], ...] | None = None
    alternatives: tuple[tuple[tuple[int, ...], float], ...] = ()
    ranking: tuple[int, ...] = ()
    importance: tuple[float, ...] = ()
    coalitions: tuple[tuple[tuple[int, ...], float], ...] | None = None
    enumeration_cut: bool = False


class Explainer(ABC):
    """Base class of all explainers.

    Args:
        strategy: Selection strategy δ (default:
            [``RecentStrategy``][cftgnn.explain.RecentStrategy]).
        post: The steps after the search (default: none of them).
        **options: The explainer's parameters (its [``Params``][cftgnn.explain.Explainer.Params],
            the budget included).

    Raises:
        ExplainerError: On an unknown option or a bad value, naming the option.
    """

    #: Short name written into results.
    name: ClassVar[str] = "explainer"
    #: Whether the explainer hands back several counterfactuals; their consequences
    #: ([``Oracle.consequence``][cftgnn.oracle.Oracle.consequence]) are then measured when the
    #: oracle has the measure.
    several: ClassVar[bool] = False
    #: The declaration of the explainer's parameters.
    Params: ClassVar[type[BudgetParams]] = BudgetParams
    #: The budget's oracle calls are exact evaluations (searches calling the exact backend
    #: directly), not search-mode ones.
    budget_counts_exact: ClassVar[bool] = False
    #: The curve protocols (``cftgnn.scoring.curves.Protocol`` values) whose curves the
    #: explainer's results can be scored under: every one for every explainer of the project
    #: (each hands back a ranking; a search that also hands back its scored ``coalitions`` is
    #: scored by them under ``tgnnexplainer``). An explainer that cannot serve one names the
    #: others here; [``supports``][cftgnn.explain.Explainer.supports] then refuses that protocol
    #: before the first event.
    protocols: ClassVar[frozenset[str]] = frozenset({"common", "tgnnexplainer", "tempme",
                                                     "temgx"})
    #: The explainer's results carry the search's scored ``coalitions``, by which the
    #: ``tgnnexplainer`` protocol scores them (T-GNNExplainer). Records do not keep them, so
    #: that protocol cannot be added to a finished run of such an explainer
    #: (``scripts/rescore.py`` refuses it); every other protocol can.
    scored_by_coalitions: ClassVar[bool] = False

    def __init__(self, strategy: SelectionStrategy | None = None,
                 post: PostProcessing | None = None, **options: Any) -> None:
        self.strategy: SelectionStrategy = strategy if strategy is not None else RecentStrategy()
        self.post = post if post is not None else PostProcessing()
        self.params = self.Params.from_options(options)

    def supports(self, fingerprint: ModelFingerprint | None = None,
                 protocols: Iterable[str] = ()) -> None:
        """Refuse, before any event is explained, a run this explainer cannot serve: a curve
        protocol its results cannot be scored under (its ``protocols``), or a model or stream
        it cannot read (a model without the attention it reads, a trained explainer of
        another model or stream). ``explain.py`` asks it before the first event: the
        protocols as soon as the explainer is built (before anything loads), the fingerprint
        once the model is loaded; ``scripts/rescore.py`` once per run it adds protocols to
        (without a fingerprint: it explains nothing). The default serves every model; a
        subclass that needs more checks the fingerprint after ``super().supports(...)``.

        Args:
            fingerprint: The run's model and stream; None: the model is not checked.
            protocols: The run's curve protocols (``Protocol`` members or their values).

        Raises:
            ConfigError: Naming the explainer and a protocol it cannot be scored under.
            CftgnnError: Naming what the model lacks or what does not match (one line).
        """
        for protocol in protocols:
            value = str(getattr(protocol, "value", protocol))
            if value not in self.protocols:
                raise ConfigError(f"explainer {self.name} cannot be scored under protocol="
                                  f"{value} (it serves {', '.join(sorted(self.protocols))}); "
                                  "choose another protocol or curves=none")

    def largest_call(self, removable: int) -> int:
        """Sets in the largest oracle call the explainer makes on an event of ``removable``
        removable events, its post-processing stage's included: ``device=auto`` places a
        run by it (``cftgnn.runs.build.explain_device``). The default, one set, is a search
        of single calls (CF-TGNN's, TemGX's); an explainer of batched calls says more.

        Args:
            removable: The most removable events of an event (the run's ``m_max``).
        """
        return max(1, self.post.largest_call(removable))

    def explain(self, oracle: Oracle) -> ExplanationResult:
        """Explain the event the oracle is bound to.

        Status check, search (the strategy prepared first; its oracle calls are counted),
        exact confirmation of the answer, post-processing and packaging.

        Args:
            oracle: Oracle of the explained event.

        Returns:
            The explanation.
        """
        start = time.perf_counter()
        stats0 = oracle.stats
        status = self.status(oracle)
        ok = status is ExplanationStatus.OK
        outcome, cut_short = (self._run_search(oracle) if ok
                              else (SearchOutcome(explanation=(), iterations=0, found=False),
                                    False))
        check_answer(oracle, outcome.explanation)
        final = oracle.exact(frozenset(outcome.explanation))  # the confirmation
        found = is_flip(oracle.original_logit, final)
        done = (self.post.apply(oracle, self.strategy, outcome.explanation, final, found,
                                self.several, outcome.alternatives) if ok
                else Processed(outcome.explanation, final, found, len(outcome.explanation)))
        return self._package(oracle, status, outcome, done, cut_short or done.cut_short,
                             outcome.enumeration_cut or done.cut_short, stats0, start)

    @staticmethod
    def status(oracle: Oracle) -> ExplanationStatus:
        """Whether a search can run on the oracle's event, and why not."""
        if oracle.original_logit == 0:
            return ExplanationStatus.ZERO_LOGIT
        if len(oracle.candidates) == 0:
            return ExplanationStatus.NO_CANDIDATES
        if len(oracle.removable) == 0:
            return ExplanationStatus.NO_REMOVABLE
        return ExplanationStatus.OK

    def _run_search(self, oracle: Oracle) -> tuple[SearchOutcome, bool]:
        """The strategy prepared, then the search under a fresh budget meter:
        ``(outcome, cut_short)``."""
        self.strategy.prepare(oracle)
        meter = BudgetMeter(self.params, oracle, exact=self.budget_counts_exact)
        outcome = self._search(oracle, meter)
        return outcome, meter.cut_short

    def _package(self, oracle: Oracle, status: ExplanationStatus, outcome: SearchOutcome,
                 done: Processed, cut_short: bool, enumeration_cut: bool, stats0: Any,
                 start: float) -> ExplanationResult:
        """The result with the oracle's counters and certificate since ``stats0``; when an
        exact enumeration (the exhaustive search or ``certify``) was cut short, the share of
        the first size it did not complete that is evaluated (``next_size_share``)."""
        ok = status is ExplanationStatus.OK
        bound = oracle.certificate() if ok else 0
        share = oracle.exact_share(bound) if ok and enumeration_cut else None
        ranking, importance = ((outcome.ranking, outcome.importance) if outcome.ranking or not ok
                               else self._answer_ranking(oracle, done.explanation))
        stats = oracle.stats - stats0
        agree, compared = oracle.agreement()
        return ExplanationResult(
            explainer=self.name,
            event_id=oracle.event_id,
            original_logit=oracle.original_logit,
            candidate_ids=tuple(int(e) for e in oracle.candidates.ids),
            explanation=done.explanation,
            final_logit=done.final_logit,
            is_counterfactual=done.found,
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
            certified_minimal=done.found and len(done.explanation) == bound,
            cut_short=cut_short,
            next_size_share=share,
            num_removable=len(oracle.removable),
            size_before_prune=done.size_before_prune,
            prune=self.post.prune,
            certify=self.post.certify,
            certify_replaced=done.certify_replaced,
            counterfactuals=done.counterfactuals,
            counterfactual_logits=done.counterfactual_logits,
            counterfactual_consequences=done.counterfactual_consequences,
            ranking=ranking,
            importance=importance,
            coalitions=outcome.coalitions,
        )

    def _answer_ranking(self, oracle: Oracle, answer: tuple[int, ...]
                        ) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """A counterfactual search's ranking of ``R`` (docs/design.md §8): its answer's
        events in the order found, then the other removable events in the strategy's order;
        the ``j``-th of ``m`` has importance ``(m - j) / m``."""
        chosen = set(answer)
        rest = [int(e) for e in oracle.removable if int(e) not in chosen]
        ranking = tuple(answer) + tuple(int(e) for e in self.strategy.rank(rest))
        m = len(ranking)
        return ranking, tuple((m - j) / m for j in range(m))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(strategy={self.strategy!r}, prune={self.post.prune}, "
                f"certify={self.post.certify}, ceiling={self.post.ceiling})")

    @abstractmethod
    def _search(self, oracle: Oracle, budget: BudgetMeter) -> SearchOutcome:
        """Search for a counterfactual (called only with ``p_orig != 0`` and ``|R| > 0``).

        Args:
            oracle: Oracle of the explained event; the strategy is already prepared.
            budget: The meter to ask before each iteration
                ([``BudgetMeter.proceed``][cftgnn.explain.BudgetMeter.proceed]); it knows the
                explainer's caps.

        Returns:
            The search's answer; [``explain``][cftgnn.explain.Explainer.explain] confirms it
            exactly.
        """


@dataclass(frozen=True)
class Explained:
    """One event explained by ``explain_events``.

    Attributes:
        oracle: The event's oracle, for the checks after the search (drop it before the
            next event: its plans count against the engine's memory budget).
        result: The explanation; ``setup_time_s`` holds the oracle's construction time.
    """

    oracle: Oracle
    result: ExplanationResult


def _explain_one(engine: ReplayEngine, explainer: Explainer, event_id: int, k: int | None,
                 m_max: int, mode: OracleMode | str, constraints: Constraints,
                 history: History | str, target: RankTarget | None = None) -> Explained:
    """The event's oracle, built and timed, and the explainer's answer on it."""
    start = time.perf_counter()
    oracle = engine.oracle(event_id, k, m_max, mode, constraints, history, target)
    setup = time.perf_counter() - start
    return Explained(oracle, dataclasses.replace(explainer.explain(oracle), setup_time_s=setup))


def explain_event(
    engine: ReplayEngine,
    explainer: Explainer,
    event_id: int,
    k: int | None = None,
    m_max: int = M_MAX,
    mode: OracleMode | str = OracleMode.APPROXIMATE,
    constraints: Constraints = NO_CONSTRAINTS,
    history: History | str = History.EVENT,
    target: RankTarget | None = None,
) -> ExplanationResult:
    """Explain one event: build its oracle with ``engine`` and run ``explainer`` on it.

    ``setup_time_s`` of the result holds the oracle's construction time and
    ``wall_time_s`` the search's, so their sum is the cost of the explanation.

    Args:
        engine: The replay engine of the explained stream.
        explainer: The search to run.
        event_id: The explained event ``i``.
        k: Hop radius of the candidate set (default: the model's number of layers).
        m_max: Maximum number of candidates.
        mode: Search mode of the oracle; confirmation is exact.
        constraints: User constraints (removable events, maximum size).
        history: The explained prediction's history, ``event`` or ``batch_start``
            (``cftgnn.oracle.history``).
        target: None to explain the logit; a ``RankTarget`` (the event's negatives and k)
            to explain the true destination's TGB rank (``cftgnn.oracle.target``).

    Example:
        >>> engine = ReplayEngine.from_checkpoint("checkpoints/tgn_uci.pt", load_uci())
        >>> explainer = CFTGNNExplainer(strategy=ClosestStrategy())
        >>> result = explain_event(engine, explainer, event_id=50_000)
    """
    return _explain_one(engine, explainer, event_id, k, m_max, mode, constraints,
                        history, target).result


def explain_events(
    engine: ReplayEngine,
    explainer: Explainer,
    events: Iterable[int],
    k: int | None = None,
    m_max: int = M_MAX,
    mode: OracleMode | str = OracleMode.APPROXIMATE,
    constraints: Constraints = NO_CONSTRAINTS,
    history: History | str = History.EVENT,
    targets: RankTargets | None = None,
) -> Iterator[Explained]:
    """Explain ``events`` in the given order with one explainer, one event at a time.

    The engine is told the events first (``ReplayEngine.expect``: it keeps their base
    states as its cursor passes them), so events in stream order replay the stream once.
    Each event's result equals ``explain_event``'s for it.

    Args:
        engine: The replay engine of the explained stream.
        explainer: The search to run on every event.
        events: The explained event ids.
        k: Hop radius of the candidate sets (default: the model's number of layers).
        m_max: Maximum number of candidates.
        mode: Search mode of the oracles; confirmation is exact.
        constraints: User constraints (removable events, maximum size).
        history: The explained predictions' history, ``event`` or ``batch_start``.
        targets: None for the logit target; the rank target's negatives and k
            (``RankTargets``), checked for every event before the first is explained.

    Yields:
        Each event's oracle and explanation, in the order of ``events``.

    Example:
        >>> for done in explain_events(engine, GreedyExplainer(), [50_000, 50_010]):
        ...     print(done.result.event_id, done.result.explanation)
    """
    ids = [int(e) for e in events]
    if targets is not None:
        targets.check(ids)
    engine.expect(ids, k, m_max, history)
    for event_id in ids:
        done = _explain_one(engine, explainer, event_id, k, m_max, mode, constraints, history,
                            None if targets is None else targets.of(event_id))
        yield done
        del done  # its oracle's plans go before the next event's are recorded (memory budget)


__all__ = ["Explained", "Explainer", "SearchOutcome", "explain_event", "explain_events"]
