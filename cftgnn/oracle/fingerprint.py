"""What identifies the model and the data an oracle answers for.

Explainers see only the oracle (docs/design.md §4), yet a trained explainer (PGExplainer's
MLP, docs/design.md §8) belongs to one model checkpoint on one stream and must refuse any
other. ``ModelFingerprint`` carries what that check needs, and no model: ``explain.py``
builds it once per run (``model_fingerprint``), gives it to
each explainer's [``supports``][cftgnn.explain.Explainer.supports] before any event is
explained, and the replay engine hands it to every oracle (``oracle.fingerprint``; None when
nobody set one, e.g. toy oracles of tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the explainers' parameter checks import this module before torch loads
    from omegaconf import DictConfig

    from cftgnn.data.stream import EventStream
    from cftgnn.models.base import TemporalModel


@dataclass(frozen=True)
class ModelFingerprint:
    """The model and stream of a run.

    Attributes:
        dataset: The stream's name (``uci``, ``wikipedia``, …).
        dataset_sha256: ``stream_checksum`` of the stream.
        model: The model kind (``tgn``, ``tgat``, ``pyg_tgn``: the ``model=`` option).
        weights: Where the model's weights came from (a checkpoint path, or a description of
            fresh weights).
        weights_sha256: SHA-256 of the model's checkpoint file; None for fresh weights.
        checkpoint_dir: The folder of committed checkpoints (where ``checkpoint=auto`` of a
            trained explainer looks).
        probe: Whether the model offers the oracle a probe (attention, soft removal and
            candidate features: ``SoftRemovalModel``).
    """

    dataset: str
    dataset_sha256: str
    model: str
    weights: str
    weights_sha256: str | None
    checkpoint_dir: str
    probe: bool


def model_fingerprint(cfg: DictConfig, stream: EventStream, model: TemporalModel,
                      weights: str) -> ModelFingerprint:
    """The run's model and stream as explainers may see them (through
    [``supports``][cftgnn.explain.Explainer.supports] and ``oracle.fingerprint``)."""
    # torch and the models: only when a run builds one (the module stays light)
    from cftgnn.files import sha256_if_file
    from cftgnn.models.protocol import SoftRemovalModel
    from cftgnn.training.checkpoint import stream_checksum
    from cftgnn.training.resolve import model_name

    return ModelFingerprint(
        dataset=stream.name, dataset_sha256=stream_checksum(stream),
        model=model_name(cfg.model), weights=weights, weights_sha256=sha256_if_file(weights),
        checkpoint_dir=str(cfg.paths.checkpoint_dir),
        probe=isinstance(model, SoftRemovalModel))


__all__ = ["ModelFingerprint", "model_fingerprint"]
