"""``python scripts/train_explainer.py``: train the temporal PGExplainer for one model.

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
3. after each epoch scores ``n_val_events`` events of the validation split (drawn once) with
   the exact oracle: the MLP ranks each event's removable events and ``validation_aufsc``
   takes the AUFSC (kept) of those rankings (``aufsc_keep``, the curves' kept sets of
   ``curve_removal_plan``, as ``explain.py`` computes them); the epoch with the best value is
   the one written (the reference keeps its last epoch);
4. after each epoch saves the MLP, the best one so far, the optimizer and the epoch to
   ``state.pt`` in its run directory (atomically: a kill or a full disk leaves the last
   complete state); rerunning the same command resumes there (another configuration in that
   directory is refused, and so is ``epochs`` below the epochs the state already holds: its
   card would not say what was trained; so is a state of the training before ``FORMAT`` 2).
   A ``state.pt`` that does not load (cut short by a copy) is moved aside as
   ``state.pt.corrupt-<n>`` with one warning line, and training starts again from epoch 0;
5. writes ``pgexplainer_<model>_<dataset>.pt`` and its ``.json`` card (the epoch chosen, the
   loss and validation history, the budget against the reference's, seconds, the stream
   checksum and the model checkpoint's SHA-256) into the run directory, or ``out_dir``
   (replacing a file there takes ``overwrite=true``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError, short_reason, warn
from cftgnn.explain.base import Explainer
from cftgnn.explain.factual import rank_by_importance
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
from cftgnn.files import atomic_output, check_writable_dir, remove_stale_temporaries
from cftgnn.models.protocol import SoftRemovalModel
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.oracle import Oracle
from cftgnn.oracle.probe import ModelProbe
from cftgnn.oracle.snapshots import DEFAULT_MEMORY_BUDGET_GB
from cftgnn.runs.build import model_fingerprint
from cftgnn.runs.options import check_train_explainer_options as check_options
from cftgnn.runs.options import trained_explainer
from cftgnn.runs.records import set_aside
from cftgnn.scoring.curves import FID_SHARES, aufsc_keep, kept_removal_sets
from cftgnn.tracking import Tracker, tracking
from cftgnn.training.checkpoint import probed_models_text
from cftgnn.training.kinds import unreadable_reason
from cftgnn.training.loop import EPOCHS_FROM, Split, epoch_entries, library_versions
from cftgnn.training.resolve import model_name, resolve_device, resolve_model

#: The resumable state in the run directory.
STATE = "state.pt"
#: The options that decide what a training computes (a resumed run must match them).
#: (``epochs`` is not one: rerunning with more epochs trains on from the last one; fewer
#: than the state holds are refused, ``_load_state``.)
TRAINING_KEYS = ("seed", "n_train_events", "train_range", "lr", "batch_size",
                 "hidden", "features", "n_val_events", "k", "m_max", "split")
#: The reference's budget (``PGExplainerExt``: 1,000 fresh events per epoch, 30 epochs on
#: Reddit to 100 on Wikipedia, Adam at 1e-4, 16 events per step), what a card compares with.
REFERENCE_LR = 1e-4
REFERENCE_BUDGET = {"events_per_epoch": 1000, "epochs": [30, 100], "lr": REFERENCE_LR,
                    "batch_size": 16}


def run_dir(cfg: DictConfig) -> Path:
    """Hydra's run directory (``outputs/train_explainer/<model>-<dataset>``: the same
    command resumes there), or ``cfg.run_dir`` outside Hydra."""
    if cfg.get("run_dir"):
        return Path(str(cfg.run_dir))
    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir)
    raise ConfigError("run_dir is not set and there is no Hydra run directory; set run_dir")


def training_events(stream: EventStream, split: Split, share: Any, n: int, seed: int,
                    epoch: int | None = None) -> npt.NDArray[np.int64]:
    """``n`` distinct event ids drawn from ``share`` of the training split ``[0, train_end)``,
    sorted (fewer when the range holds fewer); ``epoch`` given: the fresh draw of that epoch
    (seeded by ``(seed, epoch)``)."""
    lo, hi = int(share[0] * split.train_end), int(share[1] * split.train_end)
    pool = np.arange(max(lo, 1), hi, dtype=np.int64)
    rng = np.random.default_rng(seed if epoch is None else [seed, epoch])
    chosen = rng.choice(pool, size=min(n, len(pool)), replace=False)
    return np.sort(chosen)


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


def probe_or_reason(engine: ReplayEngine, event_id: int, k: int | None, m_max: int
                    ) -> tuple[ModelProbe, float] | str:
    """The probe of a training event and its original logit, or why the event cannot be
    explained (``explained_probe`` without the reason).

    Returns:
        ``(probe, logit)``, or the reason, one of ``SKIP_REASONS``' values (with ``k``).
    """
    model = engine.model
    if not isinstance(model, SoftRemovalModel):
        return SKIP_REASONS["soft_removal"]
    hops = int(model.num_layers) if k is None else int(k)
    cand = engine.index.candidates(int(event_id), hops, int(m_max))
    if len(cand) == 0:
        return SKIP_REASONS["no_candidate"].format(k=hops)
    start = engine.boundary(int(event_id))
    probe = ModelProbe(model, engine.base_state(start), start, int(event_id), cand.ids)
    p0 = probe.logit()
    return SKIP_REASONS["zero_logit"] if p0 == 0 else (probe, float(p0))


#: Why a drawn training or validation event is left out (``probe_or_reason``).
SKIP_REASONS = {
    "soft_removal": "the model offers no soft removal",
    # an event between two nodes that meet the stream for the first time has no history
    "no_candidate": "no candidate event (no earlier event within k={k} hops of its endpoints)",
    "zero_logit": "its logit is exactly 0 (no prediction to explain)",
}


def explained_probe(engine: ReplayEngine, event_id: int, k: int | None, m_max: int,
                    skipped: dict[int, str] | None = None) -> tuple[ModelProbe, float] | None:
    """The probe of a training event and its original logit, shared by the trained explainers
    (the PGExplainer's ``training_event``, TempME's ``tempme_event``).

    The candidates are the oracle's (``k``, ``m_max``; all removable); the probe starts from
    the engine's unperturbed state at the event's batch boundary and advances to the event.

    Args:
        engine: The replay engine.
        event_id: The event.
        k: Hop radius (None: the model's number of layers).
        m_max: Most candidates.
        skipped: Where an event that cannot be explained is noted, by id, with the reason.

    Returns:
        ``(probe, logit)``, or None when the event cannot be explained: a model without soft
        removal, no candidate, or a zero logit (``probe_or_reason`` says which).
    """
    found = probe_or_reason(engine, event_id, k, m_max)
    if isinstance(found, str):
        if skipped is not None:
            skipped[int(event_id)] = found
        return None
    return found


def oracle_skip_reason(oracle: Oracle | None, hops: int) -> str | None:
    """Why a (validation) oracle's event is not scored, as ``SKIP_REASONS`` says it, or None
    when it is (``hops``: the candidates' radius, for the message)."""
    if oracle is None or oracle.probe is None:
        return SKIP_REASONS["soft_removal"]
    status = Explainer.status(oracle)
    return {ExplanationStatus.ZERO_LOGIT: SKIP_REASONS["zero_logit"],
            ExplanationStatus.NO_CANDIDATES: SKIP_REASONS["no_candidate"].format(k=hops),
            ExplanationStatus.NO_REMOVABLE: "no removable candidate event"}.get(status)


def skipped_summary(what: str, drawn: int, skipped: dict[int, str]) -> str:
    """One line saying how many of the ``drawn`` events a training uses and why the others
    were left out (``skipped``: event id -> reason), e.g. ``training events: 1999 of 2000
    drawn used; 1 left out: event 26293, no candidate event (...)``."""
    counts: dict[str, list[int]] = {}
    for event, reason in sorted(skipped.items()):
        counts.setdefault(reason, []).append(event)
    parts = [f"event{'s' if len(ids) > 1 else ''} "
             f"{', '.join(map(str, ids[:5]))}{', ...' if len(ids) > 5 else ''}: {reason}"
             for reason, ids in counts.items()]
    return (f"{what}: {drawn - len(skipped)} of {drawn} drawn used; {len(skipped)} left out "
            f"({'; '.join(parts)})")


def skipped_records(skipped: dict[int, str]) -> list[dict[str, Any]]:
    """A card's record of drawn events left out (``skipped_events``,
    ``skipped_validation_events``): ``[{"event_id": ..., "reason": ...}]`` by id."""
    return [{"event_id": int(e), "reason": r} for e, r in sorted(skipped.items())]


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


def learning_rate(cfg: DictConfig, reference: float) -> float:
    """``cfg.lr``, or the explainer's reference rate where it is null (the default: the
    PGExplainer's reference trains at 1e-4, TempME's at 1e-3)."""
    return reference if cfg.get("lr") is None else float(cfg.lr)


def training_options(cfg: DictConfig, keys: Sequence[str], reference_lr: float
                     ) -> dict[str, Any]:
    """The options of ``keys`` that decide what a trained explainer's training computes (a
    resumed run must match them; its card keeps them), ``lr`` resolved to the rate used
    (``learning_rate``). Shared by the PGExplainer's (``TRAINING_KEYS``) and TempME's."""
    node = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(node, dict)
    return {k: node.get(k) for k in keys} | {"lr": learning_rate(cfg, reference_lr)}


def _options(cfg: DictConfig) -> dict[str, Any]:
    return training_options(cfg, TRAINING_KEYS, REFERENCE_LR)


#: What a training state holds (a file without one of them is not a state).
_STATE_KEYS = ("mlp", "optimizer", "epoch", "history", "seconds", "options")
#: What a PGExplainer state of ``FORMAT`` 2 holds besides (``_load_state(state_format=...)``).
_PG_STATE_KEYS = ("format", "best")


def _load_state(path: Path, options: dict[str, Any], epochs: int,
                state_format: int | None = None) -> dict[str, Any] | None:
    """The training state of an earlier run in this directory, or None (none, or one that does
    not load: moved aside with one warning line, training starts again).

    ``state_format`` given (the PGExplainer's ``FORMAT``): the state must be of that format
    and hold ``_PG_STATE_KEYS`` too; None (other trainers sharing this function): neither.

    Raises:
        ConfigError: The state was trained with other options, holds more epochs than
            ``epochs`` (the card would say fewer than were trained), or is a PGExplainer
            training of another format than ``state_format``.
    """
    if not path.is_file():
        return None
    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001  (whatever a cut-short or foreign file raises)
        why = unreadable_reason(path, exc)  # read before the file is moved
        moved = set_aside(path)
        warn(f"training state {path} is unreadable: it {why}; moved to {moved.name}, "
             "training starts again from epoch 0")
        return None
    try:
        if (state_format is not None and "mlp" in state and "optimizer" in state
                and state.get("format") != state_format):
            raise ConfigError(f"{path} holds a PGExplainer training of an earlier format (another "
                              "objective and input, before 2026-11-26), which this version "
                              "does not resume; delete it, or use another hydra.run.dir, to "
                              "train the current one from epoch 0")
        needed = _STATE_KEYS + (_PG_STATE_KEYS if state_format is not None else ())
        missing = [k for k in needed if k not in state]
        if missing:
            raise KeyError(f"no {missing[0]!r}")
        stored = json.loads(str(state["options"]))
        done = int(state["epoch"])
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001  (whatever a cut-short or foreign file raises)
        moved = set_aside(path)
        warn(f"training state {path} is unreadable ({short_reason(exc).split('. ')[0]}); "
             f"moved to {moved.name}, training starts again from epoch 0")
        return None
    if stored != json.loads(json.dumps(options)):
        raise ConfigError(f"{path} holds a training with other options; rerun with its "
                          "options, or use another hydra.run.dir")
    if done > epochs:
        raise ConfigError(f"{path} holds {done} trained epochs, more than epochs={epochs}; "
                          f"rerun with epochs={done} (or more, to train on), or use another "
                          f"hydra.run.dir to train {epochs} epoch{'s' * (epochs != 1)} from "
                          "scratch")
    return state


@dataclass
class TrainingSetup:
    """What a trained explainer's training run starts from (``training_setup``).

    Attributes:
        out: The run directory (its ``state.pt`` resumes the training).
        state_file: ``out / STATE``.
        state: The saved state to resume, or None.
        stream: The dataset.
        kind: The model's kind (``tgn``, ``tgat``, ...).
        destination: Where the trained explainer is written.
        model: The trained model, through soft removal.
        weights: The model checkpoint's path.
        fingerprint: The model's fingerprint (checked by the explainer's card).
        engine: The replay engine of the model over the stream.
        split: The chronological split of ``train.py``'s shares.
    """

    out: Path
    state_file: Path
    state: dict[str, Any] | None
    stream: EventStream
    kind: str
    destination: Path
    model: SoftRemovalModel
    weights: Any
    fingerprint: Any
    engine: ReplayEngine
    split: Split


def training_setup(cfg: DictConfig, options: dict[str, Any],
                   path_of: Callable[[Path, str, str], Path], what: str,
                   state_format: int | None = None) -> TrainingSetup:
    """The start of a trained explainer's training run, shared by the PGExplainer's and
    TempME's: the run directory and ``out_dir`` checked writable, a killed run's temporaries
    removed, the saved state loaded (``_load_state``), the device and threads set, the
    stream, the destination (refused when it exists without ``overwrite=true``), the model
    (refused without soft removal), its fingerprint (a saved state of another model
    checkpoint is refused: resuming would train on for the wrong model), engine and split.

    Args:
        cfg: The ``train_explainer.py`` configuration.
        options: The options the saved state must match.
        path_of: The trained explainer's file in a folder, for a model kind and stream name.
        what: The explainer, for messages (``the PGExplainer``).
        state_format: The state format this version resumes (None: any).

    Raises:
        CftgnnError: Before any training, for each of the refusals above.
    """
    out = run_dir(cfg)
    check_writable_dir(out, "hydra.run.dir")
    if cfg.get("out_dir"):
        check_writable_dir(Path(str(cfg.out_dir)), "out_dir")
    remove_stale_temporaries(out)  # what a killed run was writing
    (out / "state.tmp").unlink(missing_ok=True)  # the temporary of versions before 2026-11-26
    state_file = out / STATE
    state = _load_state(state_file, options, int(cfg.epochs), state_format)
    device = resolve_device(str(cfg.device))
    torch.set_num_threads(int(cfg.num_threads))
    stream: EventStream = instantiate(cfg.dataset)
    kind = model_name(cfg.model)
    destination = path_of(Path(str(cfg.out_dir)) if cfg.get("out_dir") else out, kind,
                          stream.name)
    existing = [p for p in (destination, destination.with_suffix(".json")) if p.exists()]
    if cfg.get("out_dir") and existing and cfg.get("overwrite") is not True:
        raise ConfigError(f"{existing[0]} exists and would be replaced; add overwrite=true to "
                          "replace it, or leave out out_dir to write into the run directory")
    model, weights = resolve_model(cfg.model, stream, cfg.checkpoint, cfg.paths.checkpoint_dir,
                                   device, int(cfg.seed), require=True)
    if not isinstance(model, SoftRemovalModel):
        raise ConfigError(f"{what} trains through soft removal, which model {kind!r} does not "
                          f"offer; use {probed_models_text()}")
    fp = model_fingerprint(cfg, stream, model, weights)
    saved = None if state is None else state.get("weights_sha256")
    if saved is not None and saved != fp.weights_sha256:
        raise ConfigError(f"{state_file} holds a training for the model checkpoint of SHA-256 "
                          f"{str(saved)[:12]}…, this run's checkpoint ({weights}) has "
                          f"{str(fp.weights_sha256)[:12]}…; rerun with that checkpoint, or use "
                          "another hydra.run.dir to train for this one from scratch")
    engine = ReplayEngine(model, stream,
                          memory_budget_gb=cfg.get("memory_budget_gb", DEFAULT_MEMORY_BUDGET_GB))
    engine.fingerprint = fp
    split = Split.chronological(stream.num_events, model.batch_size, float(cfg.split.val),
                                float(cfg.split.test))
    return TrainingSetup(out, state_file, state, stream, kind, destination, model, weights, fp,
                         engine, split)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Train (or resume training) the PGExplainer of ``cfg.model`` on ``cfg.dataset``.

    Returns:
        The card written next to the checkpoint.

    Raises:
        CftgnnError: For bad options, a model without soft removal or without a checkpoint,
            a run directory of other options or of more epochs, or an existing checkpoint
            without ``overwrite=true``; before any training. A full disk
            (``DiskFullError``) leaves the last complete state.
    """
    check_options(cfg)
    if trained_explainer(cfg) != "pgexplainer":  # scripts/train_explainer.py sends it there
        raise ConfigError("explainer=tempme trains in cftgnn.evaluation.tempme_training.run")
    options = _options(cfg)
    setup = training_setup(cfg, options, scorer_path, "the PGExplainer", FORMAT)
    state, state_file, out = setup.state, setup.state_file, setup.out
    stream, engine, split = setup.stream, setup.engine, setup.split
    kind = str(cfg.features)
    n_train, seed = int(cfg.n_train_events), int(cfg.seed)
    first_draw = training_events(stream, split, cfg.train_range, n_train, seed, 0)
    val_events = validation_events(split, int(cfg.n_val_events), seed)
    torch.manual_seed(seed)
    features: dict[int, torch.Tensor] = {}  # of this epoch's events: no MLP in them
    mlp = EdgeScorer(feature_width(engine, first_draw, cfg, features), int(cfg.hidden))
    optimizer = torch.optim.Adam(mlp.parameters(), lr=float(options["lr"]))
    history: list[dict[str, float]] = []
    seconds, first = 0.0, 0
    best: dict[str, Any] = {"epoch": -1, "aufsc_keep": float("-inf"), "mlp": mlp.state_dict()}
    # drawn events left out (no candidate, zero logit), by id with the reason: said each epoch
    skipped: dict[int, str] = {}
    val_skipped: dict[int, str] = {}
    if state is not None:
        mlp.load_state_dict(state["mlp"])
        optimizer.load_state_dict(state["optimizer"])
        history, seconds, first = list(state["history"]), float(state["seconds"]), int(
            state["epoch"])
        best = dict(state["best"])
        skipped = {int(e): str(r) for e, r in dict(state.get("skipped", {})).items()}
        print(f"resuming {state_file} after epoch {first}")
    tracker: Tracker = instantiate(cfg.logger)
    config = options | {"model": OmegaConf.to_container(cfg.model, resolve=True),
                        "dataset": stream.name, "weights": setup.weights}
    with tracking(tracker, config, name=f"pgexplainer-{stream.name}-{setup.kind}",
                  dir=str(out)):
        for epoch in range(first, int(cfg.epochs)):
            start = time.perf_counter()
            events = training_events(stream, split, cfg.train_range, n_train, seed, epoch)
            features.clear()
            left_out: dict[int, str] = {}
            loss_sum, used = _epoch(cfg, engine, mlp, optimizer, events, epoch, features,
                                    left_out)
            if left_out:
                print(skipped_summary(f"epoch {epoch + 1}: training events", len(events),
                                      left_out), flush=True)
            skipped |= left_out
            said = bool(val_skipped)  # the validation events are the same every epoch
            val, scored = _validate(cfg, engine, mlp, val_events, epoch, val_skipped)
            if val_skipped and not said:
                print(skipped_summary("validation events", len(val_events), val_skipped),
                      flush=True)
            took = time.perf_counter() - start
            seconds += took
            if val > best["aufsc_keep"]:  # NaN never wins
                best = {"epoch": epoch, "aufsc_keep": val,
                        "mlp": {k: v.clone() for k, v in mlp.state_dict().items()}}
            history.append({"epoch": epoch + EPOCHS_FROM, "loss": loss_sum / max(used, 1),
                            "events": used, "skipped": len(left_out), "val_aufsc_keep": val,
                            "val_events": scored, "seconds": took})
            tracker.log_progress(epoch + 1, {"train/loss": history[-1]["loss"],
                                             "val/aufsc_keep": val})
            print(f"epoch {epoch + 1}: loss {history[-1]['loss']:.4f}, validation AUFSC (kept) "
                  f"{val:.4f} on {scored} events, best epoch {int(best['epoch']) + EPOCHS_FROM}",
                  flush=True)
            with atomic_output(state_file) as f:  # complete or the last one
                torch.save({"mlp": mlp.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch + 1, "history": history, "seconds": seconds,
                            "options": json.dumps(options), "format": FORMAT,
                            "best": best, "skipped": skipped,
                            "weights_sha256": setup.fingerprint.weights_sha256}, f)
        if int(best["epoch"]) >= 0:
            mlp.load_state_dict(best["mlp"])
        card = card_of(setup.fingerprint, training_events=sum(int(h["events"]) for h in history),
                       events_per_epoch=n_train, epochs=int(cfg.epochs),
                       **epoch_entries(history, int(best["epoch"])),  # None: none scored
                       val_aufsc_keep=(float(best["aufsc_keep"]) if int(best["epoch"]) >= 0
                                       else None),
                       validation_event_ids=[int(e) for e in val_events],
                       skipped_events=skipped_records(skipped),
                       skipped_validation_events=skipped_records(val_skipped),
                       reference_budget=REFERENCE_BUDGET, note=cfg.get("note"),
                       training_seconds=seconds, options=options,
                       torch_threads=torch.get_num_threads(), versions=library_versions())
        pt, js = save_scorer(setup.destination, mlp, card, kind)
        tracker.log_summary({"train/final_loss": history[-1]["loss"] if history
                             else float("nan"), "train/seconds": seconds,
                             "val/best_aufsc_keep": float(best["aufsc_keep"])
                             if int(best["epoch"]) >= 0 else float("nan")})
    print(f"saved {pt} and {js} (epoch {card['best_epoch'] or 'none'} of {int(cfg.epochs)}, "
          f"{seconds:.0f} s of training)")
    return card


def validation_events(split: Split, n: int, seed: int) -> npt.NDArray[np.int64]:
    """``n`` distinct event ids of the validation split ``[train_end, val_end)``, sorted
    (drawn once, seeded by ``seed``; fewer when the split holds fewer)."""
    pool = np.arange(max(split.train_end, 1), split.val_end, dtype=np.int64)
    rng = np.random.default_rng([seed, 1 << 20])
    return np.sort(rng.choice(pool, size=min(n, len(pool)), replace=False))


def _validate(cfg: DictConfig, engine: ReplayEngine, mlp: EdgeScorer,
              events: npt.NDArray[np.int64], epoch: int,
              skipped: dict[int, str]) -> tuple[float, int]:
    """``validation_aufsc`` on exact oracles of ``events`` (stream order) with a progress
    bar; the events it cannot score go to ``skipped`` with the reason
    (``oracle_skip_reason``)."""
    hops = int(getattr(engine.model, "num_layers", 1)) if cfg.k is None else int(cfg.k)

    def oracles() -> Iterator[Oracle]:
        for e in events.tolist():
            oracle = engine.oracle(int(e), cfg.k, int(cfg.m_max), "exact")
            reason = oracle_skip_reason(oracle, hops)
            if reason is not None:
                skipped[int(e)] = reason
            yield oracle

    with tqdm(total=len(events), desc=f"validation {epoch + 1}/{int(cfg.epochs)}",
              unit="event", disable=not cfg.progress, dynamic_ncols=True) as bar:
        return validation_aufsc(mlp, oracles(), str(cfg.features), bar)


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


def _epoch(cfg: DictConfig, engine: ReplayEngine, mlp: EdgeScorer,
           optimizer: torch.optim.Optimizer, events: npt.NDArray[np.int64], epoch: int,
           features: dict[int, torch.Tensor], skipped: dict[int, str]) -> tuple[float, int]:
    """One pass over ``events`` (in stream order) with a progress bar; the events that
    cannot be explained go to ``skipped`` with the reason."""
    oracles = (training_event(engine, int(e), cfg.k, int(cfg.m_max), features,
                              str(cfg.features), skipped) for e in events.tolist())
    with tqdm(total=len(events), desc=f"epoch {epoch + 1}/{int(cfg.epochs)}", unit="event",
              disable=not cfg.progress, dynamic_ncols=True) as bar:
        return train_epoch(mlp, optimizer, oracles, int(cfg.batch_size), bar)


__all__ = ["REFERENCE_BUDGET", "TrainingEvent", "check_options", "event_loss", "learning_rate",
           "run", "training_options",
           "train_epoch", "training_event", "training_events", "validation_aufsc",
           "SKIP_REASONS", "oracle_skip_reason", "probe_or_reason", "skipped_records",
           "skipped_summary",
           "validation_events"]
