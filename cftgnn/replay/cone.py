"""Exact masked replay of TGN that recomputes only the causal cone of the removed events.

(One module of about 900 lines on purpose: one algorithm whose many step functions all work on
the private table of perturbed state rows, ``_Rows``; splitting them would make that table
public. The recording half, ``record_trajectory`` and what it returns, could stand apart.)

Removing events changes the memory of their endpoints, then of every node that later receives a
message from an affected node, and nothing else (docs/design.md §5, "touch only what changes").
``record_trajectory`` replays the *unperturbed* history once per explained event and keeps,
for every batch, the state rows of the nodes it touches. ``cone_replay`` then follows P
removal sets at once, keeping perturbed rows only where a removal reaches and reading every
other value from the recording, so a batch costs in proportion to the affected rows it
touches, not to the batch. The result feeds ``cftgnn.replay.batched.batched_logits``.

**Rows are shared between removal sets.** The state of node ``n`` after a batch is a function
of which events in its causal past ``D(n)`` are removed: the events that reached ``n`` through
messages, and the events that could have (TGN keeps only the last message of a batch, and a
removal makes an earlier one the last). ``dependencies`` computes ``D(n)``, restricted to
the removable events (the candidates), once per trajectory as bitmasks. A perturbed row is then
keyed by ``(n, s ∩ D(n))`` rather than by ``(set, n)``: sets that agree on the removals in a
node's past share its row, and a row is split only when ``D(n)`` grows to tell them apart. The
64 children of an MCTS node share all but one removal; even independent random sets share the
rows that only their common old removals reach. Sets with ``s ∩ D(n) = ∅`` read the recorded
row, so the cone of a set is exactly the nodes whose past meets it; the cone is conservative
(``D(n)`` over-approximates the dependencies), so the result is exact by construction, and the
tests compare it with fresh replays.

**Only states the prediction can read are computed.** The prediction reads the final input of
the few nodes its embedding can attend to (``cftgnn.models.neighbors.reachable_nodes``),
and those read, batch by batch, the states of the nodes they met. ``needed_until`` sweeps
the recording backwards once per trajectory and gives, for every node, the last batch whose
state of it is read; after that batch a node gets no new rows and no messages. On long
histories (Wikipedia, ``ε_min`` far back) most of the forward cone is never read.

**Effects that die out stop costing (perturbation pruning, exact).** ``D(n)`` says which
removals *may* change a node; most far-back removals do not, in the end: a removed event
that was not a node's last message of its batch changes nothing, two events can carry the
same message, and a perturbed memory that is never sent on is left behind. At the end of
every batch, ``cone_replay`` retires the rows whose whole state (memory bit for bit,
last update, pending message and its sender's memory) equals the recording, merges rows of
one node whose states are equal bit for bit, and gives a set a row again only when its
state can differ (it removes the node's pending message, or the sender of that message
holds a perturbed memory). A row merged or revived that way can hold sets whose causal
pasts differ; such a *mixed* row is split by the message each of its sets receives
whenever its node has an event (``_split_mixed``), since a later message can tell the
sets apart without the node's dependency set growing (missing that split made some logits
wrong by up to 1e-3 on UCI · TGN before issue 27's tail run found it). No value is
approximated, so the logits are those of the replay without pruning (up to the float
rounding any two replays differ by), and so are the answers and certificates built on
them; the tests compare them.

**Tolerance pruning (opt-in, not exact).** With a tolerance ``τ > 0`` (``tolerance`` of
``cone_replay``, ``prune_tolerance`` of ``cftgnn.replay.tgn.TGNReplayOptions``)
a row's memory counts as the recorded one when ``max |mem − recorded| ≤ τ`` rather than
bit for bit, wherever the pruning asks (retiring a row, the sender of its pending message,
merging rows, reviving pairs); the last-update time and the pending message's identity
are still compared exactly. Far-back removals on long histories spread perturbations of a
few ulps through thousands of nodes that never become bitwise equal; snapping them back
removes most of that work (issue 27: ~90 % at τ = 1e-4 on Wikipedia · TGN). It is **not
exact**: the snapped differences pass through the GRU and the embedding, and the logits
differ from a fresh replay by an amount no sound bound is known for (the measured
differences were of the order of τ / 10, but that is an observation, not a guarantee), so
nothing computed with ``τ > 0`` is a proof: no record or certificate may rest on it.
``τ = 0`` (the default) is the bitwise path, unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.arrays import distinct_rows
from cftgnn.data.index import concat_ranges
from cftgnn.models.neighbors import reachable_nodes
from cftgnn.models.state import State
from cftgnn.models.tgn import TGN, other_endpoint
from cftgnn.replay.batched import NodeInputs
from cftgnn.replay.masks import RemovalSets

Words = npt.NDArray[np.uint64]

_COMPACT_MIN_ROWS = 4096  # fewer rows are never worth a compaction pass
#: Up to this many rows, ``_memory_equal`` compares whole rows at once: the two-step
#: comparison (first coordinate, then the rest of the rows it leaves) saves arithmetic only
#: on many rows, and costs a second gather and host copy per batch (the single call's case).
_ONE_PASS_ROWS = 64


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


def batch_record(events: npt.NDArray[np.int64], nodes: npt.NDArray[np.int64],
                  mem_pre: Tensor, mem_post: Tensor, lu_post: npt.NDArray[np.float64],
                  src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> BatchRecord:
    """A ``BatchRecord`` with the index arrays every replay of the batch needs."""
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
            ``needed_until``), ``int64 [N]``.
        columns: Column of each node that may get perturbed rows (one in some
            ``nodes``), ``-1`` for the others, ``int64 [N]``.
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
    ``n`` need not be computed after batch ``need[n]`` (docs/design.md §5, "touch only what
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

    With ``need`` (from ``needed_until``), ``D(n)`` stops growing after batch
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
        removed_mask: Events removed in the recording (``bool [E]``: the base state's removals
            and the recording's own, e.g. the approximate oracle's history), or None.
        deps: Dependency sets over the removable events, made by ``dependencies_for``.
    """

    start: int
    end: int
    batches: list[BatchRecord]
    final: State
    final_input: Tensor
    removed_mask: npt.NDArray[np.bool_] | None = None
    deps: Dependencies | None = field(default=None, repr=False)

    def dependencies_for(self, model: TGN, events: npt.NDArray[np.int64]) -> Dependencies:
        """Dependency sets over a universe holding ``events`` (kept, or widened and rebuilt
        when a removal set names an event outside it), restricted to the states the
        prediction of the event at ``end`` can read under removals from that universe."""
        if self.deps is None or not self.deps.covers(events):
            universe = events if self.deps is None else np.union1d(self.deps.universe, events)
            self.deps = trajectory_dependencies(model, self.batches, self.end, self.removed_mask,
                                                universe)
        return self.deps


def trajectory_dependencies(model: TGN, batches: list[BatchRecord], end: int,
                            removed_mask: npt.NDArray[np.bool_] | None,
                            universe: npt.NDArray[np.int64]) -> Dependencies:
    """The dependency sets over ``universe`` of a recording of ``batches`` up to ``end``
    (the events ``removed_mask`` masks in it), restricted to the states the prediction of
    the event at ``end`` can read (``needed_until``). Reads only the records' events and
    nodes, so a recording can compute it before its memory rows
    (``cftgnn.replay.record``)."""
    stream, index = model.stream, model.index
    link = np.array([stream.src[end], stream.dst[end]], dtype=np.int64)
    final = reachable_nodes(index, link, np.full(2, end), model.num_neighbors,
                            model.embedding.num_layers, universe, removed_mask)
    need = needed_until(batches, final, model.num_nodes, stream.src, stream.dst, universe)
    return dependencies(batches, universe, model.num_nodes, stream.src, stream.dst, need)


def record_trajectory(model: TGN, base: State, end: int,
                      removed_mask: npt.NDArray[np.bool_] | None = None,
                      removable: npt.NDArray[np.int64] | None = None) -> Trajectory:
    """Replay ``[base.position, end)`` (with an optional base removal mask) and record it.

    The batches are formed exactly as ``TemporalModel.advance`` forms them; batches that
    change nothing (empty on an idle state) are skipped there and not recorded here. Removal
    sets given to ``cone_replay`` are then relative to this recording: the approximate
    oracle records its history (events before ``ε_min`` plus all candidates) once and
    follows each removal set as a small perturbation of it. With ``removable`` (the events
    later sets may remove) the dependency sets are computed here too, as part of the
    per-event setup. Leaves ``model`` holding the recorded state at ``end``.
    """
    src, dst = model.stream.src, model.stream.dst
    records: list[BatchRecord] = []
    with torch.no_grad():
        steps = begin_recording(model, base, end, removed_mask)
        st = model.state
        dev = st.memory.device
        for events in steps:
            pend_nodes = (st.pending >= 0).nonzero(as_tuple=True)[0].cpu().numpy()
            nodes = np.unique(np.concatenate([pend_nodes, src[events], dst[events]]))
            nt = torch.as_tensor(nodes, device=dev)
            mem_pre = st.memory[nt]
            model.apply_batch(st, torch.as_tensor(events, device=dev))
            records.append(batch_record(events, nodes, mem_pre, st.memory[nt],
                                        st.last_update[nt].cpu().numpy(), src, dst))
        return finish_recording(model, base, end, records, removable)


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
                     deps: Dependencies | None = None) -> Trajectory:
    """The ``Trajectory`` of a recording whose batches were all applied: the final
    state and input, the removals every set shares, and the dependency sets of the
    ``removable`` events (``deps`` when the recording computed them already)."""
    st = model.state
    st.position = end
    final = model.snapshot()
    final_input = model.node_input(final)
    shared = final.removed.numpy()  # the base's removals and the recording's own
    traj = Trajectory(base.position, end, records, final, final_input,
                      shared if shared.any() else None, deps)
    if deps is None and removable is not None and len(removable):
        traj.dependencies_for(model, np.unique(np.asarray(removable, dtype=np.int64)))
    return traj


class _Rows:
    """Perturbed state rows, each shared by the sets that agree on its node's past.

    ``rowmap[p, columns[n]]`` is the row holding node ``n``'s state under set ``p``, or
    ``-1`` when that state is the recorded one (always for nodes without a column: their
    dependency set never grows); ``rep[r]`` is one set using row ``r``. The sets of a row
    made by splitting agree on every removal the row depends on, so any one will do; a row
    that perturbation pruning gave to sets whose keys differ, because their states were
    equal (``_merge``, ``_revive``), is ``mixed``: its sets may diverge when the node
    receives its next message, so ``_split_mixed`` splits it by that message whenever
    its node has an event, whether or not its dependency set grows.
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
        self.alive = np.zeros(cap, dtype=bool)
        self.mixed = np.zeros(cap, dtype=bool)
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
            self.alive = np.resize(self.alive, cap)
            self.mixed = np.resize(self.mixed, cap)
        rows = np.arange(self.size, need, dtype=np.int64)
        self.mem[self.size:need] = mem  # the new rows are consecutive: a slice, no upload
        self.lu[rows] = lu
        self.pend[rows] = -1
        self.rep[rows], self.n[rows] = rep, n
        self.alive[rows] = True
        self.mixed[rows] = False
        self.size = need
        return rows

    def drop(self, dead: npt.NDArray[np.int64]) -> None:
        """Retire rows ``dead``: every set using one reads the recorded state again."""
        if not len(dead):
            return
        kill = np.zeros(self.size, dtype=bool)
        kill[dead] = True
        cols = np.unique(self.columns[self.n[dead]])
        sub = self.rowmap[:, cols]  # [P, k]
        hit = sub >= 0
        hit[hit] = kill[sub[hit]]
        sub[hit] = -1
        self.rowmap[:, cols] = sub
        self.alive[dead] = False
        self.pend[dead] = -1

    def nbytes(self) -> int:
        """Bytes held: the row map and every allocated row."""
        cap = len(self.pend)
        row = self.mem.shape[1] * self.mem.element_size() + 8 * 4 + 2
        return int(self.rowmap.nbytes) + cap * row

    def compact(self, force: bool = False) -> None:
        """Free the retired rows (and rows no set uses any more) once they are the
        majority (or, with ``force``, now), so memory follows the live rows rather than
        every row ever made."""
        size = self.size
        if not force and (size < _COMPACT_MIN_ROWS or 2 * int(self.alive[:size].sum()) > size):
            return
        used = self.rowmap >= 0
        referenced = np.zeros(size, dtype=bool)
        referenced[self.rowmap[used]] = True
        keep = np.flatnonzero(self.alive[:size] & referenced)
        new_id = np.full(size, -1, dtype=np.int32)
        new_id[keep] = np.arange(len(keep), dtype=np.int32)
        self.rowmap[used] = new_id[self.rowmap[used]]
        kt = torch.as_tensor(keep, device=self.mem.device)
        cap = max(256, 2 * len(keep))
        mem = self.mem.new_empty(cap, self.mem.shape[1])
        mem[:len(keep)] = self.mem[kt]
        self.mem = mem
        for name in ("lu", "pend", "rep", "n", "alive", "mixed"):
            old = getattr(self, name)
            new = np.empty(cap, dtype=old.dtype)
            new[:len(keep)] = old[keep]
            setattr(self, name, new)
        self.size = len(keep)

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
        k = int(np.searchsorted(uniq, 0))  # recorded rows first (keys below 0), then own rows
        # both row lists in one upload: recorded rows, then own rows
        idx = torch.as_tensor(np.concatenate([-1 - uniq[:k], uniq[k:]]), device=dev)
        out = recorded[idx[:k]]  # only the rows read
        if k < len(uniq):
            out = torch.cat([out, self.mem[idx[k:]]])
        return out, of.reshape(-1)


class ConeBudgetExceeded(RuntimeError):
    """The rows of a call of several sets outgrew its memory budget (the caller splits
    the sets and tries again)."""


@dataclass
class ConeStats:
    """What the causal-cone replay computed, summed over the calls it is passed to.

    Attributes:
        calls: Calls of ``cone_replay``.
        sets: Removal sets followed.
        row_updates: Perturbed rows that went through the GRU (pending messages applied).
        rows_made: Perturbed rows created (split off or re-created).
        rows_pruned: Rows retired because their state equals the recorded one.
        peak_rows: Most rows held at once in one call.
        peak_bytes: Most bytes held at once by the rows and their map in one call.
        settled_sets: Sets whose perturbation died out before the end: no node the
            prediction reads holds a perturbed row (their logit differs from the unperturbed
            one only through the neighbours the removals hide).
    """

    calls: int = 0
    sets: int = 0
    row_updates: int = 0
    rows_made: int = 0
    rows_pruned: int = 0
    peak_rows: int = 0
    peak_bytes: int = 0
    settled_sets: int = 0


def checked_tolerance(tolerance: float, name: str = "tolerance") -> float:
    """``tolerance`` as a float, if it is a finite number ``>= 0`` (a pruning tolerance).

    Raises:
        ValueError: Otherwise.
    """
    value = float(tolerance)
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{name} must be a finite number >= 0, got {tolerance!r}")
    return value


def cone_replay(model: TGN, traj: Trajectory, sets: RemovalSets, prune: bool = True,
                stats: ConeStats | None = None, max_bytes: int | None = None,
                tolerance: float = 0.0) -> NodeInputs:
    """Follow P removal sets through the recorded batches, touching only affected rows.

    Rows are computed only for the states the prediction can read (``need`` of
    ``Dependencies``); the returned inputs cover the nodes the embedding of the
    explained event can read, and refuse to answer for the other perturbed nodes.

    **Perturbation pruning** (``prune``, exact): at the end of every batch, a perturbed row
    whose whole state equals the recorded one bit for bit (memory, last-update time, and a
    pending message built from the same sender, time and features, the sender's memory
    being the recorded one too) is retired, and its sets read the recording again; a removal
    whose effect has died out stops costing anything. A node whose dependency set says it
    may differ gets a fresh copy of the recorded state as before, kept only if it then
    differs; and a retired pair gets a row again when its recorded pending message comes
    from a sender whose memory differs under the set. Nothing is approximated: every row
    retired holds exactly the values the recording holds, so the logits are those of the
    replay without pruning (up to the float rounding of evaluating the same GRU updates in
    differently composed batches, as between any two replays).

    Args:
        model: The TGN the trajectory was recorded with.
        traj: The unperturbed trajectory.
        sets: The P removal sets; only events in ``[traj.start, traj.end)`` that the
            recording kept may be removed.
        prune: Retire rows equal to the recording (see above).
        stats: Counters to add this call's work to, or None.
        max_bytes: Memory budget of the rows and their map: when a call of several sets
            outgrows it (after freeing retired rows), ``ConeBudgetExceeded`` is
            raised for the caller to split the sets. One set is never refused: it holds at
            most one live row per node.
        tolerance: ``0.0`` (the default): memories are compared bit for bit, as above.
            ``τ > 0``: with ``prune``, a memory within ``τ`` of the recorded one (largest
            absolute coordinate difference) counts as the recorded one (see "Tolerance
            pruning" in the module docstring). **Not exact**: the logits then differ from a
            fresh replay by an amount that is not soundly bounded, so nothing computed with
            it is a proof. Ignored without ``prune``.

    Returns:
        The node inputs (memory with pending messages applied) under each set: node ``n``
        under set ``p`` reads its perturbed row where it has one, else the recorded input.
    """
    tolerance = checked_tolerance(tolerance)
    src, dst = model.stream.src, model.stream.dst
    num_nodes = model.num_nodes
    if len(sets.events) == 0:
        return NodeInputs(traj.final_input, traj.final_input[:0])
    deps = traj.dependencies_for(model, sets.events)
    dev = traj.final_input.device
    rows = _Rows(sets.num_sets, deps.columns, deps.num_columns, model.memory_dim, dev)
    words = sets.words(deps.universe)  # [P, W]
    first = int(sets.events[0])
    loc = np.full(num_nodes, -1, dtype=np.int64)
    counts = ConeStats(calls=1, sets=sets.num_sets)
    with torch.no_grad():
        for x, (rec, dn, dm) in enumerate(zip(traj.batches, deps.nodes, deps.masks,
                                              strict=True)):
            if rows.size == 0 and (not len(rec.events) or rec.events[-1] < first):
                continue  # nothing differs from the unperturbed run yet
            loc[rec.nodes] = np.arange(len(rec.nodes))
            if prune and _quiet(rows, rec, loc, sets.events):
                # no perturbed row meets the batch and it removes nothing: of the steps
                # below, only _prune's retiring of rows never read again does anything
                _drop_stale(rows, deps.need, x)
                counts.peak_rows = max(counts.peak_rows, int(rows.alive[:rows.size].sum()))
                rows.compact()
                counts.peak_bytes = max(counts.peak_bytes, rows.nbytes())
                loc[rec.nodes] = -1
                continue
            counts.row_updates += _apply_pending(model, rows, rec, loc, src, dst)
            made = rows.size
            rem = sets.columns(rec.events)  # [P, K]
            _split_rows(rows, rec, loc, words, dn, dm, rem if prune else None)
            counts.rows_made += rows.size - made
            _new_pending(rows, rec, rem, loc, deps.need > x)
            if prune:
                counts.rows_made += _split_mixed(rows, rec, rem, loc, deps.need > x, src, dst)
                made = rows.size
                counts.rows_pruned += _prune(model, rows, rec, loc, x, deps.need, src, dst,
                                             tolerance)
                counts.rows_made += rows.size - made
                counts.peak_rows = max(counts.peak_rows, int(rows.alive[:rows.size].sum()))
                rows.compact()
            else:
                counts.peak_rows = max(counts.peak_rows, rows.size)
            if max_bytes is not None and sets.num_sets > 1 and rows.nbytes() > max_bytes:
                rows.compact(force=True)
                if rows.nbytes() > max_bytes:
                    raise ConeBudgetExceeded(f"{rows.nbytes()} bytes of rows for "
                                             f"{sets.num_sets} sets")
            counts.peak_bytes = max(counts.peak_bytes, rows.nbytes())
            loc[rec.nodes] = -1
        out = _final_inputs(model, rows, traj, deps, src, dst)
    if stats is not None:
        read = (deps.columns >= 0) & (deps.need >= len(traj.batches))
        cols = deps.columns[read]
        live = (rows.rowmap[:, cols] >= 0).any(axis=1) if len(cols) else np.zeros(
            sets.num_sets, dtype=bool)
        counts.settled_sets = int((~live).sum())
        counts.row_updates += int((rows.pend[:rows.size] >= 0).sum())
        for name in ("calls", "sets", "row_updates", "rows_made", "rows_pruned",
                     "settled_sets"):
            setattr(stats, name, getattr(stats, name) + getattr(counts, name))
        stats.peak_rows = max(stats.peak_rows, counts.peak_rows)
        stats.peak_bytes = max(stats.peak_bytes, counts.peak_bytes)
    return out


def _quiet(rows: _Rows, rec: BatchRecord, loc: npt.NDArray[np.int64],
           removed: npt.NDArray[np.int64]) -> bool:
    """Whether a batch leaves every row as it is but for ``_drop_stale`` (with pruning):
    no row holds a pending message, no live row's node is among the batch's nodes
    (``loc``, set for them), and no removed event (``removed``, ascending) lies within the
    batch's events. Then ``_apply_pending`` has nothing to apply, ``_split_rows`` gives a
    row only to pairs that hold one of a node of the batch or remove its pending message
    (none), ``_new_pending`` and ``_split_mixed`` look only at rows of the batch's nodes,
    and ``_prune`` compares none, so it only retires the rows whose state is never read
    again: skipping the rest leaves bitwise the same rows, counters and logits. After a
    far-back removal, most batches are of this kind once pruning has retired most of its
    effects (a few array reads instead of a few dozen NumPy calls each)."""
    size = rows.size
    if size:
        if (rows.pend[:size] >= 0).any():
            return False
        live = np.flatnonzero(rows.alive[:size])
        if len(live) and (loc[rows.n[live]] >= 0).any():
            return False
    events = rec.events
    if not len(events):
        return True
    return bool(np.searchsorted(removed, events[0])
                == np.searchsorted(removed, events[-1], side="right"))


def _drop_stale(rows: _Rows, need: npt.NDArray[np.int64], x: int) -> None:
    """Retire the live rows whose state after batch ``x`` is never read (``need``), as
    ``_prune`` does at the end of every batch."""
    live = np.flatnonzero(rows.alive[:rows.size])
    if len(live):
        rows.drop(live[need[rows.n[live]] < x])


def _apply_pending(model: TGN, rows: _Rows, rec: BatchRecord, loc: npt.NDArray[np.int64],
                   src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> int:
    """Step 1 of a batch: apply the pending messages of perturbed rows; returns their number.

    A node whose recorded pending message comes from a perturbed state is perturbed itself
    (the sender's dependencies are in its own; with pruning, ``_prune`` gives it a row
    again), so unperturbed nodes need nothing here.
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
    return len(ra)


def _split_rows(rows: _Rows, rec: BatchRecord, loc: npt.NDArray[np.int64], words: Words,
                nodes: npt.NDArray[np.int64], masks: Words,
                rem: npt.NDArray[np.bool_] | None = None) -> None:
    """Step 2 of a batch: give every ``(set, node)`` pair whose dependency set grew in this
    batch the row of its new key ``(node, set ∩ D(node))``.

    Keys only refine (``D`` grows), so the sets of one new key all held the same old row:
    the first new key of an old row keeps it, the others get copies, and pairs that were
    unperturbed start from the recorded state after this batch's pending messages. (A mixed
    row, ``_Rows``, holds sets of several keys; it is split the same way, and every
    row this leaves holds the sets of one key.)

    With pruning (``rem``, the removals of the batch's events, ``[P, K]``), an unperturbed
    pair gets a row only when its set removes the node's recorded pending message of this
    batch: otherwise its state after the batch is the recorded one unless its pending
    message's sender differs, and ``_prune`` gives it a row then.
    """
    if len(nodes) == 0:
        return
    cols = rows.columns[nodes]  # every node whose dependencies grow has a column
    if rem is None:
        sig = words[:, None, :] & masks[None, :, :]  # [P, k, W]
        pp, jj = np.nonzero(sig.any(axis=2))
        sg = sig[pp, jj]  # [Q, W]
    else:  # only pairs holding a row, or removing the node's pending message, can need one
        lk = loc[nodes]
        last = rec.inc_k[rec.inc_end[lk] - 1]
        pp, jj = np.nonzero((rows.rowmap[:, cols] >= 0) | rem[:, last])
        sg = words[pp] & masks[jj]
        nonempty = sg.any(axis=1)
        pp, jj, sg = pp[nonempty], jj[nonempty], sg[nonempty]
    if len(pp) == 0:
        return
    order = np.lexsort((*sg.T[::-1], jj))  # by node, then key
    pp, jj, sg = pp[order], jj[order], sg[order]
    head = np.concatenate(([True], (jj[1:] != jj[:-1]) | (sg[1:] != sg[:-1]).any(axis=1)))
    group = np.cumsum(head) - 1  # [Q]
    heads = np.flatnonzero(head)
    g_p, g_n = pp[heads], nodes[jj[heads]]
    g_old = rows.rowmap[g_p, cols[jj[heads]]].astype(np.int64)
    g_row = np.full(len(heads), -1, dtype=np.int64)
    had = np.flatnonzero(g_old >= 0)
    _, first = np.unique(g_old[had], return_index=True)
    keep = had[first]
    g_row[keep] = g_old[keep]
    rows.rep[g_old[keep]] = g_p[keep]
    fresh = np.flatnonzero(g_row < 0)
    if rem is not None and len(fresh):
        unperturbed = g_old[fresh] < 0
        lf = loc[g_n[fresh]]
        last = rec.inc_k[rec.inc_end[lf] - 1]  # index of the node's last event of the batch
        fresh = fresh[~unperturbed | rem[g_p[fresh], last]]
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
    rows.mixed[g_row[g_row >= 0]] = False  # every row of these nodes now holds one key


def _new_pending(rows: _Rows, rec: BatchRecord, rem: npt.NDArray[np.bool_],
                 loc: npt.NDArray[np.int64], read: npt.NDArray[np.bool_]) -> None:
    """Step 3 of a batch: every perturbed row of a node with events in the batch whose later
    state is read (``read``, ``bool [N]``) gets its last kept event as pending message
    (``rem``: removals of the batch's events, ``[P, K]``); the other rows are left behind."""
    size = rows.size
    if size == 0:
        return
    node = rows.n[:size]
    # position of each live row's node in rec.nodes
    pos = np.where(read[node] & rows.alive[:size], loc[node], -1)
    r = np.flatnonzero(pos >= 0)
    r = r[rec.inc_end[pos[r]] > rec.inc_start[pos[r]]]  # nodes with events in the batch
    if len(r) == 0:
        return
    rows.pend[r] = _last_kept(rec, rem, rows.rep[r], pos[r])


def _last_kept(rec: BatchRecord, rem: npt.NDArray[np.bool_], p: npt.NDArray[np.int64],
               pos: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The last event of node ``rec.nodes[pos[m]]`` in the batch that set ``p[m]`` keeps
    (``rem``: removals of the batch's events, ``[P, K]``), ``-1`` where it removes them all;
    every such node has an event in the batch. Returns ``int64 [M]``."""
    starts, ends = rec.inc_start[pos], rec.inc_end[pos]
    lens = ends - starts
    kk = rec.inc_k[concat_ranges(starts, ends)]
    owner = np.repeat(np.arange(len(p)), lens)
    val = np.where(~rem[p[owner], kk], rec.events[kk], -1)
    return np.maximum.reduceat(val, np.cumsum(lens) - lens)  # segments are non-empty


def _split_mixed(rows: _Rows, rec: BatchRecord, rem: npt.NDArray[np.bool_],
                 loc: npt.NDArray[np.int64], read: npt.NDArray[np.bool_],
                 src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> int:
    """Step 3b of a batch (with pruning): split every mixed row (``_Rows``) of a node
    with events in the batch whose later state is read (``read``, ``bool [N]``) by the
    message each of its sets now holds: the last event the set keeps (``rem``, ``[P, K]``)
    and the row of that message's sender under the set. ``_new_pending`` gave the row
    its representative set's message, which it keeps; sets whose message or sender differs
    from that would diverge when it is applied in the next batch, so each such group gets its
    own copy of the row (mixed still: its sets may differ in the node's causal past). Returns
    the rows made.
    """
    size = rows.size
    node = rows.n[:size]
    m = np.flatnonzero(rows.mixed[:size] & rows.alive[:size] & read[node] & (loc[node] >= 0))
    if not len(m):
        return 0
    lk = loc[node[m]]
    m = m[rec.inc_end[lk] > rec.inc_start[lk]]  # a new message in this batch
    if not len(m):
        return 0
    is_m = np.zeros(size + 1, dtype=bool)  # the last entry stands for -1 (no row)
    is_m[m] = True
    cols = np.unique(rows.columns[node[m]])
    sub = rows.rowmap[:, cols]  # [P, C]
    pp, cc = np.nonzero(is_m[sub])
    rr = sub[pp, cc].astype(np.int64)  # every (set, row) pair of the mixed rows
    if not len(pp):  # rows no set uses any more (compaction frees them)
        return 0
    n = rows.n[rr]
    pend = _last_kept(rec, rem, pp, loc[n])  # each set's message
    sender = _sender_rows(rows, pp, pend, n, src, dst)
    # the row keeps the message _new_pending gave it (its representative set's); the pairs
    # whose message or sender differs from that move to rows of their own
    mine = np.empty(size, dtype=np.int64)
    mine[m] = _sender_rows(rows, rows.rep[m], rows.pend[m], rows.n[m], src, dst)
    off = np.flatnonzero((pend != rows.pend[rr]) | (sender != mine[rr]))
    if not len(off):
        return 0
    pp, rr, pend, sender = pp[off], rr[off], pend[off], sender[off]
    order = np.lexsort((sender, pend, rr))
    pp, rr, pend, sender = pp[order], rr[order], pend[order], sender[order]
    head = np.concatenate(([True], (rr[1:] != rr[:-1]) | (pend[1:] != pend[:-1])
                           | (sender[1:] != sender[:-1])))
    group = np.cumsum(head) - 1
    heads = np.flatnonzero(head)
    dev = rows.mem.device
    new = rows.add(pp[heads], rows.n[rr[heads]],
                   rows.mem[torch.as_tensor(rr[heads], device=dev)], rows.lu[rr[heads]])
    rows.pend[new] = pend[heads]
    rows.mixed[new] = True
    rows.rowmap[pp, rows.columns[rows.n[rr]]] = new[group]
    return len(new)


def _sender_rows(rows: _Rows, p: npt.NDArray[np.int64], pend: npt.NDArray[np.int64],
                 n: npt.NDArray[np.int64], src: npt.NDArray[np.int64],
                 dst: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Row of the sender of node ``n[m]``'s pending event ``pend[m]`` under set ``p[m]``:
    ``-1`` for the recorded state, ``-2`` where there is no pending event, ``[M]``."""
    out = np.full(len(p), -2, dtype=np.int64)
    has = np.flatnonzero(pend >= 0)
    out[has] = rows.lookup(p[has], other_endpoint(src, dst, pend[has], n[has]))
    return out


def _bits(t: Tensor) -> Tensor:
    """The bit patterns of a float tensor (so that ``0.0`` and ``-0.0`` differ)."""
    return t.view(torch.int64 if t.element_size() == 8 else torch.int32)


def _recorded_pending(rec: BatchRecord) -> npt.NDArray[np.int64]:
    """Pending message of each node of ``rec.nodes`` after the recorded batch (its last
    event there, the largest), ``-1`` for nodes without an event in it, ``[V]``."""
    out = np.full(len(rec.nodes), -1, dtype=np.int64)
    has = rec.inc_end > rec.inc_start
    out[has] = rec.events[rec.inc_k[rec.inc_end[has] - 1]]
    return out


def _memory_equal(mem: Tensor, rt: Tensor, recorded: Tensor, lt: Tensor,
                  tolerance: float) -> npt.NDArray[np.bool_]:
    """Which rows ``mem[rt]`` count as equal to ``recorded[lt]``: bit for bit when
    ``tolerance`` is ``0.0`` (exact), else when no coordinate differs by more than
    ``tolerance`` (not exact, see "Tolerance pruning" in the module docstring).
    Returns ``bool [R]``."""
    def same(a: Tensor, b: Tensor) -> Tensor:
        if tolerance == 0.0:
            return _bits(a) == _bits(b)
        return (a - b).abs() <= tolerance

    if len(rt) <= _ONE_PASS_ROWS:  # few rows: one comparison, the same answer
        whole: npt.NDArray[np.bool_] = same(mem[rt], recorded[lt]).all(dim=1).cpu().numpy()
        return whole
    # the first coordinate tells most differing rows apart; compare the rest after it
    eq: npt.NDArray[np.bool_] = same(mem[rt, 0], recorded[lt, 0]).cpu().numpy()
    e = np.flatnonzero(eq)
    if len(e):
        et = torch.as_tensor(e, device=mem.device)
        eq[e] = same(mem[rt[et]], recorded[lt[et]]).all(dim=1).cpu().numpy()
    return eq


def _prune(model: TGN, rows: _Rows, rec: BatchRecord, loc: npt.NDArray[np.int64], x: int,
           need: npt.NDArray[np.int64], src: npt.NDArray[np.int64],
           dst: npt.NDArray[np.int64], tolerance: float = 0.0) -> int:
    """Step 4 of a batch (perturbation pruning, exact): retire the rows whose state after
    the batch is the recorded one, and give a row back to the retired pairs that a
    perturbed sender reaches. Returns the number of rows retired.

    A row of node ``n`` may be retired when its memory equals the recorded memory bitwise,
    its last-update time is the recorded one, and its pending message is the recorded one
    or one with the same sender, time and edge features (the same message), the sender's
    memory under the row's sets being the recorded one too; a row whose state after this
    batch is never read (``need[n] < x``) is retired as well. Later batches then use the
    recorded state for those sets, which is what the row would have produced.

    With ``tolerance > 0`` "equals the recorded memory" means "within ``tolerance`` of it in
    every coordinate" (``_memory_equal``), here, for the sender, and in
    ``_merge`` and ``_revive``, which read the same test; a row retired that way
    is snapped to the recorded memory, which is **not exact** (the module docstring).

    Conversely, a pair ``(set, n)`` without a row whose recorded pending message comes
    from a sender holding a perturbed memory under that set must differ in the next batch.
    Without pruning such pairs always hold a row (the sender's dependencies are in
    ``n``'s); after a retirement they get one again here: the recorded state and pending
    message, one row per distinct sender row.
    """
    size = rows.size
    live = np.flatnonzero(rows.alive[:size])
    if not len(live):  # no perturbed row: nothing to retire, merge or revive
        return 0
    node = rows.n[live]
    stale = need[node] < x  # never read again
    where = loc[node]
    check = (where >= 0) & ~stale
    r, n, lc = live[check], node[check], where[check]
    dev = rows.mem.device
    rec_pend = _recorded_pending(rec)
    mem_eq = np.zeros(size, dtype=bool)  # rows whose memory is the recorded one
    checked = np.zeros(size, dtype=bool)
    if len(r):
        rt, lt = torch.as_tensor(np.stack([r, lc]), device=dev)  # one upload for both
        mem_eq[r] = _memory_equal(rows.mem, rt, rec.mem_post, lt, tolerance)
        checked[r] = True
    retire = np.zeros(len(r), dtype=bool)
    if len(r):
        same = mem_eq[r] & (rows.lu[r] == rec.lu_post[lc])
        mine, theirs = rows.pend[r], rec_pend[lc]
        reads_pending = need[n] > x  # the next batch applies the pending message
        pend_ok = (mine == theirs) | ~reads_pending
        alt = same & ~pend_ok & (mine >= 0) & (theirs >= 0)
        if alt.any():  # another event carrying the same message?
            a = np.flatnonzero(alt)
            ea, eb, na = mine[a], theirs[a], n[a]
            feat = model.edge_features
            fa = feat[torch.as_tensor(ea, device=feat.device)]
            fb = feat[torch.as_tensor(eb, device=feat.device)]
            same_msg = ((other_endpoint(src, dst, ea, na) == other_endpoint(src, dst, eb, na))
                        & (model.stream.t[ea] == model.stream.t[eb])
                        & (_bits(fa) == _bits(fb)).all(dim=1).cpu().numpy())
            pend_ok[a] = same_msg
        cand = np.flatnonzero(same & pend_ok)
        sends = cand[reads_pending[cand] & (theirs[cand] >= 0)]
        if len(sends):  # the message's sender must hold its recorded memory as well
            o = other_endpoint(src, dst, theirs[sends], n[sends])
            ro = rows.lookup(rows.rep[r[sends]], o)
            ok = (ro < 0) | (checked[np.maximum(ro, 0)] & mem_eq[np.maximum(ro, 0)])
            same[sends[~ok]] = False
        retire[cand] = same[cand]
    dead = np.concatenate([live[stale], r[retire]])
    rows.drop(dead)
    merged = _merge(model, rows, r[~retire], need, x, mem_eq, checked, src, dst)
    _revive(rows, rec, rec_pend, need, x, mem_eq, checked, src, dst)
    return int(retire.sum()) + merged


def _merge(model: TGN, rows: _Rows, r: npt.NDArray[np.int64], need: npt.NDArray[np.int64],
           x: int, mem_eq: npt.NDArray[np.bool_], checked: npt.NDArray[np.bool_],
           src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> int:
    """Merge rows ``r`` of one node whose states after the batch are equal bit for bit
    (memory, last-update time, pending event, and the sender's memory): their sets then
    share one row, as sets agreeing on the node's causal past do. Exact, like retiring a
    row: the state a row stands for is a function of those values only. Returns the
    number of rows merged away."""
    if len(r) < 2:
        return 0
    n = rows.n[r]
    sorted_n = np.sort(n)
    repeated = sorted_n[1:][sorted_n[1:] == sorted_n[:-1]]
    if not len(repeated):  # one row per node (always with one set): nothing to merge
        return 0
    multi = np.isin(n, repeated)  # only nodes with several rows can merge
    r, n = r[multi], n[multi]
    size = rows.size
    # memory identity: -1 the recorded memory, else one id per distinct memory of a node
    mem_id = size + np.arange(size, dtype=np.int64)  # by default, every row its own
    mem_id[np.flatnonzero(checked[:size] & mem_eq[:size])] = -1
    dev = rows.mem.device
    d = np.flatnonzero(~mem_eq[r])  # rows whose memory is not the recorded one
    rd = torch.as_tensor(r[d], device=dev)
    lead = _bits(rows.mem[rd, :2]).to(torch.int64).cpu().numpy()  # [R', 2]
    first, inv = distinct_rows(np.column_stack([n[d], lead]))
    cnt = np.bincount(inv, minlength=len(first))
    grp = np.flatnonzero(cnt[inv] > 1)
    if len(grp):
        # equal leading coordinates are not proof: compare the whole memory with the
        # group's first row
        gt = torch.as_tensor(r[d[grp]], device=dev)
        ht = torch.as_tensor(r[d[first[inv[grp]]]], device=dev)
        same = (_bits(rows.mem[gt]) == _bits(rows.mem[ht])).all(dim=1).cpu().numpy()
        mem_id[r[d[grp[same]]]] = inv[grp[same]]
    pend = rows.pend[r]
    # the sender's memory identity, -1 for the recorded one or no message applied next
    ro = _sender_rows(rows, rows.rep[r], np.where(need[n] > x, pend, -1), n, src, dst)
    sid = np.where(ro >= 0, mem_id[np.maximum(ro, 0)], -1)
    key = np.stack([n, mem_id[r], rows.lu[r].view(np.int64), pend, sid], axis=1)
    head, group = distinct_rows(key)
    if len(head) == len(r):
        return 0
    target = r[head[group]]  # [R]
    moved = np.flatnonzero(target != r)
    remap = np.arange(size, dtype=np.int64)
    remap[r[moved]] = target[moved]
    cols = np.unique(rows.columns[n[moved]])
    sub = rows.rowmap[:, cols]
    use = sub >= 0
    sub[use] = remap[sub[use]]
    rows.rowmap[:, cols] = sub
    gone = r[moved]
    rows.mixed[target[moved]] = True  # sets of several keys, equal states (see _Rows)
    rows.alive[gone] = False
    rows.pend[gone] = -1
    return len(moved)


def _revive(rows: _Rows, rec: BatchRecord, rec_pend: npt.NDArray[np.int64],
            need: npt.NDArray[np.int64], x: int, mem_eq: npt.NDArray[np.bool_],
            checked: npt.NDArray[np.bool_], src: npt.NDArray[np.int64],
            dst: npt.NDArray[np.int64]) -> None:
    """Rows for the pairs without one whose recorded pending message (applied in the next
    batch) comes from a sender with a perturbed memory (see ``_prune``)."""
    size = rows.size
    differs = np.zeros(size + 1, dtype=bool)  # index -1 (no row) reads the last entry
    differs[:size] = rows.alive[:size] & checked & ~mem_eq
    if not differs.any():
        return
    is_sender = np.zeros(len(rows.columns), dtype=bool)  # by node (calloc: pages touched only)
    is_sender[rows.n[np.flatnonzero(differs[:size])]] = True
    v = np.flatnonzero((rec_pend >= 0) & (need[rec.nodes] > x) & (rows.columns[rec.nodes] >= 0))
    if not len(v):
        return
    n = rec.nodes[v]
    o = other_endpoint(src, dst, rec_pend[v], n)
    hit = is_sender[o] & (o != n)
    v, n, o = v[hit], n[hit], o[hit]
    if not len(v):
        return
    # the sets under which each sender differs, then the receivers of each such sender
    senders, of = np.unique(o, return_inverse=True)
    pp, uu = np.nonzero(differs[rows.rowmap[:, rows.columns[senders]]])  # [P, U] scanned
    if not len(pp):
        return
    by_sender = np.argsort(of, kind="stable")
    count = np.bincount(of, minlength=len(senders))
    start = np.cumsum(count) - count
    reps = count[uu]
    pp = np.repeat(pp, reps)
    jj = by_sender[concat_ranges(start[uu], start[uu] + reps)]
    unrowed = rows.rowmap[pp, rows.columns[n[jj]]] < 0
    pp, jj = pp[unrowed], jj[unrowed]
    if not len(pp):
        return
    key = rows.rowmap[pp, rows.columns[o[jj]]].astype(np.int64)
    order = np.lexsort((key, jj))
    pp, jj, key = pp[order], jj[order], key[order]
    head = np.concatenate(([True], (jj[1:] != jj[:-1]) | (key[1:] != key[:-1])))
    group = np.cumsum(head) - 1
    heads = np.flatnonzero(head)
    lo_ = v[jj[heads]]
    dev = rows.mem.device
    new = rows.add(pp[heads], n[jj[heads]], rec.mem_post[torch.as_tensor(lo_, device=dev)],
                   rec.lu_post[lo_])
    rows.pend[new] = rec_pend[lo_]
    rows.rowmap[pp, rows.columns[n[jj]]] = new[group]
    rows.mixed[new[np.bincount(group) > 1]] = True  # sets of several keys (see _Rows)


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
