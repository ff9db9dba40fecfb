"""Oracle cost, side by side: ``python scripts/benchmark_oracle.py dataset=wikipedia model=tgn``."""

import hydra
from omegaconf import DictConfig

import cftgnn.config  # noqa: F401  (registers the ${cftgnn_root:} resolver)
from cftgnn.explain.benchmark import run


@hydra.main(config_path="../conf", config_name="benchmark_oracle", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    main()
