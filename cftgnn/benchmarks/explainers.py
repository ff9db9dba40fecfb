"""Factual explainers side by side (``scripts/benchmark_explainers.py``): seconds per event.

Every explainer that scores events (attention, perturb-one, PGExplainer, random;
[``FactualExplainer``][cftgnn.explain.FactualExplainer]) does two things per explained event, timed
apart here, in one process, on the same events of every pair (baselines.md's targets, 1 thread):

* **inference**: the explainer's own work,
  [``FactualExplainer.rank``][cftgnn.explain.FactualExplainer.rank]: its scores (the probe's
  features and the MLP, the probe's attention, or the single-removal exact batch of perturb-one,
  which is the explainer's own use of the oracle) and the ranking;
* **prefix**: the oracle's shortest-flipping-prefix check,
  [``FactualExplainer.flipping_prefix``][cftgnn.explain.FactualExplainer.flipping_prefix] (one
  batched exact call over the prefixes).

**setup** is building the event's oracle (candidates, base state, replay plan, original
logit), which every explainer pays alike; **event** = setup + inference + prefix, the part of
``explain.py``'s ``time_s`` these explainers spend (the confirmation that follows is a cache
hit). Each explainer gets a fresh oracle per event, so none reads another's cached logits;
one untimed oracle per event first moves the engine's cursor to the event (``explain.py``
pays that once per event), so that no explainer's setup includes it.
Events are sampled as ``explain.py`` samples them ([``plan_events``][cftgnn.runs.plan_events],
the same seed and range), explained in stream order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from hydra import compose
from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm.auto import tqdm

from cftgnn.benchmarks.options import check_explainers_options, pairs
from cftgnn.data.index import M_MAX
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.explain.base import Explainer
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.factual import FactualExplainer
from cftgnn.explain.result import ExplanationStatus
from cftgnn.files import atomic_write
from cftgnn.models.base import TemporalModel
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.fingerprint import ModelFingerprint, model_fingerprint
from cftgnn.runs.build import build_explainer
from cftgnn.runs.sampling import plan_events
from cftgnn.training.resolve import resolve_device, resolve_model


def time_event(engine: ReplayEngine, explainer: FactualExplainer, event_id: int,
               k: int | None, m_max: int) -> dict[str, Any]:
    """One explainer on one event with a fresh oracle: setup, inference and prefix seconds,
    and the answer's size (0: no prefix flips; None: the event cannot be explained)."""
    start = time.perf_counter()
    oracle = engine.oracle(int(event_id), k, m_max, "exact")
    setup = time.perf_counter() - start
    row: dict[str, Any] = {"event_id": int(event_id), "explainer": explainer.name,
                           "setup_s": setup, "removable": len(oracle.removable)}
    if Explainer.status(oracle) is not ExplanationStatus.OK:
        return row | {"inference_s": None, "prefix_s": None, "size": None}
    meter = BudgetMeter(explainer.params, oracle, exact=explainer.budget_counts_exact)
    start = time.perf_counter()
    ranking, _ = explainer.rank(oracle, meter)
    inference = time.perf_counter() - start
    start = time.perf_counter()
    size = explainer.flipping_prefix(oracle, ranking, meter)
    prefix = time.perf_counter() - start
    return row | {"inference_s": inference, "prefix_s": prefix,
                  "size": 0 if size is None else size,
                  "event_s": setup + inference + prefix}


def benchmark_explainers(model: TemporalModel, stream: EventStream, events: Sequence[int],
                         explainers: Mapping[str, FactualExplainer], *, k: int | None = None,
                         m_max: int = M_MAX, fingerprint: ModelFingerprint | None = None,
                         progress: bool = True) -> pd.DataFrame:
    """Every explainer on every event (stream order; one engine, fresh oracles).

    Args:
        model: The model (attached to ``stream`` by the engine).
        stream: The stream.
        events: Event ids.
        explainers: Name -> explainer.
        k: Hop radius (None: the model's number of layers).
        m_max: Most candidates per event.
        fingerprint: The run's model and stream (handed to every oracle, as ``explain.py``
            does; PGExplainer's ``checkpoint=auto`` needs it).
        progress: Show a progress bar.

    Returns:
        One row per (event, explainer): ``setup_s``, ``inference_s``, ``prefix_s``,
        ``event_s`` (None where the event cannot be explained), ``size``, ``removable``.
    """
    engine = ReplayEngine(model, stream)
    engine.fingerprint = fingerprint
    rows = []
    for e in tqdm(sorted(int(e) for e in events), desc=stream.name, disable=not progress):
        engine.oracle(e, k, m_max, "exact")  # the cursor moved here, for no explainer's setup
        rows += [time_event(engine, explainer, e, k, m_max)
                 for explainer in explainers.values()]
    return pd.DataFrame(rows)


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """Median seconds per event of each (pair, explainer) over its explained events."""
    ok = table.dropna(subset=["inference_s"])
    group = ok.groupby(["pair", "explainer"], sort=False)
    return pd.DataFrame({
        "events": group["event_s"].size(),
        "inference_ms": 1e3 * group["inference_s"].median(),
        "prefix_ms": 1e3 * group["prefix_s"].median(),
        "setup_ms": 1e3 * group["setup_s"].median(),
        "event_s": group["event_s"].median(),
        "found": group["size"].apply(lambda s: float((s > 0).mean())),
    }).reset_index()


def format_summary(summary: pd.DataFrame, threads: int) -> str:
    """The summary as a Markdown table (medians per event)."""
    lines = [f"Median per explained event, {threads} torch thread(s): inference = the "
             "explainer's own scoring and ranking; prefix = the oracle's shortest flipping "
             "prefix (one batched exact call); setup = building the event's oracle; event = "
             "all three.", "",
             "| pair | explainer | events | inference ms | prefix ms | setup ms | event s "
             "| flipped |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in summary.itertuples(index=False):
        lines.append(f"| {r.pair} | {r.explainer} | {r.events} | {r.inference_ms:.1f} | "
                     f"{r.prefix_ms:.1f} | {r.setup_ms:.1f} | {r.event_s:.3f} | "
                     f"{r.found:.2f} |")
    return "\n".join(lines)


def run(cfg: DictConfig) -> pd.DataFrame:
    """The benchmark of ``conf/benchmark_explainers.yaml``: every pair, every explainer, the
    same sampled events per pair; prints the medians and writes the rows (``out``)."""
    check_explainers_options(cfg)
    device = resolve_device(str(cfg.device))
    torch.set_num_threads(int(cfg.num_threads))
    tables = []
    for dataset, kind in pairs(cfg):
        base = [f"dataset={dataset}", f"model={kind}", "mode=exact"]
        explainers: dict[str, FactualExplainer] = {}
        for name in cfg.explainers:
            made = build_explainer(compose("explain", overrides=[*base, f"explainer={name}"]))
            if not isinstance(made, FactualExplainer):
                raise ConfigError(f"explainer={name} does not rank events by a score; this "
                                  "benchmark times the factual explainers (random, attention, "
                                  "perturb_one, pgexplainer, tempme)")
            explainers[str(name)] = made
        run_cfg = compose("explain", overrides=base)
        stream: EventStream = instantiate(run_cfg.dataset)
        model, weights = resolve_model(run_cfg.model, stream, "auto",
                                       run_cfg.paths.checkpoint_dir, device, int(cfg.seed),
                                       require=True)
        fingerprint = model_fingerprint(run_cfg, stream, model, weights)
        for explainer in explainers.values():
            explainer.supports(fingerprint)
        sample = cfg.sample
        plan = plan_events(model, stream, int(cfg.n_events), sample.range, sample.prediction,
                           float(sample.min_abs_logit), sample.max_abs_logit, int(cfg.seed))
        table = benchmark_explainers(model, stream, plan["event_id"].tolist(), explainers,
                                     k=cfg.k, m_max=int(cfg.m_max), fingerprint=fingerprint,
                                     progress=bool(cfg.progress))
        table.insert(0, "pair", f"{dataset} · {kind}")
        tables.append(table)
    rows = pd.concat(tables, ignore_index=True)
    print(format_summary(summarize(rows), torch.get_num_threads()))
    if cfg.out:
        records = rows.replace({np.nan: None}).to_dict(orient="records")
        atomic_write(Path(str(cfg.out)), (json.dumps(records, indent=1) + "\n").encode())
        print(f"wrote {cfg.out}")
    return rows


__all__ = ["benchmark_explainers", "format_summary", "run", "summarize", "time_event"]
