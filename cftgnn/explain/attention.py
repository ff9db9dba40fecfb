"""The attention baseline: candidates ranked by the model's aggregated attention weights.

[``AttentionExplainer``][cftgnn.explain.AttentionExplainer] (``explainer=attention``) scores each
removable event ``e`` by the attention mass the model puts on it when it predicts the explained
link: the oracle's probe (``attention``, the model's ``attention_by_event``) sums the softmax
weights of every attention slot that reads ``e`` over layers and computation-tree targets, averaged
over heads; an event no slot reads scores 0. This is the attention explainer of the T-GNNExplainer
reference system (docs/design.md §8), which averages the same weights per event. No oracle call is
spent on scoring; the answer is the shortest flipping prefix
([``FactualExplainer``][cftgnn.explain.FactualExplainer]).

It needs a model the oracle gives a probe (a ``SoftRemovalModel``: TGN and TGAT, whose
scores are attention weights, GraphMixer and DyGFormer, whose are pooling shares); with any
other model (PyG's TGN) the oracle has no probe, and the explainer refuses the run before any
event (``supports``) and any event whose oracle lacks one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from cftgnn.errors import ExplainerError
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.factual import FactualExplainer, FloatArray
from cftgnn.explain.params import BudgetParams
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.oracle.oracle import Oracle


def needs_probe(explainer: str, model: str | None) -> ExplainerError:
    """The error of an explainer that reads the model's attention or soft removal, run on a
    model that offers neither (one line, naming the model and the ``model=`` options that
    offer them, ``cftgnn.training.checkpoint.probed_models_text``)."""
    from cftgnn.training.checkpoint import probed_models_text  # the models: only when raised

    named = f"model {model!r}" if model else "this model"
    choices = probed_models_text()
    advice = f"use {choices}" if choices else "no model of conf/model has one"
    return ExplainerError(f"explainer={explainer} needs a model with a probe (attention or "
                          f"pooling scores and soft removal); {named} offers none (its oracle "
                          f"has no probe); {advice}")


@dataclass(frozen=True)
class AttentionParams(BudgetParams):
    """The attention baseline has no options besides the budget
    (``conf/explainer/attention.yaml``)."""


class AttentionExplainer(FactualExplainer):
    """Ranks each removable event by the model's attention mass on it."""

    name = "attention"
    Params = AttentionParams
    params: AttentionParams

    def supports(self, fingerprint: ModelFingerprint | None = None,
                 protocols: Iterable[str] = ()) -> None:
        super().supports(fingerprint, protocols)
        if fingerprint is not None and not fingerprint.probe:
            raise needs_probe(self.name, fingerprint.model)

    def _score(self, oracle: Oracle, budget: BudgetMeter) -> FloatArray:
        if oracle.probe is None:
            fp = oracle.fingerprint
            raise needs_probe(self.name, None if fp is None else fp.model)
        scores = np.asarray(oracle.probe.attention(), dtype=np.float64).reshape(-1)
        if len(scores) != len(oracle.removable):
            raise ExplainerError(f"the probe gave {len(scores)} attention weights for "
                                 f"{len(oracle.removable)} removable events")
        return scores


__all__ = ["AttentionExplainer", "AttentionParams", "needs_probe"]
