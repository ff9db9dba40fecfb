"""T-GNNExplainer's options: the search mode, the navigator, the published defaults."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from cftgnn.explain.params import BudgetParams, option


class Search(str, Enum):
    """Which explorer T-GNNExplainer runs (see ``cftgnn.explain.tgnnexplainer``)."""

    #: The authors' explorer: one child per visit until every child exists, selection
    #: without a prior, rollouts to the empty coalition, every child scored.
    PUBLISHED = "published"
    #: This project's earlier, faster explorer: the navigator's ``expand_width`` least
    #: important children at once, a navigator prior, rollouts ending at ``min_atoms``
    #: events, leaves scored only.
    NARROWED = "narrowed"


class Navigator(str, Enum):
    """Where T-GNNExplainer's navigator scores come from."""

    #: The paper's navigator: the model's attention re-weighted by the trained PGExplainer's
    #: scores where the model has attention (TGN, TGAT), its scores alone otherwise.
    PGEXPLAINER = "pgexplainer"
    #: The trained PGExplainer's scores alone (the reproduction's MLP navigator).
    MLP = "mlp"
    #: The model's aggregated attention.
    ATTENTION = "attention"
    #: The exact single-removal shifts (one batched call).
    PERTURB_ONE = "perturb_one"
    #: No navigator: every event alike (the older dropped first).
    NONE = "none"


@dataclass(frozen=True)
class TGNNExplainerParams(BudgetParams):
    """T-GNNExplainer's options (``conf/explainer/tgnnexplainer.yaml``).

    Defaults, and where each comes from (the authors' public code as the TMLR 2024
    reproduction carries it, ``benchmarks/xgraph/config/explainers/subgraphx_tg.yaml`` and
    ``tgnnexplainer/xgraph/method/``):

    * ``search = published``: ``subgraphx_tg.py``'s explorer (``MCTS.mcts_rollout``);
      ``narrowed`` is this project's earlier, faster one (not published);
    * ``rollouts = 500``: ``rollout: 500`` for every dataset of the published configuration;
    * ``c_puct = 5``: ``c_puct: 5`` for every dataset;
    * ``min_atoms = 6``: the answer's largest size, ``min_atoms: 6`` (Reddit; the other
      datasets' values, 20 or 100, do not bind with 20 candidates, so 6 is the one binding
      published value); ``narrowed`` rollouts also end there;
    * ``candidates = 20``: ``threshold_num = 20`` most recent candidate events
      (``base_explainer_tg.find_candidates``);
    * ``navigator = pgexplainer``: the paper's navigator (``navigators.PGNavigator``: the
      model's attention with a trained temporal PGExplainer's scores added to the attention
      scores of the candidates, ``explainer=pgexplainer``'s MLP read from ``checkpoint``);
      on a model without attention, the MLP's scores (``navigators.MLPNavigator``);
    * ``wave = 25``: not a published value (the published search is sequential, one model
      call per coalition): rollouts whose new coalitions are scored in one batched exact
      call;
    * ``expand_width = 5``: ``narrowed`` only, not a published value: a node gets its
      ``expand_width`` least important children at once.
    """

    own_cap: ClassVar[str | None] = "rollouts"

    search: Search = option(Search.PUBLISHED, "explorer: published (the authors') | narrowed "
                                              "(faster, not published)")
    rollouts: int = option(500, "MCTS rollouts (max_iterations, when set, replaces it)", low=0)
    c_puct: float = option(5.0, "weight of the UCT exploration term", low=0)
    min_atoms: int = option(6, "largest size of the answer's kept coalition (narrowed: a "
                               "rollout ends there)", low=1)
    candidates: int = option(20, "most recent removable events the search keeps or drops",
                             low=1)
    navigator: Navigator = option(Navigator.PGEXPLAINER,
                                  "navigator scores: pgexplainer | mlp | attention | "
                                  "perturb_one | none")
    checkpoint: str = option("auto", "the pgexplainer / mlp navigator's trained MLP: auto = "
                                     "<checkpoint_dir>/pgexplainer_<model>_<dataset>.pt, or a "
                                     "path")
    wave: int = option(25, "rollouts whose new coalitions are scored in one batched call "
                           "(1: one rollout at a time)", low=1)
    expand_width: int = option(5, "narrowed only: children per expansion (the navigator's "
                                  "least important events)", low=1)


__all__ = ["Navigator", "Search", "TGNNExplainerParams"]
