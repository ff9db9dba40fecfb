"""Training and evaluation of temporal link predictors (self-supervised, random negatives).

Protocol: chronological 70/15/15 split with the split points rounded down to batch
boundaries (so that no history batch straddles two splits; on a TGB stream, TGB's own split
points, rounded down the same way, and TGB's MRR and hits@k on the card:
``cftgnn.training.tgb_eval``); one random negative destination per
positive event, drawn from the stream's destination nodes; BCE loss; Adam; early stopping on
validation AP. Test metrics are reported *transductive* (all test events) and *inductive*
(test events with an endpoint that never occurs in a training event).

Each training step predicts a batch from the history before it (memory with the previous
batch's messages applied, with gradients) and then advances the model over that batch, so
training uses exactly the replay path the explainers use.

``run`` writes ``<model>_<dataset>.pt`` and its ``.json`` card into the run's own
directory (``out_dir``, else Hydra's run directory); it never replaces an existing checkpoint,
e.g. a committed one under ``checkpoints/``, unless ``overwrite=true`` (checked before
training starts).
"""

from __future__ import annotations

import copy
import importlib.metadata
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from cftgnn.data.stream import EventStream
from cftgnn.data.tgb_negatives import TGBNegatives
from cftgnn.errors import ConfigError, TrainingError
from cftgnn.files import check_writable_dir
from cftgnn.models.base import TemporalModel, eval_mode
from cftgnn.training.checkpoint import checkpoint_path, model_kind, save_checkpoint
from cftgnn.training.metrics import average_precision, roc_auc
from cftgnn.training.options import check_train_options
from cftgnn.training.resolve import resolve_device
from cftgnn.training.tgb_eval import (
    RANK_PROTOCOL,
    NegativeRanker,
    TGBSplit,
    load_negatives,
    rank_walk_bounds,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Split:
    """Chronological split by event id: train ``[0, train_end)``, val ``[train_end, val_end)``,
    test ``[val_end, num_events)``."""

    train_end: int
    val_end: int
    num_events: int

    @classmethod
    def chronological(cls, num_events: int, batch_size: int, val: float = 0.15,
                      test: float = 0.15) -> Split:
        """Split points at ``1 - val - test`` and ``1 - test``, rounded down to batch bounds."""
        def cut(frac: float) -> int:
            return int(num_events * frac) // batch_size * batch_size

        return cls(cut(1.0 - val - test), cut(1.0 - test), num_events)

    @property
    def trainable(self) -> bool:
        """Whether the training and the validation part each hold at least one event (so
        that the loss and the validation AP are numbers)."""
        return 0 < self.train_end < self.val_end


def minimum_events(batch_size: int, val: float = 0.15, test: float = 0.15) -> int:
    """The fewest events whose ``Split.chronological`` split trains and validates
    (``Split.trainable``): one batch for each part at least."""
    train, train_val = 1.0 - val - test, 1.0 - test
    # enough for sure: the training part spans a batch, the validation part two
    bound = math.ceil(max(batch_size / train, 2 * batch_size / val)) + 1
    # the least one is where the training part first reaches a batch, or where the training
    # and validation parts together reach k batches (k >= 2); +-1 for rounding
    steps = [math.ceil(batch_size / train)]
    steps += (math.ceil(k * batch_size / train_val) for k in range(2, 100_002))
    for n in sorted(steps):
        if n > bound:
            break
        for m in (n - 1, n, n + 1):
            if m > 0 and Split.chronological(m, batch_size, val, test).trainable:
                return m
    return bound


def safe_events(batch_size: int, val: float = 0.15, test: float = 0.15) -> int:
    """A size from which on every stream trains and validates: the training share spans a
    batch and the validation share more than one, so neither part can round down to nothing.
    Sizes between [``minimum_events``][cftgnn.training.loop.minimum_events] and this one may
    not split: the cuts round down to whole batches."""
    train = 1.0 - val - test
    return math.ceil(max(batch_size / train, (batch_size + 1) / val)) + 1


def check_trainable(split: Split, batch_size: int, val: float, test: float,
                    name: str) -> None:
    """Refuse a stream too small to train and validate on, before training.

    Raises:
        ConfigError: Saying how many events the split needs.
    """
    if split.trainable:
        return
    need = minimum_events(batch_size, val, test)
    shares = f"with batch size {batch_size} and split.val={val:g}, split.test={test:g}"
    if split.num_events < need:
        raise ConfigError(
            f"stream {name!r} has {split.num_events:,} events, too few to train and validate "
            f"on: {shares} the training and validation parts need a batch each, {need:,} "
            "events at least")
    raise ConfigError(
        f"stream {name!r} has {split.num_events:,} events, which do not split into training "
        f"and validation parts: {shares} the cuts, rounded down to whole batches, leave one "
        f"of them empty; {safe_events(batch_size, val, test):,} events or more always split "
        "(or choose a smaller model.batch_size)")


def negative_destinations(stream: EventStream, lo: int, hi: int, seed: int) -> npt.NDArray[
        np.int64]:
    """One random negative destination per event in ``[lo, hi)``, drawn from the destination
    nodes of the stream, reproducible from ``seed`` (``int64 [hi - lo]``)."""
    pool = np.unique(stream.dst)
    rng = np.random.default_rng([seed, lo, hi])
    return pool[rng.integers(0, len(pool), hi - lo)]


def train_epoch(model: TemporalModel, optimizer: torch.optim.Optimizer, end: int,
                seed: int, progress: bool = True) -> float:
    """One pass over history ``[0, end)`` from a reset state; returns the mean loss."""
    stream = model.stream
    model.reset()
    model.train()
    negs = negative_destinations(stream, 0, end, seed)
    losses = []
    bce = torch.nn.BCEWithLogitsLoss()
    bounds = range(0, end, model.batch_size)
    for lo in tqdm(bounds, desc="train", leave=False, disable=not progress, mininterval=5):
        hi = min(lo + model.batch_size, end)
        src, dst, t = stream.src[lo:hi], stream.dst[lo:hi], stream.t[lo:hi]
        n = hi - lo
        own = np.arange(lo, hi)  # each event attends to the history before itself
        logits = model.predict(np.r_[src, src], np.r_[dst, negs[lo:hi]], np.r_[t, t],
                               before=np.r_[own, own])
        labels = torch.cat([torch.ones(n), torch.zeros(n)]).to(logits.device)
        loss = bce(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        model.advance(lo, hi)
        losses.append(loss.item())
    return float(np.mean(losses)) if losses else float("nan")


def score_range(model: TemporalModel, lo: int, hi: int, seed: int, progress: bool = False,
                negatives: bool = True) -> tuple[npt.NDArray[np.float64],
                                                 npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Score the events ``[lo, hi)`` (and one negative each), advancing the model over them.

    The model must be at position ``lo`` (a batch boundary). Each batch is predicted from the
    memory of the batches before it and, for neighbour attention, every event before the
    predicted one; then it is consumed.

    Args:
        model: An attached model at position ``lo``.
        lo: First event scored.
        hi: End of the scored range (exclusive).
        seed: Seed of the negative destinations.
        progress: Show a progress bar.
        negatives: Also score one random negative destination per event.

    Returns:
        ``(pos, neg, neg_dst)``: logits of the events and of their negatives, ``[hi - lo]``
        each, and the negative destinations (both empty without ``negatives``).
    """
    stream = model.stream
    negs = (negative_destinations(stream, lo, hi, seed) if negatives
            else np.zeros(0, dtype=np.int64))
    pos, neg = [], []
    for _, logits in score_batches(model, lo, hi, negs if negatives else None, progress):
        pos.append(logits[: len(logits) // (2 if negatives else 1)])
        neg.append(logits[len(pos[-1]):])
    return (np.concatenate(pos).astype(np.float64) if pos else np.zeros(0),
            np.concatenate(neg).astype(np.float64) if neg else np.zeros(0), negs)


def score_batches(model: TemporalModel, lo: int, hi: int,
                  negs: npt.NDArray[np.int64] | None = None, progress: bool = False,
                  own_batch_neighbors: bool = True,
                  before_advance: Callable[[int, int], None] | None = None
                  ) -> Iterator[tuple[int, npt.NDArray[np.float32]]]:
    """Score the events ``[lo, hi)`` batch by batch, advancing the model over each batch
    after scoring it (the scoring rule of ``score_range``, streamed: nothing is kept).

    Args:
        model: An attached model at position ``lo`` (a batch boundary).
        lo: First event scored.
        hi: End of the scored range (exclusive).
        negs: Negative destination of each event, ``int64 [hi - lo]``, or None for none.
        progress: Show a progress bar.
        own_batch_neighbors: Let each event's neighbour sampling see the earlier events of
            its own batch (``before`` = its position, as in training); False: only the
            consumed batches (the prediction of ``history=batch_start``,
            ``cftgnn.oracle.history``).
        before_advance: Called with each batch's ``(a, b)`` after its prediction and
            before the model consumes it, in eval mode without gradients: where more
            queries are scored from the same state (TGB's negatives,
            ``cftgnn.training.tgb_eval``).

    Yields:
        ``(a, logits)``: the batch's first event and its logits, ``float32 [b - a]``, then
        those of its negatives when ``negs`` is given.
    """
    stream = model.stream
    with eval_mode(model):
        bounds = range(lo, hi, model.batch_size)
        for a in tqdm(bounds, desc="scoring", leave=False, disable=not progress, mininterval=5):
            b = min(a - a % model.batch_size + model.batch_size, hi)
            src, dst, t, own = stream.src[a:b], stream.dst[a:b], stream.t[a:b], np.arange(a, b)
            if negs is not None:
                src, t, own = np.r_[src, src], np.r_[t, t], np.r_[own, own]
                dst = np.r_[dst, negs[a - lo:b - lo]]
            logits = model.predict(src, dst, t, before=own if own_batch_neighbors else None
                                   ).cpu().numpy()
            if before_advance is not None:
                before_advance(a, b)
            model.advance(a, b)
            yield a, logits


def link_metrics(pos: npt.NDArray[np.float64], neg: npt.NDArray[np.float64]) -> dict[str, float]:
    """AP and AUC of positives against negatives."""
    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    s = np.r_[pos, neg]
    return {"ap": average_precision(y, s), "auc": roc_auc(y, s), "n": int(len(pos))}


def evaluate_test(model: TemporalModel, split: Split, seed: int,
                  progress: bool = False) -> dict[str, Any]:
    """Replay train+val from scratch, then score the test range (transductive and inductive).

    Inductive events are test events with an endpoint that occurs in no training event.
    """
    stream = model.stream
    model.reset()
    model.advance(0, split.val_end)
    pos, neg, _ = score_range(model, split.val_end, split.num_events, seed, progress)
    seen = np.zeros(stream.num_nodes, dtype=bool)
    seen[stream.src[: split.train_end]] = True
    seen[stream.dst[: split.train_end]] = True
    test_src = stream.src[split.val_end:]
    test_dst = stream.dst[split.val_end:]
    inductive = ~seen[test_src] | ~seen[test_dst]
    return {"transductive": link_metrics(pos, neg),
            "inductive": link_metrics(pos[inductive], neg[inductive])}


def evaluate_tgb(model: TemporalModel, split: Split, tables: dict[str, TGBNegatives],
                 k: int = 10, max_pairs: int = 8192, progress: bool = False) -> dict[str, Any]:
    """TGB's MRR and hits@k of the validation and test parts (``cftgnn.training.tgb_eval``).

    Replays the training part from scratch, then walks the rest of the stream batch by batch
    as ``score_range`` does, ranking every event with negatives against them before its batch
    is consumed.

    Args:
        model: The trained, attached model.
        split: The batch-aligned split trained on (``TGBSplit``'s points).
        tables: TGB's negatives by split (``load_negatives``).
        k: The k of hits@k.
        max_pairs: Pairs per model call.
        progress: Show a progress bar over the pairs.

    Returns:
        ``{"val": {...}, "test": {...}, "k", "pairs", "seconds", "protocol"}``: each part's
        ``mrr``, ``hits@<k>``, ``n`` (events ranked) and ``mean_negatives``; the pairs
        scored and the walk's seconds (the replay of the training part included).
    """
    lo, hi = rank_walk_bounds(tables, split.train_end, model.stream.name)
    t0 = time.perf_counter()
    model.reset()
    model.advance(0, lo)
    ranker = NegativeRanker(model, tables, max_pairs, progress)
    try:
        for _ in score_batches(model, lo, hi, before_advance=ranker):
            pass
    finally:
        ranker.close()
    return {**ranker.summary(k), "k": k, "pairs": ranker.pairs,
            "seconds": time.perf_counter() - t0, "protocol": RANK_PROTOCOL}


#: How cards and logs number epochs: the first is epoch 1 (a card's ``best_epoch`` and each
#: ``history`` entry's ``epoch``, every training log line). Cards say it
#: (``epochs_numbered_from``); cards written before 2026-12-01 counted from 0 and lack the key.
EPOCHS_FROM = 1


def epoch_entries(history: list[dict[str, Any]], best: int) -> dict[str, Any]:
    """A trained explainer's card entries about its epochs: ``best_epoch`` (None when none
    was selected, ``best`` < 0), the ``history`` with each entry's ``epoch`` numbered from
    ``EPOCHS_FROM`` by its place, and ``epochs_numbered_from``.

    Args:
        history: One entry per trained epoch, in order.
        best: The selected epoch's place in ``history`` (from 0), or -1 for none.
    """
    return {"best_epoch": best + EPOCHS_FROM if best >= 0 else None,
            "epochs_numbered_from": EPOCHS_FROM,
            "history": [{**h, "epoch": i + EPOCHS_FROM} for i, h in enumerate(history)]}


def library_versions() -> dict[str, str]:
    """Versions of the libraries a checkpoint depends on."""
    out = {}
    for name in ("torch", "torch_geometric", "numpy", "hydra-core"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "?"
    return out


#: Where the validation AP that selects the kept epoch is scored from: the kept weights'
#: own replay of the training part (``validate``), the state every explanation and the card's
#: test metrics start from. Cards before 2026-12-02 lack the key; their validation AP was
#: scored from the training pass's memory, written by weights that changed batch by batch,
#: which the saved weights cannot reproduce (docs/models.md).
VAL_SCORED_FROM = "replay"


def validate(model: TemporalModel, split: Split, seed: int) -> dict[str, float]:
    """Validation AP and AUC of the model's current weights, from a fresh replay: reset,
    consume the training part ``[0, train_end)`` in eval mode, then score ``[train_end,
    val_end)`` as ``score_range`` does; so a reload of the weights gives them again bit for bit
    (``tests/training/test_training.py``).
    """
    model.reset()
    with eval_mode(model):
        model.advance(0, split.train_end)
    pos, neg, _ = score_range(model, split.train_end, split.val_end, seed=seed)
    return link_metrics(pos, neg)


def fit(model: TemporalModel, *, epochs: int, patience: int, lr: float, seed: int,
        split: Split, progress: bool = True) -> dict[str, Any]:
    """Train with early stopping on validation AP and keep the best weights (the AP of each
    epoch's weights replayed afresh, ``validate``).

    Returns:
        A history with per-epoch loss and validation metrics, the best epoch and its val AP;
        epochs are numbered from 1 (``EPOCHS_FROM``), as the log says them.

    Raises:
        TrainingError: When an epoch's loss or validation AP is not a number (the weights
            diverged, or a part of the split is empty): no checkpoint is kept.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    best_ap, best_epoch, best_state = -1.0, -1, copy.deepcopy(model.state_dict())
    history = []
    for epoch in range(epochs):
        t0 = time.perf_counter()
        loss = train_epoch(model, optimizer, split.train_end, seed=seed * 1000 + epoch,
                           progress=progress)
        val = validate(model, split, seed=seed + 1)
        history.append({"epoch": epoch + EPOCHS_FROM, "loss": loss, "val_ap": val["ap"],
                        "val_auc": val["auc"], "seconds": time.perf_counter() - t0})
        log.info("epoch %d loss %.4f val AP %.4f AUC %.4f (%.0f s)", epoch + EPOCHS_FROM, loss,
                 val["ap"], val["auc"], history[-1]["seconds"])
        if not (math.isfinite(loss) and math.isfinite(val["ap"])):
            raise TrainingError(
                f"epoch {epoch + EPOCHS_FROM}: the training loss is {loss:.4g} and the "
                f"validation AP {val['ap']:.4g}, not numbers (diverged weights: try a "
                "smaller lr); no checkpoint was written")
        if val["ap"] > best_ap:
            best_ap, best_epoch = val["ap"], epoch
            best_state = copy.deepcopy(model.state_dict())
        elif epoch - best_epoch >= patience:
            break
    model.load_state_dict(best_state)
    return {"history": history, "best_epoch": best_epoch + EPOCHS_FROM, "best_val_ap": best_ap}


def output_dir(cfg: DictConfig) -> Path:
    """Where training writes: ``cfg.out_dir`` when set, else Hydra's run directory.

    Raises:
        ConfigError: If neither exists (``run`` called outside Hydra without ``out_dir``).
    """
    if cfg.get("out_dir"):
        return Path(str(cfg.out_dir))
    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir)
    raise ConfigError("out_dir is not set and there is no Hydra run directory; set out_dir")


def checkpoint_destination(cfg: DictConfig, stream: EventStream) -> Path:
    """The ``.pt`` path a training run writes, refused up front when it would replace one.

    Raises:
        ConfigError: If the ``.pt`` or its card exists and ``cfg.overwrite`` is not true.
    """
    name = str(cfg.get("model_name") or model_kind(str(cfg.model["_target_"]), cfg.model))
    pt = checkpoint_path(output_dir(cfg), name, stream.name, str(cfg.get("name_suffix") or ""))
    existing = [p for p in (pt, pt.with_suffix(".json")) if p.exists()]
    if existing and cfg.get("overwrite") is not True:
        raise ConfigError(f"{existing[0]} exists and would be replaced; add overwrite=true to "
                          "replace it, or leave out out_dir to write into the run's own "
                          "directory")
    return pt


def run(cfg: DictConfig) -> dict[str, Any]:
    """Train the configured model on the configured dataset, evaluate, and save a checkpoint.

    The checkpoint and its card go to ``checkpoint_destination`` (checked before any
    training, so a run that would replace a file without ``overwrite=true`` costs nothing).

    Args:
        cfg: The composed ``conf/train.yaml`` (groups ``model``, ``dataset``, ``paths``).

    Returns:
        The model card (config, split, metrics, timing).

    Raises:
        ConfigError: For a bad device, a checkpoint that exists without ``overwrite=true``,
            or a stream too small to train and validate on (``check_trainable``); before
            training.
        DataNotFoundError: For a TGB stream whose negatives file is missing, before
            training.
        TrainingError: For a loss or validation AP that is not a number (nothing is saved).
    """
    check_train_options(cfg)
    check_writable_dir(output_dir(cfg), "out_dir" if cfg.get("out_dir") else "hydra.run.dir")
    torch.set_num_threads(int(cfg.num_threads))
    torch.manual_seed(int(cfg.seed))
    device = resolve_device(str(cfg.device))
    stream: EventStream = instantiate(cfg.dataset)
    destination = checkpoint_destination(cfg, stream) if cfg.save_checkpoint else None
    model: TemporalModel = instantiate(cfg.model, num_nodes=stream.num_nodes,
                                       edge_dim=stream.feat_dim)
    model.to(device)
    model.attach(stream)
    tgb = TGBSplit.of(stream, model.batch_size)
    if tgb is None:
        tables: dict[str, TGBNegatives] = {}
        split = Split.chronological(stream.num_events, model.batch_size, float(cfg.split.val),
                                    float(cfg.split.test))
        check_trainable(split, model.batch_size, float(cfg.split.val), float(cfg.split.test),
                        stream.name)
    else:  # TGB's split, on whole batches; its negatives read before any training
        split = Split(tgb.train_end, tgb.val_end, stream.num_events)
        tgb.check_trainable(model.batch_size, stream.num_events)
        tables = load_negatives(stream)
        log.info("TGB's split of %s: validation from event %d, test from %d (trained on "
                 "[0, %d), split.val and split.test not used)", tgb.name, tgb.val_start,
                 tgb.test_start, split.train_end)
    log.info("%s on %s: %d events, split %s, device %s", type(model).__name__, stream.name,
             stream.num_events, split, device)
    t0 = time.perf_counter()
    fitted = fit(model, epochs=int(cfg.epochs), patience=int(cfg.patience), lr=float(cfg.lr),
                 seed=int(cfg.seed), split=split, progress=bool(cfg.progress))
    train_seconds = time.perf_counter() - t0
    test = evaluate_test(model, split, seed=int(cfg.seed) + 2)
    log.info("test transductive %s inductive %s", test["transductive"], test["inductive"])
    metrics: dict[str, Any] = {"test": test, "best_val_ap": fitted["best_val_ap"]}
    if tgb is not None:
        metrics["tgb"] = evaluate_tgb(model, split, tables, k=int(cfg.tgb.hits_k),
                                      max_pairs=int(cfg.tgb.max_pairs),
                                      progress=bool(cfg.progress))
        log.info("TGB %s: val MRR %.4f, test MRR %.4f", tgb.name, metrics["tgb"]["val"]["mrr"],
                 metrics["tgb"]["test"]["mrr"])
    card: dict[str, Any] = {
        "train_config": OmegaConf.to_container(cfg, resolve=True),
        "split": asdict(split),
        **({"tgb_split": tgb.card()} if tgb is not None else {}),
        "metrics": metrics,
        "eval_seed": int(cfg.seed) + 2,
        "epochs_run": len(fitted["history"]),
        "best_epoch": fitted["best_epoch"],
        "epochs_numbered_from": EPOCHS_FROM,
        "val_scored_from": VAL_SCORED_FROM,
        "history": fitted["history"],
        "training_seconds": train_seconds,
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
        "versions": library_versions(),
    }
    if destination is not None:
        pt, js = save_checkpoint(model, stream, destination, card)
        log.info("saved %s and %s (explain it with checkpoint=%s)", pt, js, pt)
    return card
