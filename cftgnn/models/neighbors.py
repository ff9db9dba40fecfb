"""Deterministic most-recent-neighbour sampling that skips removed events.

The [``TemporalIndex``][cftgnn.data.TemporalIndex] answers "the ``n`` most recent neighbours before
event ``i``" over the full stream. A model replaying history with some events removed needs
the ``n`` most recent *kept* neighbours, so that the sampling equals the one a fresh index over
``stream.without(removed)`` would give. This module does that filtering without rebuilding
anything: it asks the index for ``n + R`` neighbours (``R`` removed events in history) and keeps
the ``n`` most recent unremoved ones.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import IntArray


def recent_kept_neighbors(
    index: TemporalIndex,
    nodes: IntArray,
    before: IntArray,
    n: int,
    removed: npt.NDArray[np.bool_] | None = None,
    num_removed: int = 0,
) -> tuple[IntArray, IntArray, npt.NDArray[np.bool_]]:
    """The ``n`` most recent neighbours of each node before an event, skipping removed events.

    Args:
        index: Index of the stream the model is attached to.
        nodes: Query nodes, ``int64 [B]``.
        before: Stream position per query (history is positions ``< before``), ``int64 [B]``.
        n: Neighbours per query.
        removed: Removed events, ``bool [E]``, or None for none.
        num_removed: An upper bound on the removed events inside any query's history (e.g. all
            removed events before the current position); 0 disables filtering.

    Returns:
        ``(nbr, eid, valid)``, each ``[B, n]``, right-aligned oldest-to-newest as in
        [``TemporalIndex.recent_neighbors``][cftgnn.data.TemporalIndex.recent_neighbors]; padding is
        ``-1``.
    """
    if len(nodes) == 0:
        empty = np.zeros((0, n), dtype=np.int64)
        return empty, empty.copy(), np.zeros((0, n), dtype=bool)
    if removed is None or num_removed == 0:
        return index.recent_neighbors(nodes, before, n)
    return recent_kept_neighbors_where(index, nodes, before, n, lambda eid: removed[eid],
                                       num_removed)


def recent_kept_neighbors_where(index: TemporalIndex, nodes: IntArray, before: IntArray, n: int,
                                is_removed: Callable[[IntArray], npt.NDArray[np.bool_]],
                                max_removed: int) -> tuple[IntArray, IntArray,
                                                           npt.NDArray[np.bool_]]:
    """Like ``recent_kept_neighbors`` with the removals given as a function.

    Args:
        index: Index of the attached stream.
        nodes: Query nodes, ``int64 [B]``.
        before: Stream position bounding each query's history, ``int64 [B]``.
        n: Neighbours per query.
        is_removed: ``eid [B, m] -> bool [B, m]``, whether event ``eid[b, j]`` is removed for
            query ``b`` (so each query can have its own removal set).
        max_removed: An upper bound on the removed events inside any query's history.

    Returns:
        ``(nbr, eid, valid)``, each ``[B, n]``, right-aligned as in the index.
    """
    # Look back through a window that grows only while some query lacks n kept neighbours
    # and may have more history: removals are usually few among a node's recent events, so
    # this rarely reads far (the bound n + max_removed is always enough).
    m = min(n + max_removed, 2 * n)
    while True:
        nbr, eid, valid = index.recent_neighbors(nodes, before, m)
        keep = valid & ~is_removed(np.where(valid, eid, 0))
        short = (keep.sum(axis=1) < n) & valid[:, 0]  # full window, still short
        if m >= n + max_removed or not short.any():
            break
        m = min(n + max_removed, 4 * m)
    # rank[b, j] = number of kept entries in columns j..m-1 (1 for the most recent kept one)
    rank = np.cumsum(keep[:, ::-1], axis=1)[:, ::-1]
    sel = keep & (rank <= n)
    rows, cols = np.nonzero(sel)
    out_cols = n - rank[rows, cols]
    out_nbr = np.full((len(nodes), n), -1, dtype=np.int64)
    out_eid = np.full((len(nodes), n), -1, dtype=np.int64)
    out_valid = np.zeros((len(nodes), n), dtype=bool)
    out_nbr[rows, out_cols] = nbr[rows, cols]
    out_eid[rows, out_cols] = eid[rows, cols]
    out_valid[rows, out_cols] = True
    return out_nbr, out_eid, out_valid


def reachable_nodes(index: TemporalIndex, nodes: IntArray, before: IntArray, n: int,
                    num_layers: int, removable: IntArray,
                    removed: npt.NDArray[np.bool_] | None = None) -> IntArray:
    """Every node whose layer-0 input an ``num_layers``-layer embedding of ``nodes`` (at
    bounds ``before``) can read, under any removal of events in ``removable``.

    Layer ``l`` of a query attends to its ``n`` most recent kept neighbours, each queried
    one layer down at its event. Events outside ``removable`` (and not in ``removed``, the
    events removed for every set) are kept by every set, so a query can only sample the
    events from its most recent one back to its ``n``-th most recent such sure event.

    Args:
        index: Index of the attached stream.
        nodes: Query nodes, ``int64 [B]``.
        before: Stream position bounding each query's history, ``int64 [B]``.
        n: Neighbours per query.
        num_layers: Attention layers.
        removable: Events some set may remove, ascending, ``int64 [U]``.
        removed: Events removed for every set, ``bool [E]``, or None.

    Returns:
        The nodes, sorted and distinct (``nodes`` included).
    """
    out = [np.asarray(nodes, dtype=np.int64)]
    q_n, q_b = out[0], np.asarray(before, dtype=np.int64)
    for _ in range(num_layers):
        if len(q_n) == 0:
            break
        m = n + len(removable)
        while True:
            nbr, eid, valid = index.recent_neighbors(q_n, q_b, m)
            e0 = np.where(valid, eid, 0)
            live = valid if removed is None else valid & ~removed[e0]
            j = np.minimum(np.searchsorted(removable, e0), max(len(removable) - 1, 0))
            maybe = (removable[j] == e0) if len(removable) else np.zeros_like(valid)
            sure = live & ~maybe
            if not ((sure.sum(axis=1) < n) & valid[:, 0]).any():
                break  # every query saw n sure events, or its whole history
            m *= 4
        # sure events strictly more recent than each entry
        newer = np.cumsum(sure[:, ::-1], axis=1)[:, ::-1] - sure
        rows, cols = np.nonzero(live & (newer < n))
        out.append(nbr[rows, cols])
        pairs = np.unique(np.stack([nbr[rows, cols], eid[rows, cols]], axis=1), axis=0)
        q_n, q_b = pairs[:, 0], pairs[:, 1]
    return np.unique(np.concatenate(out))
