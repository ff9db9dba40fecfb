"""Exact masked replay of TGN that recomputes only the causal cone of the removed events.

Removing events changes the memory of their endpoints, then of every node that later receives a
message from an affected node, and nothing else (DESIGN.md §5, "touch only what changes").
:func:`record_trajectory` replays the *unperturbed* history once per explained event and keeps,
for every batch, the state rows of the nodes it touches. :func:`cone_replay` then follows P
removal sets at once, keeping perturbed rows only where a removal reaches and reading every
other value from the recording, so a batch costs in proportion to the affected rows it
touches, not to the batch. The result feeds :func:`cftgnn.replay.batched.batched_logits`.

**Rows are shared between removal sets.** The state of node ``n`` after a batch is a function
of which events in its causal past ``D(n)`` are removed: the events that reached ``n`` through
messages, and the events that could have (TGN keeps only the last message of a batch, and a
removal makes an earlier one the last). :func:`dependencies` computes ``D(n)``, restricted to
the removable events (the candidates), once per trajectory as bitmasks. A perturbed row is then
keyed by ``(n, s ∩ D(n))`` rather than by ``(set, n)``: sets that agree on the removals in a
node's past share its row, and a row is split only when ``D(n)`` grows to tell them apart. The
64 children of an MCTS node share all but one removal; even independent random sets share the
rows that only their common old removals reach. Sets with ``s ∩ D(n) = ∅`` read the recorded
row, so the cone of a set is exactly the nodes whose past meets it; the cone is conservative
(``D(n)`` over-approximates the dependencies), so the result is exact by construction, and the
tests compare it with fresh replays.

**Only states the prediction can read are computed.** The prediction reads the final input of
the few nodes its embedding can attend to (:func:`cftgnn.models.neighbors.reachable_nodes`),
and those read, batch by batch, the states of the nodes they met. :func:`needed_until` sweeps
the recording backwards once per trajectory and gives, for every node, the last batch whose
state of it is read; after that batch a node gets no new rows and no messages. On long
histories (Wikipedia, ``ε_min`` far back) most of the forward cone is never read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.data.index import concat_ranges
from cftgnn.models.neighbors import reachable_nodes
from cftgnn.models.state import State
from cftgnn.models.tgn import TGN, other_endpoint
from cftgnn.replay.batched import NodeInputs
from cftgnn.replay.masks import RemovalSets

Words = npt.NDArray[np.uint64]


@dataclass
class BatchRecord:
    """Unperturbed state rows of the nodes one history batch touches.

    Attributes:
        events: Stream positions of the batch's events, ``int64 [K]`` (ascending).
        nodes: Nodes with a pending message before the batch or an event in it, sorted,
            ``[V]``.
        mem_pre: Their memory before the batch, ``[V, d]``.
        mem_post: Their memory after the pending messages were applied, ``[V, d]``.
        lu_post: Their last-update time after that, ``float64 [V]`` (on the host: rows are
            keyed by it).
        inc_k: Incidences of the batch's events (index into ``events``), grouped by node in
            the order of ``nodes`` and ascending within a node, ``[I]``.
        inc_start: Start of each node's group in ``inc_k``, ``[V]``.
        inc_end: End of each node's group in ``inc_k``, ``[V]`` (equal to the start for
            nodes without an event in the batch).
    """

    events: npt.NDArray[np.int64]
    nodes: npt.NDArray[np.int64]
    mem_pre: Tensor
    mem_post: Tensor
    lu_post: npt.NDArray[np.float64]
    inc_k: npt.NDArray[np.int64]
    inc_start: npt.NDArray[np.int64]
    inc_end: npt.NDArray[np.int64]


def _batch_record(events: npt.NDArray[np.int64], nodes: npt.NDArray[np.int64],
                  mem_pre: Tensor, mem_post: Tensor, lu_post: npt.NDArray[np.float64],
                  src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> BatchRecord:
    """A :class:`BatchRecord` with the index arrays every replay of the batch needs."""
    k = len(events)
    s_, d_ = src[events], dst[events]
    loop = s_ == d_
    inc_node = np.concatenate([s_, d_[~loop]])
    inc_k = np.concatenate([np.arange(k), np.arange(k)[~loop]])
    order = np.lexsort((inc_k, inc_node))
    inc_node, inc_k = inc_node[order], inc_k[order]
    return BatchRecord(events, nodes, mem_pre, mem_post, lu_post, inc_k,
                       np.searchsorted(inc_node, nodes, side="left"),
                       np.searchsorted(inc_node, nodes, side="right"))


@dataclass
class Dependencies:
    """The removable events each node's state depends on, batch by batch (see the module
    docstring), for the nodes and batches whose state the prediction can read.

    Attributes:
        universe: The removable events, ascending, ``int64 [U]``; bit ``j`` of a mask (bit
            ``j % 64`` of word ``j // 64``) stands for ``universe[j]``.
        nodes: Per recorded batch, the nodes whose dependency set grows in it, ``[k_b]``.
        masks: Per recorded batch, those nodes' dependency sets after it,
            ``uint64 [k_b, ⌈U / 64⌉]``.
        need: For every node, the last batch whose state of it is read (see
            :func:`needed_until`), ``int64 [N]``.
        columns: Column of each node that may get perturbed rows (one in some
            :attr:`nodes`), ``-1`` for the others, ``int64 [N]``.
        num_columns: Number of such nodes.
    """

    universe: npt.NDArray[np.int64]
    nodes: list[npt.NDArray[np.int64]]
    masks: list[Words]
    need: npt.NDArray[np.int64]
    columns: npt.NDArray[np.int64]
    num_columns: int

    def covers(self, events: npt.NDArray[np.int64]) -> bool:
        """Whether every event of ``events`` is in the universe."""
        return bool(np.isin(events, self.universe).all())


def _suffixes(rec: BatchRecord, universe: npt.NDArray[np.int64]
              ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64],
                         npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """The incidences of a batch that can be a node's pending message after it.

    Events outside ``universe`` are kept by every set, so a node's message is one of its
    events from its last such event on (its *suffix*).

    Returns:
        ``(node, event, j, in_universe, suffix)`` per incidence (grouped by node as in
        ``rec.inc_k``), ``j`` the event's position in ``universe`` where it is there.
    """
    lens = rec.inc_end - rec.inc_start
    has = lens > 0
    node_of = np.repeat(rec.nodes, lens)  # [I], incidences grouped by node
    ev = rec.events[rec.inc_k]
    j = np.searchsorted(universe, ev)
    if len(universe):
        in_u = universe[np.minimum(j, len(universe) - 1)] == ev
    else:
        in_u = np.zeros(len(ev), dtype=bool)
    if not len(ev):
        return node_of, ev, j, in_u, in_u
    at = np.arange(len(ev))
    last_out = np.maximum.reduceat(np.where(in_u, -1, at), rec.inc_start[has])
    return node_of, ev, j, in_u, at >= np.repeat(last_out, lens[has])


def needed_until(batches: list[BatchRecord], final: npt.NDArray[np.int64], num_nodes: int,
                 src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64],
                 universe: npt.NDArray[np.int64]
                 ) -> npt.NDArray[np.int64]:
    """For every node, the last batch whose state of it the prediction can read.

    The prediction reads the final input of the nodes ``final`` (state "after batch
    ``len(batches)``"). Batch ``x`` applies the messages of the events of batch ``x - 1``,
    reading the state of their other endpoints after batch ``x - 1``; so if a node's state
    after batch ``x`` is read, so is its state after every earlier batch and the state of
    every node it met in batch ``x - 1`` (through an event of its suffix, the only ones
    that can be its message under removals from ``universe``) after that batch. A backward
    sweep over the batches gives ``need[n]``, ``-1`` for nodes never read: rows of node
    ``n`` need not be computed after batch ``need[n]`` (DESIGN.md §5, "touch only what
    changes", read backwards).
    """
    need = np.full(num_nodes, -1, dtype=np.int64)
    need[final] = len(batches)
    for x in range(len(batches), 0, -1):
        rec = batches[x - 1]
        if not len(rec.events):
            continue
        node_of, ev, _, _, suffix = _suffixes(rec, universe)
        read = suffix & (need[node_of] >= x)
        reached = other_endpoint(src, dst, ev[read], node_of[read])
        need[reached] = np.maximum(need[reached], x - 1)
    return need


def dependencies(batches: list[BatchRecord], universe: npt.NDArray[np.int64], num_nodes: int,
                 src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64],
                 need: npt.NDArray[np.int64] | None = None) -> Dependencies:
    """The dependency sets ``D(n)`` over ``universe`` along the recorded ``batches``.

    A node's pending message after a batch is its last kept event there. Events outside the
    universe are always kept, so it is one of the node's events from the last such event on
    (its *suffix*; usually just the last event). Each can become the message when the later
    ones are removed. So, in every batch, ``D(n)`` of each endpoint ``n`` gains the universe
    events of its suffix and ``D`` of their other endpoints as it was before the batch (the
    sender's state the message is built from when it is applied in the next batch).

    With ``need`` (from :func:`needed_until`), ``D(n)`` stops growing after batch
    ``need[n] - 1``: the state of ``n`` after batch ``need[n]`` is never read, and no node
    whose state is read receives a message built from it (those senders are needed later).
    """
    universe = np.asarray(universe, dtype=np.int64)
    if need is None:
        need = np.full(num_nodes, len(batches), dtype=np.int64)
    num_words = max(1, -(-len(universe) // 64))
    dep = np.zeros((num_nodes, num_words), dtype=np.uint64)
    out_nodes: list[npt.NDArray[np.int64]] = []
    out_masks: list[Words] = []
    empty_n = np.zeros(0, dtype=np.int64)
    empty_m = np.zeros((0, num_words), dtype=np.uint64)
    first = int(universe[0]) if len(universe) else None
    for x, rec in enumerate(batches):
        if first is None or not len(rec.events) or rec.events[-1] < first:
            out_nodes.append(empty_n)  # nothing removable has happened yet
            out_masks.append(empty_m)
            continue
        node_of, ev, j, in_u, suffix = _suffixes(rec, universe)
        lens = rec.inc_end - rec.inc_start
        has = lens > 0
        starts = rec.inc_start[has]
        vals = np.zeros((len(ev), num_words), dtype=np.uint64)
        sfx = np.flatnonzero(suffix)
        vals[sfx] = dep[other_endpoint(src, dst, ev[sfx], node_of[sfx])]
        hit = np.flatnonzero(suffix & in_u)
        jh = j[hit]
        vals[hit, jh // 64] |= np.left_shift(np.uint64(1), (jh % 64).astype(np.uint64))
        nodes = rec.nodes[has]
        grown = dep[nodes] | np.bitwise_or.reduceat(vals, starts, axis=0)
        changed = (grown != dep[nodes]).any(axis=1) & (need[nodes] > x)
        nodes, grown = nodes[changed], grown[changed]
        dep[nodes] = grown
        out_nodes.append(nodes)
        out_masks.append(grown)
    columns = np.full(num_nodes, -1, dtype=np.int64)
    touched = np.unique(np.concatenate(out_nodes)) if out_nodes else empty_n
    columns[touched] = np.arange(len(touched))
    return Dependencies(universe, out_nodes, out_masks, need, columns, len(touched))


@dataclass
class Trajectory:
    """The unperturbed replay of ``[start, end)`` from a base state.

    Attributes:
        start: Position of the base state (a batch boundary).
        end: End of the replay (the explained event).
        batches: One record per batch of ``[start, end)``.
        final: The unperturbed state at ``end``.
        final_input: Its node input (memory with pending messages applied), ``[N, d]``.
        removed: Events removed in the recording (``bool [E]``: the base state's removals
            and the recording's own, e.g. the approximate oracle's history), or None.
        deps: Dependency sets over the removable events, made by :meth:`dependencies_for`.
    """

    start: int
    end: int
    batches: list[BatchRecord]
    final: State
    final_input: Tensor
    removed: npt.NDArray[np.bool_] | None = None
    deps: Dependencies | None = field(default=None, repr=False)

    def dependencies_for(self, model: TGN, events: npt.NDArray[np.int64]) -> Dependencies:
        """Dependency sets over a universe holding ``events`` (kept, or widened and rebuilt
        when a removal set names an event outside it), restricted to the states the
        prediction of the event at :attr:`end` can read under removals from that universe."""
        if self.deps is None or not self.deps.covers(events):
            universe = events if self.deps is None else np.union1d(self.deps.universe, events)
            stream, index = model.stream, model.index
            link = np.array([stream.src[self.end], stream.dst[self.end]], dtype=np.int64)
            final = reachable_nodes(index, link, np.full(2, self.end), model.num_neighbors,
                                    model.embedding.num_layers, universe, self.removed)
            need = needed_until(self.batches, final, len(self.final_input), stream.src,
                                stream.dst, universe)
            self.deps = dependencies(self.batches, universe, len(self.final_input), stream.src,
                                     stream.dst, need)
        return self.deps


def record_trajectory(model: TGN, base: State, end: int,
                      removed: npt.NDArray[np.bool_] | None = None,
                      removable: npt.NDArray[np.int64] | None = None) -> Trajectory:
    """Replay ``[base.position, end)`` (with an optional base removal mask) and record it.

    The batches are formed exactly as :meth:`TemporalModel.advance` forms them; batches that
    change nothing (empty on an idle state) are skipped there and not recorded here. Removal
    sets given to :func:`cone_replay` are then relative to this recording: the approximate
    oracle records its history (events before ``ε_min`` plus all candidates) once and
    follows each removal set as a small perturbation of it. With ``removable`` (the events
    later sets may remove) the dependency sets are computed here too, as part of the
    per-event setup. Leaves ``model`` holding the recorded state at ``end``.
    """
    src, dst = model.stream.src, model.stream.dst
    records: list[BatchRecord] = []
    with torch.no_grad():
        model.restore(base)
        st = model.state
        dev = st.memory.device
        lo = base.position
        if removed is not None:
            st.removed[lo:end] = torch.from_numpy(removed[lo:end].copy())
        for events in model.history_steps(lo, end, removed, model.is_idle(st)):
            pend_nodes = (st.pending >= 0).nonzero(as_tuple=True)[0].cpu().numpy()
            nodes = np.unique(np.concatenate([pend_nodes, src[events], dst[events]]))
            nt = torch.as_tensor(nodes, device=dev)
            mem_pre = st.memory[nt]
            model.apply_batch(st, torch.as_tensor(events, device=dev))
            records.append(_batch_record(events, nodes, mem_pre, st.memory[nt],
                                         st.last_update[nt].cpu().numpy(), src, dst))
        st.position = end
        final = model.snapshot()
        final_input = model.node_input(final)
    shared = final.removed.numpy()  # the base's removals and the recording's own
    traj = Trajectory(base.position, end, records, final, final_input,
                      shared if shared.any() else None)
    if removable is not None and len(removable):
        traj.dependencies_for(model, np.unique(np.asarray(removable, dtype=np.int64)))
    return traj


class _Rows:
    """Perturbed state rows, each shared by the sets that agree on its node's past.

    ``rowmap[p, columns[n]]`` is the row holding node ``n``'s state under set ``p``, or
    ``-1`` when that state is the recorded one (always for nodes without a column: their
    dependency set never grows); ``rep[r]`` is one set using row ``r`` (any one will do: all
    of them agree on every removal the row depends on).
    """

    def __init__(self, num_p: int, columns: npt.NDArray[np.int64], num_columns: int, dim: int,
                 device: torch.device) -> None:
        self.columns = columns
        self.rowmap = np.full((num_p, num_columns), -1, dtype=np.int32)
        cap = 256
        self.mem = torch.empty(cap, dim, device=device)
        self.lu = np.empty(cap, dtype=np.float64)
        self.pend = np.full(cap, -1, dtype=np.int64)
        self.rep = np.empty(cap, dtype=np.int64)
        self.n = np.empty(cap, dtype=np.int64)
        self.size = 0

    def lookup(self, p: npt.NDArray[np.int64], n: npt.NDArray[np.int64]
               ) -> npt.NDArray[np.int64]:
        """Row of node ``n[m]`` under set ``p[m]``, ``-1`` for the recorded state, ``[M]``."""
        col = self.columns[n]
        out = np.full(len(n), -1, dtype=np.int64)
        has = np.flatnonzero(col >= 0)
        out[has] = self.rowmap[p[has], col[has]]
        return out

    def add(self, rep: npt.NDArray[np.int64], n: npt.NDArray[np.int64], mem: Tensor,
            lu: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """Allocate rows of nodes ``n`` used by sets ``rep`` (pending none); returns their
        ids (``rowmap`` is left to the caller, which knows every set using them)."""
        k = len(rep)
        need = self.size + k
        if need > len(self.pend):  # grow, copying only the rows in use
            cap, used = max(need, 2 * len(self.pend)), self.size
            grown_mem = self.mem.new_empty(cap, self.mem.shape[1])
            grown_mem[:used] = self.mem[:used]
            self.mem = grown_mem
            self.lu = np.resize(self.lu, cap)
            self.pend = np.resize(self.pend, cap)
            self.rep = np.resize(self.rep, cap)
            self.n = np.resize(self.n, cap)
        rows = np.arange(self.size, need, dtype=np.int64)
        rt = torch.as_tensor(rows, device=self.mem.device)
        self.mem[rt] = mem
        self.lu[rows] = lu
        self.pend[rows] = -1
        self.rep[rows], self.n[rows] = rep, n
        self.size = need
        return rows

    def other_memory(self, rep: npt.NDArray[np.int64], other: npt.NDArray[np.int64],
                     recorded: Tensor, recorded_row: npt.NDArray[np.int64]
                     ) -> tuple[Tensor, npt.NDArray[np.int64]]:
        """Memory of nodes ``other`` under sets ``rep``, once per distinct value: their row
        where they have one, else ``recorded[recorded_row]`` (``recorded [V, d]``).

        Returns:
            ``(memory [O, d], of [M])``: query ``m`` reads ``memory[of[m]]``.
        """
        ro = self.lookup(rep, other)
        key = np.where(ro >= 0, ro, -1 - recorded_row)  # row ids, or recorded rows below 0
        uniq, of = np.unique(key, return_inverse=True)
        dev = self.mem.device
        out = recorded[torch.as_tensor(np.maximum(-1 - uniq, 0), device=dev)]
        own = np.flatnonzero(uniq >= 0)
        if len(own):
            out[torch.as_tensor(own, device=dev)] = self.mem[torch.as_tensor(uniq[own],
                                                                             device=dev)]
        return out, of.reshape(-1)


def cone_replay(model: TGN, traj: Trajectory, removed: RemovalSets) -> NodeInputs:
    """Follow P removal sets through the recorded batches, touching only affected rows.

    Rows are computed only for the states the prediction can read (``need`` of
    :class:`Dependencies`); the returned inputs cover the nodes the embedding of the
    explained event can read, and refuse to answer for the other perturbed nodes.

    Args:
        model: The TGN the trajectory was recorded with.
        traj: The unperturbed trajectory.
        removed: The P removal sets; only events in ``[traj.start, traj.end)`` that the
            recording kept may be removed.

    Returns:
        The node inputs (memory with pending messages applied) under each set: node ``n``
        under set ``p`` reads its perturbed row where it has one, else the recorded input.
    """
    src, dst = model.stream.src, model.stream.dst
    num_nodes = model.num_nodes
    if len(removed.events) == 0:
        return NodeInputs(traj.final_input, traj.final_input[:0])
    deps = traj.dependencies_for(model, removed.events)
    dev = traj.final_input.device
    rows = _Rows(removed.num_sets, deps.columns, deps.num_columns, model.memory_dim, dev)
    sets = removed.words(deps.universe)  # [P, W]
    first = int(removed.events[0])
    loc = np.full(num_nodes, -1, dtype=np.int64)
    with torch.no_grad():
        for x, (rec, dn, dm) in enumerate(zip(traj.batches, deps.nodes, deps.masks,
                                              strict=True)):
            if rows.size == 0 and (not len(rec.events) or rec.events[-1] < first):
                continue  # nothing differs from the unperturbed run yet
            loc[rec.nodes] = np.arange(len(rec.nodes))
            _apply_pending(model, rows, rec, loc, src, dst)
            _split_rows(rows, rec, loc, sets, dn, dm)
            _new_pending(rows, rec, removed.columns(rec.events), loc, deps.need > x)
            loc[rec.nodes] = -1
        return _final_inputs(model, rows, traj, deps, src, dst)


def _apply_pending(model: TGN, rows: _Rows, rec: BatchRecord, loc: npt.NDArray[np.int64],
                   src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> None:
    """Step 1 of a batch: apply the pending messages of perturbed rows.

    A node whose recorded pending message comes from a perturbed state is perturbed itself
    (the sender's dependencies are in its own), so unperturbed nodes need nothing here.
    """
    size = rows.size
    ra = np.flatnonzero(rows.pend[:size] >= 0)
    if len(ra):
        rep, n, ev = rows.rep[ra], rows.n[ra], rows.pend[ra]
        o = other_endpoint(src, dst, ev, n)
        lo_ = loc[o]
        assert (lo_ >= 0).all(), "the other endpoint of a pending message must be recorded"
        rat = torch.as_tensor(ra, device=rows.mem.device)
        mem_other, of = rows.other_memory(rep, o, rec.mem_pre, lo_)
        rows.mem[rat] = model.message_update_shared(ev, rows.mem[rat], rows.lu[ra], mem_other, of)
        rows.lu[ra] = model.stream.t[ev]
    rows.pend[:size] = -1


def _split_rows(rows: _Rows, rec: BatchRecord, loc: npt.NDArray[np.int64], sets: Words,
                nodes: npt.NDArray[np.int64], masks: Words) -> None:
    """Step 2 of a batch: give every ``(set, node)`` pair whose dependency set grew in this
    batch the row of its new key ``(node, set ∩ D(node))``.

    Keys only refine (``D`` grows), so the sets of one new key all held the same old row:
    the first new key of an old row keeps it, the others get copies, and pairs that were
    unperturbed start from the recorded state after this batch's pending messages.
    """
    if len(nodes) == 0:
        return
    sig = sets[:, None, :] & masks[None, :, :]  # [P, k, W]
    pp, jj = np.nonzero(sig.any(axis=2))
    if len(pp) == 0:
        return
    sg = sig[pp, jj]  # [Q, W]
    order = np.lexsort((*sg.T[::-1], jj))  # by node, then key
    pp, jj, sg = pp[order], jj[order], sg[order]
    head = np.r_[True, (jj[1:] != jj[:-1]) | (sg[1:] != sg[:-1]).any(axis=1)]
    group = np.cumsum(head) - 1  # [Q]
    heads = np.flatnonzero(head)
    cols = rows.columns[nodes]  # every node whose dependencies grow has a column
    g_p, g_n = pp[heads], nodes[jj[heads]]
    g_old = rows.rowmap[g_p, cols[jj[heads]]].astype(np.int64)
    g_row = np.full(len(heads), -1, dtype=np.int64)
    had = np.flatnonzero(g_old >= 0)
    _, first = np.unique(g_old[had], return_index=True)
    keep = had[first]
    g_row[keep] = g_old[keep]
    rows.rep[g_old[keep]] = g_p[keep]
    fresh = np.flatnonzero(g_row < 0)
    if len(fresh):
        dev = rows.mem.device
        old = g_old[fresh]
        copy = old >= 0
        lo_ = loc[g_n[fresh]]
        assert (lo_ >= 0).all(), "a node whose dependencies grow has an event in the batch"
        mem, lu = rec.mem_post[torch.as_tensor(lo_, device=dev)], rec.lu_post[lo_]
        if copy.any():
            ci = np.flatnonzero(copy)
            mem[torch.as_tensor(ci, device=dev)] = rows.mem[torch.as_tensor(old[ci], device=dev)]
            lu[ci] = rows.lu[old[ci]]
        g_row[fresh] = rows.add(g_p[fresh], g_n[fresh], mem, lu)
    rows.rowmap[pp, cols[jj]] = g_row[group]


def _new_pending(rows: _Rows, rec: BatchRecord, rem: npt.NDArray[np.bool_],
                 loc: npt.NDArray[np.int64], read: npt.NDArray[np.bool_]) -> None:
    """Step 3 of a batch: every perturbed row of a node with events in the batch whose later
    state is read (``read``, ``bool [N]``) gets its last kept event as pending message
    (``rem``: removals of the batch's events, ``[P, K]``); the other rows are left behind."""
    size = rows.size
    if size == 0:
        return
    node = rows.n[:size]
    pos = np.where(read[node], loc[node], -1)  # position of each row's node in rec.nodes
    r = np.flatnonzero(pos >= 0)
    starts, ends = rec.inc_start[pos[r]], rec.inc_end[pos[r]]
    has_events = ends > starts
    r, starts, ends = r[has_events], starts[has_events], ends[has_events]
    if len(r) == 0:
        return
    idx = concat_ranges(starts, ends)
    lens = ends - starts
    owner = np.repeat(np.arange(len(r)), lens)
    kk = rec.inc_k[idx]
    kept = ~rem[rows.rep[r][owner], kk]
    val = np.where(kept, rec.events[kk], -1)
    rows.pend[r] = np.maximum.reduceat(val, np.cumsum(lens) - lens)  # segments are non-empty


def _final_inputs(model: TGN, rows: _Rows, traj: Trajectory, deps: Dependencies,
                  src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> NodeInputs:
    """Node inputs at the end: the pending messages of perturbed rows applied."""
    size = rows.size
    # nodes whose final input is not read have stale rows: make reading them an error
    final = len(traj.batches)
    columns = np.where((rows.columns >= 0) & (deps.need < final), -2, rows.columns)
    if size == 0:
        return NodeInputs(traj.final_input, traj.final_input[:0])
    extra = rows.mem[:size]
    ra = np.flatnonzero(rows.pend[:size] >= 0)
    if len(ra):
        dev = rows.mem.device
        rep, n, ev = rows.rep[ra], rows.n[ra], rows.pend[ra]
        o = other_endpoint(src, dst, ev, n)
        rat = torch.as_tensor(ra, device=dev)
        mem_other, of = rows.other_memory(rep, o, traj.final.memory, o)
        extra = extra.clone()
        extra[rat] = model.message_update_shared(ev, rows.mem[rat], rows.lu[ra], mem_other, of)
    return NodeInputs(traj.final_input, extra, rows.rowmap, columns)
