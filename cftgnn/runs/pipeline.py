"""``python scripts/explain.py``: explain a sample of predictions, measure, record, log.

The config's parts (fingerprint, explainer, constraints, protocols) are built by
``cftgnn.runs.build``, the checks after each search are ``cftgnn.scoring.checks``, the records
``cftgnn.runs.records``; this module runs them in order.

One run = one dataset, one model, one explainer with one selection strategy. It

1. loads the stream and the model (the committed checkpoint by default);
2. samples the events to explain (``cftgnn.runs.sampling``) and keeps this shard's
   share of them (``shard=i num_shards=n`` takes every n-th event from the i-th);
3. builds the explainer once (its options checked before anything loads; what it serves, the
   protocols before anything loads and the model once loaded, asked by
   ``Explainer.supports`` before the first event) and
   explains each event not yet recorded in the output directory, in stream order
   (``cftgnn.explain.base.explain_events``; every search depends only on its event's oracle,
   so a resumed run gives the same records as an uninterrupted one);
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm.auto import tqdm

from cftgnn import jit
from cftgnn.data.index import candidate_hops
from cftgnn.data.stream import EventStream
from cftgnn.errors import print_block, warn
from cftgnn.explain.base import Explainer, explain_events
from cftgnn.explain.result import (
    explained,
)
from cftgnn.files import atomic_write, check_writable_dir, sha256_if_file
from cftgnn.oracle.auto_mode import ModeChoice, measure_mode, pick_mode
from cftgnn.oracle.constraints import Constraints
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.history import History, check_history
from cftgnn.oracle.oracle import OracleMode
from cftgnn.oracle.snapshots import DEFAULT_MEMORY_BUDGET_GB, budget_bytes
from cftgnn.oracle.target import RankTargets
from cftgnn.oracle.workers import check_workers
from cftgnn.replay.tgn import TGNReplay
from cftgnn.runs.build import (
    Robustness,
    apply_replay_options,
    auto_ratios,
    build_explainer,
    cfg_name,
    constraints_of,
    curves_of,
    explain_device,
    fingerprint,
    fresh_fallback,
    history_of,
    model_fingerprint,
    output_dir,
    plain_config,
    protocols_of,
    robustness_options,
    second_model,
    tracking_group,
)
from cftgnn.runs.options import (
    AUTO_CURVES_MAX_EVENTS,
    check_explain_options,
    protocol_option,
    shard_of,
)
from cftgnn.runs.records import RECORD_SCHEMA, EventContext, RecordStore, event_record
from cftgnn.runs.sampling import PredictionGroup, plan_events, quota
from cftgnn.runs.showcase import describe_record, pick_shown, why_shown
from cftgnn.runs.targets import rank_columns, rank_targets_of
from cftgnn.scoring.checks import after_search
from cftgnn.scoring.curves import (
    ACC_SHARES,
    FID_SHARES,
    acc_curve,
    mean_fidelity_curve,
)
from cftgnn.scoring.ground_truth import cause_columns
from cftgnn.scoring.protocols import (
    CurveSet,
    Protocol,
    negative_destination,
    sampled_slots,
)
from cftgnn.scoring.summaries import (
    format_summary,
    group_note,
    summary_metrics_flat,
    summary_table,
)
from cftgnn.tracking import Tracker, tracking
from cftgnn.training.checkpoint import card_mismatch
from cftgnn.training.resolve import (
    model_name,
    resolve_device,
    resolve_model,
    used_model_config,
)

#: Draws the picture of a run's record into its directory and returns the file's path:
#: ``draw(stream, record, fingerprint, out_dir)``
#: (``cftgnn.reporting.picture.save_picture``; ``explain.py`` hands it to ``run``).
Draw = Callable[[EventStream, pd.Series, Mapping[str, Any], Path], Path]


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
    num_workers = int(cfg.get("num_workers", 1))
    constraints = constraints_of(cfg)
    # the run's one explainer: its, the strategy's, prune's and certify's options checked up
    # front, and what it can be scored under before anything loads; the model it can explain
    # once the model is known (``supports`` again below, with the fingerprint)
    explainer = build_explainer(cfg)
    protocols = protocol_option(cfg)
    explainer.supports(protocols=protocols)
    # device=auto: placed by the explainer's largest call (cftgnn.oracle.placement)
    place = explain_device(str(cfg.device), explainer.largest_call(int(cfg.m_max)),
                           num_workers=num_workers)
    device = resolve_device(place.device)  # before loading anything
    check_workers(num_workers, str(device), int(cfg.num_threads))
    if place.note is not None:
        print(place.note)
    robust = robustness_options(cfg)
    auto_ratios(cfg)
    budget = cfg.get("memory_budget_gb", DEFAULT_MEMORY_BUDGET_GB)
    budget_bytes(budget)  # a bad budget fails before anything loads
    torch.set_num_threads(int(cfg.num_threads))
    stream: EventStream = instantiate(cfg.dataset)
    constraints.validate(stream)  # nodes and events named exist, before the model loads
    targets = rank_targets_of(cfg, stream)  # target=rank: the negatives, before the model
    model, weights = resolve_model(cfg.model, stream, cfg.checkpoint, cfg.paths.checkpoint_dir,
                                   device, cfg.seed)
    if (stale := card_mismatch(weights)) is not None:  # a warning: the run goes on
        warn(stale)
    fallback = fresh_fallback(cfg, weights)
    if fallback:
        warn(fallback)
    history = check_history(history_of(cfg), bool(model.has_memory), model_name(cfg.model))
    run_fp = model_fingerprint(cfg, stream, model, weights)
    explainer.supports(run_fp)  # e.g. a trained explainer of another model
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
    engine.progress = bool(cfg.progress)  # each event's exact enumeration shows a bar
    apply_replay_options(cfg, engine)
    plan = plan_events(model, stream, int(cfg.n_events), cfg.sample.range,
                       cfg.sample.prediction, float(cfg.sample.min_abs_logit),
                       cfg.sample.max_abs_logit, int(cfg.seed),
                       None if cfg.events is None else list(cfg.events), history, engine,
                       None if targets is None else targets.eligible())
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
    config = {**plain_config(cfg), "model": used_model_config(cfg.model, model)}
    run_name = "-".join([names["dataset"], names["model"], cfg_name(cfg.explainer),
                         cfg_name(cfg.strategy)] + ([f"shard{shard}"] if num_shards > 1 else []))
    with tracking(tracker, config, name=run_name, group=tracking_group(cfg), dir=str(out)):
        mode = _search_mode(cfg, engine, plan, out, f"{names['dataset']}-{names['model']}")
        _start_compiled_loops(cfg, engine, mode, todo)
        second_engine = None if second is None else ReplayEngine(second, stream, engine.index,
                                                                 memory_budget_gb=budget)
        if second_engine is not None:
            apply_replay_options(cfg, second_engine)
        extra = None if robust is None else Robustness(robust, second_engine)
        _explain(cfg, engine, explainer, todo, store, names, tracker, shard, len(done),
                 constraints, mode, extra, targets)
        records = store.load()
        if not records.empty:
            records = records[records["event_id"].isin(plan["event_id"])]
        records = records.reset_index(drop=True)
        table = summary_table(records)
        write_summary(table, out)
        k = candidate_hops(cfg.k, model.num_layers)  # as the oracle takes it
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


def _explain(cfg: DictConfig, engine: ReplayEngine, explainer: Explainer, todo: pd.DataFrame,
             store: RecordStore, names: Mapping[str, str], tracker: Tracker, shard: int,
             already: int, constraints: Constraints, auto: ModeChoice | None = None,
             robust: Robustness | None = None, targets: RankTargets | None = None) -> None:
    """Explain ``todo`` in stream order with the run's one explainer
    (``cftgnn.explain.base.explain_events``), writing a record after each event (with its
    robustness columns when ``robust`` is given, its ranks under ``targets``)."""
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
    mode = str(cfg.mode) if auto is None else auto.mode
    where = model_device(model)
    rows = zip(todo["group"].tolist(), todo["screen_logit"].tolist(), strict=True)
    explained = explain_events(engine, explainer, todo["event_id"].tolist(), cfg.k,
                               int(cfg.m_max), mode, constraints, history, targets)
    for n, (done, (group, screen_logit)) in enumerate(zip(explained, rows, strict=True),
                                                      start=1):
        oracle, result = done.oracle, done.result
        event_id = result.event_id
        checks = after_search(oracle, result, protocols, slots=slots,
                              negative_dst=(negative_destination(pool, event_id, int(cfg.seed))
                                            if Protocol.TEMPME in protocols else None))
        record = event_record(result, EventContext(
            setup_time_s=result.setup_time_s,
            time_s=result.setup_time_s + result.wall_time_s,
            group=str(group),
            screen_logit=float(screen_logit),
            dataset=names["dataset"],
            model=names["model"],
            strategy_name=explainer.strategy.name,
            constraints=constraints.to_json(),
            auto_mode_ratio=float("nan") if auto is None else auto.ratio,
            shard=int(shard),
            history=history.value,
            group_logit=group_logit,
            **rank_columns(oracle, result),
            device=where,
            checks=checks,
        ))
        if robust is not None:
            record.update(robust.columns(oracle, result, cfg, constraints))
            record["time_s"] += record["robustness_time_s"] or 0.0
        if engine.stream.causes is not None:  # a planted stream: how the answer meets the cause
            record.update(cause_columns(result, engine.stream.causes.of(event_id), oracle))
        store.write(record)
        del oracle, done  # its plans go before the next event's are recorded (budget)
        flips += bool(result.is_counterfactual)
        bar.set_postfix(success=f"{flips / n:.2f}", size=result.size, refresh=False)
        bar.update()
        tracker.log_progress(already + n, {"progress/success_rate": flips / n,
                                           "progress/time_s": record["time_s"]})
    bar.close()


def model_device(model: Any) -> str | None:
    """The torch device a model's parameters are on, as a record's ``device`` says it
    (``cpu``, ``cuda:0``): its ``device``, else its first parameter's; None for a model that
    says neither."""
    device = getattr(model, "device", None)
    if device is None and isinstance(model, torch.nn.Module):
        device = next((p.device for p in model.parameters()), None)
    return None if device is None else str(device)


def write_summary(table: pd.DataFrame, out: Path) -> None:
    """``summary.csv`` and ``summary.json`` next to the records (each complete or absent)."""
    atomic_write(out / "summary.csv", table.to_csv(index=False).encode())
    atomic_write(out / "summary.json", json.dumps(table.to_dict("records"), indent=2,
                                                  default=float).encode())


__all__ = ["choose_auto_mode", "log_curves", "model_device", "prediction_lines", "run",
           "show_prediction", "write_summary", "Draw"]
