"""Checkpoint I/O: ``<model>_<dataset>.pt`` (weights + config) and a ``.json`` model card.

The ``.pt`` file holds only tensors, strings and numbers, so it loads with
``torch.load(..., weights_only=True)``. Loading checks that the stream is the one the model was
trained for (dataset name, node count, edge feature size) and refuses otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hydra.utils import instantiate

from cftgnn.data.stream import EventStream
from cftgnn.errors import CftgnnError
from cftgnn.models.base import TemporalModel


class CheckpointMismatchError(CftgnnError, ValueError):
    """A checkpoint was trained on a different stream than the one it is loaded for."""


def stream_checksum(stream: EventStream) -> str:
    """SHA-256 over the stream's event arrays (src, dst, t, edge features) and node count."""
    h = hashlib.sha256()
    for arr in (stream.src, stream.dst, stream.t, stream.edge_feat):
        h.update(np.ascontiguousarray(arr).tobytes())
    h.update(str(stream.num_nodes).encode())
    return h.hexdigest()


def stream_fingerprint(stream: EventStream) -> dict[str, Any]:
    """What a checkpoint records about its training stream."""
    return {
        "name": stream.name,
        "num_nodes": stream.num_nodes,
        "num_events": stream.num_events,
        "feat_dim": stream.feat_dim,
        "sha256": stream_checksum(stream),
        "source_sha256": str(stream.meta.get("sha256", "")),
    }


def checkpoint_path(directory: str | os.PathLike[str], model_name: str, dataset: str) -> Path:
    """``<directory>/<model_name>_<dataset>.pt``."""
    return Path(directory) / f"{model_name}_{dataset}.pt"


def save_checkpoint(model: TemporalModel, stream: EventStream, path: str | os.PathLike[str],
                    card: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """Write the weights (``path``) and the model card (same name, ``.json``).

    Args:
        model: The trained model.
        stream: Its training stream.
        path: Destination ``.pt`` path (folders are created).
        card: Extra card entries (split, metrics, epochs, timing, ...).

    Returns:
        The ``.pt`` and ``.json`` paths.
    """
    pt = Path(path)
    pt.parent.mkdir(parents=True, exist_ok=True)
    fingerprint = stream_fingerprint(stream)
    state_dict = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    torch.save({"state_dict": state_dict, "config": model.config(), "dataset": fingerprint}, pt)
    full_card = {"model": model.config(), "dataset": fingerprint, **(card or {})}
    js = pt.with_suffix(".json")
    js.write_text(json.dumps(full_card, indent=2, sort_keys=False, default=str) + "\n")
    return pt, js


def load_checkpoint(path: str | os.PathLike[str], stream: EventStream,
                    device: torch.device | str = "cpu", attach: bool = True) -> TemporalModel:
    """Rebuild a model from a checkpoint for ``stream`` (attached and in eval mode).

    Raises:
        CheckpointMismatchError: If the dataset name, node count or edge feature size of the
            checkpoint differs from the stream's; the message names both.
    """
    ckpt = torch.load(Path(path), map_location="cpu", weights_only=True)
    ds = ckpt["dataset"]
    have = {"name": stream.name, "num_nodes": stream.num_nodes, "feat_dim": stream.feat_dim}
    diffs = [f"{k}: checkpoint {ds[k]!r} vs stream {v!r}" for k, v in have.items() if ds[k] != v]
    if diffs:
        raise CheckpointMismatchError(
            f"checkpoint {str(path)!r} was trained on dataset {ds['name']!r} "
            f"({ds['num_nodes']} nodes, {ds['feat_dim']} features) but the stream is "
            f"{stream.name!r} ({stream.num_nodes} nodes, {stream.feat_dim} features): "
            + "; ".join(diffs))
    model: TemporalModel = instantiate(dict(ckpt["config"]))
    model.load_state_dict(ckpt["state_dict"])
    model.to(device).eval()
    if attach:
        model.attach(stream)
    return model
