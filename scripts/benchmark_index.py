"""Median candidate-set query time: ``python scripts/benchmark_index.py dataset=wikipedia``."""

import hydra
from omegaconf import DictConfig

import cftgnn.config  # noqa: F401  (registers the ${cftgnn_root:} resolver)
from cftgnn.data.benchmark import run


@hydra.main(config_path="../conf", config_name="benchmark_index", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    main()
