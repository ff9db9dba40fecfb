"""One trainer of the explainers that learn: the run, the resume and the epoch loop.

``ExplainerTrainer.run`` is what ``python scripts/train_explainer.py`` runs; an objective
(``PGExplainerTrainer``, ``TempMETrainer``) says what it trains (``build``), what an epoch
does (``epoch``), which epoch is better (``improves``), what its state and card add, and
how its checkpoint is written. The loop around them is one:

1. the options checked, the run set up (``training_setup``: the run directory, the saved
   state, the model, its fingerprint, the engine, the split);
2. ``torch.manual_seed(seed)``, then the objective's module and Adam at ``lr`` (null: the
   objective's ``REFERENCE_LR``); a saved state resumes the module, the optimizer, the
   history, the seconds, the best epoch and what the objective keeps;
3. per epoch: the objective's epoch (training and validation), the best epoch kept (by its
   validation value), one history entry, the tracker's progress, and the state written
   atomically to ``state.pt`` (a kill or a full disk leaves the last complete state);
4. the best epoch's weights, the card and the checkpoint.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn

from cftgnn.errors import ConfigError
from cftgnn.explain.training.options import check_train_explainer_options, trained_explainer
from cftgnn.explain.training.setup import TrainingSetup, training_options, training_setup
from cftgnn.files import atomic_output
from cftgnn.tracking import Tracker, tracking
from cftgnn.training.loop import EPOCHS_FROM


@dataclass
class Best:
    """The best epoch so far (``epoch`` -1: none yet), its validation value and weights."""

    epoch: int
    value: float
    weights: dict[str, Any]


@dataclass
class EpochResult:
    """What one epoch of an objective gives the loop.

    Attributes:
        entry: Its history entry (the loop adds ``epoch`` first and ``seconds`` last).
        value: The validation value the best epoch is chosen by (``improves``).
        metrics: What the tracker logs for the epoch.
    """

    entry: dict[str, Any]
    value: float
    metrics: dict[str, float] = field(default_factory=dict)


class ExplainerTrainer(ABC):
    """The training of one trained explainer for one model on one stream (class docstring of
    the module). A subclass is one objective; ``conf/trainer/<explainer>.yaml`` names it by
    ``_target_``, chosen by the ``explainer`` option."""

    #: The explainer it trains (``trained_explainer``'s name; the tracker run's prefix).
    KIND: ClassVar[str]
    #: The explainer, for messages (``the PGExplainer``).
    WHAT: ClassVar[str]
    #: The options that decide what the training computes (a resumed run must match them).
    TRAINING_KEYS: ClassVar[tuple[str, ...]]
    #: The reference's learning rate, used where ``lr`` is null.
    REFERENCE_LR: ClassVar[float]
    #: The state format this version resumes (None: any).
    STATE_FORMAT: ClassVar[int | None] = None
    #: The value no validation reaches (the best epoch's before the first).
    WORST: ClassVar[float]

    cfg: DictConfig
    setup: TrainingSetup
    options: dict[str, Any]

    @staticmethod
    @abstractmethod
    def path_of(directory: str | Path, model: str, dataset: str) -> Path:
        """The trained explainer's file in ``directory`` for a model kind and stream name."""

    def check(self, cfg: DictConfig) -> None:
        """Refuse a configuration this trainer does not train (before any work)."""
        check_train_explainer_options(cfg)
        chosen = trained_explainer(cfg)
        if chosen != self.KIND:
            raise ConfigError(f"{type(self).__name__} trains explainer={self.KIND}, the "
                              f"configuration selects explainer={chosen}; leave out trainer= (it "
                              "follows explainer=)")

    def options_of(self, cfg: DictConfig) -> dict[str, Any]:
        """The options the state and the card keep (``TRAINING_KEYS``, ``lr`` resolved)."""
        return training_options(cfg, self.TRAINING_KEYS, self.REFERENCE_LR)

    # ------------------------------------------------------------------ the objective

    @abstractmethod
    def build(self) -> nn.Module:
        """What the training draws once, and the module it trains (after
        ``torch.manual_seed(seed)``)."""

    @abstractmethod
    def resume(self, state: dict[str, Any]) -> Best:
        """The objective's part of a saved state taken back; returns its best epoch."""

    @abstractmethod
    def prepare(self, resumed: bool) -> None:
        """Work before the first epoch that counts as training time (``resumed``: a state
        was taken back)."""

    @abstractmethod
    def epoch(self, module: nn.Module, optimizer: torch.optim.Optimizer,
              epoch: int) -> EpochResult:
        """Train and validate one epoch (``epoch`` from 0)."""

    @abstractmethod
    def improves(self, value: float, best: Best) -> bool:
        """Whether an epoch of validation ``value`` replaces ``best``."""

    @abstractmethod
    def report(self, epoch: int, entry: dict[str, Any], best: Best) -> None:
        """Say how an epoch went (after its history ``entry``)."""

    @abstractmethod
    def state_of(self, best: Best) -> dict[str, Any]:
        """The objective's keys of the saved state."""

    @abstractmethod
    def card(self, history: list[dict[str, Any]], best: Best, seconds: float
             ) -> dict[str, Any]:
        """The card written beside the checkpoint."""

    @abstractmethod
    def save(self, module: nn.Module, card: dict[str, Any]) -> tuple[Path, Path]:
        """Write the checkpoint and its ``.json`` card to ``setup.destination``."""

    def summary(self, best: Best) -> dict[str, float]:
        """What the tracker's summary adds to the final loss and the seconds."""
        return {}

    # ------------------------------------------------------------------ the loop

    def run(self, cfg: DictConfig) -> dict[str, Any]:
        """Train (or resume training) the explainer of ``cfg.model`` on ``cfg.dataset``.

        Returns:
            The card written next to the checkpoint.

        Raises:
            CftgnnError: For bad options, a model without soft removal or without a
                checkpoint, a run directory of other options or of more epochs, or an
                existing checkpoint without ``overwrite=true``; before any training. A full
                disk (``DiskFullError``) leaves the last complete state.
        """
        self.check(cfg)
        self.cfg, self.options = cfg, self.options_of(cfg)
        self.setup = setup = training_setup(cfg, self.options, self.path_of, self.WHAT,
                                            self.STATE_FORMAT)
        torch.manual_seed(int(cfg.seed))
        module = self.build()
        optimizer = torch.optim.Adam(module.parameters(), lr=float(self.options["lr"]))
        history: list[dict[str, Any]] = []
        seconds, first = 0.0, 0
        best = Best(-1, self.WORST, {k: v.clone() for k, v in module.state_dict().items()})
        if setup.state is not None:
            module.load_state_dict(setup.state["mlp"])
            optimizer.load_state_dict(setup.state["optimizer"])
            history, seconds = list(setup.state["history"]), float(setup.state["seconds"])
            first, best = int(setup.state["epoch"]), self.resume(setup.state)
            print(f"resuming {setup.state_file} after epoch {first}")
        tick = time.perf_counter()
        self.prepare(setup.state is not None)
        seconds += time.perf_counter() - tick
        tracker: Tracker = instantiate(cfg.logger)
        config = self.options | {"model": OmegaConf.to_container(cfg.model, resolve=True),
                                 "dataset": setup.stream.name, "weights": setup.weights}
        with tracking(tracker, config, name=f"{self.KIND}-{setup.stream.name}-{setup.kind}",
                      dir=str(setup.out)):
            for epoch in range(first, int(cfg.epochs)):
                tick = time.perf_counter()
                result = self.epoch(module, optimizer, epoch)
                took = time.perf_counter() - tick
                seconds += took
                if self.improves(result.value, best):
                    best = Best(epoch, result.value,
                                {k: v.clone() for k, v in module.state_dict().items()})
                history.append({"epoch": epoch + EPOCHS_FROM, **result.entry, "seconds": took})
                tracker.log_progress(epoch + 1, result.metrics)
                self.report(epoch, history[-1], best)
                self._save_state(module, optimizer, epoch, history, seconds, best)
            if best.epoch >= 0:
                module.load_state_dict(best.weights)
            module.eval()
            card = self.card(history, best, seconds)
            pt, js = self.save(module, card)
            tracker.log_summary({"train/final_loss": history[-1]["loss"] if history
                                 else float("nan"), "train/seconds": seconds}
                                | self.summary(best))
        print(f"saved {pt} and {js} (epoch {card['best_epoch'] or 'none'} of "
              f"{int(cfg.epochs)}, {seconds:.0f} s of training)")
        return card

    def _save_state(self, module: nn.Module, optimizer: torch.optim.Optimizer, epoch: int,
                    history: list[dict[str, Any]], seconds: float, best: Best) -> None:
        with atomic_output(self.setup.state_file) as f:  # complete or the last one
            torch.save({"mlp": module.state_dict(), "optimizer": optimizer.state_dict(),
                        "epoch": epoch + 1, "history": history, "seconds": seconds,
                        "options": json.dumps(self.options), **self.state_of(best),
                        "weights_sha256": self.setup.fingerprint.weights_sha256}, f)


__all__ = ["Best", "EpochResult", "ExplainerTrainer"]
