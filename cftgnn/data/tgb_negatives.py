"""The Temporal Graph Benchmark's negative destinations, by explained event.

TGB (Huang et al., 2023) ranks each validation and test positive ``(src, dst, t)`` against a
fixed, pre-generated list of negative destinations (``<name>_val_ns_v2.pkl``,
``<name>_test_ns_v2.pkl``). This module holds those lists in the stream's own node and event
ids, as one CSR table, so that training (TGB's MRR, ``cftgnn.training``) and explaining (the
rank target) read them the same way. Reading TGB's files is ``cftgnn.data.tgb``'s work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cftgnn.data.stream import EventStream
from cftgnn.errors import DataFormatError

IntArray = npt.NDArray[np.int64]

#: The splits TGB draws negatives for.
TGB_SPLITS = ("val", "test")

#: The key of ``EventStream.meta`` under which ``cftgnn.data.tgb.load_tgb`` keeps TGB's
#: split and files (``name``, ``val_start``, ``test_start``, ``folder``, ...): what marks a
#: TGB stream for training, the rank target and ``dataset_info``.
TGB_KEY = "tgb"


def tgb_split_points(stream: EventStream) -> tuple[int, int] | None:
    """TGB's split points ``(val_start, test_start)`` of a stream ``load_tgb`` loaded, from
    ``stream.meta[TGB_KEY]``; None for a stream that is not TGB's (no such key). The one
    reader of those points (training's split, the negatives' splits, ``dataset_info``).

    Raises:
        DataFormatError: If the key holds no mapping with integer ``val_start`` and
            ``test_start`` with ``0 <= val_start <= test_start <= num_events``.
    """
    info = (getattr(stream, "meta", None) or {}).get(TGB_KEY)
    if info is None:
        return None
    if not isinstance(info, Mapping):
        raise DataFormatError(f"stream {stream.name!r}: meta[{TGB_KEY!r}] is not a mapping")
    try:
        val, test = int(info["val_start"]), int(info["test_start"])
    except (KeyError, TypeError, ValueError):
        raise DataFormatError(f"stream {stream.name!r}: meta[{TGB_KEY!r}] lacks integer "
                              "val_start and test_start (TGB's split)") from None
    if not 0 <= val <= test <= stream.num_events:
        raise DataFormatError(
            f"stream {stream.name!r}: TGB's split (val_start {val}, test_start {test}) is "
            f"not within its {stream.num_events} events in order")
    return val, test


def _readonly(a: npt.ArrayLike) -> IntArray:
    out = np.ascontiguousarray(np.asarray(a, dtype=np.int64).reshape(-1))
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class TGBNegatives:
    """The negative destinations of the events of one TGB split, as a CSR table.

    The negatives of event ``event_ids[q]`` are ``dst[indptr[q]:indptr[q + 1]]``: node ids of
    the stream (after any id shift the reader applies), in TGB's order. Every event of the
    split has a row; TGB's lists may differ in length between events (fewer destinations
    than the sampler asks for).

    Attributes:
        split: ``"val"`` or ``"test"``.
        event_ids: ``int64 [Q]``, strictly increasing stream event ids.
        indptr: ``int64 [Q + 1]``, non-decreasing, ``indptr[0] == 0``.
        dst: ``int64 [indptr[-1]]``, node ids ``>= 0``.
        source: Where the table was read from (a file name, for messages).
    """

    split: str
    event_ids: IntArray
    indptr: IntArray
    dst: IntArray
    source: str = "negatives"

    def __post_init__(self) -> None:
        if self.split not in TGB_SPLITS:
            raise DataFormatError(f"{self.source}: split must be one of {TGB_SPLITS}, "
                                  f"not {self.split!r}")
        event_ids, indptr, dst = (_readonly(a) for a in (self.event_ids, self.indptr, self.dst))
        if indptr.size != event_ids.size + 1 or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
            raise DataFormatError(f"{self.source}: indptr must start at 0, never decrease and "
                                  f"hold one entry more than the {event_ids.size} events")
        if indptr[-1] != dst.size:
            raise DataFormatError(f"{self.source}: indptr ends at {indptr[-1]} but there are "
                                  f"{dst.size} negatives")
        if np.any(np.diff(event_ids) <= 0) or (event_ids.size and event_ids[0] < 0):
            raise DataFormatError(f"{self.source}: event ids must be >= 0 and strictly "
                                  "increasing")
        if dst.size and dst.min() < 0:
            raise DataFormatError(f"{self.source}: negative destination {int(dst.min())}")
        for name, value in (("event_ids", event_ids), ("indptr", indptr), ("dst", dst)):
            object.__setattr__(self, name, value)

    @classmethod
    def from_lists(cls, split: str, rows: dict[int, npt.ArrayLike],
                   source: str = "negatives") -> TGBNegatives:
        """The table of ``{event id: negative destinations}`` (any order of the keys)."""
        ids = np.asarray(sorted(int(e) for e in rows), dtype=np.int64)
        lists = [np.asarray(rows[int(e)], dtype=np.int64).reshape(-1) for e in ids]
        indptr = np.zeros(ids.size + 1, dtype=np.int64)
        indptr[1:] = np.cumsum([a.size for a in lists])
        dst = np.concatenate(lists) if lists else np.zeros(0, dtype=np.int64)
        return cls(split, ids, indptr, dst, source)

    @property
    def num_events(self) -> int:
        """Number ``Q`` of events with negatives."""
        return int(self.event_ids.size)

    def __contains__(self, event_id: object) -> bool:
        if not isinstance(event_id, (int, np.integer)):
            return False
        q = int(np.searchsorted(self.event_ids, int(event_id)))
        return q < self.event_ids.size and int(self.event_ids[q]) == int(event_id)

    def of(self, event_id: int) -> IntArray:
        """The negative destinations of ``event_id``, ``int64 [N]`` (read-only).

        Raises:
            DataFormatError: ``event_id`` is not an event of the split.
        """
        q = int(np.searchsorted(self.event_ids, int(event_id)))
        if q >= self.event_ids.size or int(self.event_ids[q]) != int(event_id):
            lo = int(self.event_ids[0]) if self.event_ids.size else None
            hi = int(self.event_ids[-1]) if self.event_ids.size else None
            raise DataFormatError(
                f"{self.source}: event {int(event_id)} has no TGB negatives in the "
                f"{self.split} split (its events run from {lo} to {hi})")
        return self.dst[self.indptr[q]:self.indptr[q + 1]]

    def counts(self) -> IntArray:
        """Number of negatives of every event, ``int64 [Q]``."""
        return np.diff(self.indptr)

    def check_within(self, stream: EventStream) -> None:
        """Refuse a table whose event ids or destinations are not ids of ``stream``.

        Raises:
            DataFormatError: Naming the first id outside the stream.
        """
        if self.num_events and int(self.event_ids[-1]) >= stream.num_events:
            raise DataFormatError(f"{self.source}: event {int(self.event_ids[-1])} is outside "
                                  f"the stream {stream.name!r} ({stream.num_events} events)")
        outside = self.dst >= stream.num_nodes  # (>= 0 is the table's own invariant)
        if outside.any():
            raise DataFormatError(
                f"{self.source}: negative destination {int(self.dst[outside][0])} is outside "
                f"the stream {stream.name!r}'s nodes [0, {stream.num_nodes})")


__all__ = ["TGBNegatives", "TGB_KEY", "TGB_SPLITS", "tgb_split_points"]
