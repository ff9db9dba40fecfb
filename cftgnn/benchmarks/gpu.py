"""CPU against GPU, side by side in one process (``scripts/benchmark_gpu.py``).

Each pair (``uci-tgn``, ``wikipedia-tgn``) is loaded once per side, on the side's device
(``devices: [cpu, cuda]``; ``[cpu, cpu]`` runs the whole benchmark without a GPU, which is
how the tests run it). Every sampled test-split event, in stream order, gets on each side:

* the oracle: its plan's setup, ``sets_per_event`` random removal sets as single exact and
  single approximate calls, and one batch of ``batch_size`` random exact sets (the oracle
  benchmark's draw, ``cftgnn.benchmarks.oracle``), the same sets on both sides, and the
  largest difference between the two sides' logits (flagged above ``atol``);
* each explainer of ``explainers`` (``name: [explain.py overrides]``, e.g. CF-TGNN and
  ``experiment=search_plus``), through ``explain_event`` with the search mode that the CPU
  side's ``mode`` resolves to (``auto``: the ``auto_ratios`` table), so both sides run the
  same search: seconds per explanation (setup + search) and whether the answers agree.

Then one tail event's exhaustive search (``tail``; the tail benchmark's ``search_event``, a
fresh engine per side) is timed on each side. Times are taken with the CUDA device
synchronised before and after; one torch CPU thread (``num_threads``) for both sides. The
figures go to ``gpu_check.json`` (rewritten after every part, so a run cut short keeps what
it measured) and ``gpu_check.md`` in ``out_dir``. Each pair's ``placement`` fits
``device=auto``'s rule (``cftgnn.oracle.placement``) to its timed calls
(``cftgnn.benchmarks.gpu_placement``).
"""

from __future__ import annotations

import functools
import json
import math
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hydra import compose
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from cftgnn import jit
from cftgnn.benchmarks.gpu_placement import placement_figures, placement_line
from cftgnn.benchmarks.gpu_searches import (
    batch_size_of,
    run_search,
    search_lines,
    search_name,
    side_engine,
    tail_search,
)
from cftgnn.benchmarks.gpu_searches import sync_device as _sync
from cftgnn.benchmarks.options import check_gpu_options, pair_of, pairs
from cftgnn.benchmarks.oracle import draw_set
from cftgnn.data.stream import EventStream
from cftgnn.explain.base import Explainer, explain_event
from cftgnn.files import atomic_write, check_writable_dir
from cftgnn.models.base import TemporalModel
from cftgnn.oracle.auto_mode import pick_mode
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.runs.build import auto_ratios, build_explainer
from cftgnn.training.resolve import resolve_device, resolve_model

#: The GPU side's targets (benchmarks.md, "The GPU table"): (pair, figure) -> (kind, value).
TARGETS: dict[tuple[str, str], tuple[str, float]] = {
    ("wikipedia-tgn", "exact_ms"): ("speedup", 5.0),
    ("wikipedia-tgn", "batch_ms"): ("speedup", 5.0),
    ("*", "explainer:cftgnn"): ("seconds", 0.3),
    ("tail", "tail_s"): ("seconds", 1.0),  # UCI 56484 K = 3 (the GPU replay's target)
}

#: The benchmark's parts, in the order they run (``parts`` chooses; ``scripts/gpu/check.sh``
#: runs the searches as a step of their own, under their own timeout).
GPU_PARTS = ("pairs", "tail", "searches")

JSON_NAME = "gpu_check.json"
MD_NAME = "gpu_check.md"


def _timed(device: torch.device, fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """``fn(*args)`` and its seconds, the device synchronised before and after."""
    _sync(device)
    start = time.perf_counter()
    out = fn(*args)
    _sync(device)
    return out, time.perf_counter() - start


def _stats(seconds: Sequence[float], scale: float = 1.0) -> dict[str, float]:
    arr = np.asarray(seconds, dtype=np.float64) * scale
    if arr.size == 0:
        return {"median": math.nan, "min": math.nan, "max": math.nan, "n": 0}
    return {"median": float(np.median(arr)), "min": float(arr.min()),
            "max": float(arr.max()), "n": int(arr.size)}


Draw = Callable[[Any], tuple[list[frozenset[int]], ...]]  # singles, batch, warm-up batch


def oracle_event(engine: ReplayEngine, device: torch.device, event_id: int, draw: Draw,
                 k: int | None, m_max: int) -> dict[str, Any]:
    """One side's oracle figures on one event: setup, single exact and approximate calls on
    the single sets, one exact call on the batch (``draw(candidate ids)`` gives both), and
    every logit (for the comparison)."""
    replay, setup = _timed(device, EventReplay, engine, event_id, k, m_max)
    cand = replay.candidates.ids
    if len(cand) == 0:
        return {"setup_s": setup, "candidates": []}
    sets, batch, warm = draw(cand)
    replay.exact([frozenset()])  # untimed: the unperturbed logit (and CUDA's first kernels)
    exact, approx, t_exact, t_approx = [], [], [], []
    for s in sets:
        out, t = _timed(device, replay.exact, [s])
        exact.append(float(out[0]))
        t_exact.append(t)
        out, t = _timed(device, replay.approximate, [s])
        approx.append(float(out[0]))
        t_approx.append(t)
    replay.exact(list(warm))  # untimed: other sets of the batch's size, so that the paths
    # the batch takes are warm (on a fresh machine numba compiles a loop at its first call
    # with new types: 0.6 s inside one CPU batch of 256 on the H100's host otherwise)
    out, t_batch = _timed(device, replay.exact, list(batch))
    batches = math.ceil((replay.history_end - replay.start) / engine.batch_size)
    return {"setup_s": setup, "exact_s": t_exact, "approximate_s": t_approx,
            "batch_s": t_batch, "history_batches": batches,
            "candidates": cand.tolist(), "sets": [sorted(x) for x in sets],
            "logits": {"exact": exact, "approximate": approx,
                       "batch": [float(x) for x in out]}}


def explainer_event(engine: ReplayEngine, device: torch.device, make: Callable[[], Explainer],
                    mode: str, event_id: int, k: int | None, m_max: int) -> dict[str, Any]:
    """One explanation (a fresh explainer) on one side: seconds (setup + search), answer."""
    result, seconds = _timed(device, explain_event, engine, make(), event_id, k, m_max, mode)
    return {"seconds": seconds, "status": result.status.value,
            "found": bool(result.is_counterfactual), "cut_short": bool(result.cut_short),
            "explanation": sorted(int(e) for e in result.explanation),
            "final_logit": float(result.final_logit)}


def _max_diff(a: Sequence[float], b: Sequence[float]) -> float:
    if not len(a):
        return 0.0
    return float(np.max(np.abs(np.subtract(a, b))))


class _SharedDraw:
    """The first side's call draws an event's sets from its candidates (the single sets, the
    batch, and a warm-up batch of the same size); every later call returns the same sets."""

    def __init__(self, rng: np.random.Generator, singles: int, batch: int) -> None:
        self.rng, self.singles, self.batch = rng, singles, batch
        self.drawn: tuple[list[frozenset[int]], ...] | None = None

    def __call__(self, cand: Any) -> tuple[list[frozenset[int]], ...]:
        if self.drawn is None:
            self.drawn = ([draw_set(self.rng, cand) for _ in range(self.singles)],
                          [draw_set(self.rng, cand) for _ in range(self.batch)],
                          [draw_set(self.rng, cand) for _ in range(self.batch)])
        return self.drawn


def benchmark_pair(models: Mapping[str, TemporalModel], stream: EventStream,
                   events: Sequence[int], *, sets_per_event: int, batch_size: int,
                   k: int | None, m_max: int, seed: int,
                   explainers: Mapping[str, tuple[Callable[[], Explainer], str]],
                   memory_budget_gb: float | None = 0.5,
                   deadline: float | None = None,
                   cones: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """Both sides (``models``: side label -> model on its device) on the same events, sets
    and explainers; see the module docstring. Before the first event, each side builds its
    plan once untimed (CUDA's context and first kernels; both cursors move there alike).
    Past ``deadline`` (a ``time.perf_counter()`` value), no further event is started
    (``cut_short``).

    Returns:
        ``{"events": [...], "figures": {figure: {side: stats}}, "max_abs_logit_diff": {...},
        "answers_agree": {explainer: [agreeing, compared]}, "cut_short": bool}`` (answers
        compared where neither side's explanation was cut short by its cap); single and
        batch calls in ms, setup in ms, explanations in seconds. ``cones``: each side's
        ``replay.cone`` (``side_engine``).
    """
    sides = list(models)
    engines = {side: side_engine(m, stream, memory_budget_gb, (cones or {}).get(side))
               for side, m in models.items()}
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    ordered = sorted(int(e) for e in events)
    warm = np.random.default_rng(seed + 1)
    for side in sides if ordered else []:  # warm-up, untimed: CUDA's first kernels and
        # numba's compiled loops (they run from jit.MIN_SETS sets on), so neither side's
        # first timed batch pays for them
        replay = EventReplay(engines[side], ordered[0], k, m_max)
        cand = replay.candidates.ids
        replay.exact([frozenset()] + [draw_set(warm, cand) for _ in range(jit.MIN_SETS)]
                     if len(cand) else [frozenset()])
        _sync(models[side].device)
    cut_short = False
    for event_id in ordered:
        if deadline is not None and time.perf_counter() > deadline:
            cut_short = True
            break
        row: dict[str, Any] = {"event_id": event_id, "oracle": {}, "explainers": {}}
        first = sides[0]
        draw = _SharedDraw(rng, sets_per_event, batch_size)
        for side in sides:
            row["oracle"][side] = oracle_event(engines[side], models[side].device, event_id,
                                               draw, k, m_max)
        ref = row["oracle"][first]
        if not ref["candidates"]:
            row["status"] = "no candidates"
            rows.append(row)
            continue
        for side in sides[1:]:
            other = row["oracle"][side]
            row.setdefault("same_candidates", {})[side] = other["candidates"] == \
                ref["candidates"]
            row.setdefault("max_abs_logit_diff", {})[side] = {
                kind: _max_diff(ref["logits"][kind], other["logits"][kind])
                if "logits" in other else math.inf
                for kind in ("exact", "approximate", "batch")}
        for name, (make, mode) in explainers.items():
            row["explainers"][name] = {
                side: explainer_event(engines[side], models[side].device, make, mode,
                                      event_id, k, m_max) for side in sides}
        row["status"] = "ok"
        rows.append(row)
    ok = [r for r in rows if r["status"] == "ok"]
    figures: dict[str, dict[str, dict[str, float]]] = {}
    for side in sides:
        per = [r["oracle"][side] for r in ok]
        figures.setdefault("exact_ms", {})[side] = _stats(
            [t for p in per for t in p["exact_s"]], 1e3)
        figures.setdefault("approximate_ms", {})[side] = _stats(
            [t for p in per for t in p["approximate_s"]], 1e3)
        figures.setdefault("batch_ms", {})[side] = _stats([p["batch_s"] for p in per], 1e3)
        figures.setdefault("setup_ms", {})[side] = _stats([p["setup_s"] for p in per], 1e3)
        for name in explainers:
            figures.setdefault(f"explainer:{name}", {})[side] = _stats(
                [r["explainers"][name][side]["seconds"] for r in ok])
    diffs = {side: max((r["max_abs_logit_diff"][side][kind] for r in ok
                        for kind in ("exact", "approximate", "batch")), default=0.0)
             for side in sides[1:]}
    agree: dict[str, list[int]] = {}
    for name in explainers:  # a search its cap cut short may stop anywhere: not compared
        runs = [r["explainers"][name] for r in ok]
        whole = [(run[sides[0]], run[s]) for run in runs for s in sides[1:]
                 if not (run[sides[0]]["cut_short"] or run[s]["cut_short"])]
        agree[name] = [sum(a["explanation"] == b["explanation"] for a, b in whole), len(whole)]
    return {"events": rows, "figures": figures, "max_abs_logit_diff": diffs,
            "answers_agree": agree, "cut_short": cut_short,
            "placement": placement_figures(ok, sides, batch_size)}


def _target(pair: str, figure: str) -> tuple[str, float] | None:
    return TARGETS.get((pair, figure)) or TARGETS.get(("*", figure))


def _cell(s: Mapping[str, float], digits: int = 2) -> str:
    if not s or s.get("n", 0) == 0 or math.isnan(s["median"]):
        return "—"
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


def _verdict(target: tuple[str, float] | None, gpu: Mapping[str, float], ratio: float,
             on_gpu: bool) -> str:
    if target is None:
        return ""
    kind, value = target
    want = f"≥ {value:g}× faster" if kind == "speedup" else f"≤ {value:g} s"
    if not on_gpu:
        return f"{want} (not on a GPU: no verdict)"
    if math.isnan(ratio if kind == "speedup" else gpu["median"]):
        return f"{want}: no figure"
    got = ratio >= value if kind == "speedup" else gpu["median"] <= value
    return f"{want}: {'met' if got else 'MISSED'}"


def _one_line(text: str) -> str:
    """``text`` on one line (a table cell: an error's message may span several)."""
    return " ".join(str(text).split())


def format_markdown(res: Mapping[str, Any]) -> str:
    """The figures as one Markdown table (medians with min and max, CPU / GPU ratios)."""
    left, right = res["sides"]
    env = res["environment"]
    on_gpu = res["devices"][right].startswith("cuda")
    lines = [f"# CPU against GPU, side by side ({env['when']})", "",
             f"Left: **{left}** = `{res['devices'][left]}`; right: **{right}** = "
             f"`{res['devices'][right]}` ({env['device_name']}); torch {env['torch']}, "
             f"{env['torch_threads']} torch CPU thread(s), {env['cpu']}, compiled "
             f"bookkeeping loops {'on' if env.get('numba') else 'off'}. Medians (min–max) "
             f"over the events' calls; ratio = {left} / {right} median.", "",
             f"| pair | figure | {left} | {right} | ratio | target |",
             "| --- | --- | --- | --- | --- | --- |"]
    labels = {"exact_ms": "exact single call, ms", "approximate_ms": "approximate single call, ms",
              "batch_ms": f"batch of {res['config']['batch_size']} exact sets, ms",
              "setup_ms": "plan setup per event, ms"}
    for pair, part in res["pairs"].items():
        if "error" in part:
            lines.append(f"| {pair} | FAILED: {_one_line(part['error'])} | | | | |")
            continue
        labels["batch_ms"] = (f"batch of {part.get('batch_size', res['config']['batch_size'])}"
                              " exact sets, ms")
        for figure, by_side in part["figures"].items():
            a, b = by_side[left], by_side[right]
            ratio = a["median"] / b["median"] if b.get("n") and b["median"] > 0 else math.nan
            label = labels.get(figure, f"{figure.split(':', 1)[-1]}, s per explanation")
            digits = 3 if figure.startswith("explainer:") else 2
            lines.append(f"| {pair} | {label} | {_cell(a, digits)} | {_cell(b, digits)} | "
                         f"{ratio:.2f} | {_verdict(_target(pair, figure), b, ratio, on_gpu)} |")
        diff = part["max_abs_logit_diff"].get(right, 0.0)
        flag = ("no events" if not part["n_events"] else "ok"
                if diff <= res["config"]["atol"] else f"OVER {res['config']['atol']:g}")
        lines.append(f"| {pair} | max abs logit difference, {part['n_events']} events | | | "
                     f"{diff:.1e} | ≤ {res['config']['atol']:g}: {flag} |")
        for name, (same, total) in part["answers_agree"].items():
            cut = {side: sum(r["explainers"][name][side]["cut_short"] for r in part["events"]
                             if r["status"] == "ok") for side in (left, right)}
            lines.append(f"| {pair} | {name}: same answer on both sides, of the events "
                         f"neither side's cap cut short (cut short, {left} / {right}: "
                         f"{cut[left]} / {cut[right]}) | | | {same}/{total} | |")
        if (line := placement_line(pair, part, left)) is not None:
            lines.append(line)
        if part.get("cut_short"):
            lines.append(f"| {pair} | time_budget_s reached: {part['n_events']} events "
                         f"measured | | | | |")
    tail = res.get("tail")
    if tail and "error" in tail:
        lines.append(f"| {tail.get('pair', 'tail')} | tail: FAILED: "
                     f"{_one_line(tail['error'])} | | | | |")
    elif tail:
        a, b = tail["sides"][left], tail["sides"][right]
        sa, sb = a.get("search_s"), b.get("search_s")
        ratio = sa / sb if sa is not None and sb else math.nan
        gpu = {"median": sb if sb is not None else math.nan}
        fmt = lambda s: "—" if s is None else f"{s:.2f}"  # noqa: E731
        lines.append(f"| {tail['pair']} | event {tail['event_id']} ({a.get('span')} events "
                     f"back), exhaustive K = {tail['max_size']}, search s | {fmt(sa)} | "
                     f"{fmt(sb)} | {ratio:.2f} | "
                     f"{_verdict(TARGETS[('tail', 'tail_s')], gpu, ratio, on_gpu)} |")
        lines.append(f"| {tail['pair']} | tail: same answer; final logit difference | | | "
                     f"{tail['same_answer']}; {tail['max_abs_final_logit_diff']:.1e} | |")
    lines += search_lines(res.get("searches") or [], left, right, on_gpu)
    if res.get("failures"):
        lines += ["", "Failed parts: " + "; ".join(_one_line(f) for f in res["failures"])]
    return "\n".join(lines) + "\n"


def _environment(devices: Mapping[str, torch.device]) -> dict[str, Any]:
    cuda = next((d for d in devices.values() if d.type == "cuda"), None)
    return {"when": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "torch": torch.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(),
            "torch_threads": torch.get_num_threads(), "numba": jit.ENABLED,
            "device_name": torch.cuda.get_device_name(cuda) if cuda is not None
            else "no CUDA device"}


def _write(res: Mapping[str, Any], out_dir: Path) -> None:
    atomic_write(out_dir / JSON_NAME, (json.dumps(res, indent=1, default=str) + "\n").encode())
    atomic_write(out_dir / MD_NAME, format_markdown(res).encode())


def _explainers(cfg: DictConfig, dataset: str, kind: str
                ) -> dict[str, tuple[Callable[[], Explainer], str]]:
    """``cfg.explainers`` as name -> (explainer factory, search mode) for one pair."""
    out: dict[str, tuple[Callable[[], Explainer], str]] = {}
    for name, overrides in (cfg.explainers or {}).items():  # null: none
        run_cfg = compose("explain", overrides=[f"dataset={dataset}", f"model={kind}",
                                                *[str(o) for o in overrides]])
        mode = str(run_cfg.mode)
        if mode == "auto":  # both sides search alike: the table's choice, as the CPU runs it
            ratio = auto_ratios(run_cfg).get(f"{dataset}-{kind}", 1.0)
            mode = pick_mode([ratio], [1.0], float(run_cfg.auto_threshold)).mode.value
        build_explainer(run_cfg)  # a bad option fails here, before any timing
        out[str(name)] = (functools.partial(build_explainer, run_cfg), mode)
    return out


def _events(stream: EventStream, n: int, sample_range: Sequence[float], seed: int) -> list[int]:
    lo = int(float(sample_range[0]) * stream.num_events)
    hi = max(lo + 1, int(float(sample_range[1]) * stream.num_events))
    pool = np.arange(lo, min(hi, stream.num_events))
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(pool, size=min(n, len(pool)), replace=False).tolist())


def run(cfg: DictConfig) -> dict[str, Any]:
    """The benchmark of ``conf/benchmark_gpu.yaml``: every pair, the tail event, then the
    searches (those of ``parts``); writes
    ``gpu_check.json`` and ``gpu_check.md`` into ``out_dir`` after every part, prints the
    table. A part that fails is recorded (``failures``) and the next one runs."""
    check_gpu_options(cfg)
    devices = {str(side): resolve_device(str(name))
               for side, name in zip(("cpu", "gpu"), cfg.devices, strict=True)}
    torch.set_num_threads(int(cfg.num_threads))
    out_dir = check_writable_dir(str(cfg.out_dir), "out_dir")
    res: dict[str, Any] = {
        "sides": list(devices), "devices": {s: str(d) for s, d in devices.items()},
        "environment": _environment(devices),
        "config": OmegaConf.to_container(cfg, resolve=True), "pairs": {}, "failures": []}
    loaded: dict[str, tuple[EventStream, dict[str, TemporalModel]]] = {}

    def load(dataset: str, kind: str) -> tuple[EventStream, dict[str, TemporalModel]]:
        key = f"{dataset}-{kind}"
        if key not in loaded:
            base = compose("explain", overrides=[f"dataset={dataset}", f"model={kind}"])
            stream: EventStream = instantiate(base.dataset)
            models = {side: resolve_model(base.model, stream, str(cfg.checkpoint),
                                          base.paths.checkpoint_dir, dev, int(cfg.seed))[0]
                      for side, dev in devices.items()}
            loaded.clear()  # one pair in memory at a time
            loaded[key] = (stream, models)
        return loaded[key]

    cones = {"cpu": None, "gpu": cfg.get("right_cone")}  # the right side's replay.cone
    budget = cfg.get("time_budget_s")
    deadline = None if budget is None else time.perf_counter() + float(budget)
    parts = set(cfg.get("parts") or GPU_PARTS)
    for dataset, kind in pairs(cfg) if "pairs" in parts else []:
        key = f"{dataset}-{kind}"
        try:
            stream, models = load(dataset, kind)
            events = _events(stream, int(cfg.n_events), list(cfg.sample_range), int(cfg.seed))
            part = benchmark_pair(models, stream, events,
                                  sets_per_event=int(cfg.sets_per_event),
                                  batch_size=batch_size_of(cfg, key), k=cfg.k,
                                  m_max=int(cfg.m_max), seed=int(cfg.seed),
                                  explainers=_explainers(cfg, dataset, kind),
                                  memory_budget_gb=cfg.memory_budget_gb,
                                  deadline=deadline, cones=cones)
            part["batch_size"] = batch_size_of(cfg, key)
            part["n_events"] = sum(r["status"] == "ok" for r in part["events"])
            if part["cut_short"]:
                res["failures"].append(f"{key}: time_budget_s reached after "
                                       f"{len(part['events'])} of {len(events)} events")
            res["pairs"][key] = part
        except Exception as exc:  # recorded; the next part still runs
            res["pairs"][key] = {"error": f"{type(exc).__name__}: {exc}"}
            res["failures"].append(f"{key}: {type(exc).__name__}: {exc}")
        _write(res, out_dir)
        print(f"{key}: done", flush=True)
    tail = cfg.tail
    if tail.event is not None and "tail" in parts:
        dataset, kind = pair_of(cfg, tail.pair, "tail.pair")
        try:
            stream, models = load(dataset, kind)
            res["tail"] = tail_search(models, stream, int(tail.event),
                                      max_size=int(tail.max_size), k=cfg.k,
                                      m_max=int(cfg.m_max),
                                      memory_budget_gb=cfg.memory_budget_gb, cones=cones)
            res["tail"]["pair"] = str(tail.pair)
        except Exception as exc:
            res["tail"] = {"pair": str(tail.pair), "error": f"{type(exc).__name__}: {exc}"}
            res["failures"].append(f"tail: {type(exc).__name__}: {exc}")
        _write(res, out_dir)
    for search in cfg.get("searches") or [] if "searches" in parts else []:  # each written
        res.setdefault("searches", []).append(run_search(cfg, search, load, cones))
        if "error" in res["searches"][-1]:
            res["failures"].append(f"search {search_name(search)}: "
                                   f"{res['searches'][-1]['error']}")
        _write(res, out_dir)
    print(format_markdown(res))
    print(f"wrote {out_dir / JSON_NAME} and {out_dir / MD_NAME}")
    return res


__all__ = ["GPU_PARTS", "benchmark_pair", "format_markdown", "run", "tail_search"]
