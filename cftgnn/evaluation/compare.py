"""``scripts/compare_explainers.py``: every explainer × strategy on the same sampled events."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from cftgnn.data.stream import EventStream
from cftgnn.evaluation.runner import explain_events, sample_events, summarize
from cftgnn.explain.base import Explainer
from cftgnn.explain.replay import ReplayEngine
from cftgnn.models.resolve import resolve_model


def explainer_factories(
    conf_dir: Path, explainers: list[str], strategies: list[str], overrides: dict[str, Any]
) -> dict[str, Callable[[], Explainer]]:
    """``"<explainer>/<strategy>"`` → a factory instantiating it from the config groups."""
    out: dict[str, Callable[[], Explainer]] = {}
    for ename in explainers:
        ecfg = OmegaConf.merge(
            OmegaConf.load(conf_dir / "explainer" / f"{ename}.yaml"), overrides.get(ename, {})
        )
        for sname in strategies:
            scfg = OmegaConf.load(conf_dir / "strategy" / f"{sname}.yaml")

            def make(ecfg: Any = ecfg, scfg: Any = scfg) -> Explainer:
                explainer: Explainer = instantiate(ecfg, strategy=instantiate(scfg))
                return explainer

            out[f"{ename}/{sname}"] = make
    return out


def run(cfg: DictConfig) -> pd.DataFrame:
    """Sample events, explain them with every pair, print the summary table."""
    torch.set_num_threads(int(cfg.num_threads))
    stream: EventStream = instantiate(cfg.dataset)
    model, source = resolve_model(
        cfg.model, stream, cfg.checkpoint, cfg.paths.checkpoint_dir, cfg.device, cfg.seed
    )
    print(
        f"model: {source}; dataset: {stream.name} ({stream.num_events:,} events); "
        f"torch threads: {torch.get_num_threads()}"
    )
    engine = ReplayEngine(model, stream)
    events = sample_events(stream, cfg.n_events, cfg.seed, *cfg.event_range)
    factories = explainer_factories(
        Path(cfg.paths.root_dir) / "conf",
        list(cfg.explainers),
        list(cfg.strategies),
        dict(OmegaConf.to_container(cfg.overrides)),  # type: ignore[arg-type]
    )
    records = explain_events(
        engine, factories, events.tolist(), k=cfg.k, m_max=cfg.m_max, mode=cfg.mode
    )
    table = summarize(records)
    with pd.option_context("display.width", 120, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if cfg.out:
        pd.DataFrame(records).to_parquet(cfg.out)
        print(f"wrote {cfg.out}")
    return table
