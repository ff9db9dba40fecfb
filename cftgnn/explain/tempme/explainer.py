"""``explainer=tempme``: the trained TempME motif explainer under the explainer contract.

For an explained event ``i = (u, v, t_i)`` it samples ``n_walks`` temporal walks from ``u`` and
from ``v`` over the history before the oracle's history end (``walks``), scores each walk with
the trained ``MotifEncoder`` and gives every removable event the largest score of a walk
through it (0 on no walk); ``FactualExplainer`` ranks them and answers the shortest flipping
prefix. No oracle call goes into the scores.

The walks read the stream through the oracle's probe (``oracle.probe.model.stream``, and its
``history_end``), so TempME needs a model with a probe (TGN, TGAT, GraphMixer, DyGFormer: the
``SoftRemovalModel`` ones), as it needs soft removal to train. Walks are drawn with a generator
seeded by ``(seed, event id)``: the same event gets the same ranking.

A trained encoder lives in a checkpoint (``save_tempme``), by default
``<checkpoint_dir>/tempme_<model>_<dataset>.pt`` (``tempme_path``), with a card naming the
model kind, dataset, the stream's checksum and the model checkpoint's SHA-256; another model,
stream or model checkpoint is refused (``check_tempme_card``) by ``explain.py`` before any event
([``TempMEExplainer.supports``][cftgnn.explain.TempMEExplainer.supports]).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cftgnn.errors import ConfigError, ExplainerError, short_reason
from cftgnn.explain.attention import needs_probe
from cftgnn.explain.factual import FloatArray
from cftgnn.explain.tempme.model import EncoderShape, MotifEncoder, event_importance
from cftgnn.explain.tempme.params import TempMEParams
from cftgnn.explain.tempme.walks import Walks, sample_walks, stream_index
from cftgnn.explain.trained import TrainedExplainer, check_trained_card, load_once
from cftgnn.files import atomic_output, atomic_write
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.oracle.oracle import Oracle
from cftgnn.training.kinds import TEMPME, CheckpointError, read_checkpoint, tensors_sha256

#: What ``train_explainer.py explainer=tempme`` trains; the checkpoint file's prefix.
KIND = "tempme"


@dataclass(frozen=True)
class TrainedTempME:
    """A trained encoder, how its walks are drawn, and its card."""

    encoder: MotifEncoder
    n_walks: int
    degree: int
    card: dict[str, Any]
    path: str = ""


def tempme_path(directory: str | os.PathLike[str], model: str, dataset: str) -> Path:
    """``<directory>/tempme_<model>_<dataset>.pt``."""
    return Path(directory) / f"{KIND}_{model}_{dataset}.pt"


def tempme_card(fingerprint: ModelFingerprint, **training: Any) -> dict[str, Any]:
    """The identity part of a card (what ``check_tempme_card`` compares), plus ``training``."""
    return {"explainer": KIND, "dataset": fingerprint.dataset,
            "dataset_sha256": fingerprint.dataset_sha256, "model": fingerprint.model,
            "model_weights": Path(fingerprint.weights).name,
            "model_weights_sha256": fingerprint.weights_sha256, **training}


def save_tempme(path: str | os.PathLike[str], trained: TrainedTempME) -> tuple[Path, Path]:
    """Write ``path`` (``.pt``: weights, shape, walk options and card) and the card as ``.json``
    next to it (with the SHA-256 of the encoder's tensors, ``tensors_sha256``); returns both
    paths."""
    pt = Path(path)
    pt.parent.mkdir(parents=True, exist_ok=True)
    enc = trained.encoder
    tensors = {k: v.detach().cpu() for k, v in enc.state_dict().items()}
    blob = {"state_dict": tensors,
            "shape": json.dumps(enc.shape.__dict__), "n_walks": int(trained.n_walks),
            "degree": int(trained.degree), "card": json.dumps(trained.card)}
    with atomic_output(pt) as f:
        torch.save(blob, f)
    js = pt.with_suffix(".json")
    atomic_write(js, (json.dumps({**trained.card, "weights_sha256": tensors_sha256(tensors)},
                                 indent=2) + "\n").encode())
    return pt, js


def load_tempme(path: str | os.PathLike[str]) -> TrainedTempME:
    """Load a trained TempME (``weights_only=True``: a pickle's code is never run).

    Raises:
        CheckpointError: When the file does not read (truncated, not a torch file) or is a
            checkpoint of another kind (a PGExplainer, a model: ``CheckpointKindError``,
            naming the option that takes it); one line naming the file.
    """
    file = Path(path)
    blob = read_checkpoint(file, TEMPME)
    try:
        enc = MotifEncoder(EncoderShape(**json.loads(blob["shape"])))
        enc.load_state_dict(blob["state_dict"])
        trained = TrainedTempME(enc, int(blob["n_walks"]), int(blob["degree"]),
                                dict(json.loads(blob["card"])), str(file))
    except (RuntimeError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise CheckpointError(f"TempME checkpoint {file} does not rebuild its encoder "
                              f"({short_reason(err)}); {TEMPME.writer}") from None
    enc.eval()
    return trained


def check_tempme_card(card: dict[str, Any], fingerprint: ModelFingerprint, path: str) -> None:
    """Refuse a trained TempME of another dataset, stream, model kind or model checkpoint.

    Raises:
        CheckpointMismatchError: One line naming the first difference and how to train one.
    """
    check_trained_card(card, fingerprint, path, "TempME",
                       f"python scripts/train_explainer.py explainer=tempme "
                       f"model={fingerprint.model} dataset={fingerprint.dataset}")


_LOADED: dict[tuple[str, int, int], TrainedTempME] = {}


def resolve_tempme(checkpoint: str, fingerprint: ModelFingerprint | None) -> TrainedTempME:
    """The trained TempME that ``checkpoint`` names (``auto``: ``tempme_path`` in the
    fingerprint's checkpoint folder), checked against ``fingerprint`` (None: unchecked).

    Raises:
        ConfigError: ``auto`` without a fingerprint, or no file (saying how to train one).
        CheckpointError: A file that is not such a checkpoint.
        CheckpointMismatchError: A checkpoint of another model or stream.
    """
    if checkpoint == "auto":
        if fingerprint is None:
            raise ConfigError("tempme checkpoint=auto needs the run's model and dataset (the "
                              "oracle has no fingerprint); pass checkpoint=<path>")
        path = tempme_path(fingerprint.checkpoint_dir, fingerprint.model, fingerprint.dataset)
    else:
        path = Path(checkpoint)
    if not path.is_file():
        how = ("`python scripts/train_explainer.py explainer=tempme model=<model> "
               "dataset=<dataset>`" if fingerprint is None else
               f"`python scripts/train_explainer.py explainer=tempme model={fingerprint.model} "
               f"dataset={fingerprint.dataset} out_dir={path.parent}`")
        raise ConfigError(f"no trained TempME at {path} (checkpoint={checkpoint}: no such "
                          f"file); train one with {how}")
    trained = load_once(path, load_tempme, _LOADED)
    if fingerprint is not None:
        check_tempme_card(trained.card, fingerprint, str(path))
    return trained


def event_walks(oracle: Oracle, n_walks: int, length: int, degree: int, seed: int,
                negative: int | None = None) -> list[Walks]:
    """The walks of an explained event: from its source, its destination and, when given, a
    negative destination, over the events before the oracle's history end.

    Raises:
        ExplainerError: The oracle has no probe (the walks read the stream through it).
    """
    probe = oracle.probe
    if probe is None:
        fp = oracle.fingerprint
        raise needs_probe(KIND, None if fp is None else fp.model)
    index = stream_index(probe.model.stream)
    rng = np.random.default_rng([int(seed), int(oracle.event_id)])
    roots = [probe.src, probe.dst] + ([] if negative is None else [int(negative)])
    return [sample_walks(index, r, probe.history_end, n_walks, length, degree, rng)
            for r in roots]


class TempMEExplainer(TrainedExplainer[TrainedTempME]):
    """Ranks each removable event by the largest importance of a temporal motif through it.

    Args:
        strategy: Unused for the ranking (kept for the common constructor).
        post: The steps after the search.
        trained: A trained TempME to use instead of loading ``checkpoint`` (tests, training).
        **options: [``TempMEParams``][cftgnn.explain.TempMEParams].
    """

    name = "tempme"
    Params = TempMEParams
    params: TempMEParams

    def resolve(self, fingerprint: ModelFingerprint | None) -> TrainedTempME:
        return resolve_tempme(self.params.checkpoint, fingerprint)

    def scores(self, oracle: Oracle) -> FloatArray:
        """Each removable event's importance, aligned with ``oracle.removable``.

        Raises:
            ExplainerError: The oracle has no probe, or the encoder reads other features.
            ConfigError, CheckpointError, CheckpointMismatchError: See ``resolve_tempme``.
        """
        trained, probe = self.trained_for(oracle)
        enc = trained.encoder
        stream = probe.model.stream
        if stream.feat_dim != enc.shape.edge_dim:
            raise ExplainerError(f"the TempME at {trained.path or '(given)'} reads "
                                 f"{enc.shape.edge_dim} edge features, the stream has "
                                 f"{stream.feat_dim}")
        walks = event_walks(oracle, trained.n_walks, enc.shape.length, trained.degree,
                            self.params.seed)
        enc.eval()
        with torch.no_grad():
            sets = [(w, enc(enc.inputs(w, stream.edge_feat, stream.t, probe.t)))
                    for w in walks]
            imp = event_importance(oracle.removable, sets)
        return np.asarray(imp.numpy(), dtype=np.float64).reshape(-1)


__all__ = ["KIND", "TempMEExplainer", "TempMEParams", "TrainedTempME", "check_tempme_card",
           "event_walks", "load_tempme", "resolve_tempme", "save_tempme", "tempme_card",
           "tempme_path"]
