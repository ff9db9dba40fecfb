"""TempME (Chen and Ying, NeurIPS 2023): explanations by temporal motifs.

* ``walks``: the temporal walk sampler, anonymisation, motif classes and the null-model prior;
* ``model``: the motif encoder, the event importances and the information-bottleneck loss;
* ``explainer``: ``explainer=tempme`` (a factual explainer) and its checkpoint with a card.

Training: ``cftgnn.explain.training.tempme`` (``scripts/train_explainer.py
explainer=tempme``). docs/explainers/tempme.md describes the method and its numbers here.

The names load on first use (``cftgnn.lazy``): ``params`` (``TempMEParams``) is read by
the option checks before torch loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cftgnn.lazy import lazy_attribute

if TYPE_CHECKING:  # loaded on first use (cftgnn.lazy)
    from cftgnn.explain.tempme.explainer import (
        KIND,
        TempMEExplainer,
        TrainedTempME,
        check_tempme_card,
        event_walks,
        load_tempme,
        resolve_tempme,
        save_tempme,
        tempme_card,
        tempme_path,
    )
    from cftgnn.explain.tempme.model import (
        EncoderShape,
        MotifEncoder,
        concrete,
        event_importance,
        prior_kl,
        tempme_loss,
    )
    from cftgnn.explain.tempme.params import TempMEParams
    from cftgnn.explain.tempme.walks import (
        Walks,
        anonymise,
        motif_classes,
        null_prior,
        position_counts,
        sample_walks,
    )

_EXPORTS = {
    "cftgnn.explain.tempme.explainer": ("KIND", "TempMEExplainer", "TrainedTempME",
                                        "check_tempme_card", "event_walks", "load_tempme",
                                        "resolve_tempme", "save_tempme", "tempme_card",
                                        "tempme_path"),
    "cftgnn.explain.tempme.params": ("TempMEParams",),
    "cftgnn.explain.tempme.model": ("EncoderShape", "MotifEncoder", "concrete", "event_importance",
                                    "prior_kl", "tempme_loss"),
    "cftgnn.explain.tempme.walks": ("Walks", "anonymise", "motif_classes", "null_prior",
                                    "position_counts", "sample_walks"),
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _EXPORTS, name)


__all__ = ["KIND", "EncoderShape", "MotifEncoder", "TempMEExplainer", "TempMEParams",
           "TrainedTempME", "Walks", "anonymise", "check_tempme_card", "concrete",
           "event_importance", "event_walks", "load_tempme", "motif_classes", "null_prior",
           "position_counts", "prior_kl", "resolve_tempme", "sample_walks", "save_tempme",
           "tempme_card", "tempme_loss", "tempme_path"]
