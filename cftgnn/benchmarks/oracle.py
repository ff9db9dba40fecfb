"""Oracle benchmark (``scripts/benchmark_oracle.py``): naive vs exact vs approximate vs batched.

All four are measured in one run on the same sampled events and removal sets, so the ratios
are side by side on one machine. Events are explained in stream order, so the per-event setup
(the unperturbed state before ``ε_min``) is amortised the way a real run amortises it.
"""

from __future__ import annotations

import itertools
import json
import math
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm.auto import tqdm

from cftgnn.benchmarks.options import check_oracle_options
from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import EventStream
from cftgnn.explain.nsga2 import NSGA2Explainer
from cftgnn.files import atomic_write
from cftgnn.models.base import TemporalModel
from cftgnn.oracle.engine import EventReplay, ReplayEngine, naive_logit
from cftgnn.oracle.oracle import Oracle, is_flip
from cftgnn.training.resolve import resolve_device, resolve_model


def _stats(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=np.float64) * 1e3
    if arr.size == 0:
        return {"median_ms": float("nan"), "mean_ms": float("nan"), "min_ms": float("nan"),
                "max_ms": float("nan"), "n": 0}
    return {
        "median_ms": float(np.median(arr)),
        "mean_ms": float(arr.mean()),
        "min_ms": float(arr.min()),
        "max_ms": float(arr.max()),
        "n": int(arr.size),
    }


def _medians(per_event: dict[str, list[float]]) -> dict[str, float]:
    """The median over events of each mode's per-event figures (NaN when there are none)."""
    return {mode: float(np.median(v)) if v else float("nan") for mode, v in per_event.items()}


def _timed(fn: Any, *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def draw_set(rng: np.random.Generator, cand: npt.NDArray[np.int64]) -> frozenset[int]:
    """A random removal set of 1 to |C|/4 candidates."""
    size = int(rng.integers(1, max(2, len(cand) // 4 + 1)))
    return frozenset(rng.choice(cand, size=size, replace=False).tolist())


#: The figures timed per call, in the order ``per_call`` lists them (``batched*``: per set of
#: a batch of P), and the per-event setup.
_TIMED = ("naive", "exact", "approximate", "batched", "batched_approximate", "span_replay",
          "setup")


def _per_mode() -> dict[str, list[float]]:
    return {"exact": [], "approximate": []}


@dataclass
class _Figures:
    """What ``benchmark_oracle`` gathers over its events, one step of an event at a time (each
    ``time_*`` method), and the result it makes of them (``results``)."""

    #: The largest |exact - naive| so far (NaN: nothing is compared).
    max_dev: float
    times: dict[str, list[float]] = field(default_factory=lambda: {n: [] for n in _TIMED})
    spans: list[int] = field(default_factory=list)  # events in [b0, i) per event
    sizes: list[int] = field(default_factory=list)  # candidates per event
    agree: int = 0
    compared: int = 0
    # cost of one batch of P in units of one single call of the same mode: of the median
    # call on the event's timed sets, and of the mean call on the batch's own P sets
    batch_units: dict[str, list[float]] = field(default_factory=_per_mode)
    same_sets: dict[str, list[float]] = field(default_factory=_per_mode)
    siblings: dict[str, list[float]] = field(default_factory=_per_mode)
    generations: dict[str, list[float]] = field(default_factory=_per_mode)
    generation_sizes: list[int] = field(default_factory=list)
    exhaustive: dict[str, list[float]] = field(
        default_factory=lambda: {"seconds": [], "sets": [], "events": []})

    def time_singles(self, replay: EventReplay,
                     sets: list[frozenset[int]]) -> dict[str, list[float]]:
        """Each set alone, exact and approximate (and whether the two agree on a flip): the
        seconds per set of each mode."""
        p_orig = float(replay.exact([frozenset()])[0])
        singles = _per_mode()
        for s in sets:
            exact, t_exact = _timed(replay.exact, [s])
            approx, t_approx = _timed(replay.approximate, [s])
            self.times["exact"].append(t_exact)
            self.times["approximate"].append(t_approx)
            singles["exact"].append(t_exact)
            singles["approximate"].append(t_approx)
            self.compared += 1
            self.agree += is_flip(p_orig, float(exact[0])) == is_flip(p_orig, float(approx[0]))
        return singles

    def time_span_replay(self, replay: EventReplay, event: int,
                         sets: list[frozenset[int]]) -> None:
        """The generic path's unit: one masked replay of [b0, i) through the state verbs."""
        self.times["span_replay"].append(_timed(replay.exact_replay, sets[:1])[1])
        self.spans.append(event - replay.start)

    def time_naive(self, model: TemporalModel, stream: EventStream, event: int,
                   replay: EventReplay, sets: list[frozenset[int]]) -> None:
        """The naive replay of each of ``sets``, and its deviation from the exact oracle."""
        for s in sets:
            ref, t_naive = _timed(naive_logit, model, stream, event, sorted(s))
            self.times["naive"].append(t_naive)
            self.max_dev = max(self.max_dev, abs(ref - float(replay.exact([s])[0])))

    def time_batches(self, replay: EventReplay, big: list[frozenset[int]],
                     singles: dict[str, list[float]], same_sets_singles: bool) -> None:
        """One batched call of the P sets ``big`` (the event's own sets first, uncached), per
        set and in single calls of each mode (``singles``: the event's sets timed alone)."""
        for mode, fn, key in (("exact", replay.exact, "batched"),
                              ("approximate", replay.approximate, "batched_approximate")):
            _, t_batch = _timed(fn, big)
            self.times[key].append(t_batch / len(big))
            self.batch_units[mode].append(t_batch / float(np.median(singles[mode])))
            if same_sets_singles:
                own = singles[mode][: len(big)] + [_timed(fn, [s])[1]
                                                   for s in big[len(singles[mode]):]]
                self.same_sets[mode].append(t_batch / float(np.mean(own)))

    def time_siblings(self, replay: EventReplay, rng: np.random.Generator,
                      cand: npt.NDArray[np.int64], batch_size: int,
                      sets_per_event: int) -> None:
        """A batch of P siblings (a random parent set plus one more candidate each), in mean
        single calls of its first ``sets_per_event`` sets."""
        parent = draw_set(rng, cand)
        rest = rng.permutation(cand[~np.isin(cand, list(parent))])
        children = [parent | {int(c)} for c in rest[:batch_size]]
        for mode, fn in (("exact", replay.exact), ("approximate", replay.approximate)):
            _, t_batch = _timed(fn, children)
            alone = [_timed(fn, [c])[1] for c in children[:sets_per_event]]
            self.siblings[mode].append(t_batch / float(np.mean(alone)))

    def time_generation(self, replay: EventReplay, cand: npt.NDArray[np.int64],
                        batch_size: int, seed: int, sets_per_event: int) -> None:
        """NSGA-II's last generation on the event, timed again as one call, in mean single
        calls of its first ``sets_per_event`` sets."""
        last = _last_generation(replay, cand, batch_size, seed)
        self.generation_sizes.append(len(last))
        for mode, fn in (("exact", replay.exact), ("approximate", replay.approximate)):
            _, t_batch = _timed(fn, last)
            alone = [_timed(fn, [c])[1] for c in last[:sets_per_event]]
            self.generations[mode].append(t_batch / float(np.mean(alone)))

    def time_exhaustive(self, replay: EventReplay, event: int, cand: npt.NDArray[np.int64],
                        max_size: int, chunk: int) -> None:
        """Every set of size ``<= max_size`` of the event's candidates, exactly."""
        seconds, count = _all_small_sets(replay, cand, max_size, chunk)
        self.exhaustive["seconds"].append(seconds)
        self.exhaustive["sets"].append(count)
        self.exhaustive["events"].append(event)

    def results(self, model: TemporalModel, stream: EventStream, engine: ReplayEngine, *,
                n_events: int, batch_size: int, m_max: int) -> dict[str, Any]:
        """``benchmark_oracle``'s result, but for ``exhaustive`` and ``speedup_vs_naive``."""
        spans, generation_sizes = self.spans, self.generation_sizes
        return {
            "dataset": stream.name,
            "model": type(model).__name__,
            "events": int(n_events),
            "torch_threads": torch.get_num_threads(),
            "device": str(model.device),
            "batch_size_P": batch_size,
            "m_max": m_max,
            "mean_candidates": float(np.mean(self.sizes)),
            "per_call": {name: _stats(v) for name, v in self.times.items() if name != "setup"},
            "setup_per_event": _stats(self.times["setup"]),
            "replay": type(engine.replay).__name__,
            "span_events": {"median": float(np.median(spans)) if spans else float("nan"),
                            "min": int(min(spans, default=0)),
                            "max": int(max(spans, default=0))},
            "approx_exact_sign_agreement": (self.agree / self.compared if self.compared
                                            else float("nan")),
            "batch_in_single_calls": _medians(self.batch_units),
            "batch_in_single_calls_per_event": self.batch_units,
            "batch_in_same_set_calls": _medians(self.same_sets),
            "batch_in_same_set_calls_per_event": self.same_sets,
            "sibling_batch_in_same_set_calls": _medians(self.siblings),
            "sibling_batch_in_same_set_calls_per_event": self.siblings,
            "generation_batch_in_same_set_calls": _medians(self.generations),
            "generation_batch_in_same_set_calls_per_event": self.generations,
            "generation_sets": {"median": float(np.median(generation_sizes))
                                if generation_sizes else float("nan")},
            "max_abs_exact_vs_naive": self.max_dev,
        }

    def exhaustive_results(self, max_size: int, chunk: int,
                           max_span: int | None) -> dict[str, Any]:
        """``benchmark_oracle``'s ``exhaustive``: seconds and sets per event, their rate, and
        the process's peak resident memory."""
        exhaustive = self.exhaustive
        secs = np.asarray(exhaustive["seconds"], dtype=np.float64)
        return {
            "max_size": max_size,
            "chunk": chunk,
            "max_span": max_span,
            "events": exhaustive["events"],
            "seconds_per_event": exhaustive["seconds"],
            "sets_per_event": exhaustive["sets"],
            "median_s": float(np.median(secs)) if secs.size else float("nan"),
            "min_s": float(secs.min()) if secs.size else float("nan"),
            "max_s": float(secs.max()) if secs.size else float("nan"),
            "sets_per_s": (float(np.sum(exhaustive["sets"]) / secs.sum())
                           if secs.size and secs.sum() > 0 else float("nan")),
            "peak_rss_mib": _peak_rss_mib(),
        }


def _sample_events(rng: np.random.Generator, stream: EventStream, n_events: int,
                   min_event: int) -> npt.NDArray[np.int64]:
    """``n_events`` distinct events from ``min_event`` on (the last one at the latest), in
    stream order."""
    return np.sort(
        rng.choice(
            np.arange(min(min_event, stream.num_events - 1), stream.num_events),
            size=n_events,
            replace=False,
        )
    )


def benchmark_oracle(
    model: TemporalModel,
    stream: EventStream,
    *,
    n_events: int,
    sets_per_event: int,
    naive_per_event: int,
    batch_size: int,
    m_max: int,
    k: int | None,
    min_event: int,
    seed: int,
    progress: bool = True,
    same_sets_singles: bool = True,
    sibling_batches: bool = True,
    exhaustive_max_size: int = 0,
    exhaustive_chunk: int = 4096,
    exhaustive_max_span: int | None = None,
    population_batches: bool = True,
) -> dict[str, Any]:
    """Time the four ways of computing ``f(G(t_i) \\ s, ε_i)`` on the same inputs.

    The cost of one batch of P sets is given in two units, per event and as the median over
    events: ``batch_in_single_calls`` divides it by the median single call on the event's
    ``sets_per_event`` timed sets; ``batch_in_same_set_calls`` (with ``same_sets_singles``)
    by the mean single call on the batch's own P sets, each timed alone, which is what the
    batch replaces. The two differ when the cost of a set is heavy-tailed (an exact set with
    an old removal reaches a large causal cone).

    With ``sibling_batches``, each event also gets a batch of the kind the explainers send: P
    *siblings*, a random parent set plus one more candidate each (the children of an MCTS
    node, greedy's ``X ∪ {ε}``), whose cost ``sibling_batch_in_same_set_calls`` is given in
    mean single calls of its own sets (the first ``sets_per_event`` of them timed alone). Its
    sets are drawn from a generator of their own, so the other figures do not change.

    With ``population_batches``, each event also gets an NSGA-II generation: the explainer
    (``pop_size = P``, three generations, exact oracle) runs on the event, and its last
    generation's offspring (the batch a population search sends) is timed again, uncached, as
    one call, and in mean single calls of its own sets
    (``generation_batch_in_same_set_calls``).

    With ``exhaustive_max_size = K > 0``, each event also evaluates **every** removal set of
    size ``≤ K`` of its candidates with the batched exact backend, in chunks of
    ``exhaustive_chunk`` sets (what the exhaustive explainer does when nothing smaller flips,
    and what ``certify=K`` costs at most): seconds per event, sets per second, and the
    process's peak resident memory afterwards. ``exhaustive_max_span`` limits that to events
    whose oldest candidate is at most that many events back (their cones are small).

    Returns:
        A dict with per-call statistics (seconds converted to ms) for ``naive``, ``exact``,
        ``approximate`` and ``batched`` (per perturbation), their median ratios to naive, the
        per-event setup cost, the batch costs above, the approximate/exact sign agreement and
        the largest deviation between the exact oracle and the naive replay.
    """
    rng = np.random.default_rng(seed)
    index = TemporalIndex(stream)
    events = _sample_events(rng, stream, n_events, min_event)
    engine = ReplayEngine(model, stream, index)
    figures = _Figures(max_dev=float("nan") if naive_per_event <= 0 else 0.0)
    sibling_rng = np.random.default_rng([seed, 1])
    for i in tqdm(events.tolist(), desc="benchmark events", disable=not progress):
        replay, t_setup = _timed(EventReplay, engine, i, k, m_max)
        figures.times["setup"].append(t_setup)
        cand = replay.candidates.ids
        figures.sizes.append(len(cand))
        if len(cand) == 0:
            continue
        sets = [draw_set(rng, cand) for _ in range(sets_per_event)]
        singles = figures.time_singles(replay, sets)
        figures.time_span_replay(replay, i, sets)
        figures.time_naive(model, stream, i, replay, sets[:naive_per_event])
        # the event's own sets plus more drawn alike, uncached: P sets in one batched call
        big = sets + [draw_set(rng, cand) for _ in range(max(0, batch_size - len(sets)))]
        figures.time_batches(replay, big[:batch_size], singles, same_sets_singles)
        if sibling_batches and len(cand) > 1:
            figures.time_siblings(replay, sibling_rng, cand, batch_size, sets_per_event)
        if population_batches and len(cand) > 6:  # smaller: NSGA-II enumerates every subset
            figures.time_generation(replay, cand, batch_size, seed, sets_per_event)
        span = i - int(cand[0])
        if exhaustive_max_size > 0 and (exhaustive_max_span is None
                                        or span <= exhaustive_max_span):
            figures.time_exhaustive(replay, i, cand, exhaustive_max_size, exhaustive_chunk)
    res = figures.results(model, stream, engine, n_events=n_events, batch_size=batch_size,
                          m_max=m_max)
    if exhaustive_max_size > 0:
        res["exhaustive"] = figures.exhaustive_results(exhaustive_max_size, exhaustive_chunk,
                                                      exhaustive_max_span)
    naive = res["per_call"]["naive"]["median_ms"]
    res["speedup_vs_naive"] = {
        name: naive / res["per_call"][name]["median_ms"]
        for name in ("exact", "approximate", "batched", "batched_approximate")
    }
    return res


def _last_generation(replay: EventReplay, cand: npt.NDArray[np.int64], pop_size: int,
                     seed: int) -> list[frozenset[int]]:
    """The sets of the last batch NSGA-II sends (three generations, exact oracle) on this
    event: the offspring of a generation, as the explainer evaluates them."""
    batches: list[list[frozenset[int]]] = []

    def recording(sets: Any) -> Any:
        batches.append([frozenset(x) for x in sets])
        return replay.exact(sets)

    p0 = float(replay.exact([frozenset()])[0])
    oracle = Oracle(replay.candidates, p0, exact=recording)
    NSGA2Explainer(pop_size=pop_size, max_iterations=3, seed=seed).explain(oracle)
    return max(batches[1:] or batches, key=len) if batches else []


def _all_small_sets(replay: EventReplay, cand: npt.NDArray[np.int64], max_size: int,
                    chunk: int) -> tuple[float, int]:
    """Seconds to evaluate every set of size ``≤ max_size`` of ``cand`` exactly, and their
    number (chunks of ``chunk`` sets, no cache: each set once)."""
    ids = [int(e) for e in cand]
    sets = (frozenset(c) for size in range(1, max_size + 1)
            for c in itertools.combinations(ids, size))
    count = 0
    start = time.perf_counter()
    while True:
        batch = list(itertools.islice(sets, chunk))
        if not batch:
            break
        replay.exact(batch)
        count += len(batch)
    return time.perf_counter() - start, count


def _peak_rss_mib() -> float:
    """Peak resident memory of this process so far, MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def format_table(res: dict[str, Any]) -> str:
    """The benchmark figures as a text table."""
    lines = [
        f"{res['model']} on {res['dataset']}: {res['events']} events, mean |C| = "
        f"{res['mean_candidates']:.1f}, P = {res['batch_size_P']}, device = "
        f"{res['device']}, torch threads = {res['torch_threads']}",
        f"{'per call':<27}{'median ms':>11}{'min ms':>10}{'max ms':>10}{'n':>6}{'× naive':>10}",
    ]
    labels = {"batched": "batched exact (per set)",
              "batched_approximate": "batched approx. (per set)"}
    for name in ("naive", "exact", "approximate", "batched", "batched_approximate"):
        s = res["per_call"][name]
        ratio = 1.0 if name == "naive" else res["speedup_vs_naive"][name]
        label = labels.get(name, name)
        lines.append(
            f"{label:<27}{s['median_ms']:>11.2f}{s['min_ms']:>10.2f}"
            f"{s['max_ms']:>10.2f}{s['n']:>6}{ratio:>10.1f}"
        )
    s, span = res["per_call"]["span_replay"], res["span_events"]
    lines.append(
        f"model replay {res['replay']}; one replay of [b0, i) through the state verbs "
        f"(the generic path's cost per set): median {s['median_ms']:.2f} ms (min "
        f"{s['min_ms']:.2f}, max {s['max_ms']:.2f}) over median {span['median']:.0f} events "
        f"(min {span['min']}, max {span['max']}); an exact call costs "
        f"{res['per_call']['exact']['median_ms'] / s['median_ms']:.2f} of it")
    s = res["setup_per_event"]
    lines.append(
        f"{'setup per event':<27}{s['median_ms']:>11.2f}{s['min_ms']:>10.2f}"
        f"{s['max_ms']:>10.2f}{s['n']:>6}   mean {s['mean_ms']:.2f} ms"
    )
    for mode in ("exact", "approximate"):
        per_event = np.asarray(res["batch_in_single_calls_per_event"][mode], dtype=float)
        if per_event.size == 0:
            continue
        line = (f"one {mode} batch of P = {np.median(per_event):.1f} median single {mode} "
                f"calls (median over events; <= 8 on {(per_event <= 8).sum()}/"
                f"{per_event.size} events, max {per_event.max():.1f})")
        same = np.asarray(res["batch_in_same_set_calls_per_event"][mode], dtype=float)
        if same.size:
            line += (f"; = {np.median(same):.1f} mean single calls on its own P sets "
                     f"(max {same.max():.1f})")
        lines.append(line)
    for mode in ("exact", "approximate"):
        sib = np.asarray(res["sibling_batch_in_same_set_calls_per_event"][mode], dtype=float)
        if sib.size:
            lines.append(f"one {mode} batch of P siblings (a parent set plus one more candidate "
                         f"each) = {np.median(sib):.1f} mean single calls on its own sets "
                         f"(median over events; max {sib.max():.1f})")
    for mode in ("exact", "approximate"):
        gen = np.asarray(res.get("generation_batch_in_same_set_calls_per_event", {})
                         .get(mode, []), dtype=float)
        if gen.size:
            lines.append(f"one {mode} NSGA-II generation (median "
                         f"{res['generation_sets']['median']:.0f} sets) = {np.median(gen):.1f} "
                         f"mean single calls on its own sets (median over events; <= 8 on "
                         f"{(gen <= 8).sum()}/{gen.size} events, max {gen.max():.1f})")
    ex = res.get("exhaustive")
    if ex and ex["seconds_per_event"]:
        single = res["per_call"]["exact"]["median_ms"]
        lines.append(
            f"every set of size <= {ex['max_size']} on {len(ex['seconds_per_event'])} events"
            + ("" if ex.get("max_span") is None else
               f" whose oldest candidate is <= {ex['max_span']} events back")
            + f" (median {np.median(ex['sets_per_event']):.0f} sets, chunks of {ex['chunk']}): "
            f"median {ex['median_s']:.2f} s per event (min "
            f"{ex['min_s']:.2f}, max {ex['max_s']:.2f}), {ex['sets_per_s']:.0f} sets/s against "
            f"{1e3 / single:.0f} sets/s in single exact calls; peak RSS "
            f"{ex['peak_rss_mib']:.0f} MiB")
    lines.append(
        f"approximate/exact sign agreement: {res['approx_exact_sign_agreement']:.3f}; "
        + (f"max |exact - naive| = {res['max_abs_exact_vs_naive']:.2e}"
           if not math.isnan(res["max_abs_exact_vs_naive"])
           else "exact vs naive not compared (naive_per_event=0)")
    )
    return "\n".join(lines)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Load data and model (checkpoint when available), benchmark, print, write JSON."""
    check_oracle_options(cfg)
    device = resolve_device(cfg.device)  # before loading anything
    torch.set_num_threads(int(cfg.num_threads))
    stream: EventStream = instantiate(cfg.dataset)
    model, source = resolve_model(
        cfg.model, stream, cfg.checkpoint, cfg.paths.checkpoint_dir, device, cfg.seed
    )
    print(f"model: {source}")
    res = benchmark_oracle(
        model,
        stream,
        n_events=cfg.n_events,
        sets_per_event=cfg.sets_per_event,
        naive_per_event=cfg.naive_per_event,
        batch_size=cfg.batch_size,
        m_max=cfg.m_max,
        k=cfg.k,
        min_event=cfg.min_event,
        seed=cfg.seed,
        progress=bool(cfg.progress),
        same_sets_singles=bool(cfg.same_sets_singles),
        sibling_batches=bool(cfg.sibling_batches),
        population_batches=bool(cfg.get("population_batches", True)),
        exhaustive_max_size=int(cfg.get("exhaustive_max_size", 0)),
        exhaustive_chunk=int(cfg.get("exhaustive_chunk", 4096)),
        exhaustive_max_span=cfg.get("exhaustive_max_span"),
    )
    res["weights"] = source
    print(format_table(res))
    if cfg.out:
        atomic_write(Path(cfg.out), (json.dumps(res, indent=2) + "\n").encode())
        print(f"wrote {cfg.out}")
    return res
