"""The recorder of TGN's cone replay: one trajectory, every row stored once, only the rows read.

``record_trajectory`` replays the explained event's history once and keeps, for every batch
(a ``cftgnn.replay.tgn.trajectory.BatchRecord``), the memory of every node the batch touches
before and after its pending messages (``mem_pre``, ``mem_post``, ``[V, d]`` each). Most of
those rows repeat: a node's memory changes only when one of its pending messages is applied,
so one table holds, batch by batch, the rows first read and the new rows of the nodes whose
pending messages were applied, and each record's ``mem_pre`` / ``mem_post`` is a
``SharedRows`` view (row pointers into that table) that the cone replay indexes as it indexes
a tensor. The values are the floats a copy would hold, so every logit is bitwise the same; the
memory is about a third to a quarter (``d`` floats per applied message instead of ``2·V``
rows per batch). On a history of hundreds of thousands of events (an explained event whose
oldest candidate lies far back) copies would take gigabytes.

**Only the rows the cone replay can read** (when the removable events are known). The cone
replay (``cftgnn.replay.tgn.cone.cone_replay``) reads a recorded row only for a node that
can hold a perturbed row, that is, a node whose dependency set grows (a *column* of
``Dependencies``), from the first batch it grows in to the last
batch whose state of it the prediction reads (``need``): its memory after the batch's
pending messages (``mem_post``), and, before a batch, the memory of the senders of the
messages such a node may hold (``mem_pre``). The dependency sets need only the batches'
events and nodes, so the recording computes them first, without the model, and then keeps
only those rows: on a 1M-event synthetic stream (TGN, memory 100), a 193,000-event history
keeps about 28,000 rows instead of 416,000. A row it did not keep points past the end of
the table, so reading one raises instead of returning a wrong value; a removal set outside
the removable events re-records the history for the wider set (``PrunedTrajectory``).

**Within a byte limit** (the memory budget's segments): the table is cut into segments of
consecutive batches; the latest that fit are held and the earlier ones are written to a
temporary file (``_Spilled``) or, where none can be made, computed again from the base state
(``_Replayed``), and read back when the cone replay reads them (the same floats).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.arrays import index_dtype
from cftgnn.models.state import State
from cftgnn.models.tgn import TGN
from cftgnn.replay.tgn.trajectory import (
    BatchRecord,
    Dependencies,
    Trajectory,
    batch_record,
    trajectory_dependencies,
)


def begin_recording(model: TGN, base: State, end: int,
                    removed_mask: npt.NDArray[np.bool_] | None = None
                    ) -> list[npt.NDArray[np.int64]]:
    """Restore ``base`` (with ``removed_mask`` masked in ``[base.position, end)``) and return the
    history batches a recording applies one by one (``TemporalModel.history_steps``)."""
    model.restore(base)
    st = model.state
    lo = base.position
    if removed_mask is not None:
        st.removed[lo:end] = torch.from_numpy(removed_mask[lo:end].copy())
    return model.history_steps(lo, end, removed_mask, model.is_idle(st))


def finish_recording(model: TGN, base: State, end: int, records: list[BatchRecord],
                     removable: npt.NDArray[np.int64] | None = None,
                     deps: Dependencies | None = None,
                     dst: int | npt.NDArray[np.int64] | None = None) -> Trajectory:
    """The ``Trajectory`` of a recording whose batches were all applied: the final
    state and input, the removals every set shares, and the dependency sets of the
    ``removable`` events (``deps`` when the recording computed them already) for the query
    with destination ``dst`` (None: the event at ``end``'s own)."""
    st = model.state
    st.position = end
    final = model.snapshot()
    final_input = model.node_input(final)
    shared = final.removed.numpy()  # the base's removals and the recording's own
    traj = Trajectory(base.position, end, records, final, final_input,
                      shared if shared.any() else None, deps, dst)
    if deps is None and removable is not None and len(removable):
        traj.dependencies_for(model, np.unique(np.asarray(removable, dtype=np.int64)))
    return traj


class SharedRows:
    """Rows ``table[ptr]`` of a table shared by the records of a trajectory, read like the
    ``[V, d]`` tensor they stand for (``rows[index]`` and ``rows[index, columns]``).

    Args:
        table: The shared rows, ``[R, d]``.
        ptr: Row of ``table`` of each of the ``V`` rows, ``int32 [V]`` (``int64`` for a
            table of more than ``2**31 - 1`` rows; same device).
    """

    def __init__(self, table: Tensor, ptr: Tensor) -> None:
        self.table = table
        self.ptr = ptr

    def __getitem__(self, index: Any) -> Tensor:
        if isinstance(index, tuple):
            return self.table[(self.ptr[index[0]], *index[1:])]
        if isinstance(index, Tensor) and index.dim() == 1 and index.dtype == torch.int64:
            # the cone replay's common read: two gathers, ~3x cheaper than two indexings
            return self.table.index_select(0, self.ptr.index_select(0, index))
        return self.table[self.ptr[index]]

    def __len__(self) -> int:
        return len(self.ptr)

    @property
    def shape(self) -> torch.Size:
        """``[V, d]``."""
        return torch.Size((len(self.ptr), self.table.shape[1]))


@dataclass
class PrunedTrajectory(Trajectory):
    """A ``Trajectory`` that holds only the rows the cone replay
    reads under removals from ``deps``'s universe; a removal set naming another event
    records the history again for the wider universe (the same values, more rows).

    Attributes:
        rerecord: Records the same history for a universe of removable events.
    """

    rerecord: Callable[[npt.NDArray[np.int64]], Trajectory] | None = field(default=None,
                                                                            repr=False)

    def dependencies_for(self, model: TGN, events: npt.NDArray[np.int64]) -> Dependencies:
        if self.deps is not None and not self.deps.covers(events):
            assert self.rerecord is not None
            wider = self.rerecord(np.union1d(self.deps.universe, events))
            self.batches, self.deps = wider.batches, wider.deps
        return super().dependencies_for(model, events)


def _structure(model: TGN, pending: npt.NDArray[np.int64],
               steps: list[npt.NDArray[np.int64]]) -> list[BatchRecord]:
    """The records of ``steps`` without their rows: each batch's nodes (those pending before
    it, ``pending`` for the first, and its events' endpoints) and incidences. A batch leaves
    its events' endpoints pending (``TGN.apply_batch``)."""
    src, dst = model.stream.src, model.stream.dst
    no_rows = cast(Tensor, None)
    records = []
    # node ids as int32 where they fit (half the bytes; see ``BatchRecord.nodes``)
    small = index_dtype(model.num_nodes)
    for events in steps:
        ends = np.concatenate([src[events], dst[events]])
        nodes = np.unique(np.concatenate([pending, ends])).astype(small)
        records.append(batch_record(events, nodes, no_rows, no_rows,
                                    np.empty(len(nodes)), src, dst))
        pending = np.unique(ends)
    return records


def _rows_read(model: TGN, records: list[BatchRecord], deps: Dependencies
               ) -> tuple[list[npt.NDArray[np.int64]], list[npt.NDArray[np.int64]]]:
    """Per batch, the positions in its ``nodes`` whose ``mem_pre`` and whose ``mem_post``
    the cone replay can read (see the module docstring): ``mem_post`` of a column node from
    the first batch its dependency set grows in to ``need``; ``mem_pre`` of the other
    endpoints of the previous batch's events of such a node (the senders of the messages its
    rows may hold; a superset of its suffix's)."""
    src, dst = model.stream.src, model.stream.dst
    num_nodes = model.num_nodes
    first = np.full(num_nodes, len(records), dtype=np.int64)
    for x in range(len(deps.nodes) - 1, -1, -1):
        first[deps.nodes[x]] = x
    col, need = deps.columns >= 0, deps.need
    pre: list[npt.NDArray[np.int64]] = []
    post: list[npt.NDArray[np.int64]] = []
    empty = np.zeros(0, dtype=np.int64)
    for x, rec in enumerate(records):
        nodes = rec.nodes
        post.append(np.flatnonzero(col[nodes] & (first[nodes] <= x) & (need[nodes] >= x)))
        prev = records[x - 1].events if x else empty
        s_, d_ = src[prev], dst[prev]
        ends = np.concatenate([s_, d_])
        holds = col[ends] & (first[ends] <= x - 1) & (need[ends] > x - 1)  # may hold a row
        senders = np.unique(np.concatenate([d_, s_])[holds])
        pre.append(np.searchsorted(nodes, senders))
    return pre, post


#: Rows of one segment of a recording's table when it must fit a byte limit (one is held
#: again at a time when the segments before the kept ones are replayed, 8 MiB at least).
_MIN_SEGMENT_BYTES = 8 * 2**20


class _Segment:
    """Rows of consecutive batches of a recording: held, or read back (or computed again)
    on demand by ``make`` (a closure, so that measuring a plan's bytes does not count its
    base state or its file)."""

    def __init__(self, rows: Tensor | None, make: Callable[[], Tensor]) -> None:
        self.held = rows
        self.make = make

    def rows(self) -> Tensor:
        return self.held if self.held is not None else self.make()


class SegmentRows(SharedRows):
    """``SharedRows`` of a segment whose table may be read back when read."""

    def __init__(self, segment: _Segment, ptr: Tensor) -> None:
        self.segment = segment
        self.ptr = ptr

    @property
    def table(self) -> Tensor:  # type: ignore[override]
        return self.segment.rows()


class _Spilled:
    """The rows of segments not held, written to an unnamed temporary file as they were
    recorded and read back when asked for (the same floats, so bitwise the same rows): no
    replay, and no memory but the segment read, which is kept until another is asked for
    (the cone replay reads segments in order). The file goes with the plan (it is closed
    and its space freed when this object is collected)."""

    def __init__(self, dim: int, dtype: torch.dtype, device: torch.device) -> None:
        self.file = tempfile.TemporaryFile(prefix="cftgnn-plan-")  # noqa: SIM115 (the plan's)
        self.dim, self.dtype, self.device = dim, dtype, device
        self.where: dict[int, tuple[int, int]] = {}  # segment -> (offset, rows)
        self.last: tuple[int, Tensor] | None = None

    def write(self, j: int, rows: Tensor) -> None:
        data = rows.detach().cpu().contiguous().numpy()
        self.where[j] = (self.file.seek(0, 2), len(rows))
        self.file.write(data.data.cast("B"))  # no copy of the segment
        self.file.flush()  # nothing buffered: a forked worker (num_workers) writes nothing

    def __call__(self, j: int) -> Tensor:
        if self.last is not None and self.last[0] == j:
            return self.last[1]
        offset, count = self.where[j]
        size = count * self.dim * torch.empty(0, dtype=self.dtype).element_size()
        if hasattr(os, "pread"):  # at an offset: forked workers share the file's position
            raw = bytearray(os.pread(self.file.fileno(), size, offset))
        else:  # Windows: no fork, no workers
            raw = bytearray(size)
            self.file.seek(offset)
            self.file.readinto(raw)
        rows = torch.frombuffer(raw, dtype=self.dtype).view(count, self.dim).to(self.device)
        self.last = (j, rows)
        return rows


def _spill_file(dim: int, dtype: torch.dtype, device: torch.device) -> _Spilled | None:
    """A ``_Spilled`` in the temporary directory, or None when none can be made
    (the segments are then computed again when read)."""
    try:
        return _Spilled(dim, dtype, device)
    except OSError:
        return None


class _Replayed:
    """The rows of segments not held, computed again from the recording's base state: the
    batches before a segment are applied (no rows written), then the segment's rows are
    written as the recording wrote them (the same updates, so bitwise the same values). The
    cone replay reads segments in order, so one pass serves a whole call; the last segment
    computed is kept until another is asked for. It holds the batches' events, never the
    records (which hold it): no reference cycle keeps a plan alive after its event."""

    def __init__(self, model: TGN, base: State, events: list[npt.NDArray[np.int64]],
                 writes: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]],
                 bounds: list[tuple[int, int, int]], held_from: int) -> None:
        self.model, self.base, self.events = model, base, events
        self.writes, self.bounds, self.held_from = writes, bounds, held_from
        self.state: State | None = None
        self.next = 0  # the batch the state is before
        self.last: tuple[int, Tensor] | None = None

    def __call__(self, j: int) -> Tensor:
        if self.last is not None and self.last[0] == j:
            return self.last[1]
        lo, hi, count = self.bounds[j]
        model = self.model
        with torch.no_grad():
            if self.state is None or self.next > lo:
                self.state, self.next = self.base.clone(), 0
            st = self.state
            dev = st.memory.device
            for x in range(self.next, lo):
                model.apply_batch(st, torch.as_tensor(self.events[x], device=dev))
            rows = st.memory.new_empty(count, st.memory.shape[1])
            at = 0
            for x in range(lo, hi):
                new_pre, new_post = self.writes[x]
                rows[at:at + len(new_pre)] = st.memory[torch.as_tensor(new_pre, device=dev)]
                at += len(new_pre)
                model.apply_batch(st, torch.as_tensor(self.events[x], device=dev))
                rows[at:at + len(new_post)] = st.memory[torch.as_tensor(new_post, device=dev)]
                at += len(new_post)
            self.next = hi
            if j + 1 >= self.held_from:  # the segments after it are held: no further use
                self.state = None
        self.last = (j, rows)
        return rows


def record_trajectory(model: TGN, base: State, end: int,
                      removed_mask: npt.NDArray[np.bool_] | None = None,
                      removable: npt.NDArray[np.int64] | None = None,
                      max_bytes: int | None = None,
                      dst: int | npt.NDArray[np.int64] | None = None) -> Trajectory:
    """Replay ``[base.position, end)`` (with an optional base removal mask) and record it.

    The batches are formed exactly as ``TemporalModel.advance`` forms them
    (``history_steps``); batches that change nothing (empty on an idle state) are skipped
    there and not recorded here. Removal sets given to the cone replay are then relative to
    this recording: the approximate oracle records its history (events before ``ε_min``
    plus all candidates) once and follows each removal set as a small perturbation of it.
    Every record's ``mem_pre`` / ``mem_post`` is a ``SharedRows`` view of one table in
    which every row is stored once (see the module docstring).

    With ``removable`` (the events later sets may remove), the dependency sets are computed
    here too, as part of the per-event setup, and only the rows the cone replay can read
    under removals of those events are kept (a ``PrunedTrajectory``); with ``max_bytes`` as
    well, at most that many bytes of them are held: the table is cut into segments of
    consecutive batches, the latest segments that fit are held (every call of the cone
    replay reads from its first removal to the end) and the earlier ones are spilled to a
    temporary file (or, without one, computed again from ``base``) and read back when read.
    Without ``removable`` every row is kept and held. With ``dst``, the rows kept are those
    the prediction of the pair ``(src_end, dst, t_end)`` reads instead of the event at
    ``end`` (``Trajectory.dst``: a negative pair). Leaves ``model`` holding the recorded
    state at ``end``.
    """
    universe = (np.unique(np.asarray(removable, dtype=np.int64))
                if removable is not None and len(removable) else None)
    if universe is None:
        max_bytes = None  # every row, held
    dim = model.memory_dim
    row_bytes = dim * base.memory.element_size()
    seg_rows = (None if max_bytes is None
                else max(1, max(_MIN_SEGMENT_BYTES, max_bytes // 8) // row_bytes))
    with torch.no_grad():
        steps = begin_recording(model, base, end, removed_mask)
        st = model.state
        dev = st.memory.device
        pending = (st.pending >= 0).nonzero(as_tuple=True)[0].cpu().numpy()
        records = _structure(model, pending, steps)
        if universe is None:  # every row of every batch
            deps = None
            pre = post = [np.arange(len(rec.nodes)) for rec in records]
        else:
            mask = st.removed.numpy()
            deps = trajectory_dependencies(model, records, end,
                                           mask.copy() if mask.any() else None, universe, dst)
            pre, post = _rows_read(model, records, deps)
        # rows in the order they are written: a node's memory gets a row when first read
        # after it changed (its pending message was applied) or in a new segment, and keeps
        # it until then
        cur = np.full(model.num_nodes, -1, dtype=np.int64)
        filled, seg_lo = 0, 0
        bounds: list[tuple[int, int, int]] = []  # per segment: first batch, end, rows
        plan: list[tuple[Any, ...]] = []
        for x, rec in enumerate(records):
            if seg_rows is not None and filled >= seg_rows:  # a new segment
                bounds.append((seg_lo, x, filled))
                cur[:] = -1
                filled, seg_lo = 0, x
            nodes = rec.nodes
            new_pre = nodes[pre[x]][cur[nodes[pre[x]]] < 0]
            cur[new_pre] = filled + np.arange(len(new_pre))
            filled += len(new_pre)
            ptr_pre = np.full(len(nodes), -1, dtype=np.int64)
            ptr_pre[pre[x]] = cur[nodes[pre[x]]]
            cur[pending] = -1  # the batch applies their pending messages
            pending = np.unique(np.concatenate([model.stream.src[rec.events],
                                                model.stream.dst[rec.events]]))
            new_post = nodes[post[x]][cur[nodes[post[x]]] < 0]
            cur[new_post] = filled + np.arange(len(new_post))
            filled += len(new_post)
            ptr_post = np.full(len(nodes), -1, dtype=np.int64)
            ptr_post[post[x]] = cur[nodes[post[x]]]
            plan.append((new_pre, new_post, ptr_pre, ptr_post))
        bounds.append((seg_lo, len(records), filled))
        # hold the latest segments that fit, read the earlier ones back when read
        held = len(bounds)
        total = 0
        while held > 0 and (max_bytes is None
                            or total + bounds[held - 1][2] * row_bytes <= max_bytes):
            held -= 1
            total += bounds[held][2] * row_bytes
        first_held = held
        # the segments not held are written to a temporary file as they are recorded (one
        # segment's rows in memory at a time), or, without one, computed again when read
        spill = _spill_file(dim, st.memory.dtype, dev) if first_held else None
        if spill is None:
            writes = {x: plan[x][:2] for j in range(first_held) for x in range(*bounds[j][:2])}
            again: Callable[[int], Tensor] = _Replayed(model, base, list(steps), writes, bounds,
                                                       first_held)
        else:
            again = spill
        segments: list[_Segment] = []
        seg_of = np.zeros(len(records), dtype=np.int64)
        for j, (lo, hi, count) in enumerate(bounds):
            seg_of[lo:hi] = j
            rows = st.memory.new_empty(count, dim) if j >= first_held else None
            segments.append(_Segment(rows, partial(again, j)))
        at = 0
        for x, (events, rec) in enumerate(zip(steps, records, strict=True)):
            new_pre, new_post, ptr_pre, ptr_post = plan[x]
            j = int(seg_of[x])
            if x == bounds[j][0]:
                at = 0
                if spill is not None and j < first_held:  # this segment's rows, to spill
                    spilling = st.memory.new_empty(bounds[j][2], dim)
            table = segments[j].held if j >= first_held or spill is None else spilling
            if table is not None and len(new_pre):
                table[at:at + len(new_pre)] = st.memory[torch.as_tensor(new_pre, device=dev)]
            at += len(new_pre)
            model.apply_batch(st, torch.as_tensor(events, device=dev))
            if table is not None and len(new_post):
                table[at:at + len(new_post)] = st.memory[torch.as_tensor(new_post, device=dev)]
            at += len(new_post)
            if spill is not None and j < first_held and x == bounds[j][1] - 1:
                spill.write(j, spilling)
                del spilling
            nt = torch.as_tensor(rec.nodes, device=dev)
            rec.lu_post = st.last_update[nt].cpu().numpy()
            for ptr in (ptr_pre, ptr_post):  # a row not kept points past the table's end
                ptr[ptr < 0] = bounds[j][2]
            # int32 pointers where the segment's rows fit (half the bytes; torch reads the
            # same rows through either)
            small = index_dtype(bounds[j][2])
            p_pre, p_post = (torch.as_tensor(ptr.astype(small), device=dev)
                             for ptr in (ptr_pre, ptr_post))
            if len(bounds) == 1 and first_held == 0 and table is not None:  # held, not spilled
                rec.mem_pre = cast(Tensor, SharedRows(table, p_pre))
                rec.mem_post = cast(Tensor, SharedRows(table, p_post))
            else:
                rec.mem_pre = cast(Tensor, SegmentRows(segments[j], p_pre))
                rec.mem_post = cast(Tensor, SegmentRows(segments[j], p_post))
        traj = finish_recording(model, base, end, records, universe, deps, dst)

    if universe is None:
        return traj

    def rerecord(wider: npt.NDArray[np.int64]) -> Trajectory:
        return record_trajectory(model, base, end, removed_mask, wider, max_bytes, dst)

    return PrunedTrajectory(**{f.name: getattr(traj, f.name) for f in fields(traj)},
                            rerecord=rerecord)


__all__ = ["PrunedTrajectory", "SharedRows", "record_trajectory"]
