"""The replay engine of a dataset's committed TGN checkpoint, and the command line of the
study's scripts."""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


DATASETS = ("uci", "wikipedia")


def arguments(usage: str, *convert: Callable[[str], Any]) -> list[Any]:
    """The command line's arguments, each through its converter; a wrong count, a value
    that does not convert or an unknown dataset (the first argument) ends in one line
    ``error: usage: …`` and exit status 2."""
    args = sys.argv[1:]
    try:
        if len(args) != len(convert):
            raise ValueError
        values = [f(a) for f, a in zip(convert, args, strict=True)]
    except ValueError:
        print(f"error: usage: {usage}", file=sys.stderr)
        sys.exit(2)
    if values[0] not in DATASETS:
        print(f"error: dataset must be one of {', '.join(DATASETS)}, got {values[0]!r}",
              file=sys.stderr)
        sys.exit(2)
    return values


def positive(text: str) -> int:
    """An integer >= 1 (K), else ValueError."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def tolerances(text: str) -> list[float]:
    """Comma-separated finite numbers > 0, else ValueError."""
    values = [float(t) for t in text.split(",")]
    if not all(0.0 < v < float("inf") for v in values):
        raise ValueError(text)
    return values


__all__ = ["arguments", "positive", "tgn_engine", "tolerances"]
