"""Explanation quality against the true minimum: ``python scripts/benchmark_quality.py``
(options: conf/benchmark_quality.yaml)."""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from pathlib import Path

import hydra
from omegaconf import DictConfig

import cftgnn.config  # noqa: F401  (registers the ${cftgnn_root:} resolver)
from cftgnn.benchmarks.options import check_quality_options
from cftgnn.cli import friendly_errors, main_guard

CONF = Path(__file__).resolve().parents[1] / "conf"


@hydra.main(config_path="../conf", config_name="benchmark_quality", version_base="1.3")
def main(cfg: DictConfig) -> None:
    with friendly_errors():
        from cftgnn.benchmarks.quality import run  # heavy (torch, PyG): after the checks

        run(cfg)


if __name__ == "__main__":
    main_guard(main, CONF, check=check_quality_options, writes={"out": "folder"})
