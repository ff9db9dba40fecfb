"""TempME's parameters, apart from its explainer (which loads torch), so that ``explain.py``
checks ``explainer=tempme``'s options before torch loads
(``cftgnn.explain.params.explainer_params``)."""

from __future__ import annotations

from dataclasses import dataclass

from cftgnn.explain.params import BudgetParams, option


@dataclass(frozen=True)
class TempMEParams(BudgetParams):
    """TempME's options (``conf/explainer/tempme.yaml``); training options are
    ``train_explainer.py``'s (``conf/train_explainer.yaml``, ``tempme:``)."""

    checkpoint: str = option("auto", "trained TempME: auto = <checkpoint_dir>/tempme_"
                                     "<model>_<dataset>.pt, or a path")
    seed: int = option(0, "seed of the walks (with the event id: one ranking per event)",
                       low=0)


__all__ = ["TempMEParams"]
