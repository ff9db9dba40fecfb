"""TGN's exact cone replay held on the oracle's device: the dense replay.

The row-table replay (``cftgnn.replay.tgn.cone``) shares perturbed rows between sets and
prunes them, which makes its work small but its bookkeeping data dependent: a few dozen
host steps per batch between the kernels, so on a GPU the host decides its speed. This
replay does the other trade. Every set keeps its own state row for every node that can
hold a perturbed one (a *column* of ``Dependencies``), in fixed buffers on the device:

* ``mem [P, C, d]``, ``lu [P, C]`` (float64) and ``pend [P, C]`` (the pending event,
  ``-1`` for none), made once per call;
* per history batch, the same steps as ``TGN.apply_batch`` on every column the batch
  touches, for all P sets at once: the pending messages applied through the model's own
  ``TGN.message_update`` (one GRU call), then each set's next pending message (the last
  event of the node's batch that the set keeps, a masked maximum);
* the batch's structure (which columns it applies, which it gives messages, their
  incidences) comes from the recording on the host, which knows it before the call; the
  values never leave the device, and no size depends on them, so a batch waits for nothing.

It computes more rows than the row table (every set, not every distinct key; nothing
retired): measured on the tail events with all sets of at most K of 64 candidates, UCI 57464
K = 2 makes 18.9 M row updates where the shared rows are 3.7 M, Wikipedia 141227 K = 2
67.9 M against 17.3 M, UCI 56484 K = 3 218 M against 31 M (``docs/design.md`` §9), which a
GPU computes in a few seconds; on the CPU the row table stays the default.

Exact as the other replays: every row goes through the same arithmetic as the naive replay
(``TGN.message_update`` is what ``TGN.apply_batch`` calls), only batched differently, so the
logits agree with a fresh replay to float rounding (``tests/replay/test_dense.py``: within
1e-5 of the naive replay, 1e-6 of the row table). A set whose removals cannot reach a node
(``s ∩ D(n) = ∅`` at the end) reads the recorded input of that node, as in the row table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.arrays import mask_words
from cftgnn.models.tgn import TGN
from cftgnn.replay.batched import NodeInputs
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.tgn.cone import ConeBudgetExceeded, ConeStats
from cftgnn.replay.tgn.trajectory import BatchRecord, Dependencies, Trajectory

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class _Apply:
    """The pending messages a batch applies: columns ``cols`` (``[V]``) of nodes ``nodes``
    that had an event in the previous batch, with that batch's last event of each
    (``recorded``, a message every set may fall back on: it only stands in for a set that
    holds none, whose row keeps its value)."""

    cols: Tensor
    nodes: Tensor
    recorded: Tensor


@dataclass(frozen=True)
class _Pending:
    """The next pending messages a batch gives: columns ``cols`` (``[V]``), each node's
    incidences in the batch as event ids ``events`` (``[V, I]``, ``-1`` padding) and as
    positions among the sets' removable events ``removable`` (``[V, I]``, ``-1`` for events
    no set removes)."""

    cols: Tensor
    events: Tensor
    removable: Tensor


def _columns_born(deps: Dependencies, num_batches: int) -> IntArray:
    """The first batch each column's dependency set grows in (``num_batches`` for none)."""
    born = np.full(deps.num_columns, num_batches, dtype=np.int64)
    for x in range(len(deps.nodes) - 1, -1, -1):
        born[deps.columns[deps.nodes[x]]] = x
    return born


def _final_masks(deps: Dependencies) -> npt.NDArray[np.uint64]:
    """Each column's dependency set after the last batch, ``uint64 [C, W]``."""
    words = mask_words(len(deps.universe))
    out = np.zeros((deps.num_columns, words), dtype=np.uint64)
    for nodes, masks in zip(deps.nodes, deps.masks, strict=True):
        out[deps.columns[nodes]] = masks
    return out


def _with_events(rec: BatchRecord) -> IntArray:
    """Positions in ``rec.nodes`` of the nodes with an event in the batch."""
    return np.flatnonzero(rec.inc_end > rec.inc_start)


class _Uploads:
    """Integer arrays gathered on the host and sent to the device in one copy: ``add``
    returns a placeholder, ``send`` the tensors in the order they were added (views of one
    upload)."""

    def __init__(self) -> None:
        self.arrays: list[IntArray] = []

    def add(self, array: npt.NDArray[np.integer] | npt.NDArray[np.bool_]) -> int:
        self.arrays.append(np.ascontiguousarray(array, dtype=np.int64))
        return len(self.arrays) - 1

    def send(self, device: torch.device) -> list[Tensor]:
        if not self.arrays:
            return []
        sizes = [a.size for a in self.arrays]
        pool = torch.as_tensor(np.concatenate([a.ravel() for a in self.arrays]), device=device)
        out, at = [], 0
        for a, size in zip(self.arrays, sizes, strict=True):
            out.append(pool[at:at + size].view(a.shape))
            at += size
        return out


#: History events whose batches' index arrays the dense replay builds and sends to the
#: device at once (a window of its plan; a window holds one batch at least). A whole
#: history's arrays at once were about 30 KB a batch at tgbl-coin's size: 3 GiB more
#: resident for one far-back set through its 97,600 batches (measured 2026-12-06,
#: docs/benchmarks.md); a window of a million events holds about 150 MB, and the
#: histories of UCI and Wikipedia fit one (one upload per call, as before).
WINDOW_EVENTS = 1_000_000


@dataclass(frozen=True)
class _Batch:
    """What the dense replay does in one batch (``DensePlan.batch``): its nodes on the
    device, the pending messages it applies, the columns born in it (their columns and
    positions in the batch's nodes, and their recorded last-update times) and the next
    pending messages it gives; each None where the batch has none."""

    nodes: Tensor
    apply: _Apply | None
    new: tuple[Tensor, Tensor] | None
    lu_post: Tensor | None
    pending: _Pending | None


class DensePlan:
    """The structure of a trajectory's batches that the dense replay needs, for the removable
    events of one call, on the device of the trajectory: the index arrays of the batches of
    a window of at most ``window_events`` history events in one upload each (the first
    window's with the tables below; the sets' values are not in them), built as the replay
    reaches them, so that memory follows a window rather than the history.

    Attributes:
        born: The first batch each column's dependency set grows in, ``int64 [C]``.
        removals: Which of the sets' removable events each set removes, ``bool [P, U]``.
        columns_t, born_t: ``Dependencies.columns`` and ``born`` on the device.
        final_nodes: The nodes whose final input the prediction reads and that hold a
            column, ``int64 [F]``; ``final_cols_t``, ``final_nodes_t``: their columns and
            them on the device.
    """

    def __init__(self, model: TGN, traj: Trajectory, deps: Dependencies,
                 sets: RemovalSets, window_events: int | None = None) -> None:
        window_events = WINDOW_EVENTS if window_events is None else window_events
        self._batches = batches = traj.batches
        self._deps, self._removable = deps, sets.events
        self._dev = dev = traj.final_input.device
        num = len(batches)
        self.born = born = _columns_born(deps, num)
        cols, need = deps.columns, deps.need
        # windows of whole batches, each of at most window_events events (one batch at least)
        bounds, held = [0], 0
        for x, rec in enumerate(batches):
            if x > bounds[-1] and held + len(rec.events) > window_events:
                bounds.append(x)
                held = 0
            held += len(rec.events)
        bounds.append(num)
        self._bounds = bounds
        self._counts: list[int | None] = [None] * (len(bounds) - 1)
        self._window: tuple[int, list[_Batch | None]] = (-1, [])
        # the tables every step reads, and the columns the prediction reads at the end, sent
        # with the first window
        self.final_nodes = np.flatnonzero((cols >= 0) & (need >= num))
        up = _Uploads()
        tables = (up.add(cols), up.add(born), up.add(np.stack([cols[self.final_nodes],
                                                                self.final_nodes])))
        removals = up.add(sets.table)
        sent = self._build(0, up) if num else up.send(dev)
        self.removals = sent[removals].bool()  # [P, U]
        self.columns_t, self.born_t, final = (sent[i] for i in tables)
        self.final_cols_t, self.final_nodes_t = final.unbind(0)

    def _build(self, k: int, up: _Uploads) -> list[Tensor]:
        """Build window ``k`` (its batches' arrays added to ``up``, sent, and kept as the
        current window in place of the one before); returns what ``up`` sent."""
        batches, deps, removable = self._batches, self._deps, self._removable
        cols, need, born = deps.columns, deps.need, self.born
        lo, hi = self._bounds[k], self._bounds[k + 1]
        plans: list[tuple[int, tuple[int, int, int] | None, tuple[int, int] | None,
                          npt.NDArray[np.float64] | None, tuple[int, int, int] | None]
                    | None] = []
        updates = 0
        for x in range(lo, hi):
            rec = batches[x]
            # 1. messages of the previous batch, applied to the columns alive before this one
            app = None
            if x > 0:
                prev = batches[x - 1]
                at = _with_events(prev)
                ends = prev.nodes[at]
                c = cols[ends]
                keep = (c >= 0) & (need[ends] >= x)
                keep[keep] &= born[c[keep]] <= x - 1
                if keep.any():
                    last = prev.events[prev.inc_k[prev.inc_end[at[keep]] - 1]]
                    app = (up.add(c[keep]), up.add(ends[keep]), up.add(last))
                    updates += int(keep.sum())
            # 2. columns born in this batch: the recorded state after its messages
            c_all = cols[rec.nodes]
            fresh = np.flatnonzero(c_all >= 0)
            fresh = fresh[born[c_all[fresh]] == x]
            fresh = fresh[need[rec.nodes[fresh]] >= x]
            new = None if not len(fresh) else (up.add(c_all[fresh]), up.add(fresh))
            lu_post = None if not len(fresh) else rec.lu_post[fresh]
            # 3. the next pending messages of the columns alive after it
            at = _with_events(rec)
            c = cols[rec.nodes[at]]
            keep = (c >= 0) & (need[rec.nodes[at]] > x)
            keep[keep] &= born[c[keep]] <= x
            pen = None
            if keep.any():
                at = at[keep]
                starts, ends_ = rec.inc_start[at], rec.inc_end[at]
                slot = starts[:, None] + np.arange(int((ends_ - starts).max()))[None, :]
                valid = slot < ends_[:, None]  # [V, I]
                ev = np.where(valid, rec.events[rec.inc_k[np.where(valid, slot, 0)]], -1)
                j = np.searchsorted(removable, ev)
                hit = valid & (removable[np.minimum(j, len(removable) - 1)] == ev)
                pen = (up.add(c[keep]), up.add(ev), up.add(np.where(hit, j, -1)))
            busy = app is not None or new is not None or pen is not None
            plans.append((up.add(rec.nodes), app, new, lu_post, pen) if busy else None)
        self._counts[k] = updates
        sent = up.send(self._dev)
        fresh_lu = [b[3] for b in plans if b is not None and b[3] is not None]
        pool = (torch.as_tensor(np.concatenate(fresh_lu), device=self._dev) if fresh_lu
                else torch.zeros(0, dtype=torch.float64, device=self._dev))
        out: list[_Batch | None] = []
        at_ = 0
        for b in plans:
            if b is None:
                out.append(None)
                continue
            nodes, app, new, lu_post, pen = b
            lu_t = None
            if lu_post is not None:
                lu_t, at_ = pool[at_:at_ + len(lu_post)], at_ + len(lu_post)
            out.append(_Batch(sent[nodes], None if app is None else _Apply(*(sent[i] for i in app)),
                              None if new is None else (sent[new[0]], sent[new[1]]), lu_t,
                              None if pen is None else _Pending(*(sent[i] for i in pen))))
        self._window = (k, out)
        return sent

    def batch(self, x: int) -> _Batch | None:
        """What batch ``x`` does (None: nothing), its window built when ``x`` is past the
        current one (the replay asks in order; a window already left is built again)."""
        k = int(np.searchsorted(self._bounds, x, side="right")) - 1
        if self._window[0] != k:
            self._build(k, _Uploads())
        return self._window[1][x - self._bounds[k]]

    @property
    def row_updates(self) -> int:
        """Rows the replay sends through the GRU per set, the final inputs' included
        (the plan's, known before any value: the windows not built yet are built to count
        them)."""
        for k, count in enumerate(self._counts):
            if count is None:
                self._build(k, _Uploads())
        return sum(c for c in self._counts if c is not None) + len(self.final_nodes)


def dense_nbytes_per_set(num_columns: int, dim: int, itemsize: int = 4) -> int:
    """Bytes the dense replay holds per set: its memory, last-update and pending rows of
    every column, and as much again for the rows a batch gathers (an upper estimate)."""
    return 2 * num_columns * (dim * itemsize + 16)


def dense_replay(model: TGN, traj: Trajectory, sets: RemovalSets,
                 stats: ConeStats | None = None, max_bytes: int | None = None) -> NodeInputs:
    """Follow P removal sets through the recorded batches with a state row per set and
    column, on the trajectory's device (see the module docstring).

    Args:
        model: The TGN the trajectory was recorded with (in eval mode).
        traj: The unperturbed trajectory.
        sets: The P removal sets; only events in ``[traj.start, traj.end)`` that the
            recording kept may be removed.
        stats: Counters to add this call's work to (calls, sets, row updates and seconds;
            nothing is shared or pruned here), or None.
        max_bytes: Memory budget of the call's buffers: a call of several sets whose rows
            would outgrow it raises ``ConeBudgetExceeded`` before any work, for the caller
            to split the sets.

    Returns:
        The node inputs under each set, as ``cftgnn.replay.tgn.cone.cone_replay`` returns
        them: node ``n`` under set ``p`` reads its row where the set can change it, else
        the recorded input; nodes whose final input is never read refuse to answer.
    """
    if len(sets.events) == 0:
        return NodeInputs(traj.final_input, traj.final_input[:0])
    began = (time.perf_counter(), time.process_time()) if stats is not None else None
    deps = traj.dependencies_for(model, sets.events)
    num_p, num_c, d = sets.num_sets, deps.num_columns, model.memory_dim
    dtype = traj.final_input.dtype
    need_bytes = num_p * dense_nbytes_per_set(num_c, d, traj.final_input.element_size())
    if max_bytes is not None and num_p > 1 and need_bytes > max_bytes:
        raise ConeBudgetExceeded(f"{need_bytes} bytes of dense rows for {num_p} sets")
    plan = DensePlan(model, traj, deps, sets)
    dev = traj.final_input.device
    mem = torch.zeros(num_p, num_c, d, dtype=dtype, device=dev)
    lu = torch.zeros(num_p, num_c, dtype=torch.float64, device=dev)
    pend = torch.full((num_p, num_c), -1, dtype=torch.int64, device=dev)
    # which of the sets' removable events each set removes, [P, U + 1] (the last: none)
    table = torch.zeros(num_p, len(sets.events) + 1, dtype=torch.bool, device=dev)
    table[:, :-1] = plan.removals
    state = _DenseState(mem, lu, pend, torch.arange(num_p, device=dev)[:, None],
                        *model.endpoints, plan.columns_t, plan.born_t)
    loc = torch.full((model.num_nodes,), -1, dtype=torch.int64, device=dev)
    with torch.no_grad():
        for x, rec in enumerate(traj.batches):
            step = plan.batch(x)
            if step is None:
                continue
            nodes, app, new, pen = step.nodes, step.apply, step.new, step.pending
            loc[nodes] = torch.arange(len(nodes), device=dev)
            if app is not None:
                _apply(model, rec, app, state, loc, x)
            if new is not None:
                cols, at = new
                assert step.lu_post is not None
                mem[:, cols] = rec.mem_post[at].to(dtype)[None]
                lu[:, cols] = step.lu_post[None]
                pend[:, cols] = -1
            if pen is not None:
                removed = table[:, pen.removable]  # [P, V, I] (-1: the column of none)
                kept = (pen.events >= 0)[None] & ~removed
                pend[:, pen.cols] = torch.where(kept, pen.events[None], -1).amax(dim=2)
            loc[nodes] = -1
        out = _final_inputs(model, traj, deps, sets, plan, state)
    if stats is not None and began is not None:
        stats.calls += 1
        stats.sets += num_p
        stats.row_updates += num_p * plan.row_updates
        stats.peak_bytes = max(stats.peak_bytes, need_bytes)
        stats.replay_s += time.perf_counter() - began[0]
        stats.replay_cpu_s += time.process_time() - began[1]
    return out


@dataclass(frozen=True)
class _DenseState:
    """The buffers of a dense replay and the device tables its steps read: ``mem [P, C, d]``,
    ``lu [P, C]``, ``pend [P, C]``, the sets' numbers ``sets [P, 1]``, the stream's
    endpoints, each node's column (``-1``: none) and each column's first batch (``born``)."""

    mem: Tensor
    lu: Tensor
    pend: Tensor
    sets: Tensor
    src: Tensor
    dst: Tensor
    columns: Tensor
    born: Tensor

    def rows_of(self, other: Tensor, before: int) -> tuple[Tensor, Tensor]:
        """Whether node ``other[p, v]`` holds a row under set ``p`` (a column born before
        batch ``before``), and the index of that row in ``mem.view(P * C, d)``
        (meaningless where it holds none)."""
        oc = self.columns[other]
        own = oc >= 0
        col = oc.clamp(min=0)
        own &= self.born[col] < before
        return own, self.sets * self.mem.shape[1] + col

    def sender_memory(self, other: Tensor, before: int, recorded: Tensor) -> Tensor:
        """Memory of nodes ``other [P, V]`` under each set, ``[P, V, d]``: their row where
        they hold one, else ``recorded [P, V, d]``."""
        own, at = self.rows_of(other, before)
        flat = self.mem.view(-1, self.mem.shape[2])
        return torch.where(own[..., None], flat[at], recorded)


def _other(src: Tensor, dst: Tensor, ev: Tensor, node: Tensor) -> Tensor:
    """The other endpoint of events ``ev`` seen from ``node`` (broadcast)."""
    s = src[ev]
    return torch.where(s == node, dst[ev], s)


def _apply(model: TGN, rec: BatchRecord, app: _Apply, state: _DenseState, loc: Tensor,
           x: int) -> None:
    """Step 1 of batch ``x``: every set's pending message of the columns ``app`` applied, the
    senders' memory read from their rows where they hold one (before the batch), else from
    the recording (``rec.mem_pre``)."""
    mem, lu, pend = state.mem, state.lu, state.pend
    d = mem.shape[2]
    ev = pend[:, app.cols]  # [P, V]
    has = ev >= 0
    ev = torch.where(has, ev, app.recorded[None])
    other = _other(state.src, state.dst, ev, app.nodes[None])  # [P, V]
    recorded = rec.mem_pre[loc[other].reshape(-1)].reshape(*other.shape, d).to(mem.dtype)
    sender = state.sender_memory(other, x, recorded)
    self_mem = mem[:, app.cols]  # [P, V, d]
    self_lu = lu[:, app.cols]
    new, t = model.message_update(ev.reshape(-1), self_mem.reshape(-1, d),
                                  self_lu.reshape(-1), sender.reshape(-1, d))
    mem[:, app.cols] = torch.where(has[..., None], new.reshape(self_mem.shape), self_mem)
    lu[:, app.cols] = torch.where(has, t.reshape(has.shape), self_lu)
    pend[:, app.cols] = -1


def _final_inputs(model: TGN, traj: Trajectory, deps: Dependencies, sets: RemovalSets,
                  plan: DensePlan, state: _DenseState) -> NodeInputs:
    """The node inputs at the end: the pending messages applied to the columns the
    prediction reads, under every set whose removals can reach them (the others read the
    recorded input)."""
    final = len(traj.batches)
    mem, lu, pend = state.mem, state.lu, state.pend
    num_p, num_c, d = mem.shape
    nodes = plan.final_nodes
    cols = deps.columns[nodes]
    out_columns = np.where(deps.columns >= 0, -2, deps.columns)
    if not len(cols):
        return NodeInputs(traj.final_input, traj.final_input[:0], None, out_columns)
    out_columns[nodes] = cols
    cols_t, nodes_t = plan.final_cols_t, plan.final_nodes_t
    ev = pend[:, cols_t]  # [P, F]
    has = ev >= 0
    safe = torch.where(has, ev, 0)
    other = _other(state.src, state.dst, safe, nodes_t[None])
    sender = state.sender_memory(other, final, traj.final.memory[other].to(mem.dtype))
    rows = mem[:, cols_t]  # [P, F, d]
    new, _ = model.message_update(safe.reshape(-1), rows.reshape(-1, d),
                                  lu[:, cols_t].reshape(-1), sender.reshape(-1, d))
    rows = torch.where(has[..., None], new.reshape(rows.shape), rows)
    # a set whose removals cannot reach a node reads its recorded input (as the row table)
    masks = _final_masks(deps)[cols]  # [F, W]
    words = sets.words(deps.universe)  # [P, W]
    reach = ((words[:, None, :] & masks[None]) != 0).any(axis=2)  # [P, F]
    rowmap = np.full((num_p, num_c), -1, dtype=np.int64)
    num_f = len(cols)
    ids = np.arange(num_p)[:, None] * num_f + np.arange(num_f)[None, :]
    rowmap[:, cols] = np.where(reach, ids, -1)
    return NodeInputs(traj.final_input, rows.reshape(num_p * num_f, d), rowmap, out_columns)


__all__ = ["DensePlan", "dense_nbytes_per_set", "dense_replay"]
