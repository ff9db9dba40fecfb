"""The temporal PGExplainer's parameters, apart from its module (which loads torch), so that
``explain.py`` checks ``explainer=pgexplainer``'s options before torch loads
(``cftgnn.explain.params.explainer_params``)."""

from __future__ import annotations

from dataclasses import dataclass

from cftgnn.explain.params import BudgetParams, option


@dataclass(frozen=True)
class PGExplainerParams(BudgetParams):
    """The temporal PGExplainer's options (``conf/explainer/pgexplainer.yaml``); training
    options are ``train_explainer.py``'s (``conf/train_explainer.yaml``)."""

    checkpoint: str = option("auto", "trained MLP: auto = <checkpoint_dir>/pgexplainer_"
                                     "<model>_<dataset>.pt, or a path")


__all__ = ["PGExplainerParams"]
