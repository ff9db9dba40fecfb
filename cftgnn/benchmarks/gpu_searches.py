"""The CPU-vs-GPU benchmark's exhaustive searches (``cftgnn.benchmarks.gpu``): the tail event
and the ``searches`` list, each event's exhaustive search on both sides or on the right
(the GPU) alone, with its targets; and each side's engine, its TGN replay in the side's
form (``right_cone``).

A search of ``max_size`` 4 on an event without a counterfactual of at most three evaluates
what ``certify=4`` does there (every set of at most four, ``search_by_size``), so the
``certify=4`` figures of the device call are searches of this list.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from cftgnn.benchmarks.options import pair_of
from cftgnn.benchmarks.tail import search_event
from cftgnn.data.stream import EventStream
from cftgnn.models.base import TemporalModel
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.replay.tgn import Cone, TGNReplay

#: Loads a pair's stream and its two sides' models: ``load(dataset, kind)``.
Loader = Callable[[str, str], tuple[EventStream, dict[str, TemporalModel]]]


def sync_device(device: torch.device) -> None:
    """Wait for ``device``'s queued kernels (a GPU's; nothing elsewhere)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def side_engine(model: TemporalModel, stream: EventStream, memory_budget_gb: float | None,
                cone: str | None = None) -> ReplayEngine:
    """A side's replay engine, its TGN replay's form ``cone`` (``replay.cone``; None: the
    default, ``auto``)."""
    engine = ReplayEngine(model, stream, memory_budget_gb=memory_budget_gb)
    if cone is not None and isinstance(engine.replay, TGNReplay):
        engine.replay.options.cone = Cone(cone)
    return engine


def tail_search(models: Mapping[str, TemporalModel], stream: EventStream, event_id: int, *,
                max_size: int, k: int | None, m_max: int,
                memory_budget_gb: float | None = 0.5,
                cones: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """One event's exhaustive search up to ``max_size`` on each side of ``models`` (a fresh
    engine each, as the tail benchmark runs it, with the side's ``cones``): the tail
    benchmark's row per side and whether the answers agree."""
    out: dict[str, Any] = {"event_id": int(event_id), "max_size": max_size, "sides": {}}
    for side, model in models.items():
        engine = side_engine(model, stream, memory_budget_gb, (cones or {}).get(side))
        sync_device(model.device)
        row = search_event(engine, event_id, max_size, k, m_max)
        sync_device(model.device)
        out["sides"][side] = {key: row.get(key) for key in (
            "status", "candidates", "span", "setup_s", "search_s", "seconds", "found",
            "explanation", "final_logit", "certified_minimal", "min_size_lower_bound")}
    rows = list(out["sides"].values())
    out["same_answer"] = all(r.get("explanation") == rows[0].get("explanation")
                             and r.get("found") == rows[0].get("found") for r in rows)
    logits = [r["final_logit"] for r in rows if r.get("final_logit") is not None]
    out["max_abs_final_logit_diff"] = float(max(logits) - min(logits)) if logits else 0.0
    return out


def batch_size_of(cfg: Any, pair: str) -> int:
    """The pair's batch of exact sets per event: its entry's ``size`` in ``batch_sizes``
    (a list of ``{pair, size}``), else ``batch_size``."""
    sizes = {str(e["pair"]): int(e["size"]) for e in cfg.get("batch_sizes") or []}
    return sizes.get(pair, int(cfg.batch_size))


def search_name(search: Any) -> str:
    """``<pair> <event> K = <max_size>`` of a ``searches`` entry."""
    return f"{search.get('pair')} {search.get('event')} K = {search.get('max_size')}"


def run_search(cfg: Any, search: Any, load: Loader,
               cones: Mapping[str, str | None]) -> dict[str, Any]:
    """One entry of ``searches``: ``tail_search`` on both sides (``sides: both``) or on the
    right one alone (``sides: right``), with the entry's targets; an error is recorded in
    the result, not raised."""
    name = search_name(search)
    base = {"name": name, "pair": str(search.pair), "sides_run": str(search.get("sides",
                                                                                "both")),
            "max_s": search.get("max_s"), "min_speedup": search.get("min_speedup")}
    try:
        dataset, kind = pair_of(cfg, search.pair, "searches[].pair")
        stream, models = load(dataset, kind)
        right = list(models)[-1]
        run = models if base["sides_run"] == "both" else {right: models[right]}
        out = tail_search(run, stream, int(search.event), max_size=int(search.max_size),
                          k=cfg.k, m_max=int(cfg.m_max),
                          memory_budget_gb=cfg.memory_budget_gb, cones=cones)
    except Exception as exc:  # recorded; the next search still runs
        return {**base, "event_id": search.get("event"), "error": f"{type(exc).__name__}: "
                f"{exc}"}
    print(f"search {name}: done", flush=True)
    return {**base, **out}


def _fmt(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:.2f}"


def _search_verdict(search: Mapping[str, Any], right_s: float | None, ratio: float,
                    on_gpu: bool) -> str:
    wants = []
    if search.get("max_s") is not None:
        wants.append(("seconds", float(search["max_s"])))
    if search.get("min_speedup") is not None:
        wants.append(("speedup", float(search["min_speedup"])))
    cells = []
    for kind, value in wants:
        want = f"≥ {value:g}× faster" if kind == "speedup" else f"≤ {value:g} s"
        got = ratio if kind == "speedup" else (math.nan if right_s is None else right_s)
        if not on_gpu:
            cells.append(f"{want} (not on a GPU: no verdict)")
        elif math.isnan(got):
            cells.append(f"{want}: no figure")
        else:
            ok = got >= value if kind == "speedup" else got <= value
            cells.append(f"{want}: {'met' if ok else 'MISSED'}")
    return "; ".join(cells)


def search_lines(searches: Sequence[Mapping[str, Any]], left: str, right: str,
                 on_gpu: bool) -> list[str]:
    """The GPU table's rows of the ``searches`` results."""
    lines = []
    for search in searches:
        pair = search["pair"]
        if "error" in search:
            lines.append(f"| {pair} | search {search['name']}: FAILED: "
                         f"{' '.join(str(search['error']).split())} | | | | |")
            continue
        a, b = search["sides"].get(left, {}), search["sides"].get(right, {})
        sa, sb = a.get("search_s"), b.get("search_s")
        ratio = sa / sb if sa is not None and sb else math.nan
        alone = "" if search["sides_run"] == "both" else f", {right} side only"
        lines.append(f"| {pair} | event {search['event_id']} ({b.get('span')} events back), "
                     f"exhaustive K = {search['max_size']}{alone}, search s; L = "
                     f"{b.get('min_size_lower_bound')} | {_fmt(sa)} | {_fmt(sb)} | "
                     f"{ratio:.2f} | {_search_verdict(search, sb, ratio, on_gpu)} |")
        if search["sides_run"] == "both":
            lines.append(f"| {pair} | event {search['event_id']} K = {search['max_size']}: "
                         f"same answer; final logit difference | | | "
                         f"{search['same_answer']}; "
                         f"{search['max_abs_final_logit_diff']:.1e} | |")
    return lines


__all__ = ["Loader", "batch_size_of", "run_search", "search_lines", "search_name",
           "side_engine", "sync_device", "tail_search"]
