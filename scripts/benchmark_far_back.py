"""The far-back tail of TGN's exact cone replay, event by event (``cftgnn.benchmarks.far_back``):
``python scripts/benchmark_far_back.py dataset=uci 'events=[56484]' max_size=2``."""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from pathlib import Path

import hydra
from omegaconf import DictConfig

import cftgnn.config  # noqa: F401  (registers the ${cftgnn_root:} resolver)
from cftgnn.benchmarks.options import check_far_back_options
from cftgnn.cli import friendly_errors, main_guard

CONF = Path(__file__).resolve().parents[1] / "conf"


@hydra.main(config_path="../conf", config_name="benchmark_far_back", version_base="1.3")
def main(cfg: DictConfig) -> None:
    with friendly_errors():
        from cftgnn.benchmarks.far_back import run  # heavy (torch, PyG): after the checks

        run(cfg)


if __name__ == "__main__":
    main_guard(main, CONF, check=check_far_back_options, writes={"out": "file"})
