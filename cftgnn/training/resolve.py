"""Build the model an entry point asks for: a committed checkpoint, or fresh weights.

The one place that turns ``checkpoint=auto`` (and ``robust.checkpoint=auto``) into a file:
``auto_checkpoint``, with the file names ``checkpoint_path``
gives ``train.py``'s checkpoints.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.models.base import TemporalModel
from cftgnn.training.checkpoint import (
    MODEL_CONF,
    CheckpointMismatchError,
    checkpoint_path,
    legacy_checkpoint_path,
    load_checkpoint,
    model_kind,
    option_of,
)
from cftgnn.training.devices import resolve_device
from cftgnn.training.options import missing_checkpoint

#: How a model's weights are described when no checkpoint gave them (also in run.json).
FRESH = "fresh random weights"


def model_name(model_cfg: Any) -> str:
    """The model kind of a model config (``model_kind``): the
    ``model=`` option that builds it (``tgn``, ``tgat``, ``pyg_tgn``), the one name used in
    file names, records and messages."""
    return model_kind(str(model_cfg["_target_"]), model_cfg)


def auto_checkpoint(checkpoint_dir: str | os.PathLike[str], model_cfg: Any, dataset: str,
                    suffix: str = "") -> Path:
    """The file ``checkpoint=auto`` means: ``<checkpoint_dir>/<kind>_<dataset><suffix>.pt``,
    the name ``train.py`` writes.

    Raises:
        ConfigError: When that file is absent but one under the model's older spelling
            (``pygtgn_uci.pt``) exists: it is not guessed to be the one meant.
    """
    target = str(model_cfg["_target_"])
    path = checkpoint_path(checkpoint_dir, model_name(model_cfg), dataset, suffix)
    old = legacy_checkpoint_path(checkpoint_dir, target, dataset, suffix)
    if not path.is_file() and old is not None and old.is_file():
        raise ConfigError(f"checkpoint=auto looks for {path}, which is absent, but {old} (an "
                          "older spelling of the model kind) exists; rename it to "
                          f"{path.name} or pass checkpoint={old}")
    return path


#: The folder of the ``dataset=`` options.
DATASET_CONF = MODEL_CONF.parent / "dataset"


def planted_presets_hint(stream_name: str) -> str:
    """For a planted stream (``dataset=planted``, named ``planted_<kind>``): the hint naming
    the ``dataset=`` presets of the committed planted checkpoints (``conf/dataset/planted_*``:
    ``planted_rule``, ``planted_hawkes``), whose stream options those checkpoints were
    trained with; empty for another stream."""
    presets = sorted(p.stem for p in DATASET_CONF.glob("planted_*.yaml"))
    if not stream_name.startswith("planted_") or not presets:
        return ""
    return ("; the committed planted checkpoints were trained on the streams of "
            + " and ".join(f"dataset={p}" for p in presets)
            + " (conf/dataset/): use one, without dataset.* overrides, or checkpoint=null "
            "for fresh weights")


def _defaults(model_cfg: Any) -> dict[str, Any]:
    """The options of the ``model=`` file that builds ``model_cfg``'s class (what a run has
    when the user overrides nothing); empty when no file does."""
    option = MODEL_CONF / f"{model_name(model_cfg)}.yaml"
    if not option.is_file():
        return {}
    loaded = OmegaConf.to_container(OmegaConf.load(option), resolve=False)
    return {str(k): v for k, v in loaded.items()} if isinstance(loaded, dict) else {}


def _plain(cfg: Any) -> dict[str, Any]:
    if OmegaConf.is_config(cfg):
        out = OmegaConf.to_container(cfg, resolve=True)
        return {str(k): v for k, v in out.items()} if isinstance(out, dict) else {}
    return dict(cfg)


def check_overrides(model_cfg: Any, decided: dict[str, Any], path: str | os.PathLike[str]
                    ) -> None:
    """Refuse a ``model.<key>`` override that the checkpoint decides otherwise.

    A checkpoint fixes its model's dimensions and batch size (``decided``: its
    hyperparameters); a ``model.<key>`` that differs from the ``model=`` file's default
    (the user asked for it) and from the checkpoint's value would otherwise be ignored while
    the run's config claims it.

    Raises:
        ConfigError: Naming the option, both values and the way out.
    """
    cfg, defaults = _plain(model_cfg), _defaults(model_cfg)
    for key, value in cfg.items():
        if key == "_target_" or key not in decided or value == decided[key]:
            continue
        if key in defaults and defaults[key] == value:
            continue  # not asked for: the checkpoint's value is used (and recorded)
        raise ConfigError(f"model.{key}={value!r} disagrees with checkpoint {str(path)!r}, "
                          f"which decides it ({key}={decided[key]!r}); drop the override, or "
                          f"train or save a checkpoint with {key}={value!r}")


def check_kind(model_cfg: Any, model: Any, path: str | os.PathLike[str]) -> None:
    """Refuse a checkpoint of the configured class that another ``model=`` option builds
    (a 1-layer ``tgn`` checkpoint for ``model=tgn2l``, or the reverse), which would
    otherwise run, and be recorded, under the configured name. A config that does not say
    which (no ``num_layers``: ``option_of``) takes the checkpoint's.

    Raises:
        CheckpointMismatchError: Naming both kinds and the two ways out.
    """
    target = str(model_cfg["_target_"])
    have = model_kind(target, getattr(model, "hparams", {}) or {})
    want = model_name(model_cfg)
    if option_of(target, model_cfg) is not None and have != want:
        raise CheckpointMismatchError(
            f"checkpoint {str(path)!r} holds a {have} model but model={want}; use "
            f"model={have} or a {want} checkpoint")


def used_model_config(model_cfg: Any, model: Any) -> dict[str, Any]:
    """``model_cfg`` with the values the model was built with (its ``hparams``): what
    run.json records, so that a checkpoint's batch size or dimensions are never recorded
    as the config's defaults."""
    cfg = _plain(model_cfg)
    decided = getattr(model, "hparams", {}) or {}
    return {k: decided.get(k, v) if k != "_target_" else v for k, v in cfg.items()}


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
        device: Torch device, or ``auto`` (see ``resolve_device``).
        seed: Seed of fresh weights.
        require: Raise instead of falling back to fresh weights when the file is absent.

    Returns:
        The model (not attached) and a description of where its weights came from.

    Raises:
        ConfigError: If the device is unknown or unavailable, a named checkpoint path does
            not exist, or ``require`` and the checkpoint is absent.
        CheckpointMismatchError: If the checkpoint holds another kind of model than
            ``model_cfg`` (``check_kind``) or belongs to another dataset (``checkpoint=auto``
            on a planted stream of other options than the committed checkpoints': with
            ``planted_presets_hint``).
    """
    dev = resolve_device(device)
    path = None
    if checkpoint == "auto":
        path = auto_checkpoint(checkpoint_dir, model_cfg, stream.name)
    elif checkpoint:
        path = Path(checkpoint)
    if path is not None and path.is_file():
        try:
            loaded = load_checkpoint(path, stream, device=dev, attach=False,
                                     expect_target=str(model_cfg["_target_"]),
                                     check_checksum=True)
        except CheckpointMismatchError as exc:
            hint = planted_presets_hint(stream.name) if checkpoint == "auto" else ""
            if not hint or "was trained on" not in str(exc):
                raise
            raise CheckpointMismatchError(f"{exc}{hint}") from None
        check_overrides(model_cfg, getattr(loaded, "hparams", {}), path)
        check_kind(model_cfg, loaded, path)
        return loaded, str(path)
    if path is not None and checkpoint != "auto":  # a path the user named: never guessed
        raise ConfigError(missing_checkpoint(path) or f"checkpoint {str(path)!r} is not a file")
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
    return model.to(dev).eval(), f"{FRESH}, seed {seed} ({why})"  # as a loaded one
