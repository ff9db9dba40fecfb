"""The oracle: the explained event's logit as a function of the removed past events.

* :mod:`cftgnn.oracle.oracle`: :class:`Oracle` (caching, counting, two-stage confirmation),
  :class:`OracleMode`, and the semantics every stage shares: ``delta``, ``margin``,
  ``node_score`` and ``is_flip`` (the one flip test).
* :mod:`cftgnn.oracle.constraints`: the search space (removable events, maximum size).
* :mod:`cftgnn.oracle.backends`: how removal sets are evaluated with a model (the generic
  one-replay-per-set path, or the model's batched replay from :mod:`cftgnn.replay`).
* :mod:`cftgnn.oracle.engine`: :class:`ReplayEngine`, which builds an explained event's oracle
  from unperturbed snapshots; it never runs an explainer (:func:`cftgnn.explain.explain_event`
  does).
* :mod:`cftgnn.oracle.auto_mode`: measuring both modes to pick one.
"""

from cftgnn.oracle.backends import GenericReplay, NativeReplay, replay_backend
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

__all__ = [
    "NO_CONSTRAINTS",
    "Confirmation",
    "Constraints",
    "EventReplay",
    "GenericReplay",
    "LogitFn",
    "NativeReplay",
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
    "replay_backend",
]
