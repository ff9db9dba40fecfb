"""Explain one event of a replay engine's stream: build its oracle, then search.

The engine (``cftgnn.oracle.engine``) only builds oracles; running an explainer on one is
the search side's job, done here so that the lower stage never calls up into this one.
"""

from __future__ import annotations

import dataclasses
import time

from cftgnn.explain.base import Explainer
from cftgnn.explain.result import ExplanationResult
from cftgnn.oracle.constraints import NO_CONSTRAINTS, Constraints
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.history import History
from cftgnn.oracle.oracle import OracleMode


def explain_event(
    engine: ReplayEngine,
    explainer: Explainer,
    event_id: int,
    k: int | None = None,
    m_max: int = 64,
    mode: OracleMode | str = OracleMode.APPROXIMATE,
    constraints: Constraints = NO_CONSTRAINTS,
    history: History | str = History.EVENT,
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

    Example:
        >>> engine = ReplayEngine.from_checkpoint("checkpoints/tgn_uci.pt", load_uci())
        >>> explainer = CFTGNNExplainer(strategy=ClosestStrategy())
        >>> result = explain_event(engine, explainer, event_id=50_000)
    """
    start = time.perf_counter()
    oracle = engine.oracle(event_id, k, m_max, mode, constraints, history)
    setup = time.perf_counter() - start
    return dataclasses.replace(explainer.explain(oracle), setup_time_s=setup)


__all__ = ["explain_event"]
