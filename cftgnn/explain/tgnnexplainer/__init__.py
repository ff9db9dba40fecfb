"""T-GNNExplainer (Xia et al., ICLR 2023): MCTS over coalitions of kept events, navigated.

"Explaining Temporal Graph Models through an Explorer-Navigator Framework". The *explorer* is a
Monte-Carlo tree search whose nodes are coalitions ``C`` of **kept** candidate events; the
*navigator* scores each candidate's importance and orders the explorer's expansions. Here
(docs/design.md §8), over the oracle of one explained event with removable events ``R``:

* **candidates** ``K``: the ``candidates`` most recent events of ``R`` (the published code keeps
  the 20 most recent events of the computation graph); the other events of ``R`` stay in the
  graph throughout;
* **root**: ``C = K``; a **child** of ``C`` keeps one event fewer, ``C \\ {e}``;
* **reward** of ``C``: the model's logit with only ``C`` kept of ``K``, i.e. the exact logit
  ``p`` of removing ``K \\ C``, as a fidelity towards the original prediction (the published
  reward, ``p − p_orig`` if ``p_orig ≥ 0``, else ``p_orig − p``; larger = the prediction is
  kept; ``fidelity``);
* **explorer** (``search``): ``published`` (default), the authors' MCTS
  (``PublishedExplorer``: one child
  per visit until every child exists, UCT without a prior, rollouts to the empty coalition,
  every child scored, in batched exact calls), or ``narrowed``, this project's earlier, faster
  search (``NarrowedExplorer``: the
  navigator's ``expand_width`` least important children at once, a navigator prior, rollouts
  ending at ``min_atoms`` events, leaves scored only; its departures are listed there);
* **navigator** (``navigator``, ``navigators``): ``pgexplainer`` (the paper's: the model's
  attention re-weighted by the trained PGExplainer's scores where the model has attention, the
  scores alone otherwise), ``mlp`` (the scores alone), ``attention``, ``perturb_one`` (the
  exact single-removal shift, one batched call of ``|R|`` sets) or ``none`` (every event alike,
  the older dropped first);
* **answer**: the scored coalition of at most ``min_atoms`` events with the largest reward
  (ties: the smaller, then the first created).

The result keeps **every scored coalition** (``ExplanationResult.coalitions``: the kept
candidates and the reward, ``K`` first with reward 0), so the authors' evaluator (the best
coalition per sparsity level) can be applied.

As a [``FactualExplainer``][cftgnn.explain.FactualExplainer], it reports an **importance** per event
of ``R``: ``1 + ν(e)`` for the events of the answer (T-GNNExplainer explains by the coalition it
keeps), ``ν(e)`` for the others, where ``ν(e) ∈ [0, 1)`` is the share of ``R`` the navigator
scores strictly lower than ``e`` (a tie-breaker of the navigator's order). So the ranking is the
answer's events first, then the rest in the navigator's order, and the counterfactual answer is
the shortest prefix of that ranking whose removal flips the prediction.

Budget: the oracle calls are exact evaluations (the navigator's, the scoring's and the prefix
scan's); a coalition the calls or seconds left do not cover ends the search, cut short.

The names load on first use (``cftgnn.lazy``): ``params`` is read by the option checks
before torch loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cftgnn.lazy import lazy_attribute

if TYPE_CHECKING:  # loaded on first use (cftgnn.lazy)
    from cftgnn.explain.tgnnexplainer.explainer import TGNNExplainer
    from cftgnn.explain.tgnnexplainer.explorer import Explorer, Node, ScoredCoalition, fidelity
    from cftgnn.explain.tgnnexplainer.narrowed import NarrowedExplorer
    from cftgnn.explain.tgnnexplainer.navigators import (
        most_recent,
        navigator_scores,
        pg_navigator,
        pgexplainer_scores,
        share_below,
    )
    from cftgnn.explain.tgnnexplainer.params import Navigator, Search, TGNNExplainerParams
    from cftgnn.explain.tgnnexplainer.published import PublishedExplorer

_EXPORTS = {
    "cftgnn.explain.tgnnexplainer.explainer": ("TGNNExplainer",),
    "cftgnn.explain.tgnnexplainer.explorer": ("Explorer", "Node", "ScoredCoalition", "fidelity"),
    "cftgnn.explain.tgnnexplainer.narrowed": ("NarrowedExplorer",),
    "cftgnn.explain.tgnnexplainer.navigators": ("most_recent", "navigator_scores", "pg_navigator",
                                                "pgexplainer_scores", "share_below"),
    "cftgnn.explain.tgnnexplainer.params": ("Navigator", "Search", "TGNNExplainerParams"),
    "cftgnn.explain.tgnnexplainer.published": ("PublishedExplorer",),
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _EXPORTS, name)


__all__ = ["Explorer", "NarrowedExplorer", "Navigator", "Node", "PublishedExplorer",
           "ScoredCoalition", "Search", "TGNNExplainer", "TGNNExplainerParams", "fidelity",
           "most_recent", "navigator_scores", "pg_navigator", "pgexplainer_scores",
           "share_below"]
