"""Where a trained explainer's training run starts: its run directory, its options, the
saved state it resumes (``load_state``) and the model, stream and engine it trains for
(``training_setup``); shared by both trainers (``cftgnn.explain.training.base``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError, short_reason, warn
from cftgnn.files import check_writable_dir, remove_stale_temporaries, set_aside
from cftgnn.models.protocol import SoftRemovalModel
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.fingerprint import model_fingerprint
from cftgnn.oracle.snapshots import DEFAULT_MEMORY_BUDGET_GB
from cftgnn.training.checkpoint import probed_models_text
from cftgnn.training.kinds import unreadable_reason
from cftgnn.training.loop import Split
from cftgnn.training.resolve import model_name, resolve_device, resolve_model

#: The resumable state in the run directory.
STATE = "state.pt"


def run_dir(cfg: DictConfig) -> Path:
    """Hydra's run directory (``outputs/train_explainer/<model>-<dataset>``: the same
    command resumes there), or ``cfg.run_dir`` outside Hydra."""
    if cfg.get("run_dir"):
        return Path(str(cfg.run_dir))
    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir)
    raise ConfigError("run_dir is not set and there is no Hydra run directory; set run_dir")


def learning_rate(cfg: DictConfig, reference: float) -> float:
    """``cfg.lr``, or the explainer's reference rate where it is null (the default: the
    PGExplainer's reference trains at 1e-4, TempME's at 1e-3)."""
    return reference if cfg.get("lr") is None else float(cfg.lr)


def training_options(cfg: DictConfig, keys: Sequence[str], reference_lr: float
                     ) -> dict[str, Any]:
    """The options of ``keys`` that decide what a trained explainer's training computes (a
    resumed run must match them; its card keeps them), ``lr`` resolved to the rate used
    (``learning_rate``). Shared by the PGExplainer's (``TRAINING_KEYS``) and TempME's."""
    node = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(node, dict)
    return {k: node.get(k) for k in keys} | {"lr": learning_rate(cfg, reference_lr)}


#: What a training state holds (a file without one of them is not a state).
_STATE_KEYS = ("mlp", "optimizer", "epoch", "history", "seconds", "options")
#: What a PGExplainer state of ``FORMAT`` 2 holds besides (``load_state(state_format=...)``).
_PG_STATE_KEYS = ("format", "best")


def load_state(path: Path, options: dict[str, Any], epochs: int,
                state_format: int | None = None) -> dict[str, Any] | None:
    """The training state of an earlier run in this directory, or None (none, or one that does
    not load: moved aside with one warning line, training starts again).

    ``state_format`` given (the PGExplainer's ``FORMAT``): the state must be of that format
    and hold ``_PG_STATE_KEYS`` too; None (other trainers sharing this function): neither.

    Raises:
        ConfigError: The state was trained with other options, holds more epochs than
            ``epochs`` (the card would say fewer than were trained), or is a PGExplainer
            training of another format than ``state_format``.
    """
    if not path.is_file():
        return None
    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001  (whatever a cut-short or foreign file raises)
        why = unreadable_reason(path, exc)  # read before the file is moved
        moved = set_aside(path)
        warn(f"training state {path} is unreadable: it {why}; moved to {moved.name}, "
             "training starts again from epoch 0")
        return None
    try:
        if (state_format is not None and "mlp" in state and "optimizer" in state
                and state.get("format") != state_format):
            raise ConfigError(f"{path} holds a PGExplainer training of an earlier format (another "
                              "objective and input, before 2026-11-26), which this version "
                              "does not resume; delete it, or use another hydra.run.dir, to "
                              "train the current one from epoch 0")
        needed = _STATE_KEYS + (_PG_STATE_KEYS if state_format is not None else ())
        missing = [k for k in needed if k not in state]
        if missing:
            raise KeyError(f"no {missing[0]!r}")
        stored = json.loads(str(state["options"]))
        done = int(state["epoch"])
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001  (whatever a cut-short or foreign file raises)
        moved = set_aside(path)
        warn(f"training state {path} is unreadable ({short_reason(exc).split('. ')[0]}); "
             f"moved to {moved.name}, training starts again from epoch 0")
        return None
    if stored != json.loads(json.dumps(options)):
        raise ConfigError(f"{path} holds a training with other options; rerun with its "
                          "options, or use another hydra.run.dir")
    if done > epochs:
        raise ConfigError(f"{path} holds {done} trained epochs, more than epochs={epochs}; "
                          f"rerun with epochs={done} (or more, to train on), or use another "
                          f"hydra.run.dir to train {epochs} epoch{'s' * (epochs != 1)} from "
                          "scratch")
    return state


@dataclass
class TrainingSetup:
    """What a trained explainer's training run starts from (``training_setup``).

    Attributes:
        out: The run directory (its ``state.pt`` resumes the training).
        state_file: ``out / STATE``.
        state: The saved state to resume, or None.
        stream: The dataset.
        kind: The model's kind (``tgn``, ``tgat``, ...).
        destination: Where the trained explainer is written.
        model: The trained model, through soft removal.
        weights: The model checkpoint's path.
        fingerprint: The model's fingerprint (checked by the explainer's card).
        engine: The replay engine of the model over the stream.
        split: The chronological split of ``train.py``'s shares.
    """

    out: Path
    state_file: Path
    state: dict[str, Any] | None
    stream: EventStream
    kind: str
    destination: Path
    model: SoftRemovalModel
    weights: Any
    fingerprint: Any
    engine: ReplayEngine
    split: Split


def training_setup(cfg: DictConfig, options: dict[str, Any],
                   path_of: Callable[[Path, str, str], Path], what: str,
                   state_format: int | None = None) -> TrainingSetup:
    """The start of a trained explainer's training run, shared by the PGExplainer's and
    TempME's: the run directory and ``out_dir`` checked writable, a killed run's temporaries
    removed, the saved state loaded (``load_state``), the device and threads set, the
    stream, the destination (refused when it exists without ``overwrite=true``), the model
    (refused without soft removal), its fingerprint (a saved state of another model
    checkpoint is refused: resuming would train on for the wrong model), engine and split.

    Args:
        cfg: The ``train_explainer.py`` configuration.
        options: The options the saved state must match.
        path_of: The trained explainer's file in a folder, for a model kind and stream name.
        what: The explainer, for messages (``the PGExplainer``).
        state_format: The state format this version resumes (None: any).

    Raises:
        CftgnnError: Before any training, for each of the refusals above.
    """
    out = run_dir(cfg)
    check_writable_dir(out, "hydra.run.dir")
    if cfg.get("out_dir"):
        check_writable_dir(Path(str(cfg.out_dir)), "out_dir")
    remove_stale_temporaries(out)  # what a killed run was writing
    (out / "state.tmp").unlink(missing_ok=True)  # the temporary of versions before 2026-11-26
    state_file = out / STATE
    state = load_state(state_file, options, int(cfg.epochs), state_format)
    device = resolve_device(str(cfg.device))
    torch.set_num_threads(int(cfg.num_threads))
    stream: EventStream = instantiate(cfg.dataset)
    kind = model_name(cfg.model)
    destination = path_of(Path(str(cfg.out_dir)) if cfg.get("out_dir") else out, kind,
                          stream.name)
    existing = [p for p in (destination, destination.with_suffix(".json")) if p.exists()]
    if cfg.get("out_dir") and existing and cfg.get("overwrite") is not True:
        raise ConfigError(f"{existing[0]} exists and would be replaced; add overwrite=true to "
                          "replace it, or leave out out_dir to write into the run directory")
    model, weights = resolve_model(cfg.model, stream, cfg.checkpoint, cfg.paths.checkpoint_dir,
                                   device, int(cfg.seed), require=True)
    if not isinstance(model, SoftRemovalModel):
        raise ConfigError(f"{what} trains through soft removal, which model {kind!r} does not "
                          f"offer; use {probed_models_text()}")
    fp = model_fingerprint(cfg, stream, model, weights)
    saved = None if state is None else state.get("weights_sha256")
    if saved is not None and saved != fp.weights_sha256:
        raise ConfigError(f"{state_file} holds a training for the model checkpoint of SHA-256 "
                          f"{str(saved)[:12]}…, this run's checkpoint ({weights}) has "
                          f"{str(fp.weights_sha256)[:12]}…; rerun with that checkpoint, or use "
                          "another hydra.run.dir to train for this one from scratch")
    engine = ReplayEngine(model, stream,
                          memory_budget_gb=cfg.get("memory_budget_gb", DEFAULT_MEMORY_BUDGET_GB))
    engine.fingerprint = fp
    split = Split.chronological(stream.num_events, model.batch_size, float(cfg.split.val),
                                float(cfg.split.test))
    return TrainingSetup(out, state_file, state, stream, kind, destination, model, weights, fp,
                         engine, split)


__all__ = ["STATE", "TrainingSetup", "learning_rate", "load_state", "run_dir",
           "training_options", "training_setup"]
