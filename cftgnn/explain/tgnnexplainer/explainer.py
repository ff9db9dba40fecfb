"""The T-GNNExplainer explainer: navigator, explorer, ranking (see the package docstring)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cftgnn.explain.attention import needs_probe
from cftgnn.explain.base import SearchOutcome
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.factual import FactualExplainer, FloatArray
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

    def check_run(self, fingerprint: ModelFingerprint) -> None:
        """Refuse a run the navigator cannot read: attention or the PGExplainer on a model
        without a probe, or no trained PGExplainer of this model and stream."""
        if self.params.navigator in (Navigator.PGEXPLAINER, Navigator.MLP):
            PGExplainer(checkpoint=self.params.checkpoint).check_run(fingerprint)
        elif self.params.navigator is Navigator.ATTENTION and not fingerprint.probe:
            raise needs_probe("tgnnexplainer navigator=attention", fingerprint.model)

    def _search(self, oracle: Oracle, budget: BudgetMeter) -> SearchOutcome:
        self._explorer: Explorer | None = None
        outcome = super()._search(oracle, budget)
        explorer = self._explorer
        if explorer is None:  # pragma: no cover - _score always explores
            return outcome
        return replace(outcome, iterations=explorer.rollouts,
                       coalitions=explorer.coalitions())

    def _score(self, oracle: Oracle, budget: BudgetMeter) -> FloatArray:
        explorer = self.explore(oracle, budget)
        self._explorer = explorer
        kept = explorer.best()
        inside = np.array([int(e) in kept for e in oracle.removable], dtype=np.float64)
        return inside + share_below(explorer.scores)

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


__all__ = ["TGNNExplainer"]
