"""Training on a Temporal Graph Benchmark stream: TGB's split, and TGB's MRR and hits@k.

A stream read by ``cftgnn.data.tgb.load_tgb`` carries TGB's chronological split in
``stream.meta["tgb"]`` (``val_start``, ``test_start``: the event ids where its validation and
test parts begin). ``scripts/train.py`` then trains on that split instead of
``split.val``/``split.test``'s shares, and the card reports TGB's metric beside AP and AUC.

**The split on the model's batches.** A model consumes history in batches fixed by event id
(``[bB, (b+1)B)``, docs/design.md §2), so a split point inside a batch would make one history
batch straddle two parts. The points are rounded down to batch boundaries, as
``Split.chronological``'s are: training covers ``[0, ⌊val_start/B⌋·B)``; the up to ``B - 1``
training events of TGB after that point are not trained on (they are validation events for
the AP, never for TGB's metric), and no validation or test event is ever trained on.

**TGB's metric** (``rank_protocol``): every event of TGB's validation and test parts that has
negatives in ``<name>_{val,test}_ns_v2.pkl`` is ranked against them
(``cftgnn.training.metrics.tgb_ranks``): the model scores ``(src, dst, t)`` and every
``(src, neg_j, t)`` in one call, from the same state, and the positive's rank is TGB's
Evaluator's (ties: the mean of the optimistic and the pessimistic rank); MRR and hits@k
average them over the split, as TGB's example averages its per-event MRRs. The state is the
one our AP is scored from (``score_range``): each event is scored in its own batch, from the
memory of the batches before it, its neighbour sampling seeing every event before it (TGB's
example, with PyG's TGN, sees only the batches before it: PyG's TGN ignores the neighbour
bound, so for ``model=pyg_tgn`` the two are the same). TGB's example starts its evaluation
batches at the split points; here they are the model's own, which agree with TGB's when
``val_start`` and ``test_start`` are multiples of the batch size. Ranking takes one pass over
the stream with the trained (best) weights after training; model selection stays on
validation AP (ranking ~1,000 negatives per validation event every epoch would cost that many
times the validation's scoring).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm import tqdm

from cftgnn.data.stream import EventStream
from cftgnn.data.tgb_negatives import TGB_KEY, TGBNegatives, tgb_split_points
from cftgnn.errors import ConfigError, DataFormatError
from cftgnn.models.base import TemporalModel
from cftgnn.training.metrics import hits_at, mrr, tgb_ranks

#: What the card says of how TGB's metric was computed (``rank_protocol``).
RANK_PROTOCOL = (
    "each event of TGB's val/test part ranked against its TGB negatives: (src, dst, t) and "
    "every (src, neg, t) scored in one call from the state of score_range (the memory of the "
    "batches before the event's batch; neighbour sampling sees every event before it); "
    "rank = (#neg > pos + #neg >= pos) / 2 + 1 (TGB's Evaluator); MRR and hits@k averaged "
    "over the part's events; the model's batches, split points rounded down to them")


@dataclass(frozen=True)
class TGBSplit:
    """TGB's split points of a stream (``stream.meta["tgb"]``) and the batch-aligned ones
    training uses.

    Attributes:
        name: TGB's dataset name (``tgbl-wiki``).
        val_start: First event id of TGB's validation part.
        test_start: First event id of TGB's test part.
        train_end: ``val_start`` rounded down to a batch boundary.
        val_end: ``test_start`` rounded down to a batch boundary.
    """

    name: str
    val_start: int
    test_start: int
    train_end: int
    val_end: int

    @classmethod
    def of(cls, stream: EventStream, batch_size: int) -> TGBSplit | None:
        """TGB's split of ``stream`` on batches of ``batch_size``; None for a stream that is
        not TGB's (no ``meta["tgb"]``).

        Raises:
            DataFormatError: If the split points are missing or not ``0 <= val_start <=
                test_start <= num_events``.
        """
        points = tgb_split_points(stream)
        if points is None:
            return None
        val, test = points
        return cls(str(stream.meta[TGB_KEY].get("name", stream.name)), val, test,
                   val // batch_size * batch_size, test // batch_size * batch_size)

    def check_trainable(self, batch_size: int, num_events: int) -> None:
        """Refuse a split whose batch-aligned training or validation part is empty.

        Raises:
            ConfigError: Naming the split points and the batch size.
        """
        if 0 < self.train_end < self.val_end:
            return
        raise ConfigError(
            f"TGB's split of {self.name!r} ({num_events:,} events: validation from event "
            f"{self.val_start:,}, test from {self.test_start:,}) leaves no training or no "
            f"validation batch with model.batch_size={batch_size} (the split points are "
            "rounded down to whole batches); choose a smaller model.batch_size")

    def card(self) -> dict[str, Any]:
        """The card's entry: TGB's points and the ones trained on."""
        return {"name": self.name, "val_start": self.val_start, "test_start": self.test_start,
                "train_end": self.train_end, "val_end": self.val_end}


def load_negatives(stream: EventStream) -> dict[str, TGBNegatives]:
    """TGB's negatives of the validation and the test part of a TGB stream, read before any
    training (``cftgnn.data.tgb.load_tgb_negatives``).

    Raises:
        DataNotFoundError: A negatives file is missing (one line naming it).
        DataFormatError: A negatives file does not read.
    """
    from cftgnn.data.tgb import load_all_tgb_negatives  # the reader: only for TGB streams

    return load_all_tgb_negatives(stream)


class NegativeRanker:
    """Ranks each event of the tables against its TGB negatives, batch by batch, at the
    model's current state (``score_batches``'s ``before_advance`` hook).

    For the events of a batch ``[a, b)`` with negatives it scores ``(src, dst, t)`` and
    ``(src, neg_j, t)`` for every negative in calls of at most ``max_pairs`` pairs (an event's
    pairs never split over two calls), with each event's neighbour bound its own id, as
    ``score_range`` scores it.

    Args:
        model: The attached model the walk advances.
        tables: TGB's negatives by split (``load_negatives``).
        max_pairs: Pairs per ``model.predict`` call (an event with more takes one call).
        progress: Show a progress bar over the pairs.
    """

    def __init__(self, model: TemporalModel, tables: Mapping[str, TGBNegatives],
                 max_pairs: int = 8192, progress: bool = False) -> None:
        self.model = model
        self.tables = dict(tables)
        self.max_pairs = max(1, int(max_pairs))
        self.ranks = {s: np.full(t.num_events, np.nan) for s, t in self.tables.items()}
        total = sum(int(t.indptr[-1]) + t.num_events for t in self.tables.values())
        self.pairs = 0  # scored so far
        self._bar = tqdm(total=total, desc="TGB ranks", unit="pair", leave=False,
                         disable=not progress, mininterval=5)

    def __call__(self, a: int, b: int) -> None:
        for split, table in self.tables.items():
            q0, q1 = (int(q) for q in np.searchsorted(table.event_ids, [a, b]))
            if q1 > q0:
                self._rank(split, table, q0, q1)

    def _rank(self, split: str, table: TGBNegatives, q0: int, q1: int) -> None:
        """Rank the table's events ``q0 .. q1 - 1`` (consecutive, one batch)."""
        sizes = np.diff(table.indptr[q0:q1 + 1]) + 1  # the positive, then its negatives
        ends = np.cumsum(sizes)
        q, done = q0, 0
        while q < q1:  # the most events whose pairs fit max_pairs, at least one
            stop = q0 + max(int(np.searchsorted(ends, done + self.max_pairs, "right")),
                            q - q0 + 1)
            self._rank_chunk(split, table, q, stop)
            done = int(ends[stop - q0 - 1])
            q = stop

    def _rank_chunk(self, split: str, table: TGBNegatives, q0: int, q1: int) -> None:
        stream = self.model.stream
        events = table.event_ids[q0:q1]
        counts = np.diff(table.indptr[q0:q1 + 1])
        group = np.repeat(np.arange(q1 - q0), counts + 1)  # the event of each pair
        first = np.r_[0, np.cumsum(counts + 1)[:-1]]  # each event's positive pair
        dst = np.empty(len(group), dtype=np.int64)
        is_pos = np.zeros(len(group), dtype=bool)
        is_pos[first] = True
        dst[first] = stream.dst[events]
        dst[~is_pos] = table.dst[table.indptr[q0]:table.indptr[q1]]
        logits = self.model.predict(stream.src[events][group], dst, stream.t[events][group],
                                    before=events[group]).cpu().numpy()
        neg_ptr = np.r_[0, np.cumsum(counts)]
        self.ranks[split][q0:q1] = tgb_ranks(logits[is_pos].astype(np.float64),
                                             logits[~is_pos].astype(np.float64), neg_ptr)
        self.pairs += len(group)
        self._bar.update(len(group))

    def close(self) -> None:
        """Close the progress bar."""
        self._bar.close()

    def summary(self, k: int) -> dict[str, dict[str, Any]]:
        """``{split: {"mrr", "hits@<k>", "n", "mean_negatives"}}``: TGB's metric over each
        table's ``n`` events (NaN where one was not ranked or scored NaN)."""
        out: dict[str, dict[str, Any]] = {}
        for split, table in self.tables.items():
            ranks, counts = self.ranks[split], table.counts()
            out[split] = {"mrr": mrr(ranks), f"hits@{k}": hits_at(ranks, k),
                          "n": int(len(ranks)),
                          "mean_negatives": float(counts.mean()) if counts.size else math.nan}
        return out


def rank_walk_bounds(tables: Mapping[str, TGBNegatives], train_end: int,
                     name: str) -> tuple[int, int]:
    """Where the ranking walk runs: from ``train_end`` (a batch boundary, the model advanced
    to it) to one past the last event with negatives.

    Raises:
        DataFormatError: If an event with negatives lies in the trained part (before
            ``train_end``).
    """
    for split, table in tables.items():
        if table.num_events and int(table.event_ids[0]) < train_end:
            raise DataFormatError(
                f"{table.source}: TGB's {split} negatives start at event "
                f"{int(table.event_ids[0]):,}, inside the training part of {name!r} "
                f"(events before {train_end:,})")
    ends = [int(t.event_ids[-1]) + 1 for t in tables.values() if t.num_events]
    return train_end, max(ends, default=train_end)


__all__ = ["NegativeRanker", "RANK_PROTOCOL", "TGBSplit", "load_negatives",
           "rank_walk_bounds"]
