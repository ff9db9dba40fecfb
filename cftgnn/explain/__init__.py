"""Explainers (search only): selection strategies; the counterfactual searches CF-TGNN,
greedy, beam, exhaustive, NSGA-II and particle swarm (several counterfactuals); the factual
explainers that rank events (random, perturb-one, attention, PGExplainer, T-GNNExplainer,
TempME); one
result type. They see the oracle
([``cftgnn.oracle``][cftgnn.oracle], imported from there), never a model."""

from cftgnn.explain.attention import AttentionExplainer, AttentionParams
from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.beam import BeamExplainer, BeamParams
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.exact_search import SizeSearch, prune, search_by_size
from cftgnn.explain.exhaustive import ExhaustiveExplainer, ExhaustiveParams
from cftgnn.explain.factual import FactualExplainer
from cftgnn.explain.greedy import GreedyExplainer, GreedyParams
from cftgnn.explain.mcts import CFTGNNExplainer, CFTGNNParams
from cftgnn.explain.nsga2 import NSGA2Explainer, NSGA2Params
from cftgnn.explain.params import BudgetParams, Params
from cftgnn.explain.pgexplainer import PGExplainer, PGExplainerParams
from cftgnn.explain.post import PostProcessing
from cftgnn.explain.pso import PSOExplainer, PSOParams
from cftgnn.explain.ranking import (
    PerturbOneExplainer,
    PerturbOneParams,
    RandomExplainer,
    RandomParams,
)
from cftgnn.explain.result import SCHEMA_VERSION, ExplanationResult, ExplanationStatus
from cftgnn.explain.run import explain_event
from cftgnn.explain.strategies import (
    ClosestStrategy,
    OneBestStrategy,
    RandomStrategy,
    RecentStrategy,
    SelectionStrategy,
)
from cftgnn.explain.tempme import TempMEExplainer, TempMEParams
from cftgnn.explain.tgnnexplainer import TGNNExplainer, TGNNExplainerParams
from cftgnn.explain.tree import BackpropRule, SearchNode

__all__ = [
    "SCHEMA_VERSION",
    "AttentionExplainer",
    "AttentionParams",
    "BackpropRule",
    "BeamExplainer",
    "BeamParams",
    "BudgetMeter",
    "BudgetParams",
    "CFTGNNExplainer",
    "CFTGNNParams",
    "ClosestStrategy",
    "ExhaustiveExplainer",
    "ExhaustiveParams",
    "Explainer",
    "ExplanationResult",
    "ExplanationStatus",
    "FactualExplainer",
    "GreedyExplainer",
    "GreedyParams",
    "NSGA2Explainer",
    "NSGA2Params",
    "PGExplainer",
    "PGExplainerParams",
    "PSOExplainer",
    "PSOParams",
    "PerturbOneExplainer",
    "PerturbOneParams",
    "RandomExplainer",
    "RandomParams",
    "Params",
    "PostProcessing",
    "OneBestStrategy",
    "RandomStrategy",
    "RecentStrategy",
    "SearchNode",
    "SearchOutcome",
    "SelectionStrategy",
    "SizeSearch",
    "TGNNExplainer",
    "TempMEExplainer",
    "TempMEParams",
    "TGNNExplainerParams",
    "explain_event",
    "prune",
    "search_by_size",
]
