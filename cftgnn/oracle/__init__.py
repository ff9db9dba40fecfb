"""The oracle: the explained event's logit as a function of the removed past events.

* ``cftgnn.oracle.oracle``: [``Oracle``][cftgnn.oracle.Oracle] (caching, counting, two-stage
  confirmation), [``OracleMode``][cftgnn.oracle.OracleMode], and the semantics every stage shares:
  ``delta``, ``margin``, ``node_score`` and ``is_flip`` (the one flip test).
* ``cftgnn.oracle.constraints``: the search space (removable events, maximum size).
* ``cftgnn.oracle.engine``: [``ReplayEngine``][cftgnn.oracle.ReplayEngine], which builds an
  explained event's oracle from unperturbed snapshots and the model's replay
  (``cftgnn.replay.registry.replay_for``: its registered batched replay, or one replay per set) as
  the oracle's exact and approximate backends; it never runs an explainer
  ([``cftgnn.explain.explain_event``][cftgnn.explain.explain_event] does).
* ``cftgnn.oracle.auto_mode``: measuring both modes to pick one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cftgnn.lazy import lazy_attribute

if TYPE_CHECKING:  # loaded on first use (cftgnn.lazy): cftgnn.oracle.history stays light
    from cftgnn.oracle.constraints import NO_CONSTRAINTS, Constraints
    from cftgnn.oracle.engine import EventReplay, ReplayCounters, ReplayEngine, naive_logit
    from cftgnn.oracle.oracle import (
        Confirmation,
        LogitFn,
        Oracle,
        OracleMode,
        OracleStats,
        delta,
        is_flip,
        margin,
        node_score,
    )

_EXPORTS = {
    "cftgnn.oracle.constraints": ("NO_CONSTRAINTS", "Constraints"),
    "cftgnn.oracle.engine": ("EventReplay", "ReplayCounters", "ReplayEngine", "naive_logit"),
    "cftgnn.oracle.oracle": ("Confirmation", "LogitFn", "Oracle", "OracleMode", "OracleStats",
                             "delta", "is_flip", "margin", "node_score"),
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _EXPORTS, name)


__all__ = [
    "NO_CONSTRAINTS",
    "Confirmation",
    "Constraints",
    "EventReplay",
    "LogitFn",
    "Oracle",
    "OracleMode",
    "OracleStats",
    "ReplayCounters",
    "ReplayEngine",
    "delta",
    "is_flip",
    "margin",
    "naive_logit",
    "node_score",
]
