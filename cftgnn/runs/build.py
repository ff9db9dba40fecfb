"""``explain.py``'s config turned into the run's parts: its fingerprint (what decides its records),
the explainer, the constraints, the protocols, the robustness checks' second model; read by the
pipeline, the benchmarks and the explainer trainers alike."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError, user_error
from cftgnn.explain.base import Explainer
from cftgnn.explain.post import PostProcessing
from cftgnn.explain.result import (
    SCHEMA_VERSION,
    ExplanationResult,
)
from cftgnn.files import sha256_if_file
from cftgnn.models.base import TemporalModel
from cftgnn.oracle import placement
from cftgnn.oracle.constraints import Constraints
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.fingerprint import model_fingerprint
from cftgnn.oracle.history import History
from cftgnn.oracle.oracle import Oracle
from cftgnn.replay.tgn import Cone, TGNReplay
from cftgnn.runs.options import (
    curves_choice,
    protocol_option,
)
from cftgnn.runs.targets import target_options
from cftgnn.scoring.protocols import (
    CurveSet,
    Protocol,
    ordered_protocols,
    run_protocols,
)
from cftgnn.scoring.robustness import RobustnessOptions, robustness_columns
from cftgnn.training.checkpoint import load_checkpoint
from cftgnn.training.resolve import (
    FRESH,
    auto_checkpoint,
    check_kind,
    model_name,
    used_model_config,
)

#: Dataset options that only say where the files are, not what the stream is.
_LOCATION_KEYS = ("data_dir", "cache_dir", "download")


def plain_config(cfg: Any) -> Any:
    """An OmegaConf node as plain Python values (resolved); anything else as it is."""
    return OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else cfg


def fingerprint(cfg: DictConfig, stream: EventStream, weights: str,
                model: Any = None) -> dict[str, Any]:
    """What decides a run's records: compared when a run directory is reused.

    Logging, progress, threads, worker processes, device and file locations are left out:
    they change how a run is done, not what it finds. With ``model``, its model config holds
    the values the model was built with (a checkpoint's batch size and dimensions,
    ``used_model_config``).
    """
    dataset = {k: v for k, v in plain_config(cfg.dataset).items() if k not in _LOCATION_KEYS}
    protocols = protocols_of(cfg, stream.num_events)
    return {
        "schema_version": SCHEMA_VERSION,
        "dataset": {"name": stream.name, "num_events": stream.num_events, "config": dataset},
        "model": {"config": (plain_config(cfg.model) if model is None
                             else used_model_config(cfg.model, model)), "weights": weights,
                  "weights_sha256": sha256_if_file(weights)},
        "explainer": plain_config(cfg.explainer),
        "strategy": plain_config(cfg.strategy),
        "sample": plain_config(cfg.sample),
        "n_events": int(cfg.n_events),
        "events": plain_config(cfg.events),
        "seed": int(cfg.seed),
        "k": cfg.k,
        "m_max": int(cfg.m_max),
        "mode": str(cfg.mode),
        "history": history_of(cfg).value,
        **target_options(cfg).as_dict(),  # nothing for target=logit (runs before it)
        **protocol_keys(protocols),
        # the tempme protocol's negative destinations are drawn from the seed (already above)
        "auto_threshold": float(cfg.get("auto_threshold", 1.5)),
        **PostProcessing.from_config(cfg).as_dict(),
        "constraints": constraints_of(cfg).to_dict(),
        "shard": int(cfg.shard),
        "num_shards": int(cfg.num_shards),
        **({"robust": plain_config(cfg.get("robust"))} if cfg.get("robustness", False)
           else {}),
        # the ratio table decides only mode=auto's runs
        **({"auto_ratios": plain_config(cfg.get("auto_ratios"))} if str(cfg.mode) == "auto"
           else {}),
    }


def protocol_keys(protocols: Sequence[Protocol]) -> dict[str, Any]:
    """The run.json keys that say whose curves a run's records hold: ``curves: none`` for
    none; nothing for the common protocol alone (as before ``protocol`` existed); else
    ``protocols``, their values in ``Protocol``'s order (``recorded_protocols`` reads them
    back)."""
    ordered = ordered_protocols(protocols)
    if not ordered:
        return {"curves": CurveSet.NONE.value}
    if ordered == (Protocol.COMMON,):
        return {}
    return {"protocols": [p.value for p in ordered]}


def recorded_protocols(fp: Mapping[str, Any]) -> tuple[Protocol, ...]:
    """The protocols a run.json (``fingerprint``) says its records hold: the inverse of
    ``protocol_keys`` (``common`` for a run.json older than the options)."""
    if fp.get("curves") == CurveSet.NONE.value:
        return ()
    return ordered_protocols([Protocol(p) for p in fp.get("protocols", [Protocol.COMMON.value])])


def history_of(cfg: DictConfig) -> History:
    """The run's ``History`` (``cfg.history``; ``event`` when
    absent)."""
    return History(str(cfg.get("history", History.EVENT.value)))


def curves_of(cfg: DictConfig, num_events: int) -> CurveSet:
    """The run's [``CurveSet``][cftgnn.runs.CurveSet] on a stream of ``num_events``
    (``cfg.curves``, ``auto`` resolved by ``curves_choice``; ``common`` when absent)."""
    return curves_choice(str(cfg.get("curves", CurveSet.COMMON.value)), int(num_events))


def protocols_of(cfg: DictConfig, num_events: int) -> tuple[Protocol, ...]:
    """The protocols whose curves the run computes on a stream of ``num_events``: ``curves``
    (``curves_of``: whether) with ``protocol`` (which; ``run_protocols``)."""
    return run_protocols(curves_of(cfg, num_events), protocol_option(cfg))


def constraints_of(cfg: DictConfig) -> Constraints:
    """The run's [``Constraints``][cftgnn.oracle.Constraints] (``cfg.constraints``; none when
    absent).

    Raises:
        ConfigError: On an unknown key or a bad value.
    """
    return Constraints.from_config(plain_config(cfg.get("constraints")))


def build_explainer(cfg: DictConfig) -> Explainer:
    """A fresh explainer of ``cfg.explainer`` with its strategy and the post-processing stage
    of the top-level ``ceiling``, ``prune``, ``certify`` and ``certify_max_time_s``.

    Raises:
        CftgnnError: For a bad option of the explainer, the strategy or the stage, naming it
            (unwrapped from ``instantiate``'s exception).
    """
    return make_explainer(cfg.explainer, cfg.strategy, PostProcessing.from_config(cfg))


def make_explainer(explainer: Any, strategy: Any,
                   post: PostProcessing | None = None) -> Explainer:
    """Instantiate an explainer config node with a strategy config node and a
    post-processing stage.

    Raises:
        CftgnnError: For a bad option of either (unwrapped from ``instantiate``'s exception).
        ConfigError: When a constructor refuses its options with a ``TypeError`` or
            ``ValueError`` (an unknown key, a value of the wrong type); the message names
            the group and class.
    """
    made: Explainer = _construct("explainer", explainer,
                                 strategy=_construct("strategy", strategy), post=post,
                                 _convert_="object")  # post stays a PostProcessing
    return made


def _construct(group: str, node: Any, **kwargs: Any) -> Any:
    """``instantiate(node, **kwargs)`` with a constructor's refusal as one project error."""
    try:
        return instantiate(node, **kwargs)
    except Exception as exc:  # instantiate wraps the constructor's error
        error = user_error(exc)
        if error is not None:
            raise error from None
        cause = exc.__cause__ or exc
        if not isinstance(cause, TypeError | ValueError):
            raise
        name = str(node["_target_"]).rsplit(".", 1)[-1]
        reason = (str(cause).splitlines() or [type(cause).__name__])[0]
        raise ConfigError(f"{group} options refused by {name}: {reason}") from None


def output_dir(cfg: DictConfig) -> Path:
    """``cfg.out_dir`` when set, else the directory Hydra made for this run or job."""
    if cfg.get("out_dir"):
        return Path(cfg.out_dir)
    return Path(HydraConfig.get().runtime.output_dir)


def tracking_group(cfg: DictConfig) -> str | None:
    """W&B group: ``cfg.group``, else the sweep directory's name under ``-m``, else None."""
    if cfg.get("group"):
        return str(cfg.group)
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return Path(HydraConfig.get().sweep.dir).name
    return None


def fresh_fallback(cfg: DictConfig, weights: str) -> str | None:
    """The warning of a ``checkpoint=auto`` run that found no checkpoint and explains a model
    with fresh random weights (run.json's ``model.weights`` says the same), else None."""
    if str(cfg.checkpoint) != "auto" or not weights.startswith(FRESH):
        return None
    return (f"checkpoint=auto: {weights.removeprefix(FRESH + ', ')}; the explanations are of "
            "an UNTRAINED model with fresh random weights (train one with scripts/train.py, or "
            "say checkpoint=null to mean it)")


def auto_ratios(cfg: DictConfig) -> dict[str, float]:
    """``cfg.auto_ratios``: ``<dataset>-<model>`` -> exact / approximate cost ratio.

    Raises:
        ConfigError: When it is not a mapping of positive numbers.
    """
    table = plain_config(cfg.get("auto_ratios")) or {}
    if not isinstance(table, dict):
        raise ConfigError(f"auto_ratios must map <dataset>-<model> to a ratio, got {table!r}")
    for pair, ratio in table.items():
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not ratio > 0:
            raise ConfigError(f"auto_ratios.{pair} must be a number > 0, got {ratio!r}")
    return {str(k): float(v) for k, v in table.items()}


def cfg_name(node: Any) -> str:
    """The short name of an instantiable config: the ``name`` of its target class."""
    cls = get_class(str(node["_target_"]))
    return str(getattr(cls, "name", cls.__name__.lower()))


def robustness_options(cfg: DictConfig) -> RobustnessOptions | None:
    """The robustness settings when ``robustness=true`` (checked before anything loads)."""
    flag = cfg.get("robustness", False)
    if not isinstance(flag, bool):
        raise ConfigError(f"robustness must be true or false, got {flag!r}")
    if not flag:
        return None
    opts = dict(plain_config(cfg.get("robust") or {}))
    opts.pop("checkpoint", None)
    try:
        return RobustnessOptions(**opts)
    except TypeError as exc:
        raise ConfigError(f"unknown robust.* option: {exc}") from None


def apply_replay_options(cfg: DictConfig, engine: ReplayEngine) -> None:
    """``explain.py``'s ``replay.*`` options on the engine's replay, then the pass budget
    checked against one set, before any work.

    ``replay.cone`` is TGN's ``TGNReplayOptions.cone`` (which form of the exact cone replay
    runs); a model without a cone replay (TGAT, the window models, a generic replay) has
    nothing to set. Checked before anything loads (``check_explain_options``); it never
    changes a record (both forms are exact), so the run's fingerprint leaves it out.

    Raises:
        ConfigError: When one removal set's evaluation cannot fit a pass
            (``TGNReplay.check_one_set``: every exact call, a K = 4 certification's chunks
            too, is split into passes of at least one set).
    """
    replay = cfg.get("replay")
    if not isinstance(engine.replay, TGNReplay):
        return
    if replay is not None:
        engine.replay.options.cone = Cone(str(replay.get("cone", Cone.AUTO.value)))
    engine.replay.check_one_set()


@dataclass(frozen=True)
class RunDevice:
    """Where a run's model and oracle run (``explain_device``).

    Attributes:
        device: The torch device's name (``cpu``, ``cuda``, or the explicit choice).
        note: For ``device=auto``, one line saying what it chose and why; None otherwise.
    """

    device: str
    note: str | None = None


def explain_device(choice: str, largest_call: int, gpu: bool | None = None,
                   num_workers: int = 1) -> RunDevice:
    """The device of ``explain.py``'s run: an explicit ``device`` (``cpu``, ``cuda``,
    ``cuda:N``) as it is; ``auto`` by ``cftgnn.oracle.placement``'s rule on the run's
    largest oracle call (``Explainer.largest_call``): the GPU when there is one, the
    CPU/GPU costs are measured (``placement.MEASURED_COSTS``, read at each call) and they
    predict the GPU faster for that call size; else the CPU (so ``auto`` is never slower
    than ``device=cpu``). While ``MEASURED_COSTS`` is None, ``auto`` is always the CPU.

    Args:
        choice: The ``device`` option.
        largest_call: Sets in the run's largest oracle call.
        gpu: Whether the machine has a GPU; None: ``torch.cuda.is_available()``.
        num_workers: The run's worker processes (more than one run on the CPU only).

    Returns:
        The device, with the line that says why for ``auto``.
    """
    if choice != "auto":
        return RunDevice(choice)
    calls = f"largest oracle call {largest_call:,} set{'s' if largest_call != 1 else ''}"
    costs = placement.MEASURED_COSTS
    place = placement.Place.CPU
    if not (torch.cuda.is_available() if gpu is None else gpu):
        why = "no GPU on this machine"
    elif num_workers > 1:
        why = f"num_workers={num_workers} runs on the CPU"
    elif costs is None:
        why = ("the CPU and GPU costs are not measured yet: "
               "cftgnn.oracle.placement.MEASURED_COSTS is None")
    else:
        place = placement.place_call(largest_call, costs, gpu=True)
        crossover = costs.crossover_sets
        why = ("the GPU is faster for no call size" if math.isinf(crossover)
               else f"the GPU is faster from {int(crossover):,} sets")
    device = "cuda" if place is placement.Place.GPU else "cpu"
    return RunDevice(device, f"device=auto: {device} ({calls}; {why})")


def second_model(cfg: DictConfig, stream: EventStream,
                 device: Any) -> tuple[TemporalModel | None, str]:
    """The second checkpoint of model noise (``robust.checkpoint``): ``auto`` =
    ``<checkpoint_dir>/<model>_<dataset>_seed1.pt`` when it exists (else none, as
    ``checkpoint=auto`` falls back), a path (which must exist), or null (none).

    Returns:
        The model (None: no model noise) and a description of where it came from.

    Raises:
        ConfigError: A named checkpoint file does not exist.
        CheckpointMismatchError: It holds another model kind or dataset.
    """
    choice = (cfg.get("robust") or {}).get("checkpoint", "auto")
    if choice is None:
        return None, "robust.checkpoint=null"
    name = model_name(cfg.model)
    path = (auto_checkpoint(cfg.paths.checkpoint_dir, cfg.model, stream.name, "_seed1")
            if choice == "auto" else Path(str(choice)))
    if not path.is_file():
        if choice == "auto":
            return None, f"{path} absent"
        raise ConfigError(f"robust.checkpoint {str(path)!r} does not exist; train one with "
                          f"`python scripts/train.py model={name} dataset={stream.name} seed=1 "
                          "out_dir=checkpoints name_suffix=_seed1` or set "
                          "robust.checkpoint=null (no model noise)")
    model = load_checkpoint(path, stream, device=device, attach=False,
                            expect_target=str(cfg.model["_target_"]))
    check_kind(cfg.model, model, path)
    return model, str(path)


class Robustness:
    """Robustness columns for each record of a run (``cftgnn.scoring.robustness``).

    Args:
        options: The measures' settings.
        second: Replay engine of the second checkpoint (None: no model noise).
    """

    def __init__(self, options: RobustnessOptions, second: ReplayEngine | None) -> None:
        self.options = options
        self.second = second

    def columns(self, oracle: Oracle, result: ExplanationResult, cfg: DictConfig,
                constraints: Constraints) -> dict[str, Any]:
        """The columns of one explained event (``robustness_time_s`` includes building the
        second checkpoint's oracle)."""
        start = time.perf_counter()
        other = None
        if self.second is not None and result.is_counterfactual:
            other = self.second.oracle(oracle.event_id, cfg.k, int(cfg.m_max), "exact",
                                       constraints, history_of(cfg))
            if not set(result.explanation) <= other.removable_ids:
                other = None  # another candidate set: the question does not apply
        cols = robustness_columns(oracle, result.explanation, result.is_counterfactual,
                                  self.options, other)
        if cols["robustness_time_s"] is not None:
            cols["robustness_time_s"] = time.perf_counter() - start
        return cols


__all__ = ["Robustness", "RunDevice", "apply_replay_options", "auto_ratios", "build_explainer",
           "cfg_name", "constraints_of", "curves_of", "explain_device", "fingerprint",
           "fresh_fallback", "history_of", "make_explainer", "model_fingerprint", "output_dir",
           "protocol_keys", "protocols_of", "recorded_protocols", "robustness_options",
           "second_model", "tracking_group"]
