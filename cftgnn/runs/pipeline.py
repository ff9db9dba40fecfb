"""``python scripts/explain.py``: explain a sample of predictions, measure, record, log.

One module although over 500 lines: it is the one place that reads ``explain.py``'s Hydra
config and turns it into a run, and its steps share that config's layout through private
helpers (``_container``, ``_search_mode``, ``_explain``); the parts that
stand alone already live in records, sampling, summaries, options and robustness.

One run = one dataset, one model, one explainer with one selection strategy. It

1. loads the stream and the model (the committed checkpoint by default);
2. samples the events to explain (``cftgnn.runs.sampling``) and keeps this shard's
   share of them (``shard=i num_shards=n`` takes every n-th event from the i-th);
3. explains each event not yet recorded in the output directory, in stream order, with a fresh
   explainer per event (so a resumed run gives the same records as an uninterrupted one);
4. adds to each result the exact logit with only the explanation kept inside the candidate
   window (for fidelity−) and the exact logits of the curve metrics' kept top shares of its
   ranking (``cftgnn.scoring.curves``, one batched call; ``curves=none`` skips it), each
   timed beside the search (``keep_time_s``, ``curve_time_s``), on a stream with planted
   causes the ground-truth columns (``cftgnn.scoring.ground_truth.cause_columns``), and
   writes it as one record (``cftgnn.runs.records``);
5. writes the summary table (``cftgnn.scoring.metrics``) next to the records, prints one
   explained prediction in words (``cftgnn.runs.showcase``; with ``picture=true`` and a
   ``draw`` function, the path of its picture too) and the table's metrics that have a value;
   with ``logger=wandb`` the resolved config, the records and the summary go to W&B.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from cftgnn import jit
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError, print_block, user_error, warn
from cftgnn.explain.base import Explainer
from cftgnn.explain.post import PostProcessing
from cftgnn.explain.result import (
    SCHEMA_VERSION,
    ExplanationResult,
    ExplanationStatus,
    explained,
)
from cftgnn.files import atomic_write, check_writable_dir, sha256_if_file
from cftgnn.models.base import TemporalModel
from cftgnn.oracle.auto_mode import ModeChoice, measure_mode, pick_mode
from cftgnn.oracle.constraints import Constraints
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.fingerprint import model_fingerprint
from cftgnn.oracle.history import History, check_history
from cftgnn.oracle.oracle import Oracle, OracleMode
from cftgnn.oracle.snapshots import DEFAULT_MEMORY_BUDGET_GB, budget_bytes
from cftgnn.oracle.workers import check_workers
from cftgnn.replay.tgn import TGNReplay
from cftgnn.runs.options import (
    AUTO_CURVES_MAX_EVENTS,
    CurveSet,
    check_explain_options,
    check_served,
    curves_choice,
    protocol_option,
    run_protocols,
    shard_of,
)
from cftgnn.runs.records import RECORD_SCHEMA, EventContext, RecordStore, event_record
from cftgnn.runs.sampling import PredictionGroup, plan_events, quota
from cftgnn.runs.showcase import describe_record, pick_shown, why_shown
from cftgnn.scoring.curves import (
    ACC_SHARES,
    FID_SHARES,
    Protocol,
    acc_curve,
    curve_removal_plan,
    mean_fidelity_curve,
    negative_destination,
    sampled_slots,
    single_removal_sets,
    temgx_removal_sets,
    tempme_removal_sets,
    tgx_coalition_removal_sets,
    tgx_removal_sets,
)
from cftgnn.scoring.ground_truth import cause_columns
from cftgnn.scoring.robustness import RobustnessOptions, robustness_columns
from cftgnn.scoring.summaries import (
    SUMMARY_COLUMNS,
    format_summary,
    group_note,
    sort_groups,
    summarize,
)
from cftgnn.tracking import Tracker, tracking
from cftgnn.training.checkpoint import card_mismatch, load_checkpoint
from cftgnn.training.resolve import (
    FRESH,
    auto_checkpoint,
    check_kind,
    model_name,
    resolve_device,
    resolve_model,
    used_model_config,
)

#: Draws the picture of a run's record into its directory and returns the file's path:
#: ``draw(stream, record, fingerprint, out_dir)``
#: (``cftgnn.reporting.picture.save_picture``; ``explain.py`` hands it to ``run``).
Draw = Callable[[EventStream, pd.Series, Mapping[str, Any], Path], Path]

#: Dataset options that only say where the files are, not what the stream is.
_LOCATION_KEYS = ("data_dir", "cache_dir", "download")


def _container(cfg: Any) -> Any:
    return OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else cfg


def fingerprint(cfg: DictConfig, stream: EventStream, weights: str,
                model: Any = None) -> dict[str, Any]:
    """What decides a run's records: compared when a run directory is reused.

    Logging, progress, threads, worker processes, device and file locations are left out:
    they change how a run is done, not what it finds. With ``model``, its model config holds
    the values the model was built with (a checkpoint's batch size and dimensions,
    ``used_model_config``).
    """
    dataset = {k: v for k, v in _container(cfg.dataset).items() if k not in _LOCATION_KEYS}
    protocols = protocols_of(cfg, stream.num_events)
    return {
        "schema_version": SCHEMA_VERSION,
        "dataset": {"name": stream.name, "num_events": stream.num_events, "config": dataset},
        "model": {"config": (_container(cfg.model) if model is None
                             else used_model_config(cfg.model, model)), "weights": weights,
                  "weights_sha256": sha256_if_file(weights)},
        "explainer": _container(cfg.explainer),
        "strategy": _container(cfg.strategy),
        "sample": _container(cfg.sample),
        "n_events": int(cfg.n_events),
        "events": _container(cfg.events),
        "seed": int(cfg.seed),
        "k": cfg.k,
        "m_max": int(cfg.m_max),
        "mode": str(cfg.mode),
        "history": history_of(cfg).value,
        **protocol_keys(protocols),
        # the tempme protocol's negative destinations are drawn from the seed (already above)
        "auto_threshold": float(cfg.get("auto_threshold", 1.5)),
        **PostProcessing.from_config(cfg).as_dict(),
        "constraints": constraints_of(cfg).to_dict(),
        "shard": int(cfg.shard),
        "num_shards": int(cfg.num_shards),
        **({"robust": _container(cfg.get("robust"))} if cfg.get("robustness", False)
           else {}),
        # the ratio table decides only mode=auto's runs
        **({"auto_ratios": _container(cfg.get("auto_ratios"))} if str(cfg.mode) == "auto"
           else {}),
    }


def protocol_keys(protocols: Sequence[Protocol]) -> dict[str, Any]:
    """The run.json keys that say whose curves a run's records hold: ``curves: none`` for
    none; nothing for the common protocol alone (as before ``protocol`` existed); else
    ``protocols``, their values in ``Protocol``'s order (``recorded_protocols`` reads them
    back)."""
    ordered = _protocols(protocols)
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
    return _protocols([Protocol(p) for p in fp.get("protocols", [Protocol.COMMON.value])])


def history_of(cfg: DictConfig) -> History:
    """The run's ``History`` (``cfg.history``; ``event`` when
    absent)."""
    return History(str(cfg.get("history", History.EVENT.value)))


def curves_of(cfg: DictConfig, num_events: int) -> CurveSet:
    """The run's [``CurveSet``][cftgnn.evaluation.CurveSet] on a stream of ``num_events``
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
    return Constraints.from_config(_container(cfg.get("constraints")))


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


def run(cfg: DictConfig, draw: Draw | None = None) -> pd.DataFrame:
    """Explain the sampled events of one configuration; returns the summary table.

    Args:
        cfg: ``explain.py``'s config.
        draw: Draws the picture of the explained prediction shown (with ``picture=true``);
            None: the prediction is shown in words only.

    Raises:
        CftgnnError: For bad input (unknown event ids, a checkpoint of another dataset, an
            output directory of another configuration, ...); nothing is written then.
    """
    check_explain_options(cfg)  # types, ranges and enum values, before anything loads
    check_writable_dir(output_dir(cfg), "out_dir" if cfg.get("out_dir") else "hydra.run.dir")
    shard, num_shards = shard_of(cfg)
    device = resolve_device(cfg.device)  # before loading anything
    num_workers = int(cfg.get("num_workers", 1))
    check_workers(num_workers, str(device), int(cfg.num_threads))
    constraints = constraints_of(cfg)
    # explainer, strategy, prune and certify options checked up front, and the protocols
    check_served(build_explainer(cfg), protocol_option(cfg))
    robust = robustness_options(cfg)
    auto_ratios(cfg)
    budget = cfg.get("memory_budget_gb", DEFAULT_MEMORY_BUDGET_GB)
    budget_bytes(budget)  # a bad budget fails before anything loads
    torch.set_num_threads(int(cfg.num_threads))
    stream: EventStream = instantiate(cfg.dataset)
    constraints.validate(stream)  # nodes and events named exist, before the model loads
    model, weights = resolve_model(cfg.model, stream, cfg.checkpoint, cfg.paths.checkpoint_dir,
                                   device, cfg.seed)
    if (stale := card_mismatch(weights)) is not None:  # a warning: the run goes on
        warn(stale)
    fallback = fresh_fallback(cfg, weights)
    if fallback:
        warn(fallback)
    history = check_history(history_of(cfg), bool(model.has_memory), model_name(cfg.model))
    run_fp = model_fingerprint(cfg, stream, model, weights)
    build_explainer(cfg).check_run(run_fp)  # e.g. a trained explainer of another model
    second = None
    if robust is not None:
        second, second_weights = second_model(cfg, stream, device)
        print(f"robustness: model noise against {second_weights}" if second is not None
              else f"robustness: no second checkpoint ({second_weights}): no model noise")
    out = output_dir(cfg)
    fp = fingerprint(cfg, stream, weights, model)
    if robust is not None:
        fp["robust"]["weights_sha256"] = (None if second is None
                                          else sha256_if_file(str(second_weights)))
    store = RecordStore(out, fp, schema=RECORD_SCHEMA)
    names = {"dataset": stream.name, "model": model_name(cfg.model)}

    # the engine first: the sampling pass shares its index and leaves it snapshots
    engine = ReplayEngine(model, stream, memory_budget_gb=budget, num_workers=num_workers)
    engine.fingerprint = run_fp
    plan = plan_events(model, stream, int(cfg.n_events), cfg.sample.range,
                       cfg.sample.prediction, float(cfg.sample.min_abs_logit),
                       cfg.sample.max_abs_logit, int(cfg.seed),
                       None if cfg.events is None else list(cfg.events), history, engine)
    plan = plan.iloc[shard::num_shards].reset_index(drop=True)
    done = store.done() & set(plan["event_id"].tolist())
    todo = plan[~plan["event_id"].isin(done)]
    print_block(f"{names['dataset']} ({stream.num_events:,} events) | model {names['model']}: "
                f"{weights} | {len(plan)} events"
                + (f" (shard {shard}/{num_shards})" if num_shards > 1 else "")
                + (f", {len(done)} already recorded" if done else "")
                + f"\nrecords: {out} (to resume, {_resume_hint(cfg, out)})")
    _warn_short_groups(cfg, plan, num_shards)
    if str(cfg.get("curves")) == "auto" and curves_of(cfg, stream.num_events) is CurveSet.NONE:
        print(f"curves=auto: no curve metrics on a stream of more than "
              f"{AUTO_CURVES_MAX_EVENTS:,} events (their exact calls can cost many times the "
              "explanation); curves=common computes them")

    tracker: Tracker = instantiate(cfg.logger)
    config = {**_container(cfg), "model": used_model_config(cfg.model, model)}
    run_name = "-".join([names["dataset"], names["model"], cfg_name(cfg.explainer),
                         cfg_name(cfg.strategy)] + ([f"shard{shard}"] if num_shards > 1 else []))
    with tracking(tracker, config, name=run_name, group=tracking_group(cfg), dir=str(out)):
        mode = _search_mode(cfg, engine, plan, out, f"{names['dataset']}-{names['model']}")
        _start_compiled_loops(cfg, engine, mode, todo)
        extra = None if robust is None else Robustness(
            robust, None if second is None else ReplayEngine(second, stream, engine.index,
                                                          memory_budget_gb=budget))
        _explain(cfg, engine, todo, store, names, tracker, shard, len(done), constraints, mode,
                 extra)
        records = store.load()
        if not records.empty:
            records = records[records["event_id"].isin(plan["event_id"])]
        records = records.reset_index(drop=True)
        table = summary_table(records)
        write_summary(table, out)
        k = int(model.num_layers) if cfg.k is None else int(cfg.k)  # as the oracle takes it
        # the lines after the events as one block, so a sweep's shards print theirs whole
        block = [f"shard {shard}/{num_shards} ({out}):"] if num_shards > 1 else []
        if plan.empty:
            block.append("note: no event in sample.range matches the sampling options; "
                         "nothing to explain")
        block += [*prediction_lines(records, stream, {**fp, "k": k}, out,
                                    draw if cfg.picture else None),
                  format_summary(table, index="group", hide_nan=True, meanings=True)]
        if (note := group_note(records)) is not None:
            block.append(f"note: {note}")
        if fallback:
            block.append(f"note: {fallback}")
        print_block("\n".join(block))
        tracker.log_records(records)
        tracker.log_summary(summary_metrics_flat(table))
        log_curves(tracker, records)
    return table


def show_prediction(records: pd.DataFrame, stream: EventStream, fp: Mapping[str, Any],
                    out: Path, draw: Draw | None = None) -> None:
    """Print ``prediction_lines`` (nothing when there are none)."""
    lines = prediction_lines(records, stream, fp, out, draw)
    if lines:
        print_block("\n".join(lines))


def prediction_lines(records: pd.DataFrame, stream: EventStream, fp: Mapping[str, Any],
                     out: Path, draw: Draw | None = None) -> list[str]:
    """The run's shown prediction in words (``cftgnn.runs.showcase.pick_shown``)
    and, with ``draw``, the path of its picture, drawn into ``out``; one line when every
    event was skipped, none without records. A picture that cannot be written (a full
    disk) is one ``warning:`` line: the records and the summary are written already."""
    shown = pick_shown(records)
    if shown is None:
        if records.empty:
            return []
        statuses = ", ".join(sorted(set(records["status"].astype(str))))
        return [f"explained prediction: none, every event was skipped ({statuses})"]
    lines = [describe_record(shown, stream, why_shown(shown))]
    if draw is not None:
        try:
            lines.append(f"  picture: {draw(stream, shown, fp, out)}")
        except OSError as exc:
            warn(f"no picture of event {int(shown['event_id'])} in {out}: "
                 f"{exc.strerror or exc}")
    return lines


def log_curves(tracker: Tracker, records: pd.DataFrame) -> None:
    """The run's mean curves to the tracker (W&B line plots): T-GNNExplainer's mean
    fidelity against the kept share (``curves/fidelity_kept``) and TempME's accuracy against
    it (``curves/acc``), over the explained events that recorded curve logits; nothing
    without one."""
    if records.empty or "fid_curve_logits" not in records.columns:
        return
    ok = records[explained(records["status"])]
    p0 = ok["original_logit"].to_numpy(float)
    fid = mean_fidelity_curve(p0, list(ok["fid_curve_logits"]))
    if np.isnan(fid).all():
        return
    tracker.log_curve("curves/fidelity_kept", FID_SHARES, fid.tolist(),
                      "share of top-ranked events kept", "mean fidelity")
    acc = acc_curve(p0, list(ok["acc_curve_logits"]))
    tracker.log_curve("curves/acc", ACC_SHARES, acc.tolist(),
                      "share of top-ranked events kept", "accuracy (TempME)")


AUTO_MODE_FILE = "auto_mode.json"


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
    table = _container(cfg.get("auto_ratios")) or {}
    if not isinstance(table, dict):
        raise ConfigError(f"auto_ratios must map <dataset>-<model> to a ratio, got {table!r}")
    for pair, ratio in table.items():
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not ratio > 0:
            raise ConfigError(f"auto_ratios.{pair} must be a number > 0, got {ratio!r}")
    return {str(k): float(v) for k, v in table.items()}


def _start_compiled_loops(cfg: DictConfig, engine: ReplayEngine, mode: ModeChoice | None,
                          todo: pd.DataFrame) -> None:
    """Start numba's compiled bookkeeping loops (``cftgnn.jit``) before the events when the
    search oracle is exact and the model replays with TGN's cone.

    Such a search makes hundreds of exact calls of a few sets each, which run the loops'
    NumPy twins until numba has started (``cftgnn.jit.for_sets``): measured on Wikipedia ·
    TGN, ``mode=exact``, 6 events, 5.4-5.7 s per event with the twins and 4.4 s with the
    compiled loops, numba's start (0.3-0.5 s) included (docs/benchmarks.md). The same
    logits either way. An approximate search's few exact calls keep the lazy start, and so
    their process's memory (the 1M-event run of docs/benchmarks.md).
    """
    search = mode.mode if mode is not None else str(cfg.mode)
    if search == OracleMode.EXACT and not todo.empty and isinstance(engine.replay, TGNReplay):
        jit.warm_up(notice=print)


def _search_mode(cfg: DictConfig, engine: ReplayEngine, plan: pd.DataFrame,
                 out: Path, pair: str) -> ModeChoice | None:
    """With ``mode=auto``, the choice of ``choose_auto_mode``, printed; None for a fixed
    mode."""
    if str(cfg.mode) != "auto" or plan.empty:
        return None
    choice = choose_auto_mode(cfg, engine, [int(e) for e in plan["event_id"].tolist()], out,
                              pair)
    source = "auto_ratios table" if choice.calls == 0 else f"{choice.calls} timed calls"
    print(f"mode=auto: an exact call costs {choice.ratio:.2f} approximate calls ({source}; "
          f"threshold {choice.threshold}) -> {choice.mode.value} search oracle")
    return choice


def choose_auto_mode(cfg: DictConfig, engine: ReplayEngine, event_ids: Sequence[int],
                     out: Path, pair: str) -> ModeChoice:
    """``mode=auto``'s choice by the exact / approximate cost ratio, for ``explain.py`` and
    the quality benchmark alike.

    Read from ``out`` when a previous part of the run made it (a resumed run keeps its mode),
    else the ratio of ``auto_ratios`` for this ``<dataset>-<model>`` pair (measured by the
    oracle benchmark), else measured on the first of ``event_ids``; written to ``out``.
    """
    path = out / AUTO_MODE_FILE
    if path.is_file():
        stored = json.loads(path.read_text())
        return ModeChoice(OracleMode(stored["mode"]), float(stored["ratio"]),
                          float(stored["threshold"]), int(stored["calls"]))
    table = auto_ratios(cfg)
    threshold = float(cfg.get("auto_threshold", 1.5))
    if pair in table:
        choice = replace(pick_mode([table[pair]], [1.0], threshold), calls=0)
    else:
        choice = measure_mode(engine, list(event_ids), cfg.k, int(cfg.m_max),
                              threshold=threshold, seed=int(cfg.seed))
    atomic_write(path, json.dumps({"mode": choice.mode.value, "ratio": choice.ratio,
                                   "threshold": choice.threshold, "calls": choice.calls},
                                  indent=2).encode())
    return choice


def _resume_hint(cfg: DictConfig, out: Path) -> str:
    if cfg.get("out_dir"):
        return "rerun with the same out_dir"
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return f"rerun the sweep with hydra.sweep.dir={HydraConfig.get().sweep.dir}"
    return f"rerun with hydra.run.dir={out}"


def _warn_short_groups(cfg: DictConfig, plan: pd.DataFrame, num_shards: int) -> None:
    """Say so when the range holds fewer events of a group than asked for."""
    if cfg.events is not None or num_shards > 1:
        return
    for group, n in quota(str(cfg.sample.prediction), int(cfg.n_events)):
        have = len(plan) if group is PredictionGroup.ANY else int(
            (plan["group"] == group.value).sum())
        if have < n:
            print(f"note: only {have} {group.value} predictions in sample.range "
                  f"{list(cfg.sample.range)} within the |logit| bounds (asked for {n})")


def cfg_name(node: Any) -> str:
    """The short name of an instantiable config: the ``name`` of its target class."""
    cls = get_class(str(node["_target_"]))
    return str(getattr(cls, "name", cls.__name__.lower()))


def _explain(cfg: DictConfig, engine: ReplayEngine, todo: pd.DataFrame, store: RecordStore,
             names: Mapping[str, str], tracker: Tracker, shard: int, already: int,
             constraints: Constraints, auto: ModeChoice | None = None,
             robust: Robustness | None = None) -> None:
    """Explain ``todo`` in stream order, writing a record after each event (with its
    robustness columns when ``robust`` is given)."""
    flips = 0
    history = history_of(cfg)
    protocols = protocols_of(cfg, engine.stream.num_events)
    model = engine.model
    slots = sampled_slots(int(model.num_neighbors), int(model.num_layers))
    pool = np.unique(engine.stream.dst)
    # batch_start's screening pass scores the explained prediction itself (sampling.py)
    group_logit = "explained" if history is History.BATCH_START else "screen"
    bar = tqdm(total=len(todo) + already, initial=already, desc="explaining", unit="event",
               disable=not cfg.progress, dynamic_ncols=True)
    # the base states of the events to explain are kept as the cursor passes them
    engine.expect(todo["event_id"].tolist(), cfg.k, int(cfg.m_max), history)
    rows = zip(todo["event_id"].tolist(), todo["group"].tolist(),
               todo["screen_logit"].tolist(), strict=True)
    for n, (event_id, group, screen_logit) in enumerate(rows, start=1):
        start = time.perf_counter()
        mode = str(cfg.mode) if auto is None else auto.mode
        oracle = engine.oracle(event_id, cfg.k, int(cfg.m_max), mode, constraints, history)
        setup = time.perf_counter() - start
        explainer = build_explainer(cfg)
        result = explainer.explain(oracle)
        checks = after_search(oracle, result, protocols, slots=slots,
                              negative_dst=(negative_destination(pool, event_id, int(cfg.seed))
                                            if Protocol.TEMPME in protocols else None))
        record = event_record(result, EventContext(
            setup_time_s=setup,
            time_s=setup + result.wall_time_s,
            keep_logit=checks.keep_logit,
            group=str(group),
            screen_logit=float(screen_logit),
            dataset=names["dataset"],
            model=names["model"],
            strategy_name=explainer.strategy.name,
            constraints=constraints.to_json(),
            auto_mode_ratio=float("nan") if auto is None else auto.ratio,
            shard=int(shard),
            fid_curve_logits=checks.fid_curve_logits,
            acc_curve_logits=checks.acc_curve_logits,
            history=history.value,
            group_logit=group_logit,
            keep_time_s=checks.keep_time_s,
            curve_time_s=checks.curve_time_s,
            curve_protocols=checks.curve_protocols,
            tgnnexplainer_curve_logits=checks.tgnnexplainer_curve_logits,
            tempme_curve_logits=checks.tempme_curve_logits,
            tempme_neg_dst=checks.tempme_neg_dst,
            tempme_neg_logit=checks.tempme_neg_logit,
            tempme_neg_curve_logits=checks.tempme_neg_curve_logits,
            temgx_curve_logits=checks.temgx_curve_logits,
            single_removal_logits=checks.single_removal_logits,
        ))
        if robust is not None:
            record.update(robust.columns(oracle, result, cfg, constraints))
            record["time_s"] += record["robustness_time_s"] or 0.0
        if engine.stream.causes is not None:  # a planted stream: how the answer meets the cause
            record.update(cause_columns(result, engine.stream.causes.of(event_id), oracle))
        store.write(record)
        del oracle, explainer  # its plans go before the next event's are recorded (budget)
        flips += bool(result.is_counterfactual)
        bar.set_postfix(success=f"{flips / n:.2f}", size=result.size, refresh=False)
        bar.update()
        tracker.log_progress(already + n, {"progress/success_rate": flips / n,
                                           "progress/time_s": record["time_s"]})
    bar.close()


@dataclass(frozen=True)
class Checks:
    """The exact checks after an explanation, and their seconds (``after_search``).

    Attributes:
        keep_logit: The logit with only the explanation kept among the removable events
            (fidelity−; NaN when the event was not explained).
        keep_time_s: Seconds of that call (NaN when not made).
        fid_curve_logits: ``curve_logits``'s first part (empty when not made).
        acc_curve_logits: Its second part.
        curve_time_s: Seconds of every protocol's curve calls (NaN when none was made).
        curve_protocols: The protocols whose curves were computed (values, in
            ``Protocol``'s order).
        tgnnexplainer_curve_logits: ``tgx_curve_logits`` (empty when not made).
        tempme_curve_logits: ``tempme_curve_logits``'s explained pair's logits.
        tempme_neg_dst: Its negative destination (None when not made).
        tempme_neg_logit: The negative pair's logit with nothing removed.
        tempme_neg_curve_logits: The negative pair's logits.
        temgx_curve_logits: ``temgx_curve_logits`` (empty when not made).
        single_removal_logits: Each ranked event's single-removal logit, in the ranking's
            order (the ``temgx`` protocol's; empty when not made).
    """

    keep_logit: float = float("nan")
    keep_time_s: float = float("nan")
    fid_curve_logits: tuple[float, ...] = ()
    acc_curve_logits: tuple[float, ...] = ()
    curve_time_s: float = float("nan")
    curve_protocols: tuple[str, ...] = ()
    tgnnexplainer_curve_logits: tuple[float, ...] = ()
    tempme_curve_logits: tuple[float, ...] = ()
    tempme_neg_dst: int | None = None
    tempme_neg_logit: float = float("nan")
    tempme_neg_curve_logits: tuple[float, ...] = ()
    temgx_curve_logits: tuple[float, ...] = ()
    single_removal_logits: tuple[float, ...] = ()


def _protocols(curves: CurveSet | Sequence[Protocol]) -> tuple[Protocol, ...]:
    """A ``CurveSet`` (every protocol's curves for ``all``, the common one's for ``common``)
    or the protocols themselves."""
    if isinstance(curves, CurveSet):
        return run_protocols(curves, (Protocol.COMMON,))
    return tuple(p for p in Protocol if p in set(curves))


def after_search(oracle: Oracle, result: ExplanationResult,
                 curves: CurveSet | Sequence[Protocol], slots: int | None = None,
                 negative_dst: int | None = None) -> Checks:
    """The exact calls ``explain.py`` makes after each explanation (and the memory
    benchmark, to time what a run costs): ``keep_logit``, then each protocol's curve logits
    (``curve_logits``, ``tgx_curve_logits``, ``tempme_curve_logits``); none for an event that
    was not explained. Protected events stay, as everywhere.

    Args:
        oracle: The event's oracle.
        result: Its explanation.
        curves: The protocols whose curves to compute, or a ``CurveSet`` (``none``: none,
            ``common``: the common protocol's, ``all``: every protocol's).
        slots: The model's sampled slots (``sampled_slots``), for ``tempme``.
        negative_dst: The negative pair's destination, for ``tempme``
            (``negative_destination``).

    Raises:
        ValueError: ``tempme`` without ``slots`` or ``negative_dst``.
    """
    protocols = _protocols(curves)
    if Protocol.TEMPME in protocols and (slots is None or negative_dst is None):
        raise ValueError("the tempme protocol needs the model's slots and a negative "
                         "destination")
    if result.status is not ExplanationStatus.OK:
        return Checks()
    start = time.perf_counter()
    keep = keep_logit(oracle, result)
    keep_time = time.perf_counter() - start
    if not protocols:
        return Checks(keep, keep_time)
    start = time.perf_counter()
    out = protocol_columns(oracle, result, protocols, slots, negative_dst)
    return Checks(keep, keep_time, curve_time_s=time.perf_counter() - start,
                  curve_protocols=tuple(p.value for p in protocols), **out)


def keep_logit(oracle: Oracle, result: ExplanationResult) -> float:
    """The exact logit with only the explanation kept among the removable events
    (fidelity−): ``after_search``'s first call."""
    return oracle.exact(set(oracle.removable.tolist()) - set(result.explanation))


def protocol_columns(oracle: Oracle, result: ExplanationResult, protocols: Sequence[Protocol],
                     slots: int | None = None, negative_dst: int | None = None
                     ) -> dict[str, Any]:
    """The record columns of each protocol's curve logits (``curve_logits``,
    ``tgx_curve_logits``, ``tempme_curve_logits``): what ``after_search`` computes after an
    explanation and ``rescore.py`` adds to a finished run's records.

    Args:
        oracle: The event's oracle.
        result: Its explanation (status ``ok``).
        protocols: The protocols whose columns to compute.
        slots: The model's sampled slots (``sampled_slots``), for ``tempme``.
        negative_dst: The negative pair's destination, for ``tempme``.

    Raises:
        ValueError: ``tempme`` without ``slots`` or ``negative_dst``.
    """
    out: dict[str, Any] = {}
    if Protocol.COMMON in protocols:
        out["fid_curve_logits"], out["acc_curve_logits"] = curve_logits(oracle, result.ranking)
    if Protocol.TGNNEXPLAINER in protocols:
        out["tgnnexplainer_curve_logits"] = tgx_curve_logits(oracle, result)
    if Protocol.TEMPME in protocols:
        if slots is None or negative_dst is None:
            raise ValueError("the tempme protocol needs the model's slots and a negative "
                             "destination")
        pos, neg0, neg = tempme_curve_logits(oracle, result.ranking, slots, negative_dst)
        out.update(tempme_curve_logits=pos, tempme_neg_dst=int(negative_dst),
                   tempme_neg_logit=neg0, tempme_neg_curve_logits=neg)
    if Protocol.TEMGX in protocols:
        out["temgx_curve_logits"], out["single_removal_logits"] = temgx_curve_logits(
            oracle, result.ranking)
    return out


def _exact_logits(oracle: Oracle, sets: Sequence[tuple[int, ...]]) -> tuple[float, ...]:
    """Exact logits of ``sets`` in one batched call of their distinct sets, in order."""
    distinct = list(dict.fromkeys(sets))
    logits = oracle.exact_batch(distinct)
    where = {s: float(x) for s, x in zip(distinct, logits, strict=True)}
    return tuple(where[s] for s in sets)


def curve_logits(oracle: Oracle, ranking: Sequence[int]
                 ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The exact logits of the common protocol's kept sets, in one batched exact call.

    After the explanation is packaged, like ``keep_logit``: the result's oracle counters are
    already fixed, so this call does not count as the explainer's.

    Args:
        oracle: The event's oracle.
        ranking: The explainer's ranking of the removable events.

    Returns:
        ``(fid_curve_logits [21], acc_curve_logits [16])``
        (``curve_removal_plan``); both empty without a ranking.
    """
    if not len(ranking):
        return (), ()
    sets, fid_index, acc_index = curve_removal_plan(ranking, oracle.removable.tolist())
    logits = oracle.exact_batch(sets)
    return (tuple(float(x) for x in logits[fid_index]),
            tuple(float(x) for x in logits[acc_index]))


def tgx_curve_logits(oracle: Oracle, result: ExplanationResult) -> tuple[float, ...]:
    """The ``tgnnexplainer`` protocol's exact logits at its 21 levels, in one batched call:
    a search explainer (``result.coalitions`` not None) by its best coalition per level
    (``tgx_coalition_removal_sets``), any other by the prefix of its ranking among the 20 most
    recent removable events (``tgx_removal_sets``); empty without a ranking or coalitions."""
    removable = oracle.removable.tolist()
    if result.coalitions is not None:
        sets = tgx_coalition_removal_sets(result.coalitions, removable)
    elif len(result.ranking):
        sets = tgx_removal_sets(result.ranking, removable)
    else:
        return ()
    return _exact_logits(oracle, sets)


def tempme_curve_logits(oracle: Oracle, ranking: Sequence[int], slots: int, negative_dst: int
                        ) -> tuple[tuple[float, ...], float, tuple[float, ...]]:
    """The ``tempme`` protocol's exact logits: the explained pair's at its 16 ratios (one
    batched call), the negative pair's with nothing removed and at the same ratios
    (``Oracle.pair``: one batched call of the distinct sets, ``EventReplay.pair_logits``).

    Returns:
        ``(pair [16], negative original, negative [16])``; ``((), NaN, ())`` without a
        ranking, and the negative part ``(NaN, ())`` for an oracle without ``pair``.
    """
    if not len(ranking):
        return (), float("nan"), ()
    sets = tempme_removal_sets(ranking, oracle.removable.tolist(), slots)
    pos = _exact_logits(oracle, sets)
    if oracle.pair is None:
        return pos, float("nan"), ()
    distinct = list(dict.fromkeys([(), *sets]))
    logits = np.asarray(oracle.pair([frozenset(s) for s in distinct], int(negative_dst)),
                        dtype=np.float64).reshape(-1)
    where = {s: float(x) for s, x in zip(distinct, logits, strict=True)}
    return pos, where[()], tuple(where[s] for s in sets)


def temgx_curve_logits(oracle: Oracle, ranking: Sequence[int]
                       ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The ``temgx`` protocol's exact logits in one batched call: the top ``round(s·m)`` of
    the ranking removed at the 21 shares (``temgx_removal_sets``), and each ranked event
    removed alone (``single_removal_sets``, the benchmark's monotonicity).

    Returns:
        ``(curve [21], single [m])``; both empty without a ranking.
    """
    if not len(ranking):
        return (), ()
    curve, single = temgx_removal_sets(ranking), single_removal_sets(ranking)
    logits = _exact_logits(oracle, [*curve, *single])
    return logits[:len(curve)], logits[len(curve):]


def robustness_options(cfg: DictConfig) -> RobustnessOptions | None:
    """The robustness settings when ``robustness=true`` (checked before anything loads)."""
    flag = cfg.get("robustness", False)
    if not isinstance(flag, bool):
        raise ConfigError(f"robustness must be true or false, got {flag!r}")
    if not flag:
        return None
    opts = dict(_container(cfg.get("robust") or {}))
    opts.pop("checkpoint", None)
    try:
        return RobustnessOptions(**opts)
    except TypeError as exc:
        raise ConfigError(f"unknown robust.* option: {exc}") from None


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


def summary_table(records: pd.DataFrame) -> pd.DataFrame:
    """Summary per prediction group plus an ``all`` row, in ``GROUP_ORDER``
    (``correct incorrect all``)."""
    if records.empty:
        return summarize(records).assign(group="all")[["group", *SUMMARY_COLUMNS]]
    table = summarize(records, by=["group"])
    if len(table) > 1:
        table = pd.concat([table, summarize(records).assign(group="all")], ignore_index=True)
    return sort_groups(table)


def summary_metrics_flat(table: pd.DataFrame) -> dict[str, float]:
    """``summary/<group>/<metric>`` → value, for the tracker."""
    out: dict[str, float] = {}
    for row in table.to_dict("records"):
        group = row.pop("group", "all")
        for key, value in row.items():
            if isinstance(value, int | float):
                out[f"summary/{group}/{key}"] = float(value)
    return out


def write_summary(table: pd.DataFrame, out: Path) -> None:
    """``summary.csv`` and ``summary.json`` next to the records (each complete or absent)."""
    atomic_write(out / "summary.csv", table.to_csv(index=False).encode())
    atomic_write(out / "summary.json", json.dumps(table.to_dict("records"), indent=2,
                                                  default=float).encode())


__all__ = ["Checks", "after_search", "build_explainer", "constraints_of", "curves_of",
           "fingerprint", "keep_logit", "make_explainer", "protocol_columns", "protocol_keys",
           "protocols_of", "recorded_protocols", "run", "summary_table",
           "tempme_curve_logits", "tgx_curve_logits"]
