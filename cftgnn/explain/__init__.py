"""Explainers (search only): selection strategies; the counterfactual searches CF-TGNN,
greedy, beam, exhaustive, NSGA-II and particle swarm (several counterfactuals), and TemGX's
Select-Verify; the factual explainers that rank events (random, perturb-one, attention,
PGExplainer, T-GNNExplainer, TempME); one result type. They see the oracle
([``cftgnn.oracle``][cftgnn.oracle], imported from there), never a model.

The names below load on first use (``cftgnn.lazy``): the option checks read the
parameter declarations (``cftgnn.explain.params``, each explainer's ``Params``) before torch
loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cftgnn.lazy import lazy_attribute

if TYPE_CHECKING:  # loaded on first use (cftgnn.lazy)
    from cftgnn.explain.attention import AttentionExplainer, AttentionParams
    from cftgnn.explain.base import (
        Explained,
        Explainer,
        SearchOutcome,
        explain_event,
        explain_events,
    )
    from cftgnn.explain.beam import BeamExplainer, BeamParams
    from cftgnn.explain.budget import BudgetMeter
    from cftgnn.explain.exact_search import SizeSearch, prune, search_by_size
    from cftgnn.explain.exhaustive import ExhaustiveExplainer, ExhaustiveParams
    from cftgnn.explain.factual import FactualExplainer
    from cftgnn.explain.greedy import GreedyExplainer, GreedyParams
    from cftgnn.explain.mcts import CFTGNNExplainer, CFTGNNParams
    from cftgnn.explain.nsga2 import NSGA2Explainer, NSGA2Params
    from cftgnn.explain.params import BudgetParams, Params
    from cftgnn.explain.pgexplainer import PGExplainer
    from cftgnn.explain.pgexplainer_params import PGExplainerParams
    from cftgnn.explain.post import PostProcessing
    from cftgnn.explain.pso import PSOExplainer, PSOParams
    from cftgnn.explain.ranking import (
        PerturbOneExplainer,
        PerturbOneParams,
        RandomExplainer,
        RandomParams,
    )
    from cftgnn.explain.result import SCHEMA_VERSION, ExplanationResult, ExplanationStatus
    from cftgnn.explain.strategies import (
        ClosestStrategy,
        OneBestStrategy,
        RandomStrategy,
        RecentStrategy,
        SelectionStrategy,
    )
    from cftgnn.explain.temgx import TemGXExplainer, TemGXParams
    from cftgnn.explain.tempme.explainer import TempMEExplainer
    from cftgnn.explain.tempme.params import TempMEParams
    from cftgnn.explain.tgnnexplainer.explainer import TGNNExplainer
    from cftgnn.explain.tgnnexplainer.params import TGNNExplainerParams
    from cftgnn.explain.tree import BackpropRule, SearchNode

_EXPORTS = {
    "cftgnn.explain.attention": ("AttentionExplainer", "AttentionParams"),
    "cftgnn.explain.base": ("Explained", "Explainer", "SearchOutcome", "explain_event",
                            "explain_events"),
    "cftgnn.explain.beam": ("BeamExplainer", "BeamParams"),
    "cftgnn.explain.budget": ("BudgetMeter",),
    "cftgnn.explain.exact_search": ("SizeSearch", "prune", "search_by_size"),
    "cftgnn.explain.exhaustive": ("ExhaustiveExplainer", "ExhaustiveParams"),
    "cftgnn.explain.factual": ("FactualExplainer",),
    "cftgnn.explain.greedy": ("GreedyExplainer", "GreedyParams"),
    "cftgnn.explain.mcts": ("CFTGNNExplainer", "CFTGNNParams"),
    "cftgnn.explain.nsga2": ("NSGA2Explainer", "NSGA2Params"),
    "cftgnn.explain.params": ("BudgetParams", "Params"),
    "cftgnn.explain.pgexplainer": ("PGExplainer",),
    "cftgnn.explain.pgexplainer_params": ("PGExplainerParams",),
    "cftgnn.explain.post": ("PostProcessing",),
    "cftgnn.explain.pso": ("PSOExplainer", "PSOParams"),
    "cftgnn.explain.ranking": ("PerturbOneExplainer", "PerturbOneParams", "RandomExplainer",
                               "RandomParams"),
    "cftgnn.explain.result": ("SCHEMA_VERSION", "ExplanationResult", "ExplanationStatus"),
    "cftgnn.explain.strategies": ("ClosestStrategy", "OneBestStrategy", "RandomStrategy",
                                  "RecentStrategy", "SelectionStrategy"),
    "cftgnn.explain.temgx": ("TemGXExplainer", "TemGXParams"),
    "cftgnn.explain.tempme.explainer": ("TempMEExplainer",),
    "cftgnn.explain.tempme.params": ("TempMEParams",),
    "cftgnn.explain.tgnnexplainer.explainer": ("TGNNExplainer",),
    "cftgnn.explain.tgnnexplainer.params": ("TGNNExplainerParams",),
    "cftgnn.explain.tree": ("BackpropRule", "SearchNode"),
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _EXPORTS, name)


__all__ = [
    # The entry points: one event explained, its result, and the explainers (the order of the
    # API page, which follows this list).
    "explain_event",
    "explain_events",
    "Explained",
    "ExplanationResult",
    "ExplanationStatus",
    "Explainer",
    "CFTGNNExplainer",
    "GreedyExplainer",
    "BeamExplainer",
    "ExhaustiveExplainer",
    "NSGA2Explainer",
    "PSOExplainer",
    "FactualExplainer",
    "RandomExplainer",
    "PerturbOneExplainer",
    "AttentionExplainer",
    "PGExplainer",
    "TempMEExplainer",
    "TGNNExplainer",
    "TemGXExplainer",
    # Their parameters.
    "Params",
    "BudgetParams",
    "CFTGNNParams",
    "GreedyParams",
    "BeamParams",
    "ExhaustiveParams",
    "NSGA2Params",
    "PSOParams",
    "RandomParams",
    "PerturbOneParams",
    "AttentionParams",
    "PGExplainerParams",
    "TempMEParams",
    "TGNNExplainerParams",
    "TemGXParams",
    # Which candidates a search tries first, and what runs after it.
    "SelectionStrategy",
    "ClosestStrategy",
    "OneBestStrategy",
    "RandomStrategy",
    "RecentStrategy",
    "PostProcessing",
    # The searches' building blocks, and the version of the result records.
    "SearchOutcome",
    "BudgetMeter",
    "SearchNode",
    "BackpropRule",
    "SizeSearch",
    "search_by_size",
    "prune",
    "SCHEMA_VERSION",
]
