"""Training the explainers that learn (``python scripts/train_explainer.py``).

One trainer, ``ExplainerTrainer`` (``base``: the run, the resume, the epoch loop), and its
two objectives, ``PGExplainerTrainer`` (``pgexplainer``) and ``TempMETrainer`` (``tempme``),
chosen by the ``_target_`` of ``conf/trainer/<explainer>.yaml``, which follows the
``explainer`` option. Beside them: ``options`` (the options, checked before torch loads),
``setup`` (the run directory, the saved state, the model and engine) and ``events`` (the
training and validation events drawn).
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig


def run(cfg: DictConfig) -> dict[str, Any]:
    """Train the explainer ``cfg`` selects, with the trainer its ``trainer`` group names
    (``_target_``); the options are checked first, so an explainer that does not learn is
    refused in one line.

    Returns:
        The card written next to the checkpoint.
    """
    from hydra.utils import instantiate  # the trainer's module loads torch

    from cftgnn.explain.training.base import ExplainerTrainer
    from cftgnn.explain.training.options import check_train_explainer_options

    check_train_explainer_options(cfg)
    trainer = instantiate(cfg.trainer)
    assert isinstance(trainer, ExplainerTrainer)
    return trainer.run(cfg)


__all__ = ["run"]
