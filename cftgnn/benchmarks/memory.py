"""Memory and time on long streams, side by side (``scripts/benchmark_memory.py``).

For each seeded synthetic stream (``[num_events, num_nodes]``) and each engine memory budget,
one child process does what ``scripts/explain.py`` does with fresh weights: build the stream
and its index, the sampling pass over ``sample_range``, then explain the sampled events in
stream order through a [``ReplayEngine``][cftgnn.oracle.ReplayEngine] with that budget, each
followed by the exact checks ``explain.py`` makes after it (``keep_logit``, and the curve
metrics' logits as its ``curves`` option says, ``auto`` by default:
``cftgnn.runs.pipeline.after_search``). The
parent reads the child's peak RSS from the kernel (``os.wait4``, the child's own
``ru_maxrss``), so each configuration's peak is its own; the child reports the phase times
and each event's explanation, and the table says whether the explanations equal those of the
first budget's run on the same stream. Per event it reports ``time_s`` as ``explain.py``
records it (oracle setup + search), the seconds of the curve call, and the wall time of the
whole event (setup, search and checks: what a run of ``explain.py`` takes per event).
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from cftgnn.benchmarks.options import check_memory_options
from cftgnn.errors import ConfigError
from cftgnn.files import atomic_write
from cftgnn.oracle.snapshots import budget_bytes, snapshot_nbytes


def _peak_gib() -> float:
    """This process's peak RSS so far, GiB (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _rss_gib() -> float:
    """This process's resident memory now, GiB (``VmRSS``; NaN where ``/proc`` is absent)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return math.nan


def held_parts(stream: Any, index: Any, model: Any, engine: Any) -> dict[str, int]:
    """Bytes held by each long-lived structure of a run, counted once each (storage shared
    between them counts where it is met first, in this order).

    Returns:
        ``stream`` (its arrays), ``index`` (the ``TemporalIndex``'s arrays), ``model`` (the
        tensors and arrays the model object holds besides those and its submodules: its
        event ids, its live state and any copy of the stream's arrays; tensors that read
        the stream's own memory count with the stream), ``snapshots`` (the engine's kept
        unperturbed snapshots), ``cursor`` (the cursor's share of the budget), ``plans``
        (the explained event's replay plans as last accounted).
    """
    seen_stream = snapshot_nbytes(stream)
    seen_index = snapshot_nbytes((stream, index))
    arrays = (stream.src, stream.dst, stream.t, stream.edge_feat, stream.labels)
    shared = {int(a.__array_interface__["data"][0]) for a in arrays if a.size}
    own = {name: value for name, value in vars(model).items()  # not the stream's own memory
           if not (isinstance(value, torch.Tensor) and value.numel()
                   and int(value.untyped_storage().data_ptr()) in shared)}
    seen_model = snapshot_nbytes((stream, index, own))
    return {"stream": seen_stream, "index": seen_index - seen_stream,
            "model": seen_model - seen_index, "snapshots": engine.snapshots.nbytes,
            "cursor": engine.snapshots.cursor_nbytes, "plans": engine.snapshots.plans_nbytes}


def measure(job: dict[str, Any]) -> dict[str, Any]:
    """One configuration, in the calling process (the child): phases, times, explanations."""
    from cftgnn.data.index import TemporalIndex
    from cftgnn.data.synthetic import make_synthetic_stream
    from cftgnn.oracle.engine import ReplayEngine
    from cftgnn.runs.build import make_explainer
    from cftgnn.runs.options import curves_choice
    from cftgnn.runs.sampling import plan_events
    from cftgnn.scoring.checks import after_search
    from cftgnn.scoring.protocols import negative_destination, sampled_slots
    from cftgnn.training.resolve import resolve_model

    torch.set_num_threads(int(job["num_threads"]))
    out: dict[str, Any] = {"peak_start_gib": _peak_gib()}
    phases: list[dict[str, Any]] = []  # resident memory after each phase and the peak so far

    def phase(name: str, **extra: Any) -> None:
        phases.append({"phase": name, "rss_gib": _rss_gib(), "peak_gib": _peak_gib(), **extra})
        held = ", ".join(f"{k} {_gib(v)}" for k, v in extra.get("held", {}).items())
        print(f"  [{name}] RSS {phases[-1]['rss_gib']:.2f} GiB, peak {phases[-1]['peak_gib']:.2f}"
              + (f"; held GiB: {held}" if held else ""), file=sys.stderr, flush=True)

    phase("start")
    t0 = time.perf_counter()
    stream = make_synthetic_stream(num_nodes=int(job["num_nodes"]),
                                   num_events=int(job["num_events"]), seed=int(job["seed"]),
                                   feat_dim=int(job.get("feat_dim", 0)))
    out["stream_s"] = time.perf_counter() - t0
    phase("stream")
    index = TemporalIndex(stream)
    out["load_index_s"] = time.perf_counter() - t0
    out["peak_load_gib"] = _peak_gib()
    phase("index")
    model, _ = resolve_model(job["model"], stream, None, ".", "cpu", int(job["seed"]))
    # as explain.py: the engine first, so that the sampling pass leaves it snapshots
    engine = ReplayEngine(model, stream, index, memory_budget_gb=job["budget"])
    phase("engine", held=held_parts(stream, index, model, engine))
    if job.get("stop_after") == "engine":  # the loaded stream's memory alone
        out.update(stopped="engine", phases=phases, peak_gib=_peak_gib())
        return out
    t0 = time.perf_counter()
    plan = plan_events(model, stream, int(job["n_events"]), job["sample_range"],
                       job["prediction"], 0.0, None, int(job["seed"]), engine=engine)
    out["sampling_s"] = time.perf_counter() - t0
    out["peak_sampling_gib"] = _peak_gib()
    phase("sampling", held=held_parts(stream, index, model, engine))
    if job.get("stop_after") == "sampling":
        out.update(stopped="sampling", phases=phases, peak_gib=_peak_gib(),
                   snapshots=len(engine.snapshots))
        return out
    print(f"  {job['num_events']:,} events: load + index {out['load_index_s']:.1f} s, sampling "
          f"{out['sampling_s']:.1f} s, peak RSS so far {out['peak_sampling_gib']:.2f} GiB",
          file=sys.stderr, flush=True)
    times, walls, curve_s, records = [], [], [], []
    curves = curves_choice(str(job.get("curves", "auto")), stream.num_events)
    slots = sampled_slots(int(model.num_neighbors), int(model.num_layers))  # curves=all: tempme
    pool = np.unique(stream.dst)
    engine.expect(plan["event_id"].tolist(), job["k"], int(job["m_max"]))  # as explain.py does
    for event_id in plan["event_id"].tolist():
        t0 = time.perf_counter()
        oracle = engine.oracle(int(event_id), job["k"], int(job["m_max"]), job["mode"])
        explainer = make_explainer(job["explainer"], job["strategy"])
        result = explainer.explain(oracle)
        times.append(time.perf_counter() - t0)  # explain.py's time_s
        plans_nbytes = engine.snapshots.plans_nbytes  # this event's, while they are held
        checks = after_search(oracle, result, curves, slots=slots,
                              negative_dst=negative_destination(pool, int(event_id),
                                                                int(job["seed"])))
        del oracle
        walls.append(time.perf_counter() - t0)
        curve_s.append(checks.curve_time_s)
        records.append([int(event_id), list(result.explanation), result.original_logit,
                        result.final_logit, bool(result.is_counterfactual)])
        said = ("no curves" if math.isnan(checks.curve_time_s)
                else f"{checks.curve_time_s:.1f} s curves")
        phase(f"event {event_id}", held={**held_parts(stream, index, model, engine),
                                         "plans": plans_nbytes})
        print(f"  event {event_id}: {walls[-1]:.1f} s wall ({times[-1]:.1f} s setup + search, "
              f"{said}), peak RSS so far {_peak_gib():.2f} GiB, "
              f"{len(engine.snapshots)} snapshots", file=sys.stderr, flush=True)
    out.update(curves=curves.value, event_s=times, event_wall_s=walls, curve_s=curve_s,
               records=records, snapshots=len(engine.snapshots),
               snapshot_spacing=engine.snapshots.spacing,
               setup_events=engine.counters.setup_events, peak_gib=_peak_gib(), phases=phases)
    return out


def run_child(job: dict[str, Any], timeout_s: float | None) -> dict[str, Any]:
    """Run ``measure`` in a child process; adds ``peak_rss_gib`` from the kernel."""
    with tempfile.TemporaryDirectory() as tmp:
        spec, result = Path(tmp) / "job.json", Path(tmp) / "result.json"
        spec.write_text(json.dumps(job))
        cmd = [sys.executable, "-m", "cftgnn.benchmarks.memory", str(spec), str(result)]
        proc = subprocess.Popen(cmd)
        start = time.monotonic()
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                return {"error": f"timed out after {timeout_s:.0f} s",
                        "peak_rss_gib": usage.ru_maxrss / 2**20}
            time.sleep(0.5)
        peak = usage.ru_maxrss / 2**20
        if os.waitstatus_to_exitcode(status) != 0 or not result.is_file():
            return {"error": f"exit status {os.waitstatus_to_exitcode(status)}",
                    "peak_rss_gib": peak}
        out: dict[str, Any] = json.loads(result.read_text())
        out["peak_rss_gib"] = peak
        out["wall_s"] = time.monotonic() - start
        return out


def _fmt_budget(budget: float | None) -> str:
    return "none" if budget is None else f"{budget:g} GiB"


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.2f}"


def breakdown(res: dict[str, Any], num_events: int) -> list[str]:
    """Where a run's memory went, as lines for the table: resident memory after each phase
    (and the peak so far), the bytes each long-lived structure held after the sampling pass
    (per event for those that grow with the stream), and the most the snapshots and one
    event's plans held while the events were explained."""
    phases = res.get("phases") or []
    if not phases:
        return []
    steps = ", ".join(f"{p['phase']} {p['rss_gib']:.2f}" for p in phases
                      if not p["phase"].startswith("event"))
    events = [p for p in phases if p["phase"].startswith("event")]
    lines = [f"    RSS GiB after each phase: {steps}"
             + (f", events {min(p['rss_gib'] for p in events):.2f}-"
                f"{max(p['rss_gib'] for p in events):.2f}" if events else "")]
    peak = max(p["peak_gib"] for p in phases)
    first = next(p["phase"] for p in phases if p["peak_gib"] >= peak - 1e-9)
    lines.append(f"    peak {peak:.2f} GiB, reached by the end of phase {first!r}")
    last = next((p for p in reversed(phases) if p["phase"] in ("sampling", "engine")), None)
    if last is not None:
        held, per = last["held"], max(1, num_events)
        lines.append(f"    held after {last['phase']}, GiB: " + ", ".join(
            f"{name} {_gib(held[name])}"
            + (f" ({held[name] / per:.0f} B/event)" if name in ("stream", "index", "model")
               else "")
            for name in ("stream", "index", "model", "snapshots", "cursor")))
    if events:
        snaps = max(p["held"]["snapshots"] for p in events)
        plans = max(p["held"]["plans"] for p in events)
        lines.append(f"    while explaining, GiB: snapshots up to {_gib(snaps)}, one event's "
                     f"plans up to {_gib(plans)}")
    return lines


def run(cfg: DictConfig) -> list[dict[str, Any]]:
    """Every (stream, budget) configuration in its own process; prints a table."""
    check_memory_options(cfg)
    streams = cast("list[list[int]]", OmegaConf.to_container(cfg.streams))  # (checked)
    streams = [[*s, 0] if len(s) == 2 else s for s in streams]  # feat_dim 0 by default
    budgets = cast("list[Any]", OmegaConf.to_container(cfg.budgets))
    for budget in budgets:  # before any child starts
        try:
            budget_bytes(budget)  # the engine's own check of memory_budget_gb
        except ConfigError as exc:
            raise ConfigError(f"budgets: each entry is a memory_budget_gb: {exc}") from None
    base = {
        "model": OmegaConf.to_container(cfg.model, resolve=True),
        "explainer": OmegaConf.to_container(cfg.explainer, resolve=True),
        "strategy": OmegaConf.to_container(cfg.strategy, resolve=True),
        "n_events": int(cfg.n_events), "sample_range": list(cfg.sample_range),
        "prediction": str(cfg.prediction), "mode": str(cfg.mode), "m_max": int(cfg.m_max),
        "k": cfg.k, "seed": int(cfg.seed), "num_threads": int(cfg.num_threads),
        "curves": str(cfg.get("curves", "auto")),
        "stop_after": str(cfg.get("stop_after", "events")),
    }
    rows: list[dict[str, Any]] = []
    model_name = str(cfg.model["_target_"]).rsplit(".", 1)[-1]
    explainer_name = str(cfg.explainer["_target_"]).rsplit(".", 1)[-1]
    print(f"synthetic streams, fresh {model_name} weights, explainer {explainer_name}, "
          f"n_events={cfg.n_events}, "
          f"mode={cfg.mode}, curves={base['curves']}, {cfg.num_threads} torch thread(s); "
          "per event: wall = setup + search + checks (median, min-max), time_s = setup + "
          "search, curves = the curve call (medians)")
    header = (f"{'events':>10} {'nodes':>7} {'F':>3} {'budget':>8} {'load+index':>10} "
              f"{'sampling':>9} {'wall per event s':>24} {'time_s':>7} {'curves':>7} "
              f"{'peak RSS':>9} {'snapshots':>9}  records")
    print(header)
    for num_events, num_nodes, feat_dim in streams:
        first: list[Any] | None = None
        for budget in budgets:
            job = {**base, "num_events": int(num_events), "num_nodes": int(num_nodes),
                   "feat_dim": int(feat_dim), "budget": None if budget is None else float(budget)}
            res = run_child(job, cfg.timeout_s)
            row = {"num_events": num_events, "num_nodes": num_nodes, "feat_dim": feat_dim,
                   "budget": budget, **res}
            rows.append(row)
            if "error" in res:
                print(f"{num_events:>10,} {num_nodes:>7,} {feat_dim:>3} {_fmt_budget(budget):>8} "
                      f"{res['error']} (peak RSS {res['peak_rss_gib']:.2f} GiB)", flush=True)
                continue
            if "stopped" in res:  # stop_after: the phases it ran
                sampled = (f"{res['sampling_s']:>8.1f}s" if "sampling_s" in res
                           else f"{'-':>9}")
                print(f"{num_events:>10,} {num_nodes:>7,} {feat_dim:>3} {_fmt_budget(budget):>8} "
                      f"{res['load_index_s']:>9.1f}s {sampled} stopped after "
                      f"{res['stopped']!r}, peak RSS {res['peak_rss_gib']:.2f}Gi", flush=True)
                for line in breakdown(res, int(num_events)):
                    print(line, flush=True)
                continue
            same = "-"
            if first is None:
                first = res["records"]
            else:
                same = "same" if res["records"] == first else "DIFFER"
            ev = np.array(res["event_s"]) if res["event_s"] else np.zeros(1)
            wall = np.array(res["event_wall_s"]) if res["event_wall_s"] else np.zeros(1)
            curve = np.array(res["curve_s"], dtype=np.float64)
            curve_p50 = (f"{np.nanmedian(curve):>6.2f}s" if np.isfinite(curve).any()
                         else f"{'-':>7}")
            print(f"{num_events:>10,} {num_nodes:>7,} {feat_dim:>3} {_fmt_budget(budget):>8} "
                  f"{res['load_index_s']:>9.1f}s {res['sampling_s']:>8.1f}s "
                  f"{np.median(wall):>8.2f} ({wall.min():.2f}-{wall.max():.2f}) "
                  f"{np.median(ev):>6.2f}s {curve_p50} "
                  f"{res['peak_rss_gib']:>7.2f}Gi {res['snapshots']:>9}  {same}", flush=True)
            for line in breakdown(res, int(num_events)):
                print(line, flush=True)
    if cfg.out:
        atomic_write(Path(str(cfg.out)), json.dumps(rows, indent=1).encode())
    return rows


if __name__ == "__main__":  # the child: python -m cftgnn.benchmarks.memory job.json out.json
    spec_path, out_path = sys.argv[1], sys.argv[2]
    atomic_write(out_path, json.dumps(measure(json.loads(Path(spec_path).read_text()))).encode())
