"""The rank target's cost against the logit target's, per explained event, side by side.

``python scripts/benchmark_rank.py`` explains the same sampled events twice with one
explainer: with the logit target and with the rank target (the true destination ranked among
``num_negatives`` random negatives, ``cftgnn.oracle.target``), each event's two explanations
one after the other, so that both see the same machine load. A run prints the seconds per event
(oracle setup plus search) of each, their medians and the ratio of the medians, the median of
the per-event ratios, and how often each found a counterfactual. Random negatives stand in for
TGB's where no TGB download is at hand (``cftgnn.data.negatives_io.random_negatives``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm.auto import tqdm

from cftgnn.data.negatives_io import random_negatives
from cftgnn.data.stream import EventStream
from cftgnn.explain.base import explain_event
from cftgnn.files import atomic_write
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.target import RankTargets
from cftgnn.runs.build import build_explainer
from cftgnn.training.resolve import resolve_device, resolve_model


def sample_ids(stream: EventStream, n: int, seed: int) -> list[int]:
    """``n`` seeded event ids of the last 15 % of the stream, ascending."""
    lo = int(0.85 * stream.num_events)
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(np.arange(lo, stream.num_events), size=n, replace=False).tolist())


def benchmark_rank(cfg: DictConfig, engine: ReplayEngine, ids: list[int]) -> dict[str, Any]:
    """Both targets' seconds per event on ``ids`` (see the module docstring)."""
    stream = engine.stream
    negatives = random_negatives(stream, ids, int(cfg.num_negatives), seed=int(cfg.seed))
    targets = RankTargets((negatives,), int(cfg.target_k))
    targets.check(ids)
    explainer = build_explainer(cfg)
    rows = []
    for event_id in tqdm(ids, desc="events", disable=not cfg.progress):
        row: dict[str, Any] = {"event_id": int(event_id)}
        for name, target in (("logit", None), ("rank", targets.of(event_id))):
            start = time.perf_counter()
            result = explain_event(engine, explainer, event_id, cfg.k, int(cfg.m_max),
                                   str(cfg.mode), history="event", target=target)
            row[f"{name}_s"] = time.perf_counter() - start
            row[f"{name}_found"] = bool(result.is_counterfactual)
            row[f"{name}_calls"] = int(result.oracle_calls)
        rows.append(row)
    logit = np.array([r["logit_s"] for r in rows])
    rank = np.array([r["rank_s"] for r in rows])
    return {
        "events": rows, "num_negatives": int(cfg.num_negatives), "target_k": int(cfg.target_k),
        "mode": str(cfg.mode), "num_threads": torch.get_num_threads(),
        "logit_median_s": float(np.median(logit)), "rank_median_s": float(np.median(rank)),
        "ratio_of_medians": float(np.median(rank) / np.median(logit)),
        "median_ratio": float(np.median(rank / logit)),
        # per oracle call: the searches may take other paths (a flip found ends one early)
        "per_call_ratio": float(np.median(
            (rank / [max(1, r["rank_calls"]) for r in rows])
            / (logit / [max(1, r["logit_calls"]) for r in rows]))),
        "logit_found": float(np.mean([r["logit_found"] for r in rows])),
        "rank_found": float(np.mean([r["rank_found"] for r in rows])),
    }


def format_table(res: dict[str, Any]) -> str:
    """The figures as lines of text."""
    lines = [f"{'event':>8} {'logit s':>9} {'rank s':>9} {'ratio':>7} {'calls':>11}  found "
             "(logit/rank)"]
    for r in res["events"]:
        lines.append(f"{r['event_id']:>8} {r['logit_s']:>9.3f} {r['rank_s']:>9.3f} "
                     f"{r['rank_s'] / r['logit_s']:>7.2f} {r['logit_calls']:>5}/"
                     f"{r['rank_calls']:<5}  {int(r['logit_found'])}/{int(r['rank_found'])}")
    lines.append(
        f"median s per event: logit {res['logit_median_s']:.3f}, rank {res['rank_median_s']:.3f}"
        f" ({res['num_negatives']} negatives, k={res['target_k']}, mode={res['mode']}, "
        f"{res['num_threads']} thread(s)); rank / logit: {res['ratio_of_medians']:.2f}x of "
        f"the medians, median per-event ratio {res['median_ratio']:.2f}x, per oracle call "
        f"{res['per_call_ratio']:.2f}x; counterfactuals "
        f"found: logit {res['logit_found']:.2f}, rank {res['rank_found']:.2f}")
    return "\n".join(lines)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Load data and model, benchmark both targets, print, write JSON."""
    device = resolve_device(cfg.device)
    torch.set_num_threads(int(cfg.num_threads))
    stream: EventStream = instantiate(cfg.dataset)
    model, source = resolve_model(cfg.model, stream, cfg.checkpoint, cfg.paths.checkpoint_dir,
                                  device, int(cfg.seed))
    print(f"{stream.name} ({stream.num_events:,} events) | model: {source}")
    engine = ReplayEngine(model, stream)
    ids = sample_ids(stream, int(cfg.n_events), int(cfg.seed))
    res = benchmark_rank(cfg, engine, ids)
    res["weights"] = str(source)
    print(format_table(res))
    if cfg.out:
        atomic_write(Path(cfg.out), (json.dumps(res, indent=2) + "\n").encode())
        print(f"wrote {cfg.out}")
    return res


__all__ = ["benchmark_rank", "format_table", "run", "sample_ids"]
