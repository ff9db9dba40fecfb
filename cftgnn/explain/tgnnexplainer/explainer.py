"""The T-GNNExplainer explainer: navigator, explorer, ranking (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from cftgnn.explain.attention import needs_probe
from cftgnn.explain.base import SearchOutcome
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.factual import FactualExplainer, FloatArray, rank_by_importance
from cftgnn.explain.pgexplainer import PGExplainer
from cftgnn.explain.tgnnexplainer.explorer import Explorer
from cftgnn.explain.tgnnexplainer.narrowed import NarrowedExplorer
from cftgnn.explain.tgnnexplainer.navigators import most_recent, navigator_scores, share_below
from cftgnn.explain.tgnnexplainer.params import Navigator, Search, TGNNExplainerParams
from cftgnn.explain.tgnnexplainer.published import PublishedExplorer
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.oracle.oracle import Oracle


class TGNNExplainer(FactualExplainer):
    """T-GNNExplainer: MCTS over kept coalitions, navigated (see
    ``cftgnn.explain.tgnnexplainer``)."""

    name = "tgnnexplainer"
    Params = TGNNExplainerParams
    scored_by_coalitions = True
    params: TGNNExplainerParams

    def supports(self, fingerprint: ModelFingerprint | None = None,
                 protocols: Iterable[str] = ()) -> None:
        """Refuse a run the navigator cannot read: attention or the PGExplainer on a model
        without a probe, or no trained PGExplainer of this model and stream."""
        super().supports(fingerprint, protocols)
        if fingerprint is None:
            return
        if self.params.navigator in (Navigator.PGEXPLAINER, Navigator.MLP):
            PGExplainer(checkpoint=self.params.checkpoint).supports(fingerprint)
        elif self.params.navigator is Navigator.ATTENTION and not fingerprint.probe:
            raise needs_probe("tgnnexplainer navigator=attention", fingerprint.model)

    def _search(self, oracle: Oracle, budget: BudgetMeter) -> SearchOutcome:
        # the explorer is this search's own (nothing of it stays on the explainer)
        explorer = self.explore(oracle, budget)
        ranking, importance = rank_by_importance(oracle.removable, _scores(oracle, explorer))
        outcome = self.ranked_outcome(oracle, ranking, importance, budget)
        return replace(outcome, iterations=explorer.rollouts,
                       coalitions=explorer.coalitions())

    def _score(self, oracle: Oracle, budget: BudgetMeter) -> FloatArray:
        return _scores(oracle, self.explore(oracle, budget))

    def explore(self, oracle: Oracle, budget: BudgetMeter) -> Explorer:
        """The search alone, for inspection: the explorer after its rollouts."""
        candidates = most_recent(oracle.removable, self.params.candidates)
        nav = navigator_scores(self.params.navigator, oracle, budget, self.params.checkpoint,
                               candidates)
        kind = (PublishedExplorer if self.params.search is Search.PUBLISHED
                else NarrowedExplorer)
        explorer = kind(oracle, self.params, nav, budget)
        explorer.run()
        return explorer


def _scores(oracle: Oracle, explorer: Explorer) -> FloatArray:
    """Each removable event's importance after the rollouts: 1 inside the best kept
    coalition, plus its navigator score's share below 1 (``float [|R|]``)."""
    kept = explorer.best()
    inside = np.array([int(e) in kept for e in oracle.removable], dtype=np.float64)
    return inside + share_below(explorer.scores)


__all__ = ["TGNNExplainer"]
