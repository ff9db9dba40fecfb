"""The unperturbed recording the cone replay follows, and the dependency sets over it.

A ``Trajectory`` holds one ``BatchRecord`` per history batch (the recorded state rows of the
nodes the batch touches; ``cftgnn.replay.tgn.record`` makes them) and the ``Dependencies``
of the removable events: for every node, batch by batch, the removable events its state may
depend on (``D(n)``, ``dependencies``), restricted to the states the explained event's
prediction can read (``needed_until``). The cone replay (``cftgnn.replay.tgn.cone``) keys
its perturbed rows by them (docs/design.md §5, "touch only what changes").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from torch import Tensor

from cftgnn.arrays import as_int64, index_dtype, mask_words
from cftgnn.models.neighbors import reachable_nodes
from cftgnn.models.state import State
from cftgnn.models.tgn import TGN, other_endpoint
from cftgnn.replay.tgn.rows_kernels import last_kept

Words = npt.NDArray[np.uint64]


@dataclass
class BatchRecord:
    """Unperturbed state rows of the nodes one history batch touches.

    Attributes:
        events: Stream positions of the batch's events, ``int64 [K]`` (ascending).
        nodes: Nodes with a pending message before the batch or an event in it, sorted,
            ``int32 [V]`` (``int64`` on a stream of more than ``2**31 - 1`` nodes; the
            compiled loops take them as ``int64``).
        mem_pre: Their memory before the batch, ``[V, d]``.
        mem_post: Their memory after the pending messages were applied, ``[V, d]``.
        lu_post: Their last-update time after that, ``float64 [V]`` (on the host: rows are
            keyed by it).
        inc_k: Incidences of the batch's events (index into ``events``), grouped by node in
            the order of ``nodes`` and ascending within a node, ``int32 [I]``.
        inc_off: Offsets of each node's group in ``inc_k``, ``int32 [V + 1]``: node
            ``nodes[v]``'s incidences are ``inc_k[inc_off[v]:inc_off[v + 1]]`` (every
            incidence's node is in ``nodes``, so the groups tile ``inc_k``; one array
            instead of a start and an end per node, 8 bytes a node less);
            ``inc_start`` and ``inc_end`` are its two views.
    """

    events: npt.NDArray[np.int64]
    nodes: npt.NDArray[np.integer]
    mem_pre: Tensor
    mem_post: Tensor
    lu_post: npt.NDArray[np.float64]
    inc_k: npt.NDArray[np.integer]
    inc_off: npt.NDArray[np.integer]

    @property
    def inc_start(self) -> npt.NDArray[np.integer]:
        """Start of each node's group in ``inc_k``, ``[V]`` (a view of ``inc_off``)."""
        return self.inc_off[:-1]

    @property
    def inc_end(self) -> npt.NDArray[np.integer]:
        """End of each node's group in ``inc_k``, ``[V]`` (a view of ``inc_off``; equal to
        the start for nodes without an event in the batch)."""
        return self.inc_off[1:]

    def incidences(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                                  npt.NDArray[np.int64]]:
        """``(inc_k, inc_start, inc_end)`` as the compiled loops' ``int64`` (one copy of
        the offsets where they are ``int32``, its two views)."""
        off = as_int64(self.inc_off)
        return as_int64(self.inc_k), off[:-1], off[1:]

    def recorded_pending(self) -> npt.NDArray[np.int64]:
        """Pending message of each node of ``nodes`` after the recorded batch (its last
        event there, the largest), ``-1`` for nodes without an event in it, ``int64 [V]``."""
        out = np.full(len(self.nodes), -1, dtype=np.int64)
        has = self.inc_end > self.inc_start
        out[has] = self.events[self.inc_k[self.inc_end[has] - 1]]
        return out

    def pending_at(self, pos: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """``recorded_pending()[pos]``, computed for those nodes only, ``int64 [M]``."""
        if not len(self.inc_k):
            return np.full(len(pos), -1, dtype=np.int64)
        end = self.inc_end[pos]
        last = self.events[self.inc_k[np.maximum(end - 1, 0)]]
        return np.where(end > self.inc_start[pos], last, -1)

    def last_kept(self, rem: npt.NDArray[np.bool_], p: npt.NDArray[np.int64],
                  pos: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The last event of node ``nodes[pos[m]]`` in the batch that set ``p[m]`` keeps
        (``rem``: removals of the batch's events, ``bool [P, K]``), ``-1`` where it removes
        them all; every such node has an event in the batch. Returns ``int64 [M]``."""
        return last_kept(self.events, *self.incidences(), rem, p, pos)


def batch_record(events: npt.NDArray[np.int64], nodes: npt.NDArray[np.integer],
                  mem_pre: Tensor, mem_post: Tensor, lu_post: npt.NDArray[np.float64],
                  src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> BatchRecord:
    """A ``BatchRecord`` with the index arrays every replay of the batch needs."""
    k = len(events)
    s_, d_ = src[events], dst[events]
    loop = s_ == d_
    inc_node = np.concatenate([s_, d_[~loop]])
    inc_k = np.concatenate([np.arange(k), np.arange(k)[~loop]])
    order = np.lexsort((inc_k, inc_node))
    # positions in the batch: int32 (half the bytes; the compiled loops take them as int64)
    inc_node, inc_k = inc_node[order], inc_k[order].astype(index_dtype(k))
    off = np.empty(len(nodes) + 1, dtype=index_dtype(2 * k))
    off[:-1] = np.searchsorted(inc_node, nodes, side="left")
    off[-1] = len(inc_node)
    # every incidence's node is one of ``nodes`` (sorted), so a node's group ends where the
    # next one's starts: the same ends as ``searchsorted(inc_node, nodes, side="right")``
    return BatchRecord(events, nodes, mem_pre, mem_post, lu_post, inc_k, off)


@dataclass
class Dependencies:
    """The removable events each node's state depends on, batch by batch (``D(n)``, see
    ``cftgnn.replay.tgn.cone``), for the nodes and batches whose state the prediction can
    read.

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
    _receivers: dict[int, tuple[BatchRecord, npt.NDArray[np.int64], npt.NDArray[np.int64]]] = (
        field(default_factory=dict, repr=False, compare=False))

    def receivers(self, rec: BatchRecord, x: int, src: npt.NDArray[np.int64],
                  dst: npt.NDArray[np.int64]
                  ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``receivers`` of batch ``x`` (record ``rec``) under these dependency sets, made
        on the first call for the batch and kept: they are the same for every call of the
        cone replay over this trajectory (the pruning's ``RowTable.revive`` reads them in
        every batch with a perturbed memory; kept with the record they were made from, and
        made again for another)."""
        got = self._receivers.get(x)
        if got is None or got[0] is not rec:
            # kept as int32 (node ids and positions in ``rec.nodes`` fit: half the bytes),
            # handed out as the compiled loops' int64
            sender, v = receivers(rec, x, self.need, self.columns, src, dst)
            small = index_dtype(len(self.need))
            got = self._receivers[x] = (rec, sender.astype(small), v.astype(small))
        return as_int64(got[1]), as_int64(got[2])

    def covers(self, events: npt.NDArray[np.int64]) -> bool:
        """Whether every event of ``events`` is in the universe (ascending: a binary
        search, cheaper than ``np.isin`` on every call of the cone replay)."""
        if not len(self.universe):
            return not len(events)
        at = np.minimum(np.searchsorted(self.universe, events), len(self.universe) - 1)
        return bool((self.universe[at] == events).all())


def receivers(rec: BatchRecord, x: int, need: npt.NDArray[np.int64],
              columns: npt.NDArray[np.int64], src: npt.NDArray[np.int64],
              dst: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The nodes of batch ``x`` that a perturbed sender can reach through their recorded
    pending message: those (positions ``v`` in ``rec.nodes``) with a pending message after
    the batch (``BatchRecord.recorded_pending``) from another node, whose state is read
    after the next batch (``need > x``) and that can hold a row (``columns >= 0``).

    Returns:
        ``(sender, v)``, ``int64``, sorted by sender (stable: ``v`` ascending within one),
        for ``RowTable.revive`` to find the receivers of a few senders by binary search.
    """
    pend = rec.recorded_pending()
    v = np.flatnonzero((pend >= 0) & (need[rec.nodes] > x) & (columns[rec.nodes] >= 0))
    o = other_endpoint(src, dst, pend[v], rec.nodes[v])
    v, o = v[o != rec.nodes[v]], o[o != rec.nodes[v]]
    order = np.argsort(o, kind="stable")
    return o[order], v[order]


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
    num_words = mask_words(len(universe))
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
        dst: The query's destination, None for the event at ``end``'s own; another (a
            negative pair, ``cftgnn.replay.tgn.TGNReplay.pair_plan``) restricts ``deps`` to
            the states the prediction of ``(src_end, dst, t_end)`` can read instead, and
            ``int64 [D]`` destinations (``TGNReplay.pairs_plan``) to the states any of the D
            pairs' predictions can read.
    """

    start: int
    end: int
    batches: list[BatchRecord]
    final: State
    final_input: Tensor
    removed_mask: npt.NDArray[np.bool_] | None = None
    deps: Dependencies | None = field(default=None, repr=False)
    dst: int | npt.NDArray[np.int64] | None = None
    _bounds: tuple[list[BatchRecord], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = (
        field(default=None, repr=False, compare=False))

    def event_bounds(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The first and the last event of every batch, ``int64 [B]`` each (``1`` and ``0``
        for an empty batch: no event lies between them), made once and kept while
        ``batches`` is the same list; the cone replay finds the batches a removal set
        removes events of with two binary searches per call."""
        if self._bounds is None or self._bounds[0] is not self.batches:
            first = np.array([rec.events[0] if len(rec.events) else 1 for rec in self.batches],
                             dtype=np.int64)
            last = np.array([rec.events[-1] if len(rec.events) else 0 for rec in self.batches],
                            dtype=np.int64)
            self._bounds = (self.batches, first, last)
        return self._bounds[1], self._bounds[2]

    def dependencies_for(self, model: TGN, events: npt.NDArray[np.int64]) -> Dependencies:
        """Dependency sets over a universe holding ``events`` (kept, or widened and rebuilt
        when a removal set names an event outside it), restricted to the states the
        prediction of the event at ``end`` can read under removals from that universe."""
        if self.deps is None or not self.deps.covers(events):
            universe = events if self.deps is None else np.union1d(self.deps.universe, events)
            self.deps = trajectory_dependencies(model, self.batches, self.end, self.removed_mask,
                                                universe, self.dst)
        return self.deps


def trajectory_dependencies(model: TGN, batches: list[BatchRecord], end: int,
                            removed_mask: npt.NDArray[np.bool_] | None,
                            universe: npt.NDArray[np.int64],
                            dst: int | npt.NDArray[np.int64] | None = None) -> Dependencies:
    """The dependency sets over ``universe`` of a recording of ``batches`` up to ``end``
    (the events ``removed_mask`` masks in it), restricted to the states the prediction of
    the event at ``end`` can read (``needed_until``), or, with ``dst``, of the pair of its
    source and time with that destination (with ``int64 [D]`` destinations, of any of those
    D pairs). Reads only the records' events and nodes, so a recording can compute it before
    its memory rows (``cftgnn.replay.tgn.record``)."""
    stream, index = model.stream, model.index
    ends = (np.asarray([stream.dst[end]], dtype=np.int64) if dst is None
            else np.asarray(dst, dtype=np.int64).reshape(-1))
    link = np.unique(np.concatenate([np.asarray([stream.src[end]], dtype=np.int64), ends]))
    final = reachable_nodes(index, link, np.full(len(link), end), model.num_neighbors,
                            model.embedding.num_layers, universe, removed_mask)
    need = needed_until(batches, final, model.num_nodes, stream.src, stream.dst, universe)
    return dependencies(batches, universe, model.num_nodes, stream.src, stream.dst, need)



__all__ = ["BatchRecord", "Dependencies", "Trajectory", "Words", "batch_record", "dependencies",
           "needed_until", "receivers", "trajectory_dependencies"]
