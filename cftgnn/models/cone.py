"""Exact masked replay of TGN that recomputes only the causal cone of the removed events.

Removing events changes the memory of their endpoints, then of every node that later receives a
message from an affected node, and nothing else (DESIGN.md §5, "touch only what changes").
:func:`record_trajectory` replays the *unperturbed* history once per explained event and keeps,
for every batch, the state rows of the nodes it touches. :func:`cone_replay` then follows P
removal sets at once: it keeps perturbed rows only for affected ``(perturbation, node)`` pairs
and reads every unaffected value from the recording, so a batch costs in proportion to the
affected nodes it touches, not to the batch. The result feeds
:func:`cftgnn.models.batched.batched_logits`.

The cone is conservative: a node once affected stays affected (its rows are recomputed even if
they happen to equal the unperturbed ones), so the result is exact by construction; the tests
compare it with fresh replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.data.index import concat_ranges
from cftgnn.models.state import State

if TYPE_CHECKING:
    from cftgnn.models.tgn import TGN


@dataclass
class BatchRecord:
    """Unperturbed state rows of the nodes one history batch touches.

    Attributes:
        events: Stream positions of the batch's events, ``int64 [K]`` (ascending).
        nodes: Nodes with a pending message before the batch or an event in it, ``[V]``.
        pend_pre: Their pending message (stream position, ``-1`` none) before the batch.
        mem_pre: Their memory before the batch, ``[V, d]``.
        lu_pre: Their last-update time before the batch, ``float64 [V]``.
        mem_post: Their memory after the pending messages were applied, ``[V, d]``.
        lu_post: Their last-update time after that, ``float64 [V]``.
        pend_nodes: The nodes with a pending message before the batch, ``[M]``.
        pend_ev: Their pending event, ``[M]``.
        pend_other: The other endpoint of that event, ``[M]``.
        inc_k: Incidences of the batch's events (index into ``events``), grouped by node in
            the order of ``nodes`` and ascending within a node, ``[I]``.
        inc_start: Start of each node's group in ``inc_k``, ``[V]``.
        inc_end: End of each node's group in ``inc_k``, ``[V]`` (equal to the start for
            nodes without an event in the batch).
    """

    events: npt.NDArray[np.int64]
    nodes: npt.NDArray[np.int64]
    pend_pre: npt.NDArray[np.int64]
    mem_pre: Tensor
    lu_pre: Tensor
    mem_post: Tensor
    lu_post: Tensor
    pend_nodes: npt.NDArray[np.int64]
    pend_ev: npt.NDArray[np.int64]
    pend_other: npt.NDArray[np.int64]
    inc_k: npt.NDArray[np.int64]
    inc_start: npt.NDArray[np.int64]
    inc_end: npt.NDArray[np.int64]


def _batch_record(events: npt.NDArray[np.int64], nodes: npt.NDArray[np.int64],
                  pend_pre: npt.NDArray[np.int64], mem_pre: Tensor, lu_pre: Tensor,
                  mem_post: Tensor, lu_post: Tensor, src: npt.NDArray[np.int64],
                  dst: npt.NDArray[np.int64]) -> BatchRecord:
    """A :class:`BatchRecord` with the index arrays every replay of the batch needs."""
    has = pend_pre >= 0
    pend_nodes, pend_ev = nodes[has], pend_pre[has]
    k = len(events)
    s_, d_ = src[events], dst[events]
    loop = s_ == d_
    inc_node = np.concatenate([s_, d_[~loop]])
    inc_k = np.concatenate([np.arange(k), np.arange(k)[~loop]])
    order = np.lexsort((inc_k, inc_node))
    inc_node, inc_k = inc_node[order], inc_k[order]
    return BatchRecord(
        events, nodes, pend_pre, mem_pre, lu_pre, mem_post, lu_post, pend_nodes, pend_ev,
        other_endpoint(src, dst, pend_ev, pend_nodes), inc_k,
        np.searchsorted(inc_node, nodes, side="left"),
        np.searchsorted(inc_node, nodes, side="right"))


@dataclass
class Trajectory:
    """The unperturbed replay of ``[start, end)`` from a base state.

    Attributes:
        start: Position of the base state (a batch boundary).
        end: End of the replay (the explained event).
        batches: One record per batch of ``[start, end)``.
        final: The unperturbed state at ``end``.
        final_input: Its node input (memory with pending messages applied), ``[N, d]``.
    """

    start: int
    end: int
    batches: list[BatchRecord]
    final: State
    final_input: Tensor


def record_trajectory(model: TGN, base: State, end: int,
                      removed: npt.NDArray[np.bool_] | None = None) -> Trajectory:
    """Replay ``[base.position, end)`` (with an optional base removal mask) and record it.

    The batches are formed exactly as :meth:`TemporalModel.advance` forms them; batches that
    change nothing (empty on an idle state) are skipped there and not recorded here. Removal
    sets given to :func:`cone_replay` are then relative to this recording: the approximate
    oracle records its history (events before ``ε_min`` plus all candidates) once and
    follows each removal set as a small perturbation of it. Leaves ``model`` holding the
    recorded state at ``end``.
    """
    src, dst = model.stream.src, model.stream.dst
    batch = model.batch_size
    records: list[BatchRecord] = []
    with torch.no_grad():
        model.restore(base)
        st = model.state
        dev = st.memory.device
        lo = base.position
        pos = np.arange(lo, end, dtype=np.int64)
        if removed is not None:
            st.removed[lo:end] = torch.from_numpy(removed[lo:end].copy())
            pos = pos[~removed[lo:end]]
        groups = np.split(pos, np.flatnonzero(np.diff(pos // batch)) + 1) if len(pos) else []
        idle = model._idle(st)
        nxt = lo // batch  # first batch not processed yet

        def apply(events: npt.NDArray[np.int64]) -> None:
            pend_nodes = (st.pending >= 0).nonzero(as_tuple=True)[0].cpu().numpy()
            nodes = np.unique(np.concatenate([pend_nodes, src[events], dst[events]]))
            nt = torch.as_tensor(nodes, device=dev)
            pend_pre = st.pending[nt].cpu().numpy()
            mem_pre, lu_pre = st.memory[nt], st.last_update[nt]
            model._apply_batch(st, torch.as_tensor(events, device=dev))
            records.append(_batch_record(events, nodes, pend_pre, mem_pre, lu_pre,
                                         st.memory[nt], st.last_update[nt], src, dst))

        empty = np.zeros(0, dtype=np.int64)
        for group in groups:
            gb = int(group[0] // batch)
            if gb > nxt and not idle:
                apply(empty)
            apply(group)
            idle, nxt = False, gb + 1
        if nxt <= (end - 1) // batch and not idle:
            apply(empty)
        st.position = end
        final = model.snapshot()
        final_input = model._pending_applied(final)[0]
    return Trajectory(base.position, end, records, final, final_input)


class _Rows:
    """Perturbed state rows of affected ``(perturbation, node)`` pairs (grows as needed)."""

    def __init__(self, num_p: int, num_nodes: int, dim: int, device: torch.device) -> None:
        self.rowmap = np.full((num_p, num_nodes), -1, dtype=np.int64)
        cap = 256
        self.mem = torch.empty(cap, dim, device=device)
        self.lu = torch.empty(cap, dtype=torch.float64, device=device)
        self.pend = np.full(cap, -1, dtype=np.int64)
        self.p = np.empty(cap, dtype=np.int64)
        self.n = np.empty(cap, dtype=np.int64)
        self.size = 0

    def add(self, p: npt.NDArray[np.int64], n: npt.NDArray[np.int64], mem: Tensor,
            lu: Tensor) -> npt.NDArray[np.int64]:
        """Allocate rows for new pairs (pending none); returns their row ids."""
        k = len(p)
        need = self.size + k
        if need > len(self.pend):
            cap = max(need, 2 * len(self.pend))
            grow = cap - len(self.pend)
            self.mem = torch.cat([self.mem, self.mem.new_empty(grow, self.mem.shape[1])])
            self.lu = torch.cat([self.lu, self.lu.new_empty(grow)])
            self.pend = np.concatenate([self.pend, np.full(grow, -1, dtype=np.int64)])
            self.p = np.concatenate([self.p, np.empty(grow, dtype=np.int64)])
            self.n = np.concatenate([self.n, np.empty(grow, dtype=np.int64)])
        rows = np.arange(self.size, need, dtype=np.int64)
        rt = torch.as_tensor(rows, device=self.mem.device)
        self.mem[rt] = mem
        self.lu[rt] = lu
        self.pend[rows] = -1
        self.p[rows], self.n[rows] = p, n
        self.rowmap[p, n] = rows
        self.size = need
        return rows


def other_endpoint(src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64],
                   ev: npt.NDArray[np.int64], node: npt.NDArray[np.int64]
                   ) -> npt.NDArray[np.int64]:
    """The endpoint of each event ``ev`` that is not ``node`` (``node`` for a self-loop)."""
    s, d = src[ev], dst[ev]
    return np.where(s == node, d, s)


def messages(model: TGN, ev: npt.NDArray[np.int64], mem_self: Tensor, lu_self: Tensor,
              mem_other: Tensor) -> tuple[Tensor, Tensor]:
    """New memory ``[M, d]`` and last-update times of nodes applying pending events ``ev``."""
    evt = torch.as_tensor(ev, device=mem_self.device)
    t = model._t[evt]
    dt = (t - lu_self).to(mem_self.dtype)
    msg = model.message(mem_self, mem_other, model._feat[evt], model.msg_time_enc(dt))
    return model.gru(msg, mem_self), t


def cone_replay(model: TGN, traj: Trajectory, removed: npt.NDArray[np.bool_]
                ) -> tuple[npt.NDArray[np.int64], Tensor, Tensor]:
    """Follow P removal masks through the recorded batches, touching only affected rows.

    Args:
        model: The TGN the trajectory was recorded with.
        traj: The unperturbed trajectory.
        removed: Removal masks over the attached stream, ``bool [P, E]``; only entries in
            ``[traj.start, traj.end)`` may be set.

    Returns:
        ``(index [P, N], extra [R, d], base_input [N, d])``: the node input (memory with
        pending messages applied) of node ``n`` under perturbation ``p`` is
        ``base_input[i]`` for ``i = index[p, n] < N`` and ``extra[i - N]`` otherwise.
    """
    src, dst = model.stream.src, model.stream.dst
    num_p, num_nodes = removed.shape[0], model.num_nodes
    dev = traj.final_input.device
    rows = _Rows(num_p, num_nodes, model.memory_dim, dev)
    loc = np.full(num_nodes, -1, dtype=np.int64)
    with torch.no_grad():
        for rec in traj.batches:
            rem = removed[:, rec.events]  # [P, K]
            if rows.size == 0 and not rem.any():
                continue  # nothing differs from the unperturbed run yet
            loc[rec.nodes] = np.arange(len(rec.nodes))
            _apply_pending(model, rows, rec, loc, src, dst)
            _new_pending(rows, rec, rem, loc, src, dst)
            loc[rec.nodes] = -1
        return _final_inputs(model, rows, traj, src, dst)


def _apply_pending(model: TGN, rows: _Rows, rec: BatchRecord, loc: npt.NDArray[np.int64],
                   src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> None:
    """Step 1 of a batch: apply pending messages of affected nodes and of nodes whose
    pending message comes from an affected node (which makes them affected)."""
    if rows.size == 0:
        return
    size = rows.size
    ra = np.flatnonzero(rows.pend[:size] >= 0)
    pa, na, eva = rows.p[ra], rows.n[ra], rows.pend[ra]
    vp, ev0, o0 = rec.pend_nodes, rec.pend_ev, rec.pend_other
    pb, jb = np.nonzero((rows.rowmap[:, o0] >= 0) & (rows.rowmap[:, vp] < 0))
    nb, evb = vp[jb], ev0[jb]
    if len(ra) == 0 and len(pb) == 0:
        rows.pend[:size] = -1
        return
    lb = torch.as_tensor(loc[nb], device=rows.mem.device)
    rat = torch.as_tensor(ra, device=rows.mem.device)
    mem_self = torch.cat([rows.mem[rat], rec.mem_pre[lb]])
    lu_self = torch.cat([rows.lu[rat], rec.lu_pre[lb]])
    p, n, ev = np.concatenate([pa, pb]), np.concatenate([na, nb]), np.concatenate([eva, evb])
    o = other_endpoint(src, dst, ev, n)
    ro = rows.rowmap[p, o]
    aff_o = ro >= 0
    mem_other = rec.mem_pre.new_empty(len(p), rec.mem_pre.shape[1])
    if aff_o.any():
        dev = rows.mem.device
        mem_other[torch.as_tensor(np.flatnonzero(aff_o), device=dev)] = rows.mem[
            torch.as_tensor(ro[aff_o], device=dev)]
    if (~aff_o).any():
        lo_ = loc[o[~aff_o]]
        assert (lo_ >= 0).all(), "the other endpoint of a pending message must be recorded"
        dev = rows.mem.device
        mem_other[torch.as_tensor(np.flatnonzero(~aff_o), device=dev)] = rec.mem_pre[
            torch.as_tensor(lo_, device=dev)]
    new_mem, new_t = messages(model, ev, mem_self, lu_self, mem_other)
    rows.add(pb, nb, new_mem[len(ra):], new_t[len(ra):])
    rows.pend[:size] = -1
    if len(ra):
        rows.mem[rat] = new_mem[: len(ra)]
        rows.lu[rat] = new_t[: len(ra)]


def _new_pending(rows: _Rows, rec: BatchRecord, rem: npt.NDArray[np.bool_],
                 loc: npt.NDArray[np.int64], src: npt.NDArray[np.int64],
                 dst: npt.NDArray[np.int64]) -> None:
    """Step 2 of a batch: endpoints of removed events become affected; every affected node
    in the batch gets its last kept event as pending message."""
    pr, kr = np.nonzero(rem)
    if len(pr):
        ev = rec.events[kr]
        p = np.concatenate([pr, pr])
        n = np.concatenate([src[ev], dst[ev]])
        key = np.unique(p * rows.rowmap.shape[1] + n)
        p, n = key // rows.rowmap.shape[1], key % rows.rowmap.shape[1]
        new = rows.rowmap[p, n] < 0
        p, n = p[new], n[new]
        if len(p):
            lt = torch.as_tensor(loc[n], device=rows.mem.device)
            rows.add(p, n, rec.mem_post[lt], rec.lu_post[lt])
    size = rows.size
    if size == 0:
        return
    pos = loc[rows.n[:size]]  # position of each affected node in rec.nodes, or -1
    r = np.flatnonzero(pos >= 0)
    starts, ends = rec.inc_start[pos[r]], rec.inc_end[pos[r]]
    has_events = ends > starts
    r, starts, ends = r[has_events], starts[has_events], ends[has_events]
    if len(r) == 0:
        return
    inc_k = rec.inc_k
    idx = concat_ranges(starts, ends)
    owner = np.repeat(np.arange(len(r)), ends - starts)
    kk = inc_k[idx]
    kept = ~rem[rows.p[r][owner], kk]
    val = np.where(kept, rec.events[kk], -1)
    lens = ends - starts
    last = np.maximum.reduceat(val, np.cumsum(lens) - lens)  # every segment is non-empty
    rows.pend[r] = last


def _final_inputs(model: TGN, rows: _Rows, traj: Trajectory, src: npt.NDArray[np.int64],
                  dst: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], Tensor, Tensor]:
    """Node inputs at the end: pending messages applied, for affected nodes and for nodes
    whose pending message comes from an affected node."""
    num_p, num_nodes = rows.rowmap.shape
    final = traj.final
    size = rows.size
    index = np.broadcast_to(np.arange(num_nodes, dtype=np.int64), (num_p, num_nodes)).copy()
    if size == 0:
        return index, traj.final_input[:0], traj.final_input
    ra = np.flatnonzero(rows.pend[:size] >= 0)
    pa, na, eva = rows.p[ra], rows.n[ra], rows.pend[ra]
    pend0 = final.pending.cpu().numpy()
    vp = np.flatnonzero(pend0 >= 0)
    ev0 = pend0[vp]
    o0 = other_endpoint(src, dst, ev0, vp)
    pb, jb = np.nonzero((rows.rowmap[:, o0] >= 0) & (rows.rowmap[:, vp] < 0))
    nb, evb = vp[jb], ev0[jb]
    # affected rows without a pending message keep their memory as node input
    aff = np.flatnonzero(rows.pend[:size] < 0)
    index[rows.p[aff], rows.n[aff]] = num_nodes + aff
    table = [rows.mem[:size]]
    if len(ra) or len(pb):
        dev = rows.mem.device
        nbt = torch.as_tensor(nb, device=dev)
        rat = torch.as_tensor(ra, device=dev)
        mem_self = torch.cat([rows.mem[rat], final.memory[nbt]])
        lu_self = torch.cat([rows.lu[rat], final.last_update[nbt]])
        p, n, ev = np.concatenate([pa, pb]), np.concatenate([na, nb]), np.concatenate([eva, evb])
        o = other_endpoint(src, dst, ev, n)
        ro = rows.rowmap[p, o]
        mem_other = final.memory[torch.as_tensor(o, device=dev)].clone()
        aff_o = ro >= 0
        if aff_o.any():
            mem_other[torch.as_tensor(np.flatnonzero(aff_o), device=dev)] = rows.mem[
                torch.as_tensor(ro[aff_o], device=dev)]
        new_mem, _ = messages(model, ev, mem_self, lu_self, mem_other)
        index[p, n] = num_nodes + size + np.arange(len(p))
        table.append(new_mem)
    return index, torch.cat(table), traj.final_input
