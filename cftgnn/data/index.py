"""Temporal index: per-node time-sorted adjacency, recent neighbours and candidate sets.

Built once per stream in ``O(E log E)``; every query afterwards works on slices of two CSR
arrays and never rebuilds anything (docs/design.md §5).

* Event adjacency: for each node, the ids of the events it takes part in, ascending (ids are
  time order), with the other endpoint. A self-loop is listed once at its node.
* Distinct-neighbour adjacency: for each node, each neighbour it ever met, with the id of the
  first event between them. "Neighbours before event i" are those with first id ``< i``, which
  makes the breadth-first search of the candidate set cheap on streams with repeated contacts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cftgnn.data.stream import EventStream, IntArray
from cftgnn.errors import IndexQueryError


def concat_ranges(starts: IntArray, ends: IntArray) -> IntArray:
    """Concatenate ``range(starts[j], ends[j])`` for all ``j`` without a Python loop.

    Args:
        starts: Range starts, ``int64 [R]``.
        ends: Range ends (exclusive), ``int64 [R]``, ``ends >= starts``.

    Returns:
        ``int64 [sum(ends - starts)]``.
    """
    lens = ends - starts
    total = int(lens.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.cumsum(lens) - lens  # start of each range in the output
    return np.repeat(starts - offsets, lens) + np.arange(total, dtype=np.int64)


@dataclass(frozen=True)
class Candidates:
    """The candidate events ``C(G, ε_i, k, m_max)`` of one explained event.

    Attributes:
        event_id: Id of the explained event ``i``.
        ids: Candidate event ids, ascending (oldest first), ``int64 [M]``, all ``< event_id``.
        hops: Hop distance of each candidate from ``{u, v}`` (shortest distance to either
            endpoint), ``int64 [M]``.
        k: Hop radius used.
        m_max: Cap on the number of candidates used.
    """

    event_id: int
    ids: IntArray
    hops: IntArray
    k: int
    m_max: int

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def oldest(self) -> int | None:
        """``ε_min``, the oldest candidate id, or None when there are no candidates."""
        return int(self.ids[0]) if len(self.ids) else None


#: The most candidate events of an explained event, unless a run says otherwise (the seed's
#: ``m_max``; the configs of ``conf/`` write the same number where they document the option,
#: and tests/test_configs.py keeps them equal to this).
M_MAX = 64


def candidate_hops(k: int | None, num_layers: int) -> int:
    """The hop radius of an event's candidate set: ``k``, or by default the model's number of
    layers (what a ``num_layers``-layer model's prediction can see)."""
    return int(num_layers) if k is None else int(k)


class TemporalIndex:
    """Per-node time-sorted adjacency of an [``EventStream``][cftgnn.data.EventStream].

    Args:
        stream: The event stream to index.
    """

    def __init__(self, stream: EventStream) -> None:
        # Each temporary is freed as soon as it is used: on a stream of tens of millions of
        # events every array of incidences is 16 bytes per event (docs/benchmarks.md).
        self.stream = stream
        n_ev, n_nodes = stream.num_events, stream.num_nodes
        nonself = np.flatnonzero(stream.src != stream.dst)
        node = np.concatenate([stream.src, stream.dst[nonself]])
        self._stride = n_ev + 1
        key = node * self._stride
        del node
        key[:n_ev] += np.arange(n_ev, dtype=np.int64)
        key[n_ev:] += nonself
        order = np.argsort(key, kind="stable")
        self._key: IntArray = key[order]
        del key
        eid = np.concatenate([np.arange(n_ev, dtype=np.int64), nonself])
        self.adj_eid: IntArray = eid[order]
        del eid
        nbr = np.concatenate([stream.dst, stream.src[nonself]])
        self.adj_nbr: IntArray = nbr[order]
        del nbr, order, nonself
        self.indptr: IntArray = np.zeros(n_nodes + 1, dtype=np.int64)
        node_sorted = self._key // self._stride  # each incidence's node, in adjacency order
        np.cumsum(np.bincount(node_sorted, minlength=n_nodes), out=self.indptr[1:])

        # Distinct neighbours with the first event id between the pair. The incidences are
        # in (node, event id) order, so a stable sort by (node, neighbour) puts each pair's
        # earliest event first.
        pair = node_sorted
        pair *= max(n_nodes, 1)
        pair += self.adj_nbr
        order2 = np.argsort(pair, kind="stable")
        pair = pair[order2]
        first = np.ones(len(pair), dtype=bool)
        np.not_equal(pair[1:], pair[:-1], out=first[1:])
        sel = order2[first]
        del order2
        self.nb_node: IntArray = self.adj_nbr[sel]
        self.nb_first: IntArray = self.adj_eid[sel]
        self.nb_indptr: IntArray = np.zeros(n_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(pair[first] // max(n_nodes, 1), minlength=n_nodes),
                  out=self.nb_indptr[1:])

    # ------------------------------------------------------------------ checks
    def _check_event(self, event_id: int, allow_end: bool = False) -> int:
        e = self.stream.num_events
        hi = e if allow_end else e - 1
        if isinstance(event_id, (bool, np.bool_)) or not isinstance(event_id, (int, np.integer)):
            raise IndexQueryError(f"event id must be an integer, got {event_id!r}")
        if not 0 <= int(event_id) <= hi:
            raise IndexQueryError(
                f"event id {event_id} is outside the stream {self.stream.name!r} "
                f"(valid ids: 0..{hi})"
            )
        return int(event_id)

    def _check_nodes(self, nodes: npt.ArrayLike) -> IntArray:
        arr = np.asarray(nodes)
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise IndexQueryError(f"node ids must be integers, got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        bad = np.flatnonzero((arr < 0) | (arr >= self.stream.num_nodes))
        if bad.size:
            raise IndexQueryError(
                f"node id {arr.flat[bad[0]]} is outside [0, {self.stream.num_nodes})"
            )
        return arr

    # --------------------------------------------------------------- neighbours
    def degree_before(self, nodes: npt.ArrayLike, before: npt.ArrayLike) -> IntArray:
        """Number of events each node took part in with id ``< before``.

        Args:
            nodes: Node ids, ``int [B]``.
            before: Event-id boundary per node, ``int [B]`` (or a scalar), in ``[0, E]``.
        """
        nodes_a = self._check_nodes(nodes)
        before_a = np.broadcast_to(np.asarray(before, dtype=np.int64), nodes_a.shape)
        if before_a.size and (before_a.min() < 0 or before_a.max() > self.stream.num_events):
            raise IndexQueryError(
                f"event boundary outside [0, {self.stream.num_events}]: {before_a.min()}"
                f"..{before_a.max()}"
            )
        end = np.searchsorted(self._key, nodes_a * self._stride + before_a, side="left")
        return end - self.indptr[nodes_a]

    def recent_neighbors(
        self, nodes: npt.ArrayLike, before: npt.ArrayLike, n: int
    ) -> tuple[IntArray, IntArray, npt.NDArray[np.bool_]]:
        """The ``n`` most recent neighbours of each node strictly before an event id.

        Args:
            nodes: Query nodes, ``int [B]``.
            before: Event-id boundary per query (history is ids ``< before``), ``int [B]`` or a
                scalar, in ``[0, E]``.
            n: Number of neighbours to return per query.

        Returns:
            ``(nbr, eid, valid)``, each ``[B, n]``: neighbour node ids, the event ids linking
            them, and a mask of real entries. Entries are oldest-to-newest and right-aligned, so
            column ``n - 1`` holds the most recent neighbour; padding is ``-1``.
        """
        nodes_a = self._check_nodes(np.atleast_1d(nodes))
        before_a = np.broadcast_to(np.asarray(before, dtype=np.int64), nodes_a.shape)
        count = self.degree_before(nodes_a, before_a)
        end = self.indptr[nodes_a] + count
        take = np.minimum(count, n)
        # column j of row b holds position end_b - n + j, valid when j >= n - take_b
        cols = np.arange(n, dtype=np.int64)
        pos = end[:, None] - n + cols[None, :]
        valid = cols[None, :] >= (n - take)[:, None]
        pos = np.where(valid, pos, 0)
        nbr = np.where(valid, self.adj_nbr[pos] if len(self.adj_nbr) else -1, -1)
        eid = np.where(valid, self.adj_eid[pos] if len(self.adj_eid) else -1, -1)
        return nbr, eid, valid

    # --------------------------------------------------------------- candidates
    @staticmethod
    def _history_end(event_id: int, until: int | None) -> int:
        """``until`` (default ``event_id``), checked to lie in ``[0, event_id]``."""
        if until is None:
            return event_id
        if not 0 <= int(until) <= event_id:
            raise IndexQueryError(f"history end {until} is outside [0, {event_id}]")
        return int(until)

    def khop_distances(self, event_id: int, k: int, until: int | None = None) -> IntArray:
        """Hop distance from ``{u, v}`` of event ``event_id`` over its history, ``int64 [N]``.

        Nodes farther than ``k`` hops (or unreachable) get ``-1``. Only events with id
        ``< until`` (default ``event_id``; see
        [``candidates``][cftgnn.data.TemporalIndex.candidates]) are edges of the graph searched.
        """
        i = self._check_event(event_id)
        if k < 0:
            raise IndexQueryError(f"k must be >= 0, got {k}")
        end = self._history_end(i, until)
        dist = np.full(self.stream.num_nodes, -1, dtype=np.int64)
        frontier = np.unique(np.array([self.stream.src[i], self.stream.dst[i]], dtype=np.int64))
        dist[frontier] = 0
        for h in range(1, k + 1):
            idx = concat_ranges(self.nb_indptr[frontier], self.nb_indptr[frontier + 1])
            if idx.size == 0:
                break
            nb = self.nb_node[idx[self.nb_first[idx] < end]]
            nb = nb[dist[nb] < 0]
            if nb.size == 0:
                break
            frontier = np.unique(nb)
            dist[frontier] = h
        return dist

    def candidates(self, event_id: int, k: int, m_max: int = M_MAX,
                   until: int | None = None) -> Candidates:
        """Candidate set ``C(G, ε_i, k, m_max)`` as docs/design.md §2 defines it.

        Nodes reachable within ``k`` hops from ``u`` or ``v`` over past events form a node set;
        the candidates are the past events with both endpoints in it, the ``m_max`` most recent
        by id. The explained event is never a candidate.

        Args:
            event_id: The explained event ``i``.
            k: Hop radius (usually the model's number of layers).
            m_max: Maximum number of candidates.
            until: Where the history ends (exclusive), ``<= event_id``: past events are the
                ids ``< until`` (default ``event_id``; ``history=batch_start`` passes the
                start of the event's batch, ``cftgnn.oracle.history``).

        Returns:
            The candidates, oldest first, with their hop distances.
        """
        i = self._check_event(event_id)
        if m_max < 0:
            raise IndexQueryError(f"m_max must be >= 0, got {m_max}")
        end = self._history_end(i, until)
        dist = self.khop_distances(i, k, end)
        src, dst = self.stream.src, self.stream.dst
        found = np.empty(0, dtype=np.int64)
        # Scan backwards in growing windows: the window doubles until it holds m_max events
        # inside the node set or reaches the start of the stream. Each window is a vectorised
        # membership test, so even a full scan of Wikipedia's history costs about a millisecond.
        window = max(4 * m_max, 256)
        lo = end
        while m_max > 0 and lo > 0 and len(found) < m_max:
            new_lo = max(0, lo - window)
            s, d = src[new_lo:lo], dst[new_lo:lo]
            inside = np.flatnonzero((dist[s] >= 0) & (dist[d] >= 0)) + new_lo
            found = np.concatenate([inside, found])
            lo = new_lo
            window *= 2
        ids = found[-m_max:] if m_max > 0 else found[:0]
        hops = np.minimum(dist[src[ids]], dist[dst[ids]])
        return Candidates(event_id=i, ids=ids, hops=hops, k=k, m_max=m_max)
