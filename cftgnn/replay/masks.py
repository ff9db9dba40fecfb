"""P removal sets in compact form: a boolean table over the events any of them removes.

A batched masked replay evaluates P removal sets of one explained event. As dense masks over
the stream (``bool [P, E]``) they cost ``P·E`` to build and to combine on every call, although
together they name at most a few dozen events (the candidates). ``RemovalSets`` keeps
only those events and answers the two questions a replay asks: which of a batch's events each
set removes (``RemovalSets.columns``) and whether a sampled neighbour's event is removed
for a given set (``RemovalSets.lookup``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence, Sized
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cftgnn.arrays import mask_words
from cftgnn.data.stream import IntArray

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class RemovalSets:
    """P removal sets over the events of an attached stream.

    Attributes:
        events: The events removed by at least one set, ascending, ``int64 [U]``.
        table: ``table[p, j]`` is whether set ``p`` removes ``events[j]``, ``bool [P, U]``.
    """

    events: IntArray
    table: BoolArray

    def __post_init__(self) -> None:
        if self.table.ndim != 2 or self.table.shape[1] != len(self.events):
            raise ValueError(f"table must have shape (P, {len(self.events)}), got "
                             f"{self.table.shape}")
        if len(self.events) > 1 and not (np.diff(self.events) > 0).all():
            raise ValueError("events must be strictly ascending")

    @classmethod
    def from_sets(cls, sets: Sequence[Iterable[int]]) -> RemovalSets:
        """The table of ``sets`` (each an iterable of event ids)."""
        sized = [s if isinstance(s, Sized) else list(s) for s in sets]
        lens = np.fromiter(map(len, sized), dtype=np.int64, count=len(sized))
        flat = np.fromiter(itertools.chain.from_iterable(sized), dtype=np.int64,
                           count=int(lens.sum()))
        events = np.unique(flat)
        table = np.zeros((len(lens), len(events)), dtype=bool)
        rows = np.repeat(np.arange(len(lens)), lens)
        table[rows, np.searchsorted(events, flat)] = True
        return cls(events, table)

    @classmethod
    def from_dense(cls, masks: BoolArray) -> RemovalSets:
        """The table of dense masks ``bool [P, E]``."""
        masks = np.atleast_2d(np.asarray(masks, dtype=bool))
        events = np.flatnonzero(masks.any(axis=0)).astype(np.int64)
        return cls(events, masks[:, events])

    @property
    def num_sets(self) -> int:
        """P."""
        return int(self.table.shape[0])

    def __len__(self) -> int:
        return self.num_sets

    def select(self, rows: slice | IntArray) -> RemovalSets:
        """The sets ``rows`` of these (a slice or indices), over the events they remove."""
        table = self.table[rows]
        used = table.any(axis=0)
        return RemovalSets(self.events[used], table[:, used])

    def dense(self, num_events: int) -> BoolArray:
        """The masks as ``bool [P, num_events]``."""
        out = np.zeros((self.num_sets, num_events), dtype=bool)
        out[:, self.events] = self.table
        return out

    def sizes(self, before: int | None = None) -> IntArray:
        """Removed events per set (only those with id ``< before`` when given), ``[P]``."""
        cols = len(self.events) if before is None else int(np.searchsorted(self.events, before))
        return self.table[:, :cols].sum(axis=1).astype(np.int64)

    def _positions(self, ev: IntArray) -> tuple[IntArray, BoolArray]:
        """Column of each event in ``events`` and whether it is there at all."""
        ev = np.asarray(ev, dtype=np.int64)
        if len(self.events) == 0:
            return np.zeros(ev.shape, dtype=np.int64), np.zeros(ev.shape, dtype=bool)
        j = np.minimum(np.searchsorted(self.events, ev), len(self.events) - 1)
        return j, self.events[j] == ev

    def columns(self, ev: IntArray) -> BoolArray:
        """Whether each set removes each event of ``ev`` (``int64 [K]``): ``bool [P, K]``."""
        j, hit = self._positions(ev)
        out = np.zeros((self.num_sets, len(j)), dtype=bool)
        out[:, hit] = self.table[:, j[hit]]
        return out

    def lookup(self, p: IntArray, ev: IntArray) -> BoolArray:
        """Whether set ``p[b]`` removes event ``ev[b, m]``: ``bool [B, M]`` for ``p [B]``."""
        j, hit = self._positions(ev)
        if len(self.events) == 0:
            return hit
        return hit & self.table[np.asarray(p)[:, None], j]

    def words(self, universe: IntArray) -> npt.NDArray[np.uint64]:
        """Each set as a bitmask over ``universe`` (ascending, a superset of ``events``):
        bit ``j % 64`` of word ``j // 64`` is set when the set removes ``universe[j]``,
        ``uint64 [P, ⌈len(universe) / 64⌉]``."""
        cols = np.searchsorted(universe, self.events)
        if len(cols) and not np.array_equal(np.asarray(universe)[np.minimum(
                cols, len(universe) - 1)], self.events):
            raise ValueError("the universe must contain every removed event")
        return bitmask(self.table, cols, num_bits=len(universe))


def bitmask(table: BoolArray, cols: IntArray, num_bits: int) -> npt.NDArray[np.uint64]:
    """Rows of ``table`` (``bool [R, K]``) as bitmasks with column ``k`` at bit ``cols[k]``,
    ``uint64 [R, ⌈num_bits / 64⌉]`` (at least one word)."""
    num_words = mask_words(num_bits)
    out = np.zeros((table.shape[0], num_words), dtype=np.uint64)
    for w in range(num_words):
        in_word = (cols >= 64 * w) & (cols < 64 * (w + 1))
        if in_word.any():
            shifts = (cols[in_word] - 64 * w).astype(np.uint64)
            vals = np.left_shift(np.uint64(1), shifts)  # [k]
            out[:, w] = np.bitwise_or.reduce(np.where(table[:, in_word], vals, np.uint64(0)),
                                             axis=1)
    return out
