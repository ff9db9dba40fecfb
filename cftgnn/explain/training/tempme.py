"""``python scripts/train_explainer.py explainer=tempme``: TempME's objective
(``TempMETrainer``; the loop, the resume and the state are ``ExplainerTrainer``'s).

One run = one dataset × one model (its committed checkpoint). It shares the PGExplainer's
machinery (``cftgnn.explain.training``: the run directory, the events drawn, the resumable
state and its checks, the epoch loop) and

1. draws ``n_train_events`` training events of the training split (``train_range``) and
   ``tempme.n_val_events`` validation events of the validation split (``validation_events``,
   the PGExplainer's draw since 2026-12-02) and keeps those with a
   nonzero logit and a removable candidate (``k``, ``m_max``, as ``explain.py``;
   history=event); the others (an event between two nodes new to the stream has no candidate)
   are named with the reason in one line and in the card (``skipped_events``);
2. computes the null-model prior once (``null_prior`` on ``tempme.null_events`` training
   events; kept in the state and the checkpoint);
3. trains ``MotifEncoder`` for ``epochs`` epochs: per event, walks from the source, the
   destination and a negative destination (a node drawn uniformly, seeded), the walk
   importances, the event importances through the concrete relaxation (``temp``), the soft-
   removal logit of the probe with them as weights on the removable events, and
   ``tempme_loss``, averaged over ``batch_size`` events per Adam step (events in stream order);
4. after each epoch evaluates the validation loss (deterministic weights, fixed walks, eval
   mode) and keeps the encoder of the best epoch (**validation-selected**), then saves the
   state (atomically) to ``state.pt``: rerunning the same command resumes there, to the
   weights of an uninterrupted run (each epoch's draws, dropout's too, seeded by the epoch);
5. writes ``tempme_<model>_<dataset>.pt`` (the best epoch's encoder) and its ``.json`` card
   (training and validation events, epochs, the best epoch, seconds, loss history, the stream
   checksum and the model checkpoint's SHA-256) into the run directory, or ``out_dir``.
   Epochs are numbered from 1 in the card and the log alike
   (``cftgnn.training.loop.EPOCHS_FROM``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from omegaconf import DictConfig
from torch import nn
from tqdm.auto import tqdm

from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.explain.tempme.explainer import (
    TrainedTempME,
    save_tempme,
    tempme_card,
    tempme_path,
)
from cftgnn.explain.tempme.model import (
    EncoderShape,
    MotifEncoder,
    concrete,
    event_importance,
    tempme_loss,
)
from cftgnn.explain.tempme.walks import Walks, null_prior, sample_walks
from cftgnn.explain.training.base import Best, EpochResult, ExplainerTrainer
from cftgnn.explain.training.events import (
    explained_probe,
    probe_or_reason,
    skipped_records,
    skipped_summary,
    training_events,
    validation_events,
)
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.probe import ModelProbe
from cftgnn.training.loop import epoch_entries, library_versions

#: The options that decide what a TempME training computes (a resumed run must match them).
TRAINING_KEYS = ("seed", "n_train_events", "train_range", "lr", "batch_size", "k",
                 "m_max", "split", "tempme")


#: TempME's reference learning rate (Adam; its public code's default), used where ``lr`` is null.
REFERENCE_LR = 1e-3



class TempMEEvent:
    """One explained event of a training: its probe, label and walks (sampled once).

    Args:
        probe: The event's probe over its removable events.
        original_logit: The model's logit with the full history (nonzero).
        walks: Walks from the source, the destination and a negative destination.
    """

    def __init__(self, probe: ModelProbe, original_logit: float, walks: list[Walks]) -> None:
        self.probe = probe
        self.original_logit = float(original_logit)
        self.walks = walks
        self.inputs: list[dict[str, torch.Tensor]] | None = None


def tempme_event(engine: ReplayEngine, event_id: int, k: int | None, m_max: int,
                 walk: dict[str, int], seed: int) -> TempMEEvent | None:
    """The training event ``event_id`` (None: no candidate, or a zero logit).

    Args:
        engine: The replay engine (its model offers soft removal).
        event_id: The event.
        k: Hop radius (None: the model's number of layers).
        m_max: Most candidates.
        walk: ``n_walks``, ``length`` and ``degree``.
        seed: Seed of the walks and of the negative destination (with the event id).
    """
    explained = probe_or_reason(engine, event_id, k, m_max)
    return None if isinstance(explained, str) else _with_walks(engine, *explained, event_id,
                                                                walk, seed)


def _with_walks(engine: ReplayEngine, probe: ModelProbe, p0: float, event_id: int,
                walk: dict[str, int], seed: int) -> TempMEEvent:
    rng = np.random.default_rng([int(seed), int(event_id)])
    negative = int(rng.integers(engine.stream.num_nodes))
    walks = [sample_walks(engine.index, root, int(event_id), walk["n_walks"], walk["length"],
                          walk["degree"], rng)
             for root in (probe.src, probe.dst, negative)]
    return TempMEEvent(probe, p0, walks)


def event_loss(encoder: MotifEncoder, event: TempMEEvent, stream: EventStream,
               prior: torch.Tensor, hp: dict[str, Any], train: bool,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """TempME's loss on one event: walk importances, event importances (relaxed when
    ``train``) as soft-removal weights, ``tempme_loss``."""
    if event.inputs is None:
        event.inputs = [encoder.inputs(w, stream.edge_feat, stream.t, event.probe.t)
                        for w in event.walks]
    probs = [encoder(x) for x in event.inputs]
    imp = event_importance(event.probe.removable, list(zip(event.walks[:2], probs[:2],
                                                           strict=True)))
    weights = concrete(imp, float(hp["temp"]), generator) if train else imp
    weights = torch.where(imp > 0, weights, torch.zeros_like(weights))  # on no walk: out
    logit = event.probe.soft_logit(weights)
    roots = [(p, x["classes"]) for p, x in zip(probs, event.inputs, strict=True)]
    return tempme_loss(logit, float(event.original_logit > 0), roots, prior,
                       float(hp["prior_p"]), float(hp["beta"]))


def tempme_events(engine: ReplayEngine, ids: npt.NDArray[np.int64], cfg: DictConfig,
                  walk: dict[str, int], desc: str) -> tuple[list[TempMEEvent], dict[int, str]]:
    """The drawn events ``ids`` that can be explained (``tempme_event``), and the others by
    id with the reason (``explained_probe``: e.g. an event between two nodes new to the
    stream has no candidate event); a line on stdout says how many were left out and why.

    Returns:
        ``(events, skipped)``.
    """
    out: list[TempMEEvent] = []
    skipped: dict[int, str] = {}
    for e in tqdm(ids.tolist(), desc=desc, unit="event", disable=not cfg.progress,
                  dynamic_ncols=True):
        found = explained_probe(engine, int(e), cfg.k, int(cfg.m_max), skipped)
        if found is not None:
            out.append(_with_walks(engine, *found, int(e), walk, int(cfg.seed)))
    if skipped:
        print(skipped_summary(desc, len(ids), skipped))
    return out, skipped


def validation_loss(encoder: MotifEncoder, events: list[TempMEEvent], stream: EventStream,
                    prior: torch.Tensor, hp: dict[str, Any]) -> float:
    """The mean loss over ``events`` with deterministic weights, in eval mode."""
    encoder.eval()
    with torch.no_grad():
        losses = [float(event_loss(encoder, ev, stream, prior, hp, train=False))
                  for ev in events]
    return float(np.mean(losses)) if losses else float("nan")


def train_epoch(encoder: MotifEncoder, optimizer: torch.optim.Optimizer,
                events: list[TempMEEvent], stream: EventStream, prior: torch.Tensor,
                hp: dict[str, Any], batch_size: int, generator: torch.Generator,
                bar: tqdm[Any] | None = None) -> float:
    """One pass over ``events``: the loss averaged over ``batch_size`` events per step.

    Returns:
        The mean training loss.
    """
    encoder.train()
    total, pending = 0.0, 0
    optimizer.zero_grad()
    for ev in events:
        loss = event_loss(encoder, ev, stream, prior, hp, train=True, generator=generator)
        (loss / batch_size).backward()
        total, pending = total + float(loss.detach()), pending + 1
        if pending == batch_size:
            optimizer.step()
            optimizer.zero_grad()
            pending = 0
        if bar is not None:
            bar.update()
    if pending:
        optimizer.step()
        optimizer.zero_grad()
    encoder.eval()
    return total / max(len(events), 1)


class TempMETrainer(ExplainerTrainer):
    """TempME's objective (the module docstring): the training events drawn once, walks
    sampled once, ``tempme_loss``, the epoch of least validation loss kept."""

    KIND = "tempme"
    WHAT = "TempME"
    TRAINING_KEYS = TRAINING_KEYS
    REFERENCE_LR = REFERENCE_LR
    WORST = float("inf")

    @staticmethod
    def path_of(directory: str | Path, model: str, dataset: str) -> Path:
        return tempme_path(directory, model, dataset)

    def build(self) -> nn.Module:
        cfg, setup, tm = self.cfg, self.setup, self.cfg.tempme
        self.hp = {k: tm[k] for k in ("temp", "prior_p", "beta")}
        self.walk = {"n_walks": int(tm.n_walks), "length": int(tm.length),
                     "degree": int(tm.degree)}
        self.train_ids = training_events(setup.stream, setup.split, cfg.train_range,
                                         int(cfg.n_train_events), int(cfg.seed))
        self.val_ids = validation_events(setup.split, int(tm.n_val_events), int(cfg.seed))
        shape = EncoderShape(edge_dim=setup.stream.feat_dim, length=self.walk["length"],
                             hidden=int(tm.hidden), time_dim=int(tm.time_dim),
                             dropout=float(tm.dropout))
        return MotifEncoder(shape)

    def resume(self, state: dict[str, Any]) -> Best:
        self.prior: torch.Tensor = state["prior"]
        return Best(int(state["best_epoch"]), float(state["best_val"]), state["best"])

    def prepare(self, resumed: bool) -> None:
        """The null-model prior (not when resumed: the state keeps it) and the training and
        validation events with their walks."""
        cfg, setup, walk = self.cfg, self.setup, self.walk
        if not resumed:
            null_ids = training_events(setup.stream, setup.split, cfg.train_range,
                                       int(cfg.tempme.null_events), int(cfg.seed) + 2)
            self.prior = torch.from_numpy(null_prior(
                setup.stream, null_ids, walk["n_walks"], walk["length"], walk["degree"],
                int(cfg.seed))).float()
        self.train_events, self.train_skipped = tempme_events(
            setup.engine, self.train_ids, cfg, walk, "training events")
        self.val_events, self.val_skipped = tempme_events(
            setup.engine, self.val_ids, cfg, walk, "validation events")
        if not self.train_events:
            raise ConfigError("no training event has a removable candidate; widen train_range "
                              "or draw more n_train_events")
        self.generator = torch.Generator().manual_seed(int(cfg.seed))

    def epoch(self, module: nn.Module, optimizer: torch.optim.Optimizer,
              epoch: int) -> EpochResult:
        assert isinstance(module, MotifEncoder)
        cfg, stream = self.cfg, self.setup.stream
        self.generator.manual_seed(int(cfg.seed) * 1000 + epoch)
        # dropout draws from torch's global generator: seeded per epoch too, so that a
        # resumed run trains on as an uninterrupted one does (since 2026-11-26)
        torch.manual_seed(int(cfg.seed) * 1000 + epoch)
        with tqdm(total=len(self.train_events), desc=f"epoch {epoch + 1}/{int(cfg.epochs)}",
                  unit="event", disable=not cfg.progress, dynamic_ncols=True) as bar:
            loss = train_epoch(module, optimizer, self.train_events, stream, self.prior,
                               self.hp, int(cfg.batch_size), self.generator, bar)
            val = validation_loss(module, self.val_events, stream, self.prior, self.hp)
            bar.set_postfix(loss=f"{loss:.4f}", val=f"{val:.4f}", refresh=True)
        return EpochResult({"loss": loss, "val_loss": val, "events": len(self.train_events)},
                           val, {"train/loss": loss, "val/loss": val})

    def improves(self, value: float, best: Best) -> bool:
        # no validation event (a tiny stream): the last epoch is the one kept
        return not np.isfinite(value) or value < best.value or best.epoch < 0

    def report(self, epoch: int, entry: dict[str, Any], best: Best) -> None:
        return None  # the epoch's bar says its loss and validation loss

    def state_of(self, best: Best) -> dict[str, Any]:
        return {"prior": self.prior, "best": best.weights, "best_epoch": best.epoch,
                "best_val": best.value}

    def card(self, history: list[dict[str, Any]], best: Best, seconds: float
             ) -> dict[str, Any]:
        return tempme_card(self.setup.fingerprint, training_events=len(self.train_events),
                           validation_events=len(self.val_events),
                           event_ids=[int(e) for e in self.train_ids],
                           validation_event_ids=[int(e) for e in self.val_ids],
                           skipped_events=skipped_records(self.train_skipped),
                           skipped_validation_events=skipped_records(self.val_skipped),
                           epochs=int(self.cfg.epochs), **epoch_entries(history, best.epoch),
                           best_val_loss=float(best.value), training_seconds=seconds,
                           options=self.options, prior=self.prior.tolist(),
                           torch_threads=torch.get_num_threads(), versions=library_versions())

    def save(self, module: nn.Module, card: dict[str, Any]) -> tuple[Path, Path]:
        assert isinstance(module, MotifEncoder)
        return save_tempme(self.setup.destination, TrainedTempME(
            module, self.walk["n_walks"], self.walk["degree"], card))


__all__ = ["REFERENCE_LR", "TRAINING_KEYS", "TempMEEvent", "TempMETrainer", "event_loss",
           "tempme_event", "tempme_events", "train_epoch", "validation_loss"]
