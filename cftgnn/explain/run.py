"""Explain events of a replay engine's stream: build each event's oracle, then search.

The engine (``cftgnn.oracle.engine``) only builds oracles; running an explainer on one is
the search side's job, done here so that the lower stage never calls up into this one.
``explain_event`` explains one event, ``explain_events`` many with one explainer (built
once: the search's per-event state lives in the search, the strategy is prepared per
oracle); ``explain.py``'s pipeline wraps the latter with its checks and records.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cftgnn.data.index import M_MAX
from cftgnn.explain.base import Explainer
from cftgnn.explain.result import ExplanationResult
from cftgnn.oracle.constraints import NO_CONSTRAINTS, Constraints
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.history import History
from cftgnn.oracle.oracle import Oracle, OracleMode
from cftgnn.oracle.target import RankTarget, RankTargets


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


__all__ = ["Explained", "explain_event", "explain_events"]
