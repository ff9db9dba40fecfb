"""The rank target against the logit target, side by side:
``python scripts/benchmark_rank.py dataset=uci model=tgn``."""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from pathlib import Path

import hydra
from omegaconf import DictConfig

import cftgnn.config  # noqa: F401  (registers the ${cftgnn_root:} resolver)
from cftgnn.benchmarks.options import check_rank_options
from cftgnn.cli import friendly_errors, main_guard

CONF = Path(__file__).resolve().parents[1] / "conf"


@hydra.main(config_path="../conf", config_name="benchmark_rank", version_base="1.3")
def main(cfg: DictConfig) -> None:
    with friendly_errors():
        from cftgnn.benchmarks.rank import run  # heavy (torch, PyG): after the checks

        run(cfg)


if __name__ == "__main__":
    main_guard(main, CONF, check=check_rank_options, writes={"out": "file"})
