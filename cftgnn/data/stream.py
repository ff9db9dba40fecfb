"""The immutable event stream every other module reads.

Events are ordered by (timestamp, position in the source file); an event's id is its 0-based
position in that order, and the history of event ``i`` is the events with id ``< i``
(docs/design.md §2). Events that share a timestamp keep their file order, so "history" is defined by
id, never by time: of two events with equal timestamps, the earlier line is history of the later
one. Duplicate events (same endpoints and time) are kept as separate events with separate ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from cftgnn.errors import DataFormatError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def _frozen(a: np.ndarray) -> bool:
    """Whether nothing can write to ``a``'s memory: it and every array it views are
    read-only, down to one that owns its data."""
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        if a.base is None:
            return True
        a = a.base
    return False  # a buffer of another kind (bytes, mmap): copied, to be safe


def _stream_array(a: np.ndarray, dtype: type[np.generic]) -> np.ndarray:
    """``a`` as the stream keeps it: read-only, C-contiguous, of ``dtype``. A frozen array
    (``_frozen``) of that dtype and layout is kept as it is, anything else copied: on a
    stream of tens of millions of events a copy of every array would double its memory
    while it is made (the generators and ``prefix`` hand their arrays over frozen)."""
    if a.dtype == dtype and a.flags.c_contiguous and _frozen(a):
        return a
    return _readonly(a.astype(dtype))


@dataclass(frozen=True, eq=False)
class EventCauses:
    """The known causes of each event of a generated stream, as a CSR side table.

    The causes of event ``i`` are ``parents[indptr[i]:indptr[i + 1]]``: ids of earlier events
    (``< i``) of the same stream, in increasing order. An event without causes (background
    noise) has an empty slice. Planted streams (`make_planted_stream`) carry
    one; streams read from files have none.

    Attributes:
        indptr: ``int64 [E + 1]``, non-decreasing, ``indptr[0] == 0``.
        parents: ``int64 [P]``, ``P == indptr[-1]``.
    """

    indptr: IntArray
    parents: IntArray

    def __post_init__(self) -> None:
        indptr = np.asarray(self.indptr, dtype=np.int64).reshape(-1)
        parents = np.asarray(self.parents, dtype=np.int64).reshape(-1)
        if indptr.size == 0 or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
            raise DataFormatError("causes: indptr must start at 0 and never decrease")
        if indptr[-1] != parents.size:
            raise DataFormatError(f"causes: indptr ends at {indptr[-1]} but there are "
                                  f"{parents.size} parents")
        child = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
        bad = np.flatnonzero((parents < 0) | (parents >= child))
        if bad.size:
            raise DataFormatError(f"causes: event {child[bad[0]]} has parent {parents[bad[0]]}, "
                                  "which is not an earlier event")
        object.__setattr__(self, "indptr", _readonly(indptr))
        object.__setattr__(self, "parents", _readonly(parents))

    @property
    def num_events(self) -> int:
        """Number of events ``E`` the table covers."""
        return int(self.indptr.size - 1)

    def of(self, event: int) -> IntArray:
        """The causes of ``event`` (empty for a background event)."""
        return self.parents[self.indptr[event]:self.indptr[event + 1]]

    def counts(self) -> IntArray:
        """Number of causes of every event, ``int64 [E]``."""
        return np.diff(self.indptr)

    def children(self) -> IntArray:
        """The event each entry of ``parents`` is a cause of, ``int64 [P]``."""
        return np.repeat(np.arange(self.num_events, dtype=np.int64), self.counts())

    def prefix(self, n: int) -> EventCauses:
        """The table of the first ``n`` events (their causes are earlier, so all stay)."""
        return EventCauses(self.indptr[: n + 1], self.parents[: self.indptr[n]])


@dataclass(frozen=True, eq=False)
class EventStream:
    """A continuous-time dynamic graph as a time-ordered list of edge events.

    Attributes:
        src: Source node of each event, ``int64 [E]``.
        dst: Destination node of each event, ``int64 [E]``.
        t: Timestamp of each event in seconds, non-decreasing, ``float64 [E]``.
        edge_feat: Edge features, ``float32 [E, F]`` (``F`` may be 0).
        labels: Per-event label (e.g. Wikipedia's state change), ``int64 [E]``.
        num_nodes: Number of nodes; every id in ``src``/``dst`` is in ``[0, num_nodes)``.
        name: Short dataset name (``"uci"``, ``"wikipedia"``, ``"synthetic"``).
        meta: Free-form provenance (source file, checksum, loader options).
        causes: The known causes of each event ([`EventCauses`][cftgnn.data.EventCauses]) for a
            planted stream, else None. `prefix` keeps them;
            `without` drops them (the reduced stream's
            events no longer follow the generator's rule).

    The arrays are read-only; construct a new stream instead of editing one.
    """

    src: IntArray
    dst: IntArray
    t: FloatArray
    edge_feat: npt.NDArray[np.float32]
    labels: IntArray
    num_nodes: int
    name: str = "stream"
    meta: dict[str, Any] = field(default_factory=dict)
    causes: EventCauses | None = None

    def __post_init__(self) -> None:
        src = np.asarray(self.src)
        dst = np.asarray(self.dst)
        t = np.asarray(self.t)
        n = len(src)
        feat = np.asarray(self.edge_feat) if self.edge_feat is not None else np.zeros((n, 0))
        labels = np.asarray(self.labels) if self.labels is not None else np.zeros(n, np.int64)
        where = f"stream {self.name!r}"
        for arr, label in ((src, "src"), (dst, "dst"), (t, "t"), (labels, "labels")):
            if arr.ndim != 1:
                raise DataFormatError(f"{where}: {label} must be 1-D, got shape {arr.shape}")
        if feat.ndim != 2:
            raise DataFormatError(f"{where}: edge_feat must be 2-D [E, F], got shape {feat.shape}")
        lengths = {
            "src": n,
            "dst": len(dst),
            "t": len(t),
            "edge_feat": len(feat),
            "labels": len(labels),
        }
        if len(set(lengths.values())) != 1:
            raise DataFormatError(f"{where}: arrays differ in length: {lengths}")
        for arr, label in ((src, "src"), (dst, "dst"), (labels, "labels")):
            if arr.size and not np.issubdtype(arr.dtype, np.integer):
                if not np.issubdtype(arr.dtype, np.number) or not np.all(np.isfinite(arr)):
                    raise DataFormatError(f"{where}: {label} must hold finite integers")
                bad = np.flatnonzero(arr != np.round(arr))
                if bad.size:
                    raise DataFormatError(
                        f"{where}: {label}[{bad[0]}] = {arr[bad[0]]!r} is not an integer"
                    )
        num_nodes = int(self.num_nodes)
        if num_nodes < 0:
            raise DataFormatError(f"{where}: num_nodes must be >= 0, got {num_nodes}")
        for arr, label in ((src, "src"), (dst, "dst")):
            bad = np.flatnonzero((arr < 0) | (arr >= num_nodes))
            if bad.size:
                raise DataFormatError(
                    f"{where}: {label}[{bad[0]}] = {arr[bad[0]]} is outside [0, {num_nodes})"
                )
        if not np.issubdtype(t.dtype, np.number):
            raise DataFormatError(f"{where}: t must be numeric, got dtype {t.dtype}")
        bad = np.flatnonzero(~np.isfinite(t))
        if bad.size:
            raise DataFormatError(f"{where}: t[{bad[0]}] = {t[bad[0]]} is not finite")
        if not np.issubdtype(feat.dtype, np.number):
            raise DataFormatError(f"{where}: edge_feat must be numeric, got dtype {feat.dtype}")
        bad_rows = np.flatnonzero(~np.isfinite(feat).all(axis=1)) if feat.size else np.empty(0)
        if bad_rows.size:
            raise DataFormatError(f"{where}: edge_feat row {bad_rows[0]} is not finite")
        dec = np.flatnonzero(np.diff(t) < 0)
        if dec.size:
            i = int(dec[0]) + 1
            raise DataFormatError(
                f"{where}: timestamps must be non-decreasing, but t[{i}] = {t[i]} < "
                f"t[{i - 1}] = {t[i - 1]}"
            )
        object.__setattr__(self, "src", _stream_array(src, np.int64))
        object.__setattr__(self, "dst", _stream_array(dst, np.int64))
        object.__setattr__(self, "t", _stream_array(t, np.float64))
        object.__setattr__(self, "edge_feat", _stream_array(feat, np.float32))
        object.__setattr__(self, "labels", _stream_array(labels, np.int64))
        object.__setattr__(self, "num_nodes", num_nodes)
        if self.causes is not None and self.causes.num_events != n:
            raise DataFormatError(f"{where}: causes cover {self.causes.num_events} events, the "
                                  f"stream has {n}")

    @property
    def num_events(self) -> int:
        """Number of events ``E``."""
        return len(self.src)

    @property
    def feat_dim(self) -> int:
        """Edge feature dimension ``F`` (0 for feature-less streams)."""
        return int(self.edge_feat.shape[1])

    def __len__(self) -> int:
        return self.num_events

    @property
    def time_span(self) -> float:
        """Seconds between the first and the last event (0 for fewer than two events)."""
        return float(self.t[-1] - self.t[0]) if self.num_events > 1 else 0.0

    def prefix(self, n: int) -> EventStream:
        """The first ``n`` events (same node count), e.g. for tests on a real-data prefix."""
        if not 0 <= n <= self.num_events:
            raise DataFormatError(f"prefix length {n} outside [0, {self.num_events}]")
        return EventStream(
            self.src[:n],
            self.dst[:n],
            self.t[:n],
            self.edge_feat[:n],
            self.labels[:n],
            self.num_nodes,
            self.name,
            dict(self.meta),
            None if self.causes is None else self.causes.prefix(n),
        )

    def without(self, removed: npt.ArrayLike) -> tuple[EventStream, IntArray]:
        """The stream with the events ``removed`` deleted, and the original ids kept.

        Returns:
            The reduced stream and ``kept_ids`` (``int64 [E - |removed|]``), the original id of
            each remaining event, which is what batching by original id needs (docs/design.md §2).
        """
        mask = np.ones(self.num_events, dtype=bool)
        removed = np.asarray(removed, dtype=np.int64).reshape(-1)
        if removed.size and (removed.min() < 0 or removed.max() >= self.num_events):
            raise DataFormatError(f"removed ids must be in [0, {self.num_events})")
        mask[removed] = False
        kept = np.flatnonzero(mask).astype(np.int64)
        sub = EventStream(
            self.src[mask],
            self.dst[mask],
            self.t[mask],
            self.edge_feat[mask],
            self.labels[mask],
            self.num_nodes,
            self.name,
            dict(self.meta),
        )
        return sub, kept

    def summary(self) -> dict[str, Any]:
        """Counts and spans a researcher wants to see first."""
        return {
            "name": self.name,
            "events": self.num_events,
            "nodes": self.num_nodes,
            "time_span_s": self.time_span,
            "feat_dim": self.feat_dim,
            "source": self.meta.get("source", "-"),
        }
