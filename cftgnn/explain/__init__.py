"""Counterfactual explainers: the oracle, selection strategies, CF-TGNN, greedy, one result type."""

from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.cftgnn import CFTGNNExplainer
from cftgnn.explain.greedy import GreedyExplainer
from cftgnn.explain.oracle import (
    Confirmation,
    LogitFn,
    Oracle,
    OracleMode,
    OracleStats,
    delta,
    is_flip,
    node_score,
)
from cftgnn.explain.replay import ReplayEngine, naive_logit
from cftgnn.explain.result import SCHEMA_VERSION, ExplanationResult, ExplanationStatus
from cftgnn.explain.strategies import (
    ClosestStrategy,
    OneBestStrategy,
    RandomStrategy,
    RecentStrategy,
    SelectionStrategy,
)
from cftgnn.explain.tree import BackpropRule, SearchNode

__all__ = [
    "SCHEMA_VERSION",
    "BackpropRule",
    "CFTGNNExplainer",
    "ClosestStrategy",
    "Confirmation",
    "Explainer",
    "ExplanationResult",
    "ExplanationStatus",
    "GreedyExplainer",
    "LogitFn",
    "OneBestStrategy",
    "Oracle",
    "OracleMode",
    "OracleStats",
    "RandomStrategy",
    "RecentStrategy",
    "ReplayEngine",
    "SearchNode",
    "SearchOutcome",
    "SelectionStrategy",
    "delta",
    "is_flip",
    "naive_logit",
    "node_score",
]
