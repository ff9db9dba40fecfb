"""``python scripts/train_explainer.py explainer=tempme``: train TempME for one model.

One run = one dataset × one model (its committed checkpoint). It reuses the PGExplainer's
machinery (``cftgnn.evaluation.explainer_training``: the run directory, the training events,
the resumable state and its checks) and

1. draws ``n_train_events`` training events of the training split (``train_range``) and
   ``tempme.n_val_events`` validation events of the validation split and keeps those with a
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

import copy
import json
import time
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.evaluation.explainer_training import (
    explained_probe,
    probe_or_reason,
    skipped_records,
    skipped_summary,
    training_events,
    training_options,
    training_setup,
)
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
from cftgnn.files import atomic_output
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.probe import ModelProbe
from cftgnn.runs.options import check_train_explainer_options, trained_explainer
from cftgnn.tracking import Tracker, tracking
from cftgnn.training.loop import EPOCHS_FROM, epoch_entries, library_versions

#: The options that decide what a TempME training computes (a resumed run must match them).
TRAINING_KEYS = ("seed", "n_train_events", "train_range", "lr", "batch_size", "k",
                 "m_max", "split", "tempme")


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


#: TempME's reference learning rate (Adam; its public code's default), used where ``lr`` is null.
REFERENCE_LR = 1e-3


def _options(cfg: DictConfig) -> dict[str, Any]:
    return training_options(cfg, TRAINING_KEYS, REFERENCE_LR)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Train (or resume training) TempME for ``cfg.model`` on ``cfg.dataset``.

    Returns:
        The card written next to the checkpoint.

    Raises:
        CftgnnError: For bad options, a model without soft removal or without a checkpoint,
            a run directory of other options or of more epochs, or an existing checkpoint
            without ``overwrite=true``; before any training.
    """
    check_train_explainer_options(cfg)  # the shared options, then the tempme: block
    if cfg.get("tempme") is None or trained_explainer(cfg) != "tempme":
        raise ConfigError("tempme_training.run trains explainer=tempme; this configuration "
                          "selects another explainer")
    options = _options(cfg)
    setup = training_setup(cfg, options, tempme_path, "TempME")
    state, state_file, out = setup.state, setup.state_file, setup.out
    stream, engine, split, weights = setup.stream, setup.engine, setup.split, setup.weights
    kind, destination, fp = setup.kind, setup.destination, setup.fingerprint
    tm = cfg.tempme
    hp = {k: tm[k] for k in ("temp", "prior_p", "beta")}
    walk = {"n_walks": int(tm.n_walks), "length": int(tm.length), "degree": int(tm.degree)}
    train_ids = training_events(stream, split, cfg.train_range, int(cfg.n_train_events),
                                int(cfg.seed))
    val_pool = np.arange(split.train_end, split.val_end, dtype=np.int64)
    rng = np.random.default_rng(int(cfg.seed) + 1)
    val_ids = np.sort(rng.choice(val_pool, size=min(int(tm.n_val_events), len(val_pool)),
                                 replace=False)) if len(val_pool) else val_pool
    torch.manual_seed(int(cfg.seed))
    shape = EncoderShape(edge_dim=stream.feat_dim, length=walk["length"],
                         hidden=int(tm.hidden), time_dim=int(tm.time_dim),
                         dropout=float(tm.dropout))
    encoder = MotifEncoder(shape)
    optimizer = torch.optim.Adam(encoder.parameters(), lr=float(options["lr"]))
    history: list[dict[str, float]] = []
    seconds, first = 0.0, 0
    best: dict[str, Any] = {"epoch": -1, "val_loss": float("inf"),
                            "state": copy.deepcopy(encoder.state_dict())}
    if state is not None:
        encoder.load_state_dict(state["mlp"])
        optimizer.load_state_dict(state["optimizer"])
        history, seconds, first = list(state["history"]), float(state["seconds"]), int(
            state["epoch"])
        prior = state["prior"]
        best = {"epoch": int(state["best_epoch"]), "val_loss": float(state["best_val"]),
                "state": state["best"]}
        print(f"resuming {state_file} after epoch {first}")
    else:
        start = time.perf_counter()
        null_ids = training_events(stream, split, cfg.train_range, int(tm.null_events),
                                   int(cfg.seed) + 2)
        prior = torch.from_numpy(null_prior(stream, null_ids, walk["n_walks"], walk["length"],
                                            walk["degree"], int(cfg.seed))).float()
        seconds += time.perf_counter() - start
    start = time.perf_counter()
    train_events, train_skipped = tempme_events(engine, train_ids, cfg, walk, "training events")
    val_events, val_skipped = tempme_events(engine, val_ids, cfg, walk, "validation events")
    seconds += time.perf_counter() - start
    if not train_events:
        raise ConfigError("no training event has a removable candidate; widen train_range or "
                          "draw more n_train_events")
    generator = torch.Generator().manual_seed(int(cfg.seed))
    tracker: Tracker = instantiate(cfg.logger)
    config = options | {"model": OmegaConf.to_container(cfg.model, resolve=True),
                        "dataset": stream.name, "weights": weights}
    with tracking(tracker, config, name=f"tempme-{stream.name}-{kind}", dir=str(out)):
        for epoch in range(first, int(cfg.epochs)):
            generator.manual_seed(int(cfg.seed) * 1000 + epoch)
            # dropout draws from torch's global generator: seeded per epoch too, so that a
            # resumed run trains on as an uninterrupted one does (since 2026-11-26)
            torch.manual_seed(int(cfg.seed) * 1000 + epoch)
            tick = time.perf_counter()
            with tqdm(total=len(train_events), desc=f"epoch {epoch + 1}/{int(cfg.epochs)}",
                      unit="event", disable=not cfg.progress, dynamic_ncols=True) as bar:
                loss = train_epoch(encoder, optimizer, train_events, stream, prior, hp,
                                   int(cfg.batch_size), generator, bar)
                val = validation_loss(encoder, val_events, stream, prior, hp)
                bar.set_postfix(loss=f"{loss:.4f}", val=f"{val:.4f}", refresh=True)
            took = time.perf_counter() - tick
            seconds += took
            # no validation event (a tiny stream): the last epoch is the one kept
            if not np.isfinite(val) or val < best["val_loss"] or best["epoch"] < 0:
                best = {"epoch": epoch, "val_loss": val,
                        "state": copy.deepcopy(encoder.state_dict())}
            history.append({"epoch": epoch + EPOCHS_FROM, "loss": loss, "val_loss": val,
                            "events": len(train_events), "seconds": took})
            tracker.log_progress(epoch + 1, {"train/loss": loss, "val/loss": val})
            with atomic_output(state_file) as f:
                torch.save({"mlp": encoder.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch + 1, "history": history, "seconds": seconds,
                            "options": json.dumps(options), "prior": prior,
                            "best": best["state"], "best_epoch": best["epoch"],
                            "best_val": best["val_loss"], "weights_sha256": fp.weights_sha256}, f)
        encoder.load_state_dict(best["state"])
        encoder.eval()
        card = tempme_card(fp, training_events=len(train_events),
                           validation_events=len(val_events),
                           event_ids=[int(e) for e in train_ids],
                           validation_event_ids=[int(e) for e in val_ids],
                           skipped_events=skipped_records(train_skipped),
                           skipped_validation_events=skipped_records(val_skipped),
                           epochs=int(cfg.epochs), **epoch_entries(history, int(best["epoch"])),
                           best_val_loss=float(best["val_loss"]), training_seconds=seconds,
                           options=options, prior=prior.tolist(),
                           torch_threads=torch.get_num_threads(), versions=library_versions())
        pt, js = save_tempme(destination, TrainedTempME(encoder, walk["n_walks"],
                                                        walk["degree"], card))
        tracker.log_summary({"train/final_loss": history[-1]["loss"] if history
                             else float("nan"), "train/seconds": seconds})
    print(f"saved {pt} and {js} ({seconds:.0f} s of training, best epoch "
          f"{card['best_epoch']})")
    return card


__all__ = ["TempMEEvent", "event_loss", "run", "tempme_event", "tempme_events", "train_epoch",
           "validation_loss"]
