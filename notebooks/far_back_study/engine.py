"""The replay engine of a dataset's committed TGN checkpoint, for the study's scripts."""

from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import cftgnn.config  # noqa: F401  (the ${cftgnn_root:} resolver)
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.training.resolve import resolve_device, resolve_model


def tgn_engine(dataset: str) -> ReplayEngine:
    """The engine (memory budget 0.5 GiB, the benchmarks' default) of ``dataset``'s committed
    TGN, read through ``conf/benchmark_tail.yaml``; one torch thread."""
    torch.set_num_threads(1)
    conf = str(Path(__file__).resolve().parents[2] / "conf")
    with initialize_config_dir(config_dir=conf, version_base=None):
        cfg = compose("benchmark_tail", overrides=[f"dataset={dataset}", "model=tgn"])
    stream = instantiate(cfg.dataset)
    model, _ = resolve_model(cfg.model, stream, "auto", cfg.paths.checkpoint_dir,
                             resolve_device("cpu"), 0)
    return ReplayEngine(model, stream, memory_budget_gb=0.5)
