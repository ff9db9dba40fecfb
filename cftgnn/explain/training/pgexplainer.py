"""``python scripts/train_explainer.py``: the temporal PGExplainer's objective
(``PGExplainerTrainer``; the loop, the resume and the state are ``ExplainerTrainer``'s).

One run = one dataset × one model (its committed checkpoint; an explainer of fresh weights
would be refused by every run anyway). As the reference (T-GNNExplainer's ``PGExplainerExt``,
docs/explainers/pgexplainer.md), it

1. draws ``n_train_events`` **fresh** events of the model's training split every epoch
   (``train_range`` of ``[0, train_end)``, ``Split`` with ``train.py``'s shares; the draw of
   epoch ``e`` is seeded by ``(seed, e)``, so a resumed run draws what an uninterrupted one
   would), each with a nonzero logit and a removable event;
2. trains ``EdgeScorer`` for ``epochs`` epochs: per event a probe (``training_event``: the
   candidates and the model's state at the event, no oracle: training evaluates no removal set)
   gives the candidates' features (``features_of``) and the differentiable soft-removal logit;
   ``fidelity_loss`` (minus the fidelity of the signed logit, no regulariser, as the
   reference's code applies it) is averaged over ``batch_size`` events per Adam step (events in
   stream order, so the replay engine moves forward);
3. after each epoch scores ``n_val_events`` events of the validation split (drawn once,
   ``validation_events``) with
   the exact oracle: the MLP ranks each event's removable events and ``validation_aufsc``
   takes the AUFSC (kept) of those rankings (``aufsc_keep``, the curves' kept sets of
   ``curve_removal_plan``, as ``explain.py`` computes them); the epoch with the best value is
   the one written (the reference keeps its last epoch);
4. after each epoch saves the MLP, the best one so far, the optimizer and the epoch to
   ``state.pt`` in its run directory (atomically: a kill or a full disk leaves the last
   complete state); rerunning the same command resumes there (another configuration in that
   directory is refused, and so is ``epochs`` below the epochs the state already holds: its
   card would not say what was trained; so is a state of the training before ``FORMAT`` 2;
   ``cftgnn.explain.training.setup.load_state``).
   A ``state.pt`` that does not load (cut short by a copy) is moved aside as
   ``state.pt.corrupt-<n>`` with one warning line, and training starts again from epoch 0;
5. writes ``pgexplainer_<model>_<dataset>.pt`` and its ``.json`` card (the epoch chosen, the
   loss and validation history, the budget against the reference's, seconds, the stream
   checksum and the model checkpoint's SHA-256) into the run directory, or ``out_dir``
   (replacing a file there takes ``overwrite=true``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from omegaconf import DictConfig
from torch import nn
from tqdm.auto import tqdm

from cftgnn.errors import ConfigError
from cftgnn.explain.base import Explainer
from cftgnn.explain.factual import rank_by_importance
from cftgnn.explain.fidelity_curve import FID_SHARES, aufsc_keep, kept_removal_sets
from cftgnn.explain.pgexplainer import (
    FORMAT,
    EdgeScorer,
    card_of,
    features_of,
    fidelity_loss,
    save_scorer,
    scorer_path,
)
from cftgnn.explain.result import ExplanationStatus
from cftgnn.explain.training.base import Best, EpochResult, ExplainerTrainer
from cftgnn.explain.training.events import (
    explained_probe,
    oracle_skip_reason,
    skipped_records,
    skipped_summary,
    training_events,
    validation_events,
)
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.oracle import Oracle
from cftgnn.oracle.probe import ModelProbe
from cftgnn.training.loop import EPOCHS_FROM, epoch_entries, library_versions

#: The options that decide what a training computes (a resumed run must match them).
#: (``epochs`` is not one: rerunning with more epochs trains on from the last one; fewer
#: than the state holds are refused, ``load_state``.)
TRAINING_KEYS = ("seed", "n_train_events", "train_range", "lr", "batch_size",
                 "hidden", "features", "n_val_events", "k", "m_max", "split")
#: The reference's budget (``PGExplainerExt``: 1,000 fresh events per epoch, 30 epochs on
#: Reddit to 100 on Wikipedia, Adam at 1e-4, 16 events per step), what a card compares with.
REFERENCE_LR = 1e-4
REFERENCE_BUDGET = {"events_per_epoch": 1000, "epochs": [30, 100], "lr": REFERENCE_LR,
                    "batch_size": 16}


@dataclass(frozen=True)
class TrainingEvent:
    """What PGExplainer's loss reads of one explained event.

    Attributes:
        event_id: The event.
        original_logit: Its logit with the full history (nonzero).
        probe: Its probe over the removable events (at least one).
        features: ``probe.features()``, ``float32 [m, D]``.
    """

    event_id: int
    original_logit: float
    probe: ModelProbe
    features: torch.Tensor

    @classmethod
    def of(cls, oracle: Oracle, kind: str = "probe") -> TrainingEvent | None:
        """The training event of an oracle (None when it cannot be explained: zero logit,
        no removable event, or no probe); ``kind``: the MLP's input (``features_of``)."""
        if Explainer.status(oracle) is not ExplanationStatus.OK or oracle.probe is None:
            return None
        return cls(oracle.event_id, oracle.original_logit, oracle.probe,
                   features_of(oracle.probe, kind))


def training_event(engine: ReplayEngine, event_id: int, k: int | None, m_max: int,
                   features: dict[int, torch.Tensor] | None = None,
                   kind: str = "probe",
                   skipped: dict[int, str] | None = None) -> TrainingEvent | None:
    """One training event, without the oracle's replay plans (training evaluates no removal
    set, so recording the history for them is wasted work).

    The candidates are the oracle's (``k``, ``m_max``; all removable); the probe starts from
    the engine's unperturbed state at the event's batch boundary (the cursor, moving forward
    when events come in stream order) and advances to the event, which is the state an oracle's
    probe reads (the same batches from the same start); the original logit is the model's
    prediction there (``logit``).

    Args:
        engine: The replay engine (its model offers soft removal).
        event_id: The event.
        k: Hop radius (None: the model's number of layers).
        m_max: Most candidates.
        features: Features of events seen before, by id (read, and filled for this one).
        kind: The MLP's input (``features_of``).
        skipped: Where an event that cannot be explained is noted with the reason
            (``explained_probe``).

    Returns:
        The event, or None when it cannot be explained (no candidate, zero logit).
    """
    explained = explained_probe(engine, event_id, k, m_max, skipped)
    if explained is None:
        return None
    probe, p0 = explained
    cache = {} if features is None else features
    if int(event_id) not in cache:
        cache[int(event_id)] = features_of(probe, kind)
    return TrainingEvent(int(event_id), p0, probe, cache[int(event_id)])


def event_loss(mlp: EdgeScorer, event: Oracle | TrainingEvent | None,
               kind: str = "probe") -> torch.Tensor | None:
    """The reference's loss on one explained event (``fidelity_loss`` of the logit with the
    weights ``sigmoid(MLP(features))``); None when the event cannot be explained: None, zero
    logit, no removable event, or no probe. ``kind``: the input of an oracle's event."""
    if isinstance(event, Oracle):
        event = TrainingEvent.of(event, kind)
    if event is None:
        return None
    weights = torch.sigmoid(mlp(event.features))
    return fidelity_loss(event.probe.soft_logit(weights), event.original_logit)


def validation_aufsc(mlp: EdgeScorer, oracles: Iterable[Oracle | None], kind: str,
                     bar: tqdm[Any] | None = None) -> tuple[float, int]:
    """AUFSC (kept) of the MLP's rankings on explained events, as ``explain.py`` scores them.

    Per oracle: the MLP's scores of its removable events, ``rank_by_importance``, the exact
    logits of the kept sets of ``FID_SHARES`` (``kept_removal_sets``, one batched exact call),
    then ``aufsc_keep`` over the events.

    Args:
        mlp: The MLP.
        oracles: Exact oracles of the validation events (None: an event skipped).
        kind: The MLP's input (``features_of``).
        bar: Advanced once per oracle.

    Returns:
        ``(AUFSC (kept), events scored)`` (NaN without one).
    """
    originals: list[float] = []
    kept: list[list[float]] = []
    for oracle in oracles:
        if bar is not None:
            bar.update()
        if (oracle is None or oracle.probe is None
                or Explainer.status(oracle) is not ExplanationStatus.OK):
            continue
        with torch.no_grad():
            scores = mlp(features_of(oracle.probe, kind)).numpy().astype(np.float64)
        ranking, _ = rank_by_importance(oracle.removable, scores)
        sets = kept_removal_sets(ranking, FID_SHARES, True, oracle.removable.tolist())
        originals.append(float(oracle.original_logit))
        kept.append([float(x) for x in oracle.exact_batch(sets)])
    return aufsc_keep(originals, kept), len(kept)


def feature_width(engine: ReplayEngine, events: npt.NDArray[np.int64], cfg: DictConfig,
                  features: dict[int, torch.Tensor] | None = None) -> int:
    """``D``, the probe's feature width (read on the first training event with a removable
    event).

    Raises:
        ConfigError: When no training event has one.
    """
    for event_id in events.tolist():
        event = training_event(engine, int(event_id), cfg.k, int(cfg.m_max), features,
                               str(cfg.features))
        if event is not None:
            return int(event.features.shape[1])
    raise ConfigError("no training event has a removable candidate; widen train_range or "
                      "draw more n_train_events")


def train_epoch(mlp: EdgeScorer, optimizer: torch.optim.Optimizer,
                oracles: Iterable[Oracle | TrainingEvent | None], batch_size: int,
                bar: tqdm[Any] | None = None, kind: str = "probe") -> tuple[float, int]:
    """One pass over the explained events (oracles or ``TrainingEvent`` objects; None for one
    that cannot be explained): ``event_loss`` averaged over ``batch_size`` events per
    optimizer step (a last, smaller batch steps too; ``kind``: an oracle's input).

    Returns:
        ``(sum of the losses, events used)`` (events that cannot be explained are skipped).
    """
    mlp.train()
    total, used, pending = 0.0, 0, 0
    optimizer.zero_grad()
    for oracle in oracles:
        loss = event_loss(mlp, oracle, kind)
        if bar is not None:
            bar.update()
        if loss is None:
            continue
        (loss / batch_size).backward()
        total, used, pending = total + float(loss.detach()), used + 1, pending + 1
        if pending == batch_size:
            optimizer.step()
            optimizer.zero_grad()
            pending = 0
        if bar is not None:
            bar.set_postfix(loss=f"{total / used:.4f}", refresh=False)
    if pending:
        optimizer.step()
        optimizer.zero_grad()
    mlp.eval()
    return total, used


class PGExplainerTrainer(ExplainerTrainer):
    """PGExplainer's objective (the module docstring): fresh training events every epoch,
    ``fidelity_loss``, the epoch of best validation AUFSC (kept) kept."""

    KIND = "pgexplainer"
    WHAT = "the PGExplainer"
    TRAINING_KEYS = TRAINING_KEYS
    REFERENCE_LR = REFERENCE_LR
    STATE_FORMAT = FORMAT
    WORST = float("-inf")

    @staticmethod
    def path_of(directory: str | Path, model: str, dataset: str) -> Path:
        return scorer_path(directory, model, dataset)

    def build(self) -> nn.Module:
        cfg, setup = self.cfg, self.setup
        self.val_events = validation_events(setup.split, int(cfg.n_val_events), int(cfg.seed))
        first_draw = self._draw(0)
        self.features: dict[int, torch.Tensor] = {}  # of this epoch's events: no MLP in them
        # drawn events left out (no candidate, zero logit), by id with the reason
        self.skipped: dict[int, str] = {}
        self.val_skipped: dict[int, str] = {}
        return EdgeScorer(feature_width(setup.engine, first_draw, cfg, self.features),
                          int(cfg.hidden))

    def _draw(self, epoch: int) -> npt.NDArray[np.int64]:
        cfg = self.cfg
        return training_events(self.setup.stream, self.setup.split, cfg.train_range,
                               int(cfg.n_train_events), int(cfg.seed), epoch)

    def resume(self, state: dict[str, Any]) -> Best:
        self.skipped = {int(e): str(r) for e, r in dict(state.get("skipped", {})).items()}
        best = dict(state["best"])
        return Best(int(best["epoch"]), float(best["aufsc_keep"]), best["mlp"])

    def prepare(self, resumed: bool) -> None:
        return None  # the events are drawn afresh each epoch

    def epoch(self, module: nn.Module, optimizer: torch.optim.Optimizer,
              epoch: int) -> EpochResult:
        assert isinstance(module, EdgeScorer)
        cfg, engine = self.cfg, self.setup.engine
        events = self._draw(epoch)
        self.features.clear()
        left_out: dict[int, str] = {}
        oracles = (training_event(engine, int(e), cfg.k, int(cfg.m_max), self.features,
                                  str(cfg.features), left_out) for e in events.tolist())
        with tqdm(total=len(events), desc=f"epoch {epoch + 1}/{int(cfg.epochs)}", unit="event",
                  disable=not cfg.progress, dynamic_ncols=True) as bar:
            loss_sum, used = train_epoch(module, optimizer, oracles, int(cfg.batch_size), bar)
        if left_out:
            print(skipped_summary(f"epoch {epoch + 1}: training events", len(events),
                                  left_out), flush=True)
        self.skipped |= left_out
        said = bool(self.val_skipped)  # the validation events are the same every epoch
        val, scored = self._validate(module, epoch)
        if self.val_skipped and not said:
            print(skipped_summary("validation events", len(self.val_events),
                                  self.val_skipped), flush=True)
        loss = loss_sum / max(used, 1)
        return EpochResult({"loss": loss, "events": used, "skipped": len(left_out),
                            "val_aufsc_keep": val, "val_events": scored}, val,
                           {"train/loss": loss, "val/aufsc_keep": val})

    def _validate(self, mlp: EdgeScorer, epoch: int) -> tuple[float, int]:
        """``validation_aufsc`` on exact oracles of the validation events (stream order) with
        a progress bar; the events it cannot score go to ``val_skipped`` with the reason
        (``oracle_skip_reason``)."""
        cfg, engine = self.cfg, self.setup.engine
        hops = int(getattr(engine.model, "num_layers", 1)) if cfg.k is None else int(cfg.k)

        def oracles() -> Iterator[Oracle]:
            for e in self.val_events.tolist():
                oracle = engine.oracle(int(e), cfg.k, int(cfg.m_max), "exact")
                reason = oracle_skip_reason(oracle, hops)
                if reason is not None:
                    self.val_skipped[int(e)] = reason
                yield oracle

        with tqdm(total=len(self.val_events), desc=f"validation {epoch + 1}/{int(cfg.epochs)}",
                  unit="event", disable=not cfg.progress, dynamic_ncols=True) as bar:
            return validation_aufsc(mlp, oracles(), str(cfg.features), bar)

    def improves(self, value: float, best: Best) -> bool:
        return value > best.value  # NaN never wins

    def report(self, epoch: int, entry: dict[str, Any], best: Best) -> None:
        print(f"epoch {epoch + 1}: loss {entry['loss']:.4f}, validation AUFSC (kept) "
              f"{entry['val_aufsc_keep']:.4f} on {entry['val_events']} events, best epoch "
              f"{best.epoch + EPOCHS_FROM}", flush=True)

    def state_of(self, best: Best) -> dict[str, Any]:
        return {"format": FORMAT, "best": {"epoch": best.epoch, "aufsc_keep": best.value,
                                           "mlp": best.weights},
                "skipped": self.skipped}

    def card(self, history: list[dict[str, Any]], best: Best, seconds: float
             ) -> dict[str, Any]:
        cfg = self.cfg
        return card_of(self.setup.fingerprint,
                       training_events=sum(int(h["events"]) for h in history),
                       events_per_epoch=int(cfg.n_train_events), epochs=int(cfg.epochs),
                       **epoch_entries(history, best.epoch),  # None: none scored
                       val_aufsc_keep=float(best.value) if best.epoch >= 0 else None,
                       validation_event_ids=[int(e) for e in self.val_events],
                       skipped_events=skipped_records(self.skipped),
                       skipped_validation_events=skipped_records(self.val_skipped),
                       reference_budget=REFERENCE_BUDGET, note=self.cfg.get("note"),
                       training_seconds=seconds, options=self.options,
                       torch_threads=torch.get_num_threads(), versions=library_versions())

    def save(self, module: nn.Module, card: dict[str, Any]) -> tuple[Path, Path]:
        assert isinstance(module, EdgeScorer)
        return save_scorer(self.setup.destination, module, card, str(self.cfg.features))

    def summary(self, best: Best) -> dict[str, float]:
        return {"val/best_aufsc_keep": float(best.value) if best.epoch >= 0 else float("nan")}


__all__ = ["REFERENCE_BUDGET", "TRAINING_KEYS", "PGExplainerTrainer", "TrainingEvent",
           "event_loss", "feature_width", "train_epoch", "training_event", "validation_aufsc"]
