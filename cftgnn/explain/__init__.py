"""Counterfactual explainers: the oracle, selection strategies, CF-TGNN, greedy, one result type."""

from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.beam import BeamExplainer
from cftgnn.explain.cftgnn import CFTGNNExplainer
from cftgnn.explain.constraints import Constraints
from cftgnn.explain.exact_search import SizeSearch, prune, search_by_size
from cftgnn.explain.exhaustive import ExhaustiveExplainer
from cftgnn.explain.greedy import GreedyExplainer
from cftgnn.explain.oracle import (
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
    "BeamExplainer",
    "CFTGNNExplainer",
    "ClosestStrategy",
    "Confirmation",
    "Constraints",
    "ExhaustiveExplainer",
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
    "SizeSearch",
    "delta",
    "is_flip",
    "margin",
    "naive_logit",
    "node_score",
    "prune",
    "search_by_size",
]
