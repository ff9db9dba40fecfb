"""Build the model an entry point asks for: a committed checkpoint, or fresh weights."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate

from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.models.base import TemporalModel
from cftgnn.training.checkpoint import load_checkpoint


def resolve_device(device: str | torch.device) -> torch.device:
    """The torch device a config names: ``auto`` is CUDA when available, else the CPU.

    Raises:
        ConfigError: If the name is not a torch device, or names a CUDA device that this
            machine or torch build does not have.
    """
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ConfigError(f"unknown device {str(device)!r} (use cpu, cuda, cuda:N or auto)"
                          ) from err
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device={device} but CUDA is not available (torch "
                              f"{torch.__version__}); use device=cpu or device=auto")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"device={device} but this machine has "
                              f"{torch.cuda.device_count()} CUDA device(s)")
    return dev


def model_name(model_cfg: Any) -> str:
    """The file-name stem of a model config: its class name in lower case (``tgn``)."""
    return str(model_cfg["_target_"]).rsplit(".", 1)[-1].lower()


def resolve_model(
    model_cfg: Any,
    stream: EventStream,
    checkpoint: str | None,
    checkpoint_dir: str | os.PathLike[str],
    device: str | torch.device = "cpu",
    seed: int = 0,
    require: bool = False,
) -> tuple[TemporalModel, str]:
    """The model for ``stream``: from a checkpoint when there is one, else fresh weights.

    Args:
        model_cfg: The ``model`` config (``_target_`` plus hyperparameters).
        stream: The stream the model runs on.
        checkpoint: ``"auto"`` (``<checkpoint_dir>/<model>_<dataset>.pt``, fresh weights when
            absent), a path (which must exist), or None for fresh weights.
        checkpoint_dir: Folder of the committed checkpoints.
        device: Torch device, or ``auto`` (see :func:`resolve_device`).
        seed: Seed of fresh weights.
        require: Raise instead of falling back to fresh weights when the file is absent.

    Returns:
        The model (not attached) and a description of where its weights came from.

    Raises:
        ConfigError: If the device is unknown or unavailable, a named checkpoint path does
            not exist, or ``require`` and the checkpoint is absent.
        CheckpointMismatchError: If the checkpoint holds another kind of model than
            ``model_cfg`` or belongs to another dataset.
    """
    dev = resolve_device(device)
    path = None
    if checkpoint == "auto":
        path = Path(checkpoint_dir) / f"{model_name(model_cfg)}_{stream.name}.pt"
    elif checkpoint:
        path = Path(checkpoint)
    if path is not None and path.is_file():
        loaded = load_checkpoint(path, stream, device=dev, attach=False,
                                 expect_target=str(model_cfg["_target_"]))
        return loaded, str(path)
    if path is not None and checkpoint != "auto":  # a path the user named: never guessed
        raise ConfigError(f"checkpoint {str(path)!r} does not exist (checkpoint=auto: the "
                          "committed one, checkpoint=null: fresh weights)")
    if require:
        raise ConfigError(
            f"checkpoint {path} not found; train it with "
            f"`python scripts/train.py model={model_name(model_cfg)} "
            f"dataset={stream.name} out_dir={Path(checkpoint_dir)}`"
        )
    torch.manual_seed(seed)
    model: TemporalModel = instantiate(
        model_cfg, num_nodes=stream.num_nodes, edge_dim=stream.feat_dim
    )
    why = "checkpoint=null" if path is None else f"no checkpoint at {path}"
    return model.to(dev), f"fresh random weights, seed {seed} ({why})"
