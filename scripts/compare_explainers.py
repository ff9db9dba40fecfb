"""Every explainer × strategy on the same events: ``python scripts/compare_explainers.py``."""

import hydra
from omegaconf import DictConfig

import cftgnn.config  # noqa: F401  (registers the ${cftgnn_root:} resolver)
from cftgnn.evaluation.compare import run


@hydra.main(config_path="../conf", config_name="compare", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    main()
