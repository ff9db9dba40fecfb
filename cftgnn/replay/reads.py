"""What each query of a batched embedding reads, and which sets can change it.

A query's embedding (a node at the explained position, ``L`` attention layers) is a function
of its computation tree: the slot events of its neighbour windows at every layer and the
layer-0 inputs of the nodes in them. Under a removal set the windows are the most recent
*kept* events, so a window holding none of the set's removed events is unchanged (removing an
older event does not change the most recent ``k``), and by induction a query's embedding is
the unperturbed one when the set removes no event of its unperturbed tree and perturbs the
input of no node in it. ``tree_reads`` records those trees once for the queries of a call;
``TreeReads.changed`` says, per set and query, whether the set can change it — the rank
target's D destinations are mostly far from the removals, and their unperturbed embeddings
are then computed once for all P sets (``cftgnn.replay.batched.batched_logits``).

The same holds of every query below the top layer: a query ``(v, τ)`` of layer ``l`` whose
*unperturbed* window (its ``k`` most recent events before ``τ`` with only the shared removals)
holds none of a set's removed events has that window under the set too (the set's kept events
are a subset of the unperturbed ones that still contains those ``k``), so its neighbours and
their events are the same; where in addition its own and its neighbours' layer ``l - 1``
embeddings are unperturbed, so is its own. ``LayerWindows`` keeps the unperturbed windows and
embeddings of one layer's queries, recorded once per plan, for ``batched_logits`` to reuse.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.arrays import distinct_rows
from cftgnn.data.index import TemporalIndex
from cftgnn.models.neighbors import recent_kept_neighbors_where
from cftgnn.replay.masks import RemovalSets

IntArray = npt.NDArray[np.int64]


def _join(keys: IntArray, owners: IntArray, p: IntArray, hits: IntArray
          ) -> tuple[IntArray, IntArray]:
    """``(p', owner)`` for every ``(p[i], hits[i])`` and every ``owner`` with
    ``(owner, hits[i])`` among ``(owners, keys)``; ``keys`` ascending."""
    lo = np.searchsorted(keys, hits, "left")
    hi = np.searchsorted(keys, hits, "right")
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return np.repeat(p, counts), owners[starts + np.arange(total)]


def _by_key(owners: IntArray, keys: IntArray) -> tuple[IntArray, IntArray]:
    """``(owners, keys)`` ordered by key."""
    order = np.argsort(keys, kind="stable")
    return owners[order], keys[order]


@dataclass(frozen=True)
class TreeReads:
    """The unperturbed computation trees of W queries.

    Attributes:
        width: W.
        event_query, event: Pairs ``(query, slot event)`` of the trees, ``int64 [A]`` each,
            ordered by event.
        node_query, node: Pairs ``(query, node whose layer-0 input it reads)``, ``[B]`` each,
            ordered by node.
    """

    width: int
    event_query: IntArray
    event: IntArray
    node_query: IntArray
    node: IntArray

    def changed(self, sets: object, p: IntArray, n: IntArray,
                unknown: IntArray) -> npt.NDArray[np.bool_]:
        """Whether each set can change each query's embedding, ``bool [P, W]``.

        Args:
            sets: The P removal sets (``RemovalSets``).
            p, n: The perturbations and nodes whose layer-0 input is perturbed.
            unknown: Nodes whose input may differ under any set.
        """
        table, events = sets.table, sets.events  # type: ignore[attr-defined]
        out = np.zeros((table.shape[0], self.width), dtype=bool)
        rp, rj = np.nonzero(table)
        sp, sq = _join(self.event, self.event_query, rp.astype(np.int64), events[rj])
        out[sp, sq] = True
        sp, sq = _join(self.node, self.node_query, p, n)
        out[sp, sq] = True
        if len(unknown):
            out[:, np.unique(self.node_query[np.isin(self.node, unknown)])] = True
        return out


@dataclass(frozen=True)
class LayerWindows:
    """The unperturbed queries of one layer below the top, their windows and embeddings
    (``record_windows``), ordered by key.

    Attributes:
        stride: Keys are ``node * stride + before``.
        keys: ``int64 [C]``, ascending and distinct.
        tq: Query times, ``float64 [C]``.
        nbr, eid, valid: The unperturbed windows, ``[C, k]`` each (as the sampler gives them).
        rows: The unperturbed embeddings, ``[C, d]``.
    """

    stride: int
    keys: IntArray
    tq: npt.NDArray[np.float64]
    nbr: IntArray
    eid: IntArray
    valid: npt.NDArray[np.bool_]
    rows: Tensor

    def find(self, n: IntArray, before: IntArray, tq: npt.NDArray[np.float64]) -> IntArray:
        """The recorded query of each ``(n, before, tq)``, ``-1`` where none, ``int64 [M]``."""
        key = n * self.stride + before
        at = np.minimum(np.searchsorted(self.keys, key), max(len(self.keys) - 1, 0))
        hit = (self.keys[at] == key) & (self.tq[at] == tq) if len(self.keys) else key < 0
        return np.where(hit, at, -1).astype(np.int64)

    def unremoved(self, c: IntArray, p: IntArray, sets: RemovalSets,
                  extra: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.bool_]:
        """Whether query ``c[m]`` (``-1``: none) is recorded and set ``p[m]`` (``-1``: none)
        removes no event of its window, which is then its window under that set too,
        ``bool [M]``; with ``extra`` (events removed on top of the recorded windows' shared
        ones, ``bool [E]``), none of those either."""
        out = c >= 0
        if extra is not None:
            hit = np.flatnonzero(out)
            ch = c[hit]
            out[hit] = ~(extra[np.where(self.valid[ch], self.eid[ch], 0)]
                         & self.valid[ch]).any(axis=1)
        some = np.flatnonzero(out & (p >= 0))
        if len(some):
            cs = c[some]
            valid = self.valid[cs]
            removed = sets.lookup(p[some], np.where(valid, self.eid[cs], 0))
            out[some] = ~(removed & valid).any(axis=1)
        return out


def record_windows(stride: int, n: IntArray, before: IntArray, tq: npt.NDArray[np.float64],
                   window: tuple[IntArray, IntArray, npt.NDArray[np.bool_]],
                   rows: Tensor) -> LayerWindows:
    """``LayerWindows`` of distinct unperturbed queries ``(n, before, tq)`` with their
    windows ``(nbr, eid, valid)`` and embeddings ``rows``."""
    key = n * stride + before
    _, order = np.unique(key, return_index=True)  # sorted; one per key (find checks tq)
    nbr, eid, valid = window
    return LayerWindows(stride, key[order], tq[order], nbr[order], eid[order], valid[order],
                        rows[torch.as_tensor(order, device=rows.device)])


WindowFn = Callable[[int, IntArray, IntArray],
                    tuple[IntArray, IntArray, npt.NDArray[np.bool_]] | None]


def tree_reads(index: TemporalIndex, num_neighbors: int, num_layers: int, nodes: IntArray,
               position: int, shared: npt.NDArray[np.bool_] | None,
               windows: WindowFn | None = None) -> TreeReads | None:
    """The unperturbed trees of ``nodes`` queried at ``position`` (``shared``'s events
    removed, as for every set), ``num_layers`` layers of ``num_neighbors`` slots; with
    ``windows`` (``(layer, nodes, bounds) -> (nbr, eid, valid)``, the unperturbed windows
    already sampled: ``recorded_windows``), read from there, None where it has none."""
    width = len(nodes)
    q = np.arange(width, dtype=np.int64)
    n = np.asarray(nodes, dtype=np.int64)
    before = np.full(width, int(position), dtype=np.int64)
    removed = 0 if shared is None else int(shared[:position].sum())

    def is_removed(eid: IntArray) -> npt.NDArray[np.bool_]:
        return np.zeros(eid.shape, dtype=bool) if shared is None else shared[eid]

    ev_q, ev, nd_q, nd = [], [], [q], [n]
    for layer in range(num_layers, 0, -1):
        if len(q) == 0:
            break
        if windows is None:
            window = recent_kept_neighbors_where(index, n, before, num_neighbors, is_removed,
                                                 removed)
        else:
            got = windows(layer, n, before)
            if got is None:
                return None
            window = got
        nbr, eid, valid = window
        rows, cols = np.nonzero(valid)
        q, n, before = q[rows], nbr[rows, cols], eid[rows, cols]
        ev_q.append(q)
        ev.append(before)
        nd_q.append(q)
        nd.append(n)
        # the next layer's queries: each distinct (query, node, bound) once
        if len(q):
            first, _ = distinct_rows(np.stack([q, n, before], axis=1))
            q, n, before = q[first], n[first], before[first]
    empty = np.zeros(0, dtype=np.int64)
    by_event = _by_key(np.concatenate(ev_q) if ev_q else empty,
                       np.concatenate(ev) if ev else empty)
    return TreeReads(width, *by_event, *_by_key(np.concatenate(nd_q), np.concatenate(nd)))


def recorded_windows(recorded: dict[int, LayerWindows], times: npt.NDArray[np.float64]
                     ) -> WindowFn:
    """``tree_reads``'s ``windows`` from the unperturbed queries of a recorded pass (every
    layer's, queried at their bounds' times), None where one was not recorded."""

    def windows(layer: int, n: IntArray, before: IntArray
                ) -> tuple[IntArray, IntArray, npt.NDArray[np.bool_]] | None:
        rec = recorded.get(layer)
        if rec is None:
            return None
        c = rec.find(n, before, times[before])
        if (c < 0).any():
            return None
        return rec.nbr[c], rec.eid[c], rec.valid[c]

    return windows


__all__ = ["LayerWindows", "TreeReads", "WindowFn", "record_windows", "recorded_windows",
           "tree_reads"]
