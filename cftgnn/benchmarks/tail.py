"""Tail benchmark (``scripts/benchmark_tail.py``): the exact exhaustive search on every event
of a sample, ranked by cost.

The median event of a pair is cheap; events whose candidates lie far back reach large causal
cones. This benchmark runs the exhaustive search (closest ranking, up to ``max_size``, exact
oracle, one event after another in stream order) on every sampled event and reports each
event's time, the cone replay's work and memory, and the p90 and maximum over events. Each
event's time is split into the cone replay's memory updates (the model's arithmetic) and its
bookkeeping (the rest of the cone replay: the table of perturbed rows, index building, the
pruning's comparisons; ``ConeStats.replay_s`` and ``update_s``, in CPU seconds
``replay_cpu_s`` and ``update_cpu_s``), with the bookkeeping's share of the event's CPU
seconds (``bookkeeping_share``: every process of the search counted, so the share means
the same with one process and with ``num_workers``). numba's start (loading the compiled
bookkeeping loops, ``cftgnn.jit.warm_up``) is paid once before the events and reported on
its own (``jit_start_s``), not in the first event's bookkeeping. The
``compare_top`` costliest events are then searched again with perturbation pruning off and
on, side by side in the same process, so the saving is a ratio measured under the same
load, and the answers and certificates of the two runs are compared.

With ``num_workers`` ``N > 1`` every search splits the sets of one size across ``N``
processes (``cftgnn.oracle.workers``), and the ``compare_top`` costliest events are instead
searched again with one process and with ``N``, side by side in the same run: time, whether
the answers and certificates agree, and whether every exact logit of the two searches is
bitwise the same (a digest of all of them).

With ``prune_tolerance`` ``τ > 0`` the ``compare_top`` costliest events are instead searched
with the exact replay (bitwise perturbation pruning) and with tolerance pruning at ``τ``
(``TGNReplayOptions``), side by side: time, rows updated, whether
the answers and ``min_size_lower_bound`` agree, and the largest logit difference over the
final logits and the single removals' logits. Tolerance pruning is **not exact** (its
logits differ from a fresh replay by an amount with no sound bound), so its columns are
a measurement, never an answer or a certificate; the per-event table above always comes
from the exact replay.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import resource
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm.auto import tqdm

from cftgnn import jit
from cftgnn.benchmarks.options import check_tail_options
from cftgnn.data.index import M_MAX
from cftgnn.data.stream import EventStream
from cftgnn.explain import ClosestStrategy, ExhaustiveExplainer
from cftgnn.files import atomic_write
from cftgnn.models.base import TemporalModel
from cftgnn.options import number
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.oracle.oracle import Oracle
from cftgnn.oracle.snapshots import DEFAULT_MEMORY_BUDGET_GB
from cftgnn.oracle.workers import check_workers
from cftgnn.replay.tgn import TGNReplay
from cftgnn.replay.tgn.cone import ConeStats, checked_tolerance
from cftgnn.replay.tgn.row_times import RowStepTimes
from cftgnn.runs.sampling import plan_events
from cftgnn.training.resolve import resolve_device, resolve_model


def _peak_rss_mib() -> float:
    """Peak resident memory of this process so far, MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def _children_cpu_s() -> float:
    """CPU seconds (user and system) of this process's children that have ended and been
    waited for (the worker processes of ``num_workers``, once a search has joined them)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bookkeeping_share(replay_cpu_s: float, update_cpu_s: float, cpu_s: float) -> float:
    """The bookkeeping's share of an event's work: the cone replay's CPU seconds but its
    memory updates' (``replay_cpu_s - update_cpu_s``, summed over every process that
    replayed), of the event's CPU seconds (``cpu_s``: this process's and its worker
    processes', the plan's setup included); ``0.0`` for an event that took none.

    Both sides count every process's CPU seconds and nothing else, so the share is the same
    measure with one process and with ``num_workers`` ``N > 1`` (dividing the workers' summed
    seconds by the wall seconds, as before, made it grow with ``N``: 76 % on UCI · TGN 56484
    with two processes where one gave 48 %), and waiting (for a worker, or for a core on a
    loaded machine) counts on neither side."""
    return (replay_cpu_s - update_cpu_s) / cpu_s if cpu_s > 0 else 0.0


def search_event(engine: ReplayEngine, event_id: int, max_size: int, k: int | None,
                 m_max: int, single_logits: bool = False,
                 logits_digest: bool = False, step_times: bool = False) -> dict[str, Any]:
    """One exhaustive search on ``event_id`` (a fresh plan), timed, with the cone replay's
    counters when the engine's replay is the TGN replay (the worker processes' work
    included). With ``single_logits``, the row holds the logits of removing each candidate
    alone too (key ``single_logits``), read after the timing and the counters (from the
    oracle's cache, where the search evaluated them); with ``logits_digest``, a SHA-256 of
    every exact logit the search holds for the sets of sizes ``1..max_size`` (key
    ``logits_sha256``, bitwise; a set not evaluated counts as absent); with ``step_times``,
    the CPU seconds of each step of the cone replay's row table (key ``step_cpu_s``,
    ``RowStepTimes.as_dict``: this process's replays only).

    The row's times: ``seconds`` (wall, the plan's setup included), ``cpu_s`` (the CPU
    seconds of this process and of the worker processes it waited for), the cone replay's
    ``replay_s``, ``update_s`` and ``bookkeeping_s`` (wall, summed over the processes) and
    the same in CPU seconds (``replay_cpu_s``, ``update_cpu_s``, ``bookkeeping_cpu_s``), and
    ``bookkeeping_share`` (``bookkeeping_share``, of the CPU seconds)."""
    model_replay = engine.replay
    stats = ConeStats(steps=RowStepTimes() if step_times else None)
    if isinstance(model_replay, TGNReplay):
        model_replay.options.stats = stats
    start = time.perf_counter()
    cpu_start = time.process_time() + _children_cpu_s()
    replay = EventReplay(engine, event_id, k, m_max)
    setup = time.perf_counter() - start
    cand = replay.candidates.ids
    row: dict[str, Any] = {"event_id": int(event_id), "candidates": len(cand),
                           "span": int(event_id - cand[0]) if len(cand) else 0,
                           "setup_s": setup}
    oracle = replay.oracle("exact")
    oracle.tallies.append(stats)  # what worker processes add to it counts too
    if len(cand) == 0 or oracle.original_logit == 0:
        row.update(status="no candidates" if len(cand) == 0 else "p_orig = 0", seconds=setup)
        return row
    result = ExhaustiveExplainer(ClosestStrategy(), max_size=max_size).explain(oracle)
    seconds = time.perf_counter() - start
    cpu_s = time.process_time() + _children_cpu_s() - cpu_start
    row.update(
        status="ok", seconds=seconds, search_s=seconds - setup,
        found=bool(result.is_counterfactual), size=len(result.explanation),
        explanation=list(result.explanation), final_logit=float(result.final_logit),
        certified_minimal=bool(result.certified_minimal),
        min_size_lower_bound=int(result.min_size_lower_bound),
        cone_sets=stats.sets, settled_sets=stats.settled_sets,
        row_updates=stats.row_updates, rows_pruned=stats.rows_pruned,
        cone_peak_mib=stats.peak_bytes / 2**20, rss_mib=_peak_rss_mib(),
        replay_s=stats.replay_s, update_s=stats.update_s,
        bookkeeping_s=stats.replay_s - stats.update_s, cpu_s=cpu_s,
        replay_cpu_s=stats.replay_cpu_s, update_cpu_s=stats.update_cpu_s,
        bookkeeping_cpu_s=stats.replay_cpu_s - stats.update_cpu_s,
        bookkeeping_share=bookkeeping_share(stats.replay_cpu_s, stats.update_cpu_s, cpu_s),
    )
    if isinstance(model_replay, TGNReplay):
        model_replay.options.stats = None
    if single_logits:
        row["single_logits"] = oracle.exact_batch([[int(c)] for c in cand]).tolist()
    if logits_digest:
        row["logits_sha256"] = _logits_digest(oracle, max_size)
    if stats.steps is not None:
        row["step_cpu_s"] = stats.steps.as_dict()
    return row


def _logits_digest(oracle: Oracle, max_size: int) -> str:
    """SHA-256 of the exact logits the oracle holds for every removable set of sizes
    ``1..max_size`` (in ``itertools.combinations`` order; absent sets marked), bitwise."""
    digest = hashlib.sha256()
    events = sorted(int(e) for e in oracle.removable)
    for size in range(1, oracle.size_limit(max_size) + 1):
        for combo in itertools.combinations(events, size):
            value = oracle.cached_exact(frozenset(combo))
            digest.update(b"-" if value is None else struct.pack("<d", value))
    return digest.hexdigest()


def _percentile(values: pd.Series, q: float) -> float:
    arr = np.asarray(values, dtype=np.float64)
    return float(np.percentile(arr, q)) if arr.size else float("nan")


def benchmark_tail(model: TemporalModel, stream: EventStream, events: list[int], *,
                   max_size: int, m_max: int = M_MAX, k: int | None = None,
                   compare_top: int = 2, progress: bool = True, prune_perturbations: bool = True,
                   memory_budget_gb: float | None = DEFAULT_MEMORY_BUDGET_GB,
                   prune_tolerance: float = 0.0, num_workers: int = 1) -> dict[str, Any]:
    """Exhaustive search on every event of ``events`` (see the module docstring), with
    perturbation pruning (``prune_perturbations``), the replay engine's
    ``memory_budget_gb`` (which bounds each pass of TGN's cone replay too) and
    ``num_workers`` processes per search.

    Times of the side-by-side rows are the searches' own (the plan's setup apart). With
    ``prune_tolerance > 0`` the side-by-side rows compare the exact replay with tolerance
    pruning (``"tolerance"``, not exact); else with ``num_workers > 1`` one process with
    ``num_workers`` (``"workers"``); else pruning off and on (``"pruning"``).

    Returns:
        ``{"events": [...one row per event, costliest first...], "summary": {...},
        "pruning": [...side-by-side rows of the compare_top costliest events...],
        "tolerance": [...the same, exact vs prune_tolerance...], "workers": [...the same,
        1 vs num_workers processes...]}``; times in seconds, memory in MiB,
        ``torch_threads`` and ``num_workers`` stated; the summary's ``jit_start_s`` and
        ``jit_start_cpu_s`` are numba's start in this process (wall and CPU seconds, paid
        before the first event, ``0`` where it had started already or numba is off), and
        ``bookkeeping_share`` the bookkeeping's CPU seconds of all events' CPU seconds.
    """
    tolerance = checked_tolerance(prune_tolerance, "prune_tolerance")
    engine = ReplayEngine(model, stream, memory_budget_gb=memory_budget_gb,
                          num_workers=num_workers)
    if isinstance(engine.replay, TGNReplay):
        engine.replay.options.prune_perturbations = prune_perturbations
        engine.replay.options.prune_tolerance = 0.0  # the per-event table is exact
    # numba's start is the process's, not an event's: paid here, reported on its own
    jit_wall, jit_cpu = time.perf_counter(), time.process_time()
    jit.warm_up()
    jit_wall, jit_cpu = time.perf_counter() - jit_wall, time.process_time() - jit_cpu
    rows = [search_event(engine, i, max_size, k, m_max)
            for i in tqdm(sorted(events), desc="tail events", disable=not progress)]
    table = pd.DataFrame(rows)
    ok = table[table["status"] == "ok"] if len(table) else table
    summary: dict[str, Any] = {
        "dataset": stream.name, "model": type(model).__name__, "max_size": max_size,
        "events": len(table), "searched": len(ok), "torch_threads": torch.get_num_threads(),
        "num_workers": num_workers,
        "median_s": _percentile(ok["seconds"], 50) if len(ok) else float("nan"),
        "p90_s": _percentile(ok["seconds"], 90) if len(ok) else float("nan"),
        "max_s": float(ok["seconds"].max()) if len(ok) else float("nan"),
        "prune_perturbations": prune_perturbations, "memory_budget_gb": memory_budget_gb,
        "prune_tolerance": tolerance, "peak_rss_mib": _peak_rss_mib(),
        "jit_start_s": jit_wall, "jit_start_cpu_s": jit_cpu,
    }
    if len(ok) and "cone_sets" in ok and ok["cone_sets"].sum() > 0:
        summary["settled_share"] = float(ok["settled_sets"].sum() / ok["cone_sets"].sum())
        summary["max_cone_peak_mib"] = float(ok["cone_peak_mib"].max())
        summary["bookkeeping_share"] = bookkeeping_share(
            float(ok["replay_cpu_s"].sum()), float(ok["update_cpu_s"].sum()),
            float(ok["cpu_s"].sum()))
        summary["max_bookkeeping_share"] = float(ok["bookkeeping_share"].max())
    ranked = ok.sort_values("seconds", ascending=False) if len(ok) else ok
    side: list[dict[str, Any]] = []
    tol_rows: list[dict[str, Any]] = []
    worker_rows: list[dict[str, Any]] = []
    replay = engine.replay
    if compare_top > 0 and num_workers > 1 and tolerance == 0:
        for event_id in ranked["event_id"].head(compare_top).tolist():
            worker_rows.append(_workers_row(engine, int(event_id), max_size, k, m_max))
    elif compare_top > 0 and isinstance(replay, TGNReplay) and tolerance > 0:
        for event_id in ranked["event_id"].head(compare_top).tolist():
            tol_rows.append(_tolerance_row(engine, replay, int(event_id), max_size, k, m_max,
                                           tolerance))
        replay.options.prune_perturbations = prune_perturbations
    elif compare_top > 0 and isinstance(replay, TGNReplay):
        for event_id in ranked["event_id"].head(compare_top).tolist():
            runs = {}
            for pruning in (False, True):
                replay.options.prune_perturbations = pruning
                runs[pruning] = search_event(engine, int(event_id), max_size, k, m_max)
            replay.options.prune_perturbations = prune_perturbations
            off, on = runs[False], runs[True]
            same = all(off[key] == on[key] for key in
                       ("found", "explanation", "certified_minimal", "min_size_lower_bound"))
            side.append({"event_id": int(event_id), "span": on["span"],
                         "seconds_off": off["search_s"], "seconds_on": on["search_s"],
                         "speedup": off["search_s"] / on["search_s"],
                         "row_updates_off": off["row_updates"],
                         "row_updates_on": on["row_updates"],
                         "cone_peak_mib_off": off["cone_peak_mib"],
                         "cone_peak_mib_on": on["cone_peak_mib"],
                         "same_answer_and_certificate": same,
                         "max_abs_logit_diff": abs(off["final_logit"] - on["final_logit"])})
    records = ranked.to_dict(orient="records") + (
        table[table["status"] != "ok"].to_dict(orient="records") if len(table) else [])
    return {"summary": summary, "events": records, "pruning": side, "tolerance": tol_rows,
            "workers": worker_rows}


def _workers_row(engine: ReplayEngine, event_id: int, max_size: int, k: int | None,
                 m_max: int) -> dict[str, Any]:
    """One event searched with one process, then with the engine's ``num_workers``,
    compared: time, answer, certificate, and every exact logit bitwise (digests)."""
    workers = engine.num_workers
    runs = {}
    try:
        for n in (1, workers):
            engine.num_workers = n
            runs[n] = search_event(engine, event_id, max_size, k, m_max, logits_digest=True)
    finally:
        engine.num_workers = workers
    one, many = runs[1], runs[workers]
    keys = ("status", "found", "explanation", "final_logit", "certified_minimal",
            "min_size_lower_bound")
    one_s = one.get("search_s", one["seconds"])
    many_s = many.get("search_s", many["seconds"])
    return {"event_id": event_id, "span": one["span"], "num_workers": workers,
            "seconds_one": one_s, "seconds_workers": many_s,
            "speedup": one_s / many_s if many_s > 0 else float("nan"),
            "same_answer_and_certificate": all(one.get(key) == many.get(key) for key in keys),
            "same_logits_bitwise": one.get("logits_sha256") == many.get("logits_sha256"),
            "row_updates_one": one.get("row_updates", 0),
            "row_updates_workers": many.get("row_updates", 0)}


def _tolerance_row(engine: ReplayEngine, replay: TGNReplay, event_id: int, max_size: int,
                   k: int | None, m_max: int, tolerance: float) -> dict[str, Any]:
    """One event searched with the exact replay (bitwise pruning), then with tolerance
    pruning at ``tolerance`` (not exact), compared."""
    runs = {}
    replay.options.prune_perturbations = True
    for tau in (0.0, tolerance):
        replay.options.prune_tolerance = tau
        try:
            runs[tau] = search_event(engine, event_id, max_size, k, m_max, single_logits=True)
        finally:
            replay.options.prune_tolerance = 0.0
    exact, approx = runs[0.0], runs[tolerance]
    same_answer = all(exact.get(key) == approx.get(key)
                      for key in ("status", "found", "explanation", "size"))
    diffs = np.abs(np.subtract(exact.get("single_logits", []),
                               approx.get("single_logits", []))).tolist()
    if "final_logit" in exact and "final_logit" in approx:
        diffs.append(abs(exact["final_logit"] - approx["final_logit"]))
    exact_s = exact.get("search_s", exact["seconds"])
    approx_s = approx.get("search_s", approx["seconds"])
    return {"event_id": event_id, "span": exact["span"], "prune_tolerance": tolerance,
            "seconds_exact": exact_s, "seconds_tolerance": approx_s,
            "speedup": exact_s / approx_s if approx_s > 0 else float("nan"),
            "row_updates_exact": exact.get("row_updates", 0),
            "row_updates_tolerance": approx.get("row_updates", 0),
            "same_answer": same_answer,
            "same_min_size_lower_bound": (exact.get("min_size_lower_bound")
                                          == approx.get("min_size_lower_bound")),
            "max_abs_logit_diff": max(diffs) if diffs else 0.0,
            "explanation_exact": exact.get("explanation"),
            "explanation_tolerance": approx.get("explanation")}


def format_tail(res: dict[str, Any], top: int = 10) -> str:
    """The summary, the ``top`` costliest events and the side-by-side pruning rows."""
    s = res["summary"]
    lines = [f"{s['dataset']} · {s['model']}, exhaustive search (closest) up to "
             f"{s['max_size']}, {s['searched']} of {s['events']} events searched, "
             f"{s['torch_threads']} torch thread(s), {s.get('num_workers', 1)} process(es) "
             "per search",
             f"seconds per event: median {s['median_s']:.2f}, p90 {s['p90_s']:.2f}, max "
             f"{s['max_s']:.2f}; peak RSS {s['peak_rss_mib']:.0f} MiB",
             f"numba's start, once per process before the events (not in them): "
             f"{s.get('jit_start_s', 0.0):.2f} s"]
    if "settled_share" in s:
        lines.append(f"sets whose perturbation died out before the prediction (pruned away): "
                     f"{s['settled_share']:.1%}; replayed to the end: "
                     f"{1 - s['settled_share']:.1%}; largest cone replay "
                     f"{s['max_cone_peak_mib']:.0f} MiB")
    if "bookkeeping_share" in s:
        lines.append(f"bookkeeping (the cone replay's CPU time but its memory updates) of "
                     f"the events' CPU time (every process): {s['bookkeeping_share']:.1%} over "
                     f"all, at most {s['max_bookkeeping_share']:.1%} on one event")
    lines += ["", "| event | back | seconds | CPU s | cone replay (CPU s) | memory updates "
              "(CPU s) | bookkeeping (CPU s) | bookkeeping share | rows updated | settled sets "
              "| cone MiB |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in res["events"][:top]:
        if row.get("status") != "ok":
            continue
        lines.append(f"| {row['event_id']} | {row['span']} | {row['seconds']:.2f} | "
                     f"{row['cpu_s']:.2f} | {row['replay_cpu_s']:.2f} | "
                     f"{row['update_cpu_s']:.2f} | {row['bookkeeping_cpu_s']:.2f} | "
                     f"{row['bookkeeping_share']:.1%} | "
                     f"{row['row_updates']} | {row['settled_sets']}/{row['cone_sets']} | "
                     f"{row['cone_peak_mib']:.0f} |")
    if res["pruning"]:
        lines += ["", "Pruning off and on, side by side (search time, the plan's setup apart):",
                  "", "| event | back | pruning off (s) | on (s) | speedup | rows updated "
                  "off → on | same answer and certificate |", "| --- | --- | --- | --- | --- "
                  "| --- | --- |"]
        for p in res["pruning"]:
            lines.append(f"| {p['event_id']} | {p['span']} | {p['seconds_off']:.1f} | "
                         f"{p['seconds_on']:.1f} | {p['speedup']:.1f}× | "
                         f"{p['row_updates_off']} → {p['row_updates_on']} | "
                         f"{p['same_answer_and_certificate']} |")
    if res.get("workers"):
        lines += ["", "One process and num_workers processes side by side (search time, the "
                  "plan's setup apart):", "", "| event | back | 1 process (s) | N processes (s) "
                  "| N | speedup | same answer and certificate | same logits, bitwise |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for p in res["workers"]:
            lines.append(f"| {p['event_id']} | {p['span']} | {p['seconds_one']:.1f} | "
                         f"{p['seconds_workers']:.1f} | {p['num_workers']} | "
                         f"{p['speedup']:.2f}× | {p['same_answer_and_certificate']} | "
                         f"{p['same_logits_bitwise']} |")
    if res.get("tolerance"):
        tau = res["tolerance"][0]["prune_tolerance"]
        lines += ["", f"Exact replay and tolerance pruning τ = {tau:g} side by side (search "
                  "time, the plan's setup apart). The τ columns are NOT EXACT: a measurement, "
                  "not an answer or a certificate:", "",
                  "| event | back | exact (s) | τ, not exact (s) | speedup | rows updated "
                  "exact → τ (not exact) | same answer | same lower bound | max abs Δ logit "
                  "(final, singles) |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for p in res["tolerance"]:
            lines.append(f"| {p['event_id']} | {p['span']} | {p['seconds_exact']:.1f} | "
                         f"{p['seconds_tolerance']:.1f} | {p['speedup']:.1f}× | "
                         f"{p['row_updates_exact']} → {p['row_updates_tolerance']} | "
                         f"{p['same_answer']} | {p['same_min_size_lower_bound']} | "
                         f"{p['max_abs_logit_diff']:.1e} |")
    return "\n".join(lines)


def run(cfg: DictConfig) -> dict[str, Any]:
    """The benchmark of ``conf/benchmark_tail.yaml``: sample, search, print, write JSON."""
    check_tail_options(cfg)
    max_size = int(cfg.max_size)
    tolerance = float(number(cfg, "prune_tolerance", minimum=0.0, finite=True) or 0.0)
    device = resolve_device(cfg.device)
    num_workers = int(cfg.get("num_workers", 1))
    check_workers(num_workers, str(device), int(cfg.num_threads))
    torch.set_num_threads(int(cfg.num_threads))
    stream: EventStream = instantiate(cfg.dataset)
    model, source = resolve_model(cfg.model, stream, cfg.checkpoint, cfg.paths.checkpoint_dir,
                                  device, cfg.seed)
    print(f"model: {source}")
    explicit = list(cfg.events) if cfg.get("events") else None
    plan = plan_events(model, stream, int(cfg.n_events), cfg.sample.range,
                       cfg.sample.prediction, float(cfg.sample.min_abs_logit),
                       cfg.sample.max_abs_logit, int(cfg.seed), explicit)
    res = benchmark_tail(model, stream, plan["event_id"].tolist(), max_size=max_size,
                         m_max=int(cfg.m_max), k=cfg.k, compare_top=int(cfg.compare_top),
                         progress=bool(cfg.progress),
                         prune_perturbations=bool(cfg.prune_perturbations),
                         memory_budget_gb=cfg.memory_budget_gb, prune_tolerance=tolerance,
                         num_workers=num_workers)
    res["weights"] = source
    print(format_tail(res))
    if cfg.out:
        atomic_write(Path(cfg.out), (json.dumps(res, indent=2, default=str) + "\n").encode())
        print(f"wrote {cfg.out}")
    return res
