"""Candidate-set query benchmark (``scripts/benchmark_index.py``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig

from cftgnn.benchmarks.options import check_index_options
from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import EventStream


def benchmark_candidates(
    stream: EventStream, n_events: int, ks: list[int], m_max: int, seed: int = 0, repeats: int = 3
) -> dict[str, Any]:
    """Time ``TemporalIndex.candidates`` on ``n_events`` events sampled uniformly (seeded).

    Each query is repeated ``repeats`` times and its fastest run kept (removes scheduler
    noise); the figures are the median, min and max over events, in milliseconds.
    """
    t0 = time.perf_counter()
    index = TemporalIndex(stream)
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    events = rng.choice(np.arange(1, stream.num_events), size=n_events, replace=False)
    out: dict[str, Any] = {
        "dataset": stream.name,
        "events": stream.num_events,
        "n_queries": n_events,
        "m_max": m_max,
        "build_s": build_s,
        "queries": {},
    }
    for k in ks:
        times, sizes = [], []
        for i in events:
            best = float("inf")
            for _ in range(repeats):
                t1 = time.perf_counter()
                c = index.candidates(int(i), k, m_max)
                best = min(best, time.perf_counter() - t1)
            times.append(best * 1e3)
            sizes.append(len(c))
        arr = np.array(times)
        out["queries"][k] = {
            "median_ms": float(np.median(arr)),
            "min_ms": float(arr.min()),
            "max_ms": float(arr.max()),
            "p90_ms": float(np.percentile(arr, 90)),
            "mean_candidates": float(np.mean(sizes)),
        }
    return out


def run(cfg: DictConfig) -> dict[str, Any]:
    """Load the dataset, run the benchmark and print a table."""
    check_index_options(cfg)
    stream: EventStream = instantiate(cfg.dataset)
    res = benchmark_candidates(stream, cfg.n_events, list(cfg.ks), cfg.m_max, cfg.seed, cfg.repeats)
    print(
        f"dataset={res['dataset']} events={res['events']:,} index build "
        f"{res['build_s']:.2f} s; {res['n_queries']} candidate queries, m_max={res['m_max']}"
    )
    print(f"{'k':>2} {'median ms':>10} {'min ms':>8} {'p90 ms':>8} {'max ms':>8} {'|C| mean':>9}")
    for k, q in res["queries"].items():
        print(
            f"{k:>2} {q['median_ms']:>10.3f} {q['min_ms']:>8.3f} {q['p90_ms']:>8.3f} "
            f"{q['max_ms']:>8.3f} {q['mean_candidates']:>9.1f}"
        )
    return res
