"""Explanation quality against the true minimum: ``python scripts/benchmark_quality.py``.

For each sampled event (docs/design.md §7, "Quality benchmark"):

1. the **exhaustive minimum** up to ``K`` (every removable set of size ``≤ K`` through the
   batched exact oracle; certified), or "none of size ``≤ K``";
2. the **ceiling**: the exact logit with every removable candidate removed, and whether it
   flips (neither necessary nor sufficient for a smaller counterfactual: the oracle is not
   monotone);
3. every explainer configuration given, each on a fresh oracle (no shared cache): found or
   not, size, certificate, time (oracle setup + search), oracle calls.

One row per event × configuration goes to ``quality.parquet``; ``quality_table`` turns
them into the table of ``quality.md``. Each event's rows are written as soon as it is done
(``records/<event>.parquet``, atomically), so an interrupted run resumes where it stopped
when rerun with the same options. Configurations name files of ``conf/explainer`` and
``conf/strategy`` (so ``_target_`` picks the classes) plus ``prune``, ``certify``, ``mode``
and explainer parameters.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from cftgnn.benchmarks.options import check_quality_options
from cftgnn.errors import ConfigError
from cftgnn.explain.base import Explainer
from cftgnn.explain.exhaustive import ExhaustiveExplainer
from cftgnn.explain.post import PostProcessing
from cftgnn.explain.result import ExplanationResult, ExplanationStatus, explained
from cftgnn.explain.strategies import RecentStrategy
from cftgnn.files import atomic_output, atomic_write, check_writable_dir
from cftgnn.oracle.constraints import Constraints
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.oracle import OracleMode, is_flip
from cftgnn.runs.build import make_explainer
from cftgnn.runs.pipeline import choose_auto_mode
from cftgnn.runs.records import RecordStore
from cftgnn.runs.sampling import plan_events
from cftgnn.training.resolve import model_name, resolve_device, resolve_model

CONF = Path(__file__).resolve().parents[2] / "conf"


@dataclass(frozen=True)
class Configuration:
    """One explainer configuration of the benchmark.

    Attributes:
        name: Row label.
        explainer: File name in ``conf/explainer``.
        strategy: File name in ``conf/strategy``.
        ceiling: ``ceiling`` option (post-processing, as in ``conf/explain.yaml``).
        prune: ``prune`` option.
        certify: ``certify`` option.
        certify_max_time_s: Cap on ``certify``'s seconds per event.
        mode: Search mode of the oracle (``exact`` / ``approximate``).
        params: Overrides of the explainer's own options.
        nodes: The explainer and strategy config nodes, read once (so a long run is not
            affected by later edits of the files).
    """

    name: str
    explainer: str
    strategy: str
    ceiling: bool = False
    prune: bool = False
    certify: int = 0
    certify_max_time_s: float | None = None
    mode: str = "approximate"
    params: Mapping[str, Any] = field(default_factory=dict)
    nodes: tuple[Any, Any] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_config(cls, name: str, cfg: Mapping[str, Any], mode: str,
                    certify_max_time_s: float | None = None) -> Configuration:
        """From one entry of ``explainers`` in ``conf/benchmark_quality.yaml``.

        Raises:
            ConfigError: On an unknown key, explainer or strategy.
        """
        known = {"explainer", "strategy", "ceiling", "prune", "certify", "mode", "params"}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ConfigError(f"explainers.{name}: unknown key {unknown[0]!r} (known: "
                              f"{', '.join(sorted(known))})")
        conf = cls(name=name, explainer=str(cfg.get("explainer", "")),
                   strategy=str(cfg.get("strategy", "closest")),
                   ceiling=cfg.get("ceiling", False), prune=cfg.get("prune", False),
                   certify=cfg.get("certify", 0),
                   certify_max_time_s=certify_max_time_s,
                   mode=str(cfg.get("mode", mode)), params=dict(cfg.get("params") or {}))
        for group, option in (("explainer", conf.explainer), ("strategy", conf.strategy)):
            if not (CONF / group / f"{option}.yaml").is_file():
                options = sorted(p.stem for p in (CONF / group).glob("*.yaml"))
                raise ConfigError(f"explainers.{name}: unknown {group} {option!r} (choose "
                                  f"from: {', '.join(options)})")
        if conf.mode != "auto":  # auto: resolved from auto_ratios once the pair is known
            try:
                OracleMode(conf.mode)
            except ValueError as err:
                raise ConfigError(f"explainers.{name}: unknown mode {conf.mode!r}") from err
        explainer = OmegaConf.merge(
            OmegaConf.load(CONF / "explainer" / f"{conf.explainer}.yaml"), conf.params)
        strategy = OmegaConf.load(CONF / "strategy" / f"{conf.strategy}.yaml")
        conf = replace(conf, nodes=(explainer, strategy))
        conf.build()  # bad parameters fail here, before any data is loaded
        return conf

    def build(self) -> Explainer:
        """A fresh explainer (with a fresh strategy).

        Raises:
            CftgnnError: For a bad option (unwrapped from ``instantiate``).
        """
        if self.nodes is None:
            raise ConfigError(f"configuration {self.name!r} was not read from a config "
                              "(use Configuration.from_config)")
        explainer, strategy = self.nodes
        return make_explainer(explainer, strategy, PostProcessing(
            ceiling=self.ceiling, prune=self.prune, certify=self.certify,
            certify_max_time_s=self.certify_max_time_s))


def _row(result: ExplanationResult, setup: float) -> dict[str, Any]:
    return {
        "status": result.status.value,
        "found": bool(result.is_counterfactual),
        "size": result.size if result.is_counterfactual else np.nan,
        "size_before_prune": result.size_before_prune,
        "prune": result.prune,
        "certified_minimal": result.certified_minimal,
        "min_size_lower_bound": result.min_size_lower_bound,
        "certify_replaced": result.certify_replaced,
        "cut_short": result.cut_short,
        "final_logit": result.final_logit,
        "oracle_calls": result.oracle_calls,
        "n_counterfactuals": result.n_counterfactuals,
        "time_s": setup + result.wall_time_s,
    }


def evaluate_event(engine: ReplayEngine, event_id: int, configs: list[Configuration], k: int |
                   None, m_max: int, max_size: int, constraints: Constraints,
                   exhaustive_max_time_s: float | None = None) -> list[dict[str, Any]]:
    """The minimum, the ceiling and every configuration on one event (rows of the table)."""
    start = time.perf_counter()
    oracle = engine.oracle(event_id, k, m_max, OracleMode.EXACT, constraints)
    setup = time.perf_counter() - start
    exhaustive = ExhaustiveExplainer(RecentStrategy(), max_size=max_size,
                                     max_time_s=exhaustive_max_time_s).explain(oracle)
    ceiling = (oracle.exact(oracle.removable) if exhaustive.status is ExplanationStatus.OK
               else oracle.original_logit)
    base = {
        "event_id": int(event_id),
        "original_logit": oracle.original_logit,
        "num_candidates": len(oracle.candidates),
        "num_removable": len(oracle.removable),
        "min_size": exhaustive.size if exhaustive.is_counterfactual else np.nan,
        "min_certified": (exhaustive.certified_minimal
                          or (not exhaustive.is_counterfactual and not exhaustive.cut_short)),
        "min_lower_bound": exhaustive.min_size_lower_bound,
        "ceiling_logit": ceiling,
        "ceiling_flips": is_flip(oracle.original_logit, ceiling),
        "K": max_size,
    }
    rows = [{**base, "config": f"exhaustive K={max_size}", **_row(exhaustive, setup)}]
    for conf in configs:
        start = time.perf_counter()
        oracle = engine.oracle(event_id, k, m_max, conf.mode, constraints)
        setup = time.perf_counter() - start
        rows.append({**base, "config": conf.name, **_row(conf.build().explain(oracle), setup)})
    return rows


def quality_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: how its answers compare with the true minimum.

    Over the events whose search ran (status ``ok``), with ``m`` the exhaustive minimum (NaN
    when none of size ``≤ K`` exists or the exhaustive search was cut short before finding
    one):

    * ``found`` — share of events with a counterfactual;
    * ``found_min_le_K`` — the same among events with ``m ≤ K``;
    * ``true_min`` — share of events with ``m ≤ K`` answered with a counterfactual of size
      ``m``;
    * ``excess`` — mean ``size − m`` over events with ``m ≤ K`` that it found;
    * ``found_rest`` / ``size_rest`` — share found and mean size among events with no
      counterfactual of size ``≤ K``;
    * ``certified`` — share of events whose answer is certified minimal;
    * ``pruned_ge5`` — mean share of events that pruning dropped from the search's answers of
      size ``≥ 5`` (NaN when there are none, or for configurations without pruning);
    * ``time_p50`` (seconds per event, setup + search) and ``oracle_calls`` (mean);
    * ``cf_ge3`` — share of events answered with at least 3 distinct counterfactuals among
      the events where a counterfactual is known to exist (the exhaustive minimum, the
      ceiling, or any configuration found one), and ``n_cf``, the mean number handed back
      there (NaN for rows without ``n_counterfactuals``).

    Args:
        rows: The rows of ``evaluate_event`` (``quality.parquet``).

    Returns:
        One row per configuration, in order of first appearance.
    """
    out = []
    ok = rows[explained(rows["status"])]
    known = (ok["min_size"].notna() | ok["ceiling_flips"].astype(bool)
             | ok["found"].astype(bool)).groupby(ok["event_id"]).transform("any")
    for name, g in ok.groupby("config", sort=False):
        exists = known[g.index]
        n_cf = (g["n_counterfactuals"].astype(float) if "n_counterfactuals" in g.columns
                else pd.Series(math.nan, index=g.index))
        has = g["min_size"].notna()
        rest = ~has & g["min_certified"].astype(bool)
        found = g["found"].astype(bool)
        hit = has & found & (g["size"] == g["min_size"])
        excess = (g["size"] - g["min_size"])[has & found]
        out.append({
            "config": name,
            "events": len(g),
            "found": found.mean(),
            "found_min_le_K": found[has].mean() if has.any() else math.nan,
            "true_min": hit[has].mean() if has.any() else math.nan,
            "excess": excess.mean() if len(excess) else math.nan,
            "found_rest": found[rest].mean() if rest.any() else math.nan,
            "size_rest": g["size"][rest & found].mean() if (rest & found).any() else math.nan,
            "certified": g["certified_minimal"].astype(bool).mean(),
            "pruned_ge5": _pruned_share(g, found),
            "time_p50": float(np.median(g["time_s"])),
            "oracle_calls": g["oracle_calls"].mean(),
            "cf_ge3": (n_cf[exists] >= 3).mean() if exists.any() and n_cf.notna().all()
            else math.nan,
            "n_cf": n_cf[exists].mean() if exists.any() else math.nan,
        })
    return pd.DataFrame(out)


def _pruned_share(g: pd.DataFrame, found: pd.Series) -> float:
    """Mean ``1 − size / size_before_prune`` over pruned answers of at least 5 events."""
    if "prune" not in g.columns or not g["prune"].astype(bool).any():
        return math.nan
    big = found & (g["size_before_prune"] >= 5) & g["prune"].astype(bool)
    if not big.any():
        return math.nan
    return float((1.0 - g["size"][big] / g["size_before_prune"][big]).mean())


def event_summary(rows: pd.DataFrame) -> dict[str, Any]:
    """What the events are like: minimum sizes, the ceiling, statuses."""
    first = rows.drop_duplicates("event_id")
    ok = first[explained(first["status"])]
    sizes = ok["min_size"].dropna().astype(int).value_counts().sort_index()
    counts = {int(str(s)): int(n) for s, n in sizes.items()}
    return {
        "events": len(first),
        "explained": len(ok),
        "skipped": len(first) - len(ok),
        "min_le_K": int(ok["min_size"].notna().sum()),
        "none_le_K": int((ok["min_size"].isna() & ok["min_certified"].astype(bool)).sum()),
        "min_sizes": counts,
        "ceiling_flips": int(ok["ceiling_flips"].astype(bool).sum()),
    }


def to_markdown(table: pd.DataFrame, summary: Mapping[str, Any], title: str) -> str:
    """``quality.md``: the event summary and the table."""
    def cell(v: Any) -> str:
        if isinstance(v, float | np.floating):
            x = float(v)
            return "–" if math.isnan(x) else f"{x:.3f}" if abs(x) < 10 else f"{x:.0f}"
        return str(v)

    lines = [f"# {title}", "",
             f"Events: {summary['events']} ({summary['explained']} explained, "
             f"{summary['skipped']} without candidates). Minimum of size ≤ K: "
             f"{summary['min_le_K']} (sizes {summary['min_sizes']}); none of size ≤ K "
             f"(certified): {summary['none_le_K']}; the ceiling (all removable candidates "
             f"removed) flips on {summary['ceiling_flips']}.", ""]
    cols = list(table.columns)
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))
    for row in table.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _fingerprint(cfg: DictConfig, weights: str, configs: list[Configuration]) -> dict[str, Any]:
    """What decides the rows (compared when an output directory is reused)."""
    keep = ("dataset", "model", "sample", "n_events", "seed", "k", "m_max", "max_size",
            "exhaustive_max_time_s", "certify_max_time_s", "mode", "constraints",
            "auto_threshold", "auto_ratios")
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    plain = {key: container.get(key) for key in keep}
    for key in ("data_dir", "cache_dir", "download"):
        if isinstance(plain["dataset"], dict):
            plain["dataset"].pop(key, None)
    plain["weights"] = weights
    plain["configurations"] = [
        {"name": c.name, "explainer": c.explainer, "strategy": c.strategy,
         "ceiling": c.ceiling, "prune": c.prune, "certify": c.certify, "mode": c.mode,
         "params": dict(c.params)} for c in configs]
    return plain


def run(cfg: DictConfig) -> pd.DataFrame:
    """The benchmark of ``conf/benchmark_quality.yaml``; returns the table.

    Raises:
        CftgnnError: For bad input, before any data is loaded where possible.
    """
    check_quality_options(cfg)
    max_size = int(cfg.max_size)
    device = resolve_device(cfg.device)
    raw = OmegaConf.to_container(cfg.constraints, resolve=True) if cfg.get("constraints") else None
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"constraints must be a mapping, got {raw!r}")
    constraints = Constraints.from_config({str(k): v for k, v in (raw or {}).items()}
                                          if raw is not None else None)
    entries = OmegaConf.to_container(cfg.explainers, resolve=True) or {}
    if not isinstance(entries, dict):
        raise ConfigError("explainers must map names to configurations")
    only = cfg.get("only")
    if only is not None:
        unknown = [str(n) for n in only if str(n) not in entries]
        if unknown:
            raise ConfigError(f"only: unknown configuration {unknown[0]!r} (choose from: "
                              f"{', '.join(map(str, entries))})")
        entries = {n: c for n, c in entries.items() if str(n) in {str(x) for x in only}}
    configs = [Configuration.from_config(str(n), c or {}, str(cfg.mode),
                                         cfg.get("certify_max_time_s"))
               for n, c in entries.items()]
    torch.set_num_threads(int(cfg.num_threads))
    stream = instantiate(cfg.dataset)
    constraints.validate(stream)
    out = check_writable_dir(cfg.out or f"outputs/quality/{stream.name}-{model_name(cfg.model)}",
                             "out")
    model, weights = resolve_model(cfg.model, stream, cfg.checkpoint, cfg.paths.checkpoint_dir,
                                   device, cfg.seed)
    plan = plan_events(model, stream, int(cfg.n_events), cfg.sample.range,
                       cfg.sample.prediction, float(cfg.sample.min_abs_logit),
                       cfg.sample.max_abs_logit, int(cfg.seed))
    store = RecordStore(out, _fingerprint(cfg, weights, configs))
    done = store.done()
    todo = [int(e) for e in plan["event_id"].tolist() if int(e) not in done]
    print(f"{stream.name} | {model_name(cfg.model)}: {weights} | {len(plan)} events"
          + (f" ({len(plan) - len(todo)} already done)" if len(todo) < len(plan) else "")
          + f" | K = {max_size} | {len(configs)} configurations | torch threads "
          f"{torch.get_num_threads()} -> {out} (rerun the same command to resume)")
    engine = ReplayEngine(model, stream)
    names = {"dataset": stream.name, "model": model_name(cfg.model)}
    if any(c.mode == "auto" for c in configs) and len(plan):
        mode = choose_auto_mode(cfg, engine, [int(e) for e in plan["event_id"].tolist()], out,
                                f"{names['dataset']}-{names['model']}").mode.value
        print(f"mode=auto configurations search with the {mode} oracle")
        configs = [replace(c, mode=mode) if c.mode == "auto" else c for c in configs]
    for event_id in tqdm(todo, desc="events", unit="event", disable=not cfg.progress,
                         dynamic_ncols=True):
        rows = evaluate_event(engine, event_id, configs, cfg.k, int(cfg.m_max), max_size,
                              constraints, cfg.exhaustive_max_time_s)
        store.write_rows(event_id, [{**names, **r} for r in rows])
    frame = pd.concat([pd.read_parquet(f) for f in sorted(store.records_dir.glob("*.parquet"))],
                      ignore_index=True)
    frame = frame[frame["event_id"].isin(plan["event_id"])].reset_index(drop=True)
    with atomic_output(out / "quality.parquet") as f:
        frame.to_parquet(f, index=False)
    table = quality_table(frame)
    text = to_markdown(table, event_summary(frame),
                       f"{stream.name} · {model_name(cfg.model)}, K = {max_size}, "
                       f"m_max = {cfg.m_max}, mode = {cfg.mode}, {torch.get_num_threads()} "
                       "thread(s)")
    atomic_write(out / "quality.md", text.encode())
    print(text)
    return table


__all__ = ["Configuration", "evaluate_event", "event_summary", "quality_table", "run",
           "to_markdown"]
