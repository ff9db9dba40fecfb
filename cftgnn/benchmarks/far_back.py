"""The far-back tail of TGN's exact cone replay, measured event by event
(``scripts/benchmark_far_back.py``; the findings: docs/benchmarks.md, "The far-back tail:
what a removal far back does").

An event whose candidates lie far back in the stream makes the cone replay follow each
removal through thousands of history batches. Four parts, each on every event given, one
process, the row table on the CPU (``TGNReplayOptions.cone = "rows"``):

* ``effects``: every candidate removed alone and ``n_pairs`` random pairs of them, replayed
  exactly with perturbation pruning off and on, and with tolerance pruning at each ``τ`` of
  ``tolerances`` (not exact): the rows updated, the sets whose perturbation died out before
  the prediction (``settled``), seconds, and the largest logit difference from the exact
  replay; of the singles, how many move the logit at all, and by how much.
* ``flips``: every set of up to ``max_size`` candidates (closest ranking), replayed exactly
  with the sets in time order (as ``search_by_size`` orders them), exactly in ranking order
  (the float noise any two exact replays differ by), and with each ``τ`` in time order:
  seconds, rows updated and made, the largest cone replay, the largest and p99 logit
  difference from the first, and how many flip decisions the two disagree on at a threshold
  ``b`` at the median logit and at the worst ``b`` (moving the decoder's output bias by ``b``
  moves every logit by ``b``, so the decisions at ``b`` differ exactly for the sets whose two
  logits lie on either side of it).
* ``bookkeeping``: the tail benchmark's exhaustive search (``tail.search_event``: closest
  ranking, exact oracle, a fresh plan) with each step of the row table timed
  (``ConeStats.steps``) and a SHA-256 of every exact logit (bitwise), to compare two versions
  of the code event by event.
* ``jacobian``: the spectral norm of TGN's memory update's Jacobian with respect to a node's
  own memory (and to the other endpoint's), at a sample of the rows the unperturbed history
  of the event updates: where it is at least 1, no per-node bound on a perturbation can
  contract, which is why sound no-flip bounds certify nothing on these models.

Every replay here but the ``τ`` rows is exact; the ``τ`` rows are a measurement, never an
answer or a certificate.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from cftgnn import jit
from cftgnn.benchmarks.options import PARTS, check_far_back_options, far_back_tolerances
from cftgnn.benchmarks.tail import search_event
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.explain import ClosestStrategy
from cftgnn.files import atomic_write
from cftgnn.models.base import TemporalModel
from cftgnn.models.tgn import TGN, other_endpoint
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.oracle.snapshots import DEFAULT_MEMORY_BUDGET_GB
from cftgnn.replay.tgn import Cone, TGNReplay
from cftgnn.replay.tgn.cone import ConeStats
from cftgnn.runs.sampling import explicit_events
from cftgnn.training.resolve import resolve_device, resolve_model

#: Sets per call of ``EventReplay.exact`` in the ``flips`` part.
CHUNK = 4096

#: Quantiles of the Jacobian norms reported, percent.
QUANTILES = (10, 50, 90, 99)


def tgn_replay(engine: ReplayEngine) -> TGNReplay:
    """The engine's replay, if it is TGN's (the cone replay this benchmark measures).

    Raises:
        ConfigError: For another model's.
    """
    replay = engine.replay
    if not isinstance(replay, TGNReplay):
        raise ConfigError(f"the far-back benchmark measures TGN's cone replay; "
                          f"{type(engine.model).__name__} has none (model=tgn or tgn2l)")
    return replay


@contextlib.contextmanager
def replay_options(engine: ReplayEngine, *, prune: bool = True, tolerance: float = 0.0,
                   stats: ConeStats | None = None, cone_only: bool = True
                   ) -> Iterator[TGNReplay]:
    """The engine's TGN replay with the row table, pruning ``prune``, tolerance
    ``tolerance`` and counters ``stats`` for the duration, and with ``cone_only`` every call
    through the cone replay (a call of one set too, which otherwise takes the local
    replay); its options as they were after. They are read at each call, so one
    ``EventReplay`` serves every setting."""
    replay = tgn_replay(engine)
    options = replay.options
    names = ("prune_perturbations", "prune_tolerance", "stats", "cone", "local_max_sets")
    values = (prune, tolerance, stats, Cone.ROWS, 0 if cone_only else options.local_max_sets)
    saved = [getattr(options, name) for name in names]
    for name, value in zip(names, values, strict=True):
        setattr(options, name, value)
    try:
        yield replay
    finally:
        for name, value in zip(names, saved, strict=True):
            setattr(options, name, value)


def ranked_sets(replay: EventReplay, max_size: int, time_order: bool
                ) -> list[frozenset[int]]:
    """Every set of up to ``max_size`` of the event's removable candidates, by size; within
    a size in time order (by the oldest event, then the next) or in the closest ranking's
    order."""
    oracle = replay.oracle("exact")
    strategy = ClosestStrategy()
    strategy.prepare(oracle)
    events = [int(e) for e in strategy.rank(oracle.removable)]
    if time_order:
        events.sort()
    return [frozenset(c) for size in range(1, max_size + 1)
            for c in itertools.combinations(events, size)]


def replay_sets(replay: EventReplay, sets: Sequence[frozenset[int]], *, prune: bool = True,
                tolerance: float = 0.0) -> tuple[npt.NDArray[np.float64], ConeStats, float]:
    """The exact logits of ``sets`` (calls of ``CHUNK`` sets through the cone replay, with
    pruning ``prune`` and tolerance ``tolerance``), the cone replay's counters of those
    calls and their seconds."""
    stats = ConeStats()
    with replay_options(replay.engine, prune=prune, tolerance=tolerance, stats=stats):
        start = time.perf_counter()
        parts = [replay.exact(list(sets[lo:lo + CHUNK])) for lo in range(0, len(sets), CHUNK)]
        seconds = time.perf_counter() - start
    logits = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)
    return logits, stats, seconds


def most_changed(a: npt.ArrayLike, b: npt.ArrayLike) -> int:
    """The most sets whose two logits (``a[i]``, ``b[i]``) lie on either side of one
    threshold, over every threshold: a sweep over the intervals between them."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    lo, hi = np.minimum(x, y), np.maximum(x, y)
    keep = lo < hi  # equal logits straddle no threshold
    lo, hi = lo[keep], hi[keep]
    points = np.concatenate([lo, hi])
    step = np.concatenate([np.ones(len(lo)), -np.ones(len(hi))])
    order = np.lexsort((step, points))  # at one point, closings before openings
    return int(np.cumsum(step[order]).max(initial=0))


def changed_at(a: npt.ArrayLike, b: npt.ArrayLike, threshold: float) -> int:
    """The sets whose decision ``logit > threshold`` differs between ``a`` and ``b``."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return int(((x > threshold) != (y > threshold)).sum())


def _spread(values: npt.ArrayLike) -> dict[str, float]:
    """Median and maximum (``nan`` of nothing)."""
    arr = np.asarray(values, dtype=np.float64)
    if not arr.size:
        return {"median": float("nan"), "max": float("nan")}
    return {"median": float(np.median(arr)), "max": float(arr.max())}


def removal_effects(engine: ReplayEngine, event_id: int, *, n_pairs: int,
                    tolerances: Sequence[float], seed: int, k: int | None = None,
                    m_max: int = 64) -> dict[str, Any]:
    """The ``effects`` part (module docstring) on one event.

    Returns:
        ``{"singles": {...}, "rows": [...]}``: of the singles under the exact replay, how
        many there are, how many move the logit (``with_effect``), ``|Δ logit|`` of those
        (median, max) and the flips; and one row per kind of set (``single``, ``pair``) and
        replay (``pruning off``, ``exact``, ``τ=…``): ``sets``, ``row_updates``,
        ``rows_pruned``, ``settled_sets``, ``seconds`` and ``max_abs_logit_diff`` from the
        exact replay.
    """
    replay = EventReplay(engine, event_id, k, m_max)
    cand = [int(c) for c in replay.candidates.ids]
    p_orig = float(replay.exact([frozenset()])[0])
    rng = np.random.default_rng(seed)
    combos = list(itertools.combinations(cand, 2))
    picked = (rng.choice(len(combos), min(n_pairs, len(combos)), replace=False) if combos
              else np.zeros(0, dtype=np.int64))
    kinds = {"single": [frozenset([c]) for c in cand],
             "pair": [frozenset(combos[int(i)]) for i in sorted(picked)]}
    runs = [("pruning off", False, 0.0), ("exact", True, 0.0)] + [
        (f"τ={tau:g}", True, float(tau)) for tau in tolerances]
    rows: list[dict[str, Any]] = []
    exact: dict[str, npt.NDArray[np.float64]] = {}
    for kind, sets in kinds.items():
        if not sets:
            continue
        got = {name: replay_sets(replay, sets, prune=prune, tolerance=tau)
               for name, prune, tau in runs}
        exact[kind] = got["exact"][0]
        for name, prune, tau in runs:
            logits, stats, seconds = got[name]
            rows.append({"kind": kind, "replay": name, "prune_perturbations": prune,
                         "prune_tolerance": tau, "sets": len(sets),
                         "row_updates": stats.row_updates, "rows_pruned": stats.rows_pruned,
                         "settled_sets": stats.settled_sets, "seconds": seconds,
                         "max_abs_logit_diff": float(np.abs(logits - exact[kind]).max())})
    singles = exact.get("single", np.zeros(0))
    delta = np.abs(singles - p_orig)
    moved = delta[delta > 0]
    return {"singles": {"sets": len(singles), "with_effect": len(moved),
                        "abs_dlogit": _spread(moved),
                        "flips": int((np.sign(singles) != np.sign(p_orig)).sum())},
            "rows": rows}


def tolerance_flips(engine: ReplayEngine, event_id: int, *, max_size: int,
                    tolerances: Sequence[float], k: int | None = None, m_max: int = 64
                    ) -> list[dict[str, Any]]:
    """The ``flips`` part (module docstring) on one event: one row per replay
    (``exact, time order``, the reference, then ``exact, ranking order`` and each ``τ``)."""
    replay = EventReplay(engine, event_id, k, m_max)
    in_time = ranked_sets(replay, max_size, time_order=True)
    in_rank = ranked_sets(replay, max_size, time_order=False)
    where = {s: i for i, s in enumerate(in_rank)}
    order = np.array([where[s] for s in in_time], dtype=np.int64)
    runs: list[tuple[str, float, tuple[npt.NDArray[np.float64], ConeStats, float]]] = []
    runs.append(("exact, time order", 0.0, replay_sets(replay, in_time)))
    logits, stats, seconds = replay_sets(replay, in_rank)
    runs.append(("exact, ranking order", 0.0, (logits[order], stats, seconds)))
    for tau in tolerances:
        runs.append((f"τ={tau:g}", float(tau),
                     replay_sets(replay, in_time, tolerance=float(tau))))
    reference = runs[0][2][0]
    median = float(np.median(reference)) if len(reference) else 0.0
    out = []
    for name, tau, (got, stats, seconds) in runs:
        diff = np.abs(got - reference)
        out.append({"replay": name, "prune_tolerance": tau, "sets": len(got),
                    "seconds": seconds, "row_updates": stats.row_updates,
                    "rows_made": stats.rows_made, "cone_peak_mib": stats.peak_bytes / 2**20,
                    "max_abs_logit_diff": float(diff.max(initial=0.0)),
                    "p99_abs_logit_diff": float(np.percentile(diff, 99)) if len(diff) else 0.0,
                    "median_logit": median,
                    "changed_at_median": changed_at(reference, got, median),
                    "changed_at_worst": most_changed(reference, got)})
    return out


def bookkeeping(engine: ReplayEngine, event_id: int, *, max_size: int, k: int | None = None,
                m_max: int = 64) -> dict[str, Any]:
    """The ``bookkeeping`` part (module docstring) on one event: the tail benchmark's row
    (``tail.search_event``) with ``step_cpu_s`` and ``logits_sha256``."""
    with replay_options(engine, cone_only=False):  # as the tail benchmark searches
        row = search_event(engine, event_id, max_size, k, m_max, logits_digest=True,
                           step_times=True)
    row.pop("explanation", None)
    return row


def jacobian_norms(engine: ReplayEngine, event_id: int, *, max_rows: int, seed: int,
                   k: int | None = None, m_max: int = 64) -> dict[str, Any]:
    """The ``jacobian`` part (module docstring) on one event: up to ``max_rows`` rows that
    the unperturbed history from the event's replay start to the event updates (at most
    ``ceil(max_rows / batches)`` drawn from each batch), and at each the spectral norms of
    ``∂h'/∂h_self`` and ``∂h'/∂h_other`` of ``TGN.message_update``.

    Returns:
        ``{"rows", "batches", "self": {"p10", ...}, "other": {...},
        "share_self_at_least_1"}``; the model's state is as it was after.
    """
    model = engine.model
    if not isinstance(model, TGN):
        raise ConfigError(f"the jacobian part needs TGN's memory update; "
                          f"{type(model).__name__} has none")
    replay = EventReplay(engine, event_id, k, m_max)
    rng = np.random.default_rng(seed)
    saved = model.snapshot()
    events, mems, lus, others = [], [], [], []
    try:
        with torch.no_grad():
            model.restore(replay.base)
            state = model.state
            steps = model.history_steps(replay.start, replay.history_end, None,
                                        model.is_idle(state))
            per_batch = -(-max_rows // max(len(steps), 1))
            src, dst = model.stream.src, model.stream.dst
            for batch in steps:
                nodes = (state.pending >= 0).nonzero(as_tuple=True)[0].cpu().numpy()
                if len(nodes):
                    pick = np.sort(rng.choice(len(nodes), min(per_batch, len(nodes)),
                                              replace=False))
                    n = nodes[pick]
                    ev = state.pending[torch.as_tensor(n)].cpu().numpy()
                    o = other_endpoint(src, dst, ev, n)
                    events.append(ev)
                    mems.append(state.memory[torch.as_tensor(n)].clone())
                    lus.append(state.last_update[torch.as_tensor(n)].clone())
                    others.append(state.memory[torch.as_tensor(o)].clone())
                model.apply_batch(state, torch.as_tensor(batch, device=model.device))
    finally:
        model.restore(saved)
    if not events:
        return {"rows": 0, "batches": len(steps), "self": {}, "other": {},
                "share_self_at_least_1": float("nan")}
    ev_all = np.concatenate(events)[:max_rows]
    h = torch.cat(mems)[:max_rows]
    lu = torch.cat(lus)[:max_rows]
    o = torch.cat(others)[:max_rows]
    norms = _update_jacobian_norms(model, ev_all, h, lu, o)
    quant = {name: {f"p{q}": float(np.percentile(norms[:, c], q)) for q in QUANTILES}
             for c, name in ((0, "self"), (1, "other"))}
    return {"rows": len(ev_all), "batches": len(steps), **quant,
            "share_self_at_least_1": float((norms[:, 0] >= 1.0).mean())}


def _update_jacobian_norms(model: TGN, events: npt.NDArray[np.int64], h: torch.Tensor,
                           lu: torch.Tensor, other: torch.Tensor) -> npt.NDArray[np.float64]:
    """Spectral norms of ``∂h'/∂h`` and ``∂h'/∂o`` of ``message_update`` at each row,
    ``float64 [M, 2]`` (rows are independent: one backward pass per output coordinate gives
    that coordinate's row of every Jacobian)."""
    h = h.detach().clone().requires_grad_(True)
    o = other.detach().clone().requires_grad_(True)
    d = h.shape[1]
    with torch.enable_grad():
        out, _ = model.message_update(events, h, lu, o)
        jac_h, jac_o = torch.empty(len(h), d, d), torch.empty(len(h), d, d)
        for j in range(d):
            gh, go = torch.autograd.grad(out[:, j].sum(), (h, o), retain_graph=j < d - 1)
            jac_h[:, j], jac_o[:, j] = gh.detach().cpu(), go.detach().cpu()
    norms = torch.stack([torch.linalg.matrix_norm(jac_h.double(), ord=2),
                         torch.linalg.matrix_norm(jac_o.double(), ord=2)], dim=1)
    out_norms: npt.NDArray[np.float64] = norms.numpy()
    return out_norms


def benchmark_far_back(model: TemporalModel, stream: EventStream, events: Sequence[int], *,
                       parts: Sequence[str] = PARTS, max_size: int = 2,
                       tolerances: Sequence[float] = (1e-5, 1e-4), n_pairs: int = 16,
                       seed: int = 0, k: int | None = None, m_max: int = 64,
                       jacobian_rows: int = 2000,
                       memory_budget_gb: float | None = DEFAULT_MEMORY_BUDGET_GB
                       ) -> dict[str, Any]:
    """The ``parts`` of the module docstring on every event of ``events`` (model: a TGN).

    Returns:
        ``{"summary": {...}, "events": [{"event_id", "span", "candidates", "p_orig",
        <part>: ...}]}``, seconds and MiB; ``span``: events back to the oldest candidate.
    """
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ConfigError(f"parts: unknown {unknown[0]!r} (choose from: {', '.join(PARTS)})")
    engine = ReplayEngine(model, stream, memory_budget_gb=memory_budget_gb)
    tgn_replay(engine)  # a TGN's, or one error line
    jit.warm_up()  # numba's start is the process's, not the first replay's
    rows = []
    for event_id in events:
        replay = EventReplay(engine, int(event_id), k, m_max)
        cand = replay.candidates.ids
        row: dict[str, Any] = {"event_id": int(event_id), "candidates": len(cand),
                               "span": int(event_id - cand[0]) if len(cand) else 0,
                               "p_orig": float(replay.exact([frozenset()])[0])}
        if len(cand):
            if "effects" in parts:
                row["effects"] = removal_effects(engine, int(event_id), n_pairs=n_pairs,
                                                 tolerances=tolerances, seed=seed, k=k,
                                                 m_max=m_max)
            if "flips" in parts:
                row["flips"] = tolerance_flips(engine, int(event_id), max_size=max_size,
                                               tolerances=tolerances, k=k, m_max=m_max)
            if "bookkeeping" in parts:
                row["bookkeeping"] = bookkeeping(engine, int(event_id), max_size=max_size,
                                                 k=k, m_max=m_max)
            if "jacobian" in parts:
                row["jacobian"] = jacobian_norms(engine, int(event_id), max_rows=jacobian_rows,
                                                 seed=seed, k=k, m_max=m_max)
        rows.append(row)
    summary = {"dataset": stream.name, "model": type(model).__name__, "max_size": max_size,
               "tolerances": [float(t) for t in tolerances], "n_pairs": n_pairs,
               "parts": list(parts), "torch_threads": torch.get_num_threads()}
    return {"summary": summary, "events": rows}


def format_far_back(res: dict[str, Any]) -> str:
    """The parts of every event as Markdown tables."""
    s = res["summary"]
    lines = [f"{s['dataset']} · {s['model']}, the far-back tail: parts "
             f"{', '.join(s['parts'])}, {s['torch_threads']} torch thread(s). Rows with τ > 0 "
             "are NOT EXACT: a measurement, not an answer or a certificate."]
    for ev in res["events"]:
        lines += ["", f"## event {ev['event_id']}: {ev['candidates']} candidates, the oldest "
                  f"{ev['span']:,} events back, p_orig {ev['p_orig']:.4f}"]
        if "effects" in ev:
            single = ev["effects"]["singles"]
            lines += ["", f"singles: {single['with_effect']} of {single['sets']} move the logit; "
                      f"|Δ logit| median {single['abs_dlogit']['median']:.2g}, max "
                      f"{single['abs_dlogit']['max']:.2g}; flips {single['flips']}", "",
                      "| sets | replay | rows updated | settled sets | seconds | max \\|Δ logit\\| "
                      "vs exact |", "| --- | --- | --- | --- | --- | --- |"]
            for r in ev["effects"]["rows"]:
                lines.append(f"| {r['sets']} {r['kind']}s | {r['replay']} | {r['row_updates']:,} "
                             f"| {r['settled_sets']} | {r['seconds']:.2f} | "
                             f"{r['max_abs_logit_diff']:.1e} |")
        if "flips" in ev:
            rows = ev["flips"]
            lines += ["", f"every set of up to {s['max_size']} ({rows[0]['sets']:,} sets), "
                      "against the exact replay in time order:", "",
                      "| replay | seconds | rows updated | rows made | cone MiB | "
                      "max \\|Δ logit\\| | p99 | disagreements at median b / worst b |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- |"]
            for r in rows:
                lines.append(f"| {r['replay']} | {r['seconds']:.2f} | {r['row_updates']:,} | "
                             f"{r['rows_made']:,} | {r['cone_peak_mib']:.0f} | "
                             f"{r['max_abs_logit_diff']:.1e} | {r['p99_abs_logit_diff']:.1e} | "
                             f"{r['changed_at_median']} / {r['changed_at_worst']} |")
        if "bookkeeping" in ev:
            b = ev["bookkeeping"]
            if b.get("status") == "ok":
                steps = ", ".join(f"{name} {sec:.2f}" for name, sec in b["step_cpu_s"].items())
                lines += ["", f"exhaustive search up to {s['max_size']}: {b['cpu_s']:.2f} CPU s, "
                          f"memory updates {b['update_cpu_s']:.2f}, bookkeeping "
                          f"{b['bookkeeping_cpu_s']:.2f} ({b['bookkeeping_share']:.1%}); "
                          f"row table steps, CPU s (prune holds drop, merge, revive): {steps}; "
                          f"logits SHA-256 {b['logits_sha256'][:8]}…"]
            else:
                lines += ["", f"exhaustive search: {b.get('status')}"]
        if "jacobian" in ev:
            j = ev["jacobian"]
            if j["rows"]:
                q = "/".join(f"{j['self'][f'p{p}']:.3f}" for p in QUANTILES)
                qo = "/".join(f"{j['other'][f'p{p}']:.3f}" for p in QUANTILES)
                lines += ["", f"memory update's Jacobian, spectral norm, p10/p50/p90/p99 over "
                          f"{j['rows']} rows of {j['batches']} batches: own memory {q} "
                          f"({j['share_self_at_least_1']:.1%} at least 1), other endpoint's {qo}"]
    return "\n".join(lines)


def run(cfg: DictConfig) -> dict[str, Any]:
    """The benchmark of ``conf/benchmark_far_back.yaml``: search, print, write JSON."""
    check_far_back_options(cfg)
    device = resolve_device(cfg.device)
    torch.set_num_threads(int(cfg.num_threads))
    stream: EventStream = instantiate(cfg.dataset)
    events = explicit_events(list(cfg.events), stream).tolist()
    model, source = resolve_model(cfg.model, stream, cfg.checkpoint, cfg.paths.checkpoint_dir,
                                  device, cfg.seed)
    print(f"model: {source}")
    res = benchmark_far_back(model, stream, events, parts=list(cfg.parts),
                             max_size=int(cfg.max_size), tolerances=far_back_tolerances(cfg),
                             n_pairs=int(cfg.n_pairs), seed=int(cfg.seed), k=cfg.k,
                             m_max=int(cfg.m_max), jacobian_rows=int(cfg.jacobian_rows),
                             memory_budget_gb=cfg.memory_budget_gb)
    res["weights"] = source
    print(format_far_back(res))
    if cfg.out:
        atomic_write(Path(cfg.out), (json.dumps(res, indent=2, default=str) + "\n").encode())
        print(f"wrote {cfg.out}")
    return res


__all__ = ["benchmark_far_back", "bookkeeping", "changed_at", "format_far_back",
           "jacobian_norms", "most_changed", "ranked_sets", "removal_effects", "replay_sets",
           "replay_options", "run", "tgn_replay", "tolerance_flips"]
