"""Array kernels of ``cftgnn.replay.tgn.rows.RowTable``: scans of its row map by column.

The row map ``rowmap [P, C]`` is stored column-major (``order="F"``): the batch steps read
every set's row of a few nodes, which is then a few contiguous runs of memory rather than
``P`` strided reads per column. ``rowmap.T`` is a C-contiguous ``[C, P]`` view of the same
memory, and ``column_view`` its flat view, in which entry ``(p, c)`` sits at ``c * P + p``.

The scans return their hits **column by column, sets ascending within a column** (the
order of ``np.nonzero`` on the transposed block), not set by set as ``np.nonzero`` on
``rowmap[:, cols]`` would. Every caller groups its hits by a key that fixes the column (a
row, a receiver) and breaks ties by a stable sort, so within a group the order is by set in
both, and the result is the same bit for bit; ``np.flatnonzero`` with a division is several
times faster than ``np.nonzero`` on a 2-D block, and nothing is sorted.

The other kernels (row lookups, ``last_kept``, ``mixed_pairs``, ``revive_pairs``,
``groups``, ``remap_columns``) are loops compiled by numba (``cftgnn.jit``), each with a
NumPy twin that runs where numba is absent (``jit.ENABLED``) and gives the same integers.
``column_hits`` stays NumPy; the two scans whose hits are then worked on entry by entry,
``mixed_pairs`` (``RowTable.split_mixed``) and ``revive_pairs`` (``RowTable.revive``), are
compiled loops that do that work where they read the entry, in the order of
``column_hits``. Two things made such a loop 2-4x slower than ``np.flatnonzero`` and the
NumPy passes after it (issue 44): a call of another compiled function with arrays in its
innermost loop (numba counts the arrays' references at every call, even inlined), and a
list grown inside the loop (the same, at every step); so the lookup is written out there
and the lists are allocated to their bounds (only the pages written are touched).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from cftgnn import jit
from cftgnn.data.index import concat_ranges
from cftgnn.models.tgn import other_endpoint

IntArray = npt.NDArray[np.int64]

#: The pairs ``mixed_pairs``' compiled loop makes room for at first (more: it runs again).
FEW_PAIRS = 256


def column_view(rowmap: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
    """The flat view of a column-major row map ``[P, C]``: entry ``(p, c)`` at ``c * P + p``
    (writes go to the map)."""
    flat = rowmap.T.reshape(-1)
    assert np.shares_memory(flat, rowmap), "the row map must be column-major (order='F')"
    return flat


def column_hits(rowmap: npt.NDArray[np.int32], cols: npt.NDArray[np.int64],
                member: npt.NDArray[np.bool_] | None = None,
                also: npt.NDArray[np.bool_] | None = None) -> tuple[IntArray, IntArray, IntArray]:
    """The entries of ``rowmap[:, cols]`` that hold a row (``>= 0``), or only a row of
    ``member`` (``bool [size]``, by row), or else whose ``also [P, k]`` is true.

    Returns:
        ``(pp, jj, rr)``: each hit's set, index into ``cols`` and row (``-1`` where only
        ``also`` holds), ``int64``, column by column (see the module docstring).
    """
    num_p = rowmap.shape[0]
    block = rowmap.T[cols].reshape(-1)  # [k * P]: column j's sets at j * P + p
    if also is None:
        hit = np.flatnonzero(block >= 0)
        if member is not None:
            hit = hit[member[block[hit]]]
    else:
        assert member is None, "member and also are not combined"
        hit = np.flatnonzero((block >= 0) | also.T.reshape(-1))
    jj, pp = np.divmod(hit, num_p)
    return pp, jj, block[hit].astype(np.int64)


@jit.compiled
def _row_at(view: npt.NDArray[np.int32], num_p: int, columns: IntArray, node: int,
            p: int) -> int:
    """The compiled loops' one lookup: node ``node``'s row under set ``p``, ``-1`` where
    the node has no column (``lookup`` for one entry). (The scans of whole columns,
    ``_mixed_pairs`` and ``_revive_scan``, write it out: a call of a compiled function
    with arrays in their innermost loop made them 3x slower.)"""
    c = columns[node]
    return -1 if c < 0 else int(view[c * num_p + p])


@jit.compiled
def _lookup(view: npt.NDArray[np.int32], num_p: int, columns: IntArray, p: IntArray,
            n: IntArray) -> IntArray:
    out = np.empty(len(n), dtype=np.int64)
    for m in range(len(n)):
        out[m] = _row_at(view, num_p, columns, n[m], p[m])
    return out


def lookup(rowmap: npt.NDArray[np.int32], columns: IntArray, p: IntArray, n: IntArray
           ) -> IntArray:
    """Row of node ``n[m]`` under set ``p[m]`` in a column-major row map whose node ``n`` has
    column ``columns[n]`` (``-1``: none, then the answer is ``-1``), ``int64 [M]``."""
    if jit.ENABLED:
        return _lookup(column_view(rowmap), rowmap.shape[0], columns, _i64(p), _i64(n))
    col = columns[n]
    out = np.full(len(n), -1, dtype=np.int64)
    has = np.flatnonzero(col >= 0)
    out[has] = column_view(rowmap)[map_at(len(rowmap), p[has], col[has])]
    return out


@jit.compiled
def _sender_rows(view: npt.NDArray[np.int32], num_p: int, columns: IntArray, p: IntArray,
                 pend: IntArray, n: IntArray, src: IntArray, dst: IntArray) -> IntArray:
    out = np.empty(len(p), dtype=np.int64)
    for m in range(len(p)):
        e = pend[m]
        if e < 0:
            out[m] = -2
            continue
        o = dst[e] if src[e] == n[m] else src[e]  # models.tgn.other_endpoint
        out[m] = _row_at(view, num_p, columns, o, p[m])
    return out


def sender_rows(rowmap: npt.NDArray[np.int32], columns: IntArray, p: IntArray,
                pend: IntArray, n: IntArray, src: IntArray, dst: IntArray) -> IntArray:
    """Row of the sender (``cftgnn.models.tgn.other_endpoint``) of node ``n[m]``'s pending
    event ``pend[m]`` under set ``p[m]``: ``-1`` for the recorded state, ``-2`` where there
    is no pending event (``pend[m] < 0``), ``int64 [M]``."""
    if jit.ENABLED:
        return _sender_rows(column_view(rowmap), rowmap.shape[0], columns, _i64(p), _i64(pend),
                            _i64(n), src, dst)
    out = np.full(len(p), -2, dtype=np.int64)
    has = np.flatnonzero(pend >= 0)
    out[has] = lookup(rowmap, columns, p[has], other_endpoint(src, dst, pend[has], n[has]))
    return out


@jit.compiled
def _last_kept(events: IntArray, inc_k: IntArray, inc_start: IntArray, inc_end: IntArray,
               rem: npt.NDArray[np.bool_], p: IntArray, pos: IntArray) -> IntArray:
    out = np.empty(len(p), dtype=np.int64)
    for m in range(len(p)):
        out[m] = -1
        # a node's incidences are ascending, and so are the events: the last kept is the first
        # kept from the end (most often the node's last event, which most sets keep)
        for i in range(inc_end[pos[m]] - 1, inc_start[pos[m]] - 1, -1):
            if not rem[p[m], inc_k[i]]:
                out[m] = events[inc_k[i]]
                break
    return out


def last_kept(events: IntArray, inc_k: IntArray, inc_start: IntArray, inc_end: IntArray,
              rem: npt.NDArray[np.bool_], p: IntArray, pos: IntArray) -> IntArray:
    """``cftgnn.replay.tgn.trajectory.BatchRecord.last_kept``: the largest event of node
    ``pos[m]``'s incidences ``inc_k[inc_start[pos[m]]:inc_end[pos[m]]]`` that set ``p[m]``
    keeps (``rem [P, K]``), ``-1`` where it removes them all, ``int64 [M]``."""
    if jit.ENABLED:
        return _last_kept(events, inc_k, inc_start, inc_end, rem, _i64(p), _i64(pos))
    # the node's last event, unless the set removes it (rare: the rest scan every event)
    out = events[inc_k[inc_end[pos] - 1]]
    slow = np.flatnonzero(rem[p, inc_k[inc_end[pos] - 1]])
    if len(slow):
        ps, starts, ends = p[slow], inc_start[pos[slow]], inc_end[pos[slow]]
        lens = ends - starts
        kk = inc_k[concat_ranges(starts, ends)]
        owner = np.repeat(np.arange(len(ps)), lens)
        val = np.where(~rem[ps[owner], kk], events[kk], -1)
        out[slow] = np.maximum.reduceat(val, np.cumsum(lens) - lens)  # segments not empty
    return out


@jit.compiled
def _revive_scan(view: npt.NDArray[np.int32], num_p: int, columns: IntArray,
                 sender_cols: IntArray, differs: npt.NDArray[np.bool_], start: IntArray,
                 count: IntArray, by_sender: IntArray, n: IntArray
                 ) -> tuple[IntArray, IntArray, IntArray]:
    """``revive_pairs`` compiled: each sender's column scanned for rows of ``differs`` (the
    hits of ``column_hits`` with ``member``, in its order, kept as their positions), then
    each hit's receivers looked up. (Lists are allocated to their bounds, never grown in a
    loop: a list reassigned in the loop costs numba reference counting at every step.)"""
    hits = np.empty(len(sender_cols) * num_p, dtype=np.int64)
    h = 0
    bound = 0
    for u in range(len(sender_cols)):
        base = sender_cols[u] * num_p
        for p in range(num_p):
            r = view[base + p]
            if r >= 0 and differs[r]:
                hits[h] = u * num_p + p
                h += 1
                bound += count[u]
    out_p = np.empty(bound, dtype=np.int64)
    out_j = np.empty(bound, dtype=np.int64)
    out_r = np.empty(bound, dtype=np.int64)
    m = 0
    for k in range(h):
        u = hits[k] // num_p
        p = hits[k] - u * num_p
        r = view[sender_cols[u] * num_p + p]
        for i in range(start[u], start[u] + count[u]):
            j = by_sender[i]
            c = columns[n[j]]  # _row_at, written out
            if c < 0 or view[c * num_p + p] < 0:
                out_p[m], out_j[m], out_r[m] = p, j, r
                m += 1
    return out_p[:m], out_j[:m], out_r[:m]


def revive_pairs(rowmap: npt.NDArray[np.int32], columns: IntArray,
                 differs: npt.NDArray[np.bool_], senders: IntArray, of: IntArray,
                 n: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """The pairs ``RowTable.revive`` gives rows: receiver ``j`` (node ``n[j]``, whose pending
    message comes from sender ``senders[of[j]]``) under set ``p`` where the sender holds a
    row of ``differs`` (``bool``, by row) and the receiver holds none.

    Returns:
        ``(pp, jj, key)``: the set, the receiver and the sender's row under the set,
        ``int64``, in the order of ``column_hits`` over the senders' columns (sender by
        sender, sets ascending), each hit followed by its sender's receivers in the order of
        ``j``.
    """
    by_sender = np.argsort(of, kind="stable")
    count = np.bincount(of, minlength=len(senders))
    start = np.cumsum(count) - count
    if jit.ENABLED:
        return _revive_scan(column_view(rowmap), rowmap.shape[0], columns,
                            _i64(columns[senders]), differs, start, count, by_sender, _i64(n))
    pp, uu, rr = column_hits(rowmap, columns[senders], member=differs)
    if not len(pp):
        return pp, uu, rr
    reps = count[uu]
    pp, rr = np.repeat(pp, reps), np.repeat(rr, reps)
    jj = by_sender[concat_ranges(start[uu], start[uu] + reps)]
    unrowed = lookup(rowmap, columns, pp, n[jj]) < 0
    return pp[unrowed], jj[unrowed], rr[unrowed]


@jit.compiled
def _new_pending(row_n: IntArray, alive: npt.NDArray[np.bool_], rep: IntArray, pend: IntArray,
                 size: int, read: npt.NDArray[np.bool_], loc: IntArray, events: IntArray,
                 inc_k: IntArray, inc_start: IntArray, inc_end: IntArray,
                 rem: npt.NDArray[np.bool_], touched: npt.NDArray[np.bool_]) -> None:
    for q in range(size):
        node = row_n[q]
        if not alive[q] or not read[node]:
            continue
        pos = loc[node]
        if pos < 0 or inc_end[pos] <= inc_start[pos]:
            continue
        last = inc_end[pos] - 1  # _last_kept for the row's representative set (written out)
        e = -1
        if not touched[inc_k[last]]:
            e = events[inc_k[last]]
        else:
            for i in range(last, inc_start[pos] - 1, -1):
                if not rem[rep[q], inc_k[i]]:
                    e = events[inc_k[i]]
                    break
        pend[q] = e


def new_pending(row_n: IntArray, alive: npt.NDArray[np.bool_], rep: IntArray, pend: IntArray,
                size: int, read: npt.NDArray[np.bool_], loc: IntArray, events: IntArray,
                inc_k: IntArray, inc_start: IntArray, inc_end: IntArray,
                rem: npt.NDArray[np.bool_], touched: npt.NDArray[np.bool_]) -> None:
    """``RowTable.new_pending``: every live row ``q < size`` whose node's later state is
    read (``read``, by node) and has events in the batch (position ``loc``) gets as pending
    event (``pend``, written in place) the last of them its representative set keeps
    (``last_kept`` over ``events``, ``inc_k``, ``inc_start``, ``inc_end``, ``rem``;
    ``touched`` as for ``mixed_pairs``). One pass over the rows, compiled."""
    if jit.ENABLED:
        _new_pending(row_n, alive, rep, pend, size, read, loc, events, inc_k, inc_start,
                     inc_end, rem, touched)
        return
    node = row_n[:size]
    at = np.where(read[node] & alive[:size], loc[node], -1)
    r = np.flatnonzero(at >= 0)
    r = r[inc_end[at[r]] > inc_start[at[r]]]  # nodes with events in the batch
    if len(r):
        pend[r] = last_kept(events, inc_k, inc_start, inc_end, rem, rep[r], at[r])


@jit.compiled
def _mixed_pairs(view: npt.NDArray[np.int32], num_p: int, columns: IntArray, cols: IntArray,
                 is_m: npt.NDArray[np.bool_], row_n: IntArray, row_pend: IntArray,
                 mine: IntArray, loc: IntArray, events: IntArray, inc_k: IntArray,
                 inc_start: IntArray, inc_end: IntArray, rem: npt.NDArray[np.bool_],
                 touched: npt.NDArray[np.bool_], src: IntArray, dst: IntArray, bound: int
                 ) -> tuple[IntArray, IntArray, IntArray, IntArray, bool]:
    """``mixed_pairs`` in one pass over the columns: each hit's message (``_last_kept``, the
    node's last event at once where no set removes it) and sender row (``_sender_rows``)
    found where it is read; the pairs that move (few: most batches move none) are listed,
    with their values, as they are found, up to ``bound`` of them (the last value: whether
    all were)."""
    out_p = np.empty(bound, dtype=np.int64)
    out_r = np.empty(bound, dtype=np.int64)
    out_e = np.empty(bound, dtype=np.int64)
    out_s = np.empty(bound, dtype=np.int64)
    m = 0
    for j in range(len(cols)):
        base = cols[j] * num_p
        for p in range(num_p):
            r = view[base + p]
            if r < 0 or not is_m[r]:
                continue
            node = row_n[r]
            pos = loc[node]
            last = inc_end[pos] - 1
            e = -1
            if not touched[inc_k[last]]:
                e = events[inc_k[last]]
            else:
                for i in range(last, inc_start[pos] - 1, -1):
                    if not rem[p, inc_k[i]]:
                        e = events[inc_k[i]]
                        break
            sender = -2
            if e >= 0:  # _row_at, written out
                c = columns[dst[e] if src[e] == node else src[e]]
                sender = -1 if c < 0 else view[c * num_p + p]
            if e != row_pend[r] or sender != mine[r]:
                if m == bound:
                    return out_p, out_r, out_e, out_s, False
                out_p[m], out_r[m], out_e[m], out_s[m] = p, r, e, sender
                m += 1
    return out_p[:m].copy(), out_r[:m].copy(), out_e[:m].copy(), out_s[:m].copy(), True


def mixed_pairs(rowmap: npt.NDArray[np.int32], columns: IntArray, cols: IntArray,
                is_m: npt.NDArray[np.bool_], row_n: IntArray, row_pend: IntArray,
                mine: IntArray, loc: IntArray, events: IntArray, inc_k: IntArray,
                inc_start: IntArray, inc_end: IntArray, rem: npt.NDArray[np.bool_],
                touched: npt.NDArray[np.bool_], src: IntArray, dst: IntArray
                ) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """The (set, row) pairs ``RowTable.split_mixed`` moves: entries of ``rowmap[:, cols]``
    holding a row of ``is_m`` (``bool``, by row; the last entry stands for ``-1``) whose set's
    message differs from the row's kept one (``row_pend``) or whose message's sender row
    differs from the row's own (``mine``, by row). A set's message is the last event of the
    row's node (``row_n``; its position in the batch ``loc``) that it keeps (``last_kept``
    over ``events``, ``inc_k``, ``inc_start``, ``inc_end``, ``rem [P, K]``; ``touched``,
    ``bool [K]``, is true for every event of the batch some set removes, or more), its
    sender row as ``sender_rows`` gives it (``-2`` for no message).

    Returns:
        ``(pp, rr, pend, sender)``: each moved pair's set, row, message and sender row,
        ``int64``, in the order of ``column_hits`` (column by column, sets ascending).
    """
    if jit.ENABLED:
        # lists of a few pairs first (most batches move none), of every entry if they overflow:
        # lists of every entry at once (megabytes a call) slowed the steps around this one
        args = (column_view(rowmap), rowmap.shape[0], columns, _i64(cols), is_m, row_n,
                row_pend, mine, loc, events, inc_k, inc_start, inc_end, rem, touched, src, dst)
        *out, done = _mixed_pairs(*args, min(FEW_PAIRS, len(cols) * rowmap.shape[0]))
        if not done:
            *out, done = _mixed_pairs(*args, len(cols) * rowmap.shape[0])
        pp, rr, pend, sender = out
        return pp, rr, pend, sender
    pp, _, rr = column_hits(rowmap, cols, member=is_m)
    n = row_n[rr]
    pend = last_kept(events, inc_k, inc_start, inc_end, rem, pp, loc[n])
    sender = sender_rows(rowmap, columns, pp, pend, n, src, dst)
    off = np.flatnonzero((pend != row_pend[rr]) | (sender != mine[rr]))
    return pp[off], rr[off], pend[off], sender[off]


def map_at(num_p: int, p: IntArray, c: IntArray) -> IntArray:
    """Positions of entries ``(p[m], c[m])`` of a column-major ``[num_p, C]`` row map in its
    ``column_view`` (a 1-D gather there is cheaper than a 2-D one in the map)."""
    return c * num_p + p


@jit.compiled
def _groups(key: npt.NDArray[np.int64]) -> tuple[IntArray, IntArray]:
    """``groups`` by an open-addressing hash table of the rows (linear probing), each row
    compared whole with its slot's group's first row: a collision costs a probe, never a
    wrong group."""
    m, k = key.shape
    cap = 2
    while cap < 2 * m:
        cap *= 2
    mask = np.uint64(cap - 1)
    table = np.full(cap, -1, dtype=np.int64)  # slot -> group
    first = np.empty(m, dtype=np.int64)
    inverse = np.empty(m, dtype=np.int64)
    count = 0
    for i in range(m):
        h = np.uint64(0x9E3779B97F4A7C15)
        for c in range(k):  # a multiply-xorshift mix of the columns' bits
            h = (h ^ np.uint64(key[i, c])) * np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(31)
        slot = np.int64(h & mask)
        while True:
            g = table[slot]
            if g < 0:  # a new key: row i is its group's first
                table[slot] = count
                first[count] = i
                inverse[i] = count
                count += 1
                break
            f = first[g]
            same = True
            for c in range(k):
                if key[f, c] != key[i, c]:
                    same = False
                    break
            if same:
                inverse[i] = g
                break
            slot = np.int64((np.uint64(slot) + np.uint64(1)) & mask)
    return first[:count].copy(), inverse


def groups(key: npt.NDArray[np.int64]) -> tuple[IntArray, IntArray]:
    """``(first, inverse)`` of the distinct rows of ``key [M, k]``, as
    ``cftgnn.arrays.distinct_rows`` gives them up to the numbering of the groups:
    ``first[g]`` is the first row of group ``g`` (the smallest index) and ``inverse[m]`` the
    group of row ``m``. Groups are numbered in the order of their first rows
    (``distinct_rows``: in the order of their keys' bytes), so only callers that use the
    partition and its first rows, not the numbers, may swap one for the other.

    A hash table of the rows in a compiled loop, every row proved equal to its group's first
    (the equality is exact, the hash only finds the candidate): one pass instead of a
    ``lexsort`` of ``k`` columns (issue 44: ``merge`` groups millions of rows per search;
    on UCI · TGN 54454, K = 3, its two groupings took 0.86 CPU s by ``lexsort``, ``np.unique``
    of the rows as bytes before that was slower still)."""
    m = len(key)
    if m == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if jit.ENABLED:
        return _groups(np.ascontiguousarray(key, dtype=np.int64))
    # without numba: a stable lexsort of the columns (ties keep their order, the first row
    # leads), the groups then numbered in the order of their keys
    order = np.lexsort(key.T[::-1])
    ranked = key[order]
    head = np.empty(m, dtype=bool)
    head[0] = True
    np.any(ranked[1:] != ranked[:-1], axis=1, out=head[1:])
    inverse = np.empty(m, dtype=np.int64)
    inverse[order] = np.cumsum(head) - 1
    return order[head], inverse


@jit.compiled
def merge_groups(r: IntArray, row_n: IntArray, mem_bits: npt.NDArray[np.integer],
                 mem_eq: npt.NDArray[np.bool_], checked: npt.NDArray[np.bool_],
                 lu_bits: IntArray, pend: IntArray, rep: IntArray, need: IntArray, x: int,
                 view: npt.NDArray[np.int32], num_p: int, columns: IntArray, src: IntArray,
                 dst: IntArray, size: int) -> tuple[IntArray, IntArray, IntArray]:
    """``RowTable.merge``'s groups of rows ``r`` with equal states, compiled (with the
    rows' memory on the CPU, read in place as bits, ``mem_bits [capacity, d]``): the rows
    of nodes with several rows among ``r``, and ``(head, group)`` of ``groups`` over their
    keys (node, memory identity, last-update time ``lu_bits``, pending event, the
    sender's memory identity), each step as ``merge``'s NumPy code takes it. The memory
    identity is ``-1`` for a row ``checked`` and ``mem_eq`` (the recorded memory), else its
    group by (node, two leading coordinates) where the row equals that group's first row
    bit for bit in a group of several, else the row's own (``size + row``); the sender's
    is the identity of the row of the sender of the row's pending event under its
    representative set (``-1`` where the sender holds the recorded state, or the event is
    not applied next: ``need[node] <= x``).

    Returns:
        ``(rows, head, group)``: the rows kept, ``int64``, and the groups over them.
    """
    count = np.zeros(len(columns), dtype=np.int64)  # rows per node
    for i in range(len(r)):
        count[row_n[r[i]]] += 1
    m = 0
    for i in range(len(r)):
        m += count[row_n[r[i]]] > 1
    rows = np.empty(m, dtype=np.int64)
    m = 0
    for i in range(len(r)):
        if count[row_n[r[i]]] > 1:  # only nodes with several rows can merge
            rows[m] = r[i]
            m += 1
    mem_id = np.empty(size, dtype=np.int64)
    for q in range(size):
        mem_id[q] = -1 if checked[q] and mem_eq[q] else size + q
    nd = 0
    for i in range(m):
        nd += not mem_eq[rows[i]]
    d = np.empty(nd, dtype=np.int64)  # rows whose memory is not the recorded one
    lead = np.empty((nd, 3), dtype=np.int64)
    k = 0
    for i in range(m):
        q = rows[i]
        if not mem_eq[q]:
            d[k] = q
            lead[k, 0], lead[k, 1], lead[k, 2] = row_n[q], mem_bits[q, 0], mem_bits[q, 1]
            k += 1
    first, inv = _groups(lead)
    size_of = np.zeros(len(first), dtype=np.int64)
    for i in range(nd):
        size_of[inv[i]] += 1
    for i in range(nd):
        if size_of[inv[i]] > 1:  # the whole row, until its first differing coordinate
            a, b = d[i], d[first[inv[i]]]
            same = True
            for c in range(mem_bits.shape[1]):
                if mem_bits[a, c] != mem_bits[b, c]:
                    same = False
                    break
            if same:
                mem_id[a] = inv[i]
    key = np.empty((m, 5), dtype=np.int64)
    for i in range(m):
        q = rows[i]
        node = row_n[q]
        e = pend[q] if need[node] > x else -1
        sid = -1
        if e >= 0:  # the sender's row, as sender_rows finds it (written out)
            c = columns[dst[e] if src[e] == node else src[e]]
            ro = -1 if c < 0 else view[c * num_p + rep[q]]
            if ro >= 0:
                sid = mem_id[ro]
        key[i, 0], key[i, 1], key[i, 2] = node, mem_id[q], lu_bits[q]
        key[i, 3], key[i, 4] = pend[q], sid
    head, group = _groups(key)
    return rows, head, group


def sorted_groups(key: npt.NDArray[np.int64], order_by: tuple[npt.NDArray[Any], ...]
                  ) -> tuple[IntArray, IntArray]:
    """The groups of equal rows of ``key [M, k]`` in the order a stable ``np.lexsort`` of
    the rows by ``order_by`` (``lexsort``'s keys, the last one primary; equal exactly when
    the rows of ``key`` are) lists them: ``(heads, group)``, ``heads[g]`` the first row
    (smallest index) of the ``g``-th group in that order, ``group[m]`` the rank of row ``m``'s
    group. The same as sorting the rows and cutting the sorted list where the key changes,
    but only one row per group is sorted (``groups`` finds them by hashing)."""
    first, inverse = groups(key)
    order = np.lexsort(tuple(k[first] for k in order_by))
    rank = np.empty(len(first), dtype=np.int64)
    rank[order] = np.arange(len(first), dtype=np.int64)
    return first[order], rank[inverse]


@jit.compiled
def _referenced(view: npt.NDArray[np.int32], num_p: int, cols: IntArray, size: int
                ) -> npt.NDArray[np.bool_]:
    out = np.zeros(size, dtype=np.bool_)
    for j in range(len(cols)):
        base = cols[j] * num_p
        for p in range(num_p):
            r = view[base + p]
            if r >= 0:
                out[r] = True
    return out


def referenced(rowmap: npt.NDArray[np.int32], cols: IntArray, size: int
               ) -> npt.NDArray[np.bool_]:
    """Which of rows ``0..size-1`` some entry of ``rowmap[:, cols]`` holds, ``bool [size]``
    (one pass over the columns' memory)."""
    if jit.ENABLED:
        return _referenced(column_view(rowmap), rowmap.shape[0], _i64(cols), size)
    out = np.zeros(size, dtype=bool)
    out[column_hits(rowmap, cols)[2]] = True
    return out


@jit.compiled
def _unique_inverse(key: IntArray, lo: int, hi: int) -> tuple[IntArray, IntArray]:
    seen = np.zeros(hi - lo, dtype=np.int64)  # by value: 1 where present, then its rank + 1
    for v in key:
        seen[v - lo] = 1
    count = 0
    for i in range(hi - lo):
        if seen[i]:
            count += 1
            seen[i] = count
    uniq = np.empty(count, dtype=np.int64)
    for i in range(hi - lo):
        if seen[i]:
            uniq[seen[i] - 1] = lo + i
    inverse = np.empty(len(key), dtype=np.int64)
    for m in range(len(key)):
        inverse[m] = seen[key[m] - lo] - 1
    return uniq, inverse


def unique_inverse(key: IntArray, lo: int, hi: int) -> tuple[IntArray, IntArray]:
    """``np.unique(key, return_inverse=True)`` for integers in ``[lo, hi)``: the distinct
    values ascending and each entry's index among them, ``int64``; compiled, by marking
    the values in a table of the range instead of sorting (``RowTable.other_memory``:
    the range is the batch's recorded rows and the table's rows, a few thousand)."""
    if jit.ENABLED:
        return _unique_inverse(_i64(key), lo, hi)
    uniq, inverse = np.unique(key, return_inverse=True)
    return uniq.astype(np.int64), inverse.reshape(-1).astype(np.int64)


@jit.compiled
def _remap(view: npt.NDArray[np.int32], num_p: int, cols: IntArray,
           table: npt.NDArray[np.int32]) -> None:
    for j in range(len(cols)):
        base = cols[j] * num_p
        for p in range(num_p):
            r = view[base + p]
            if r >= 0:
                view[base + p] = table[r]


def remap_columns(rowmap: npt.NDArray[np.int32], cols: IntArray,
                  table: npt.NDArray[np.int32]) -> None:
    """Rewrite in place every entry of ``rowmap[:, cols]`` that holds a row ``r`` to
    ``table[r]`` (``-1``: the recorded state again), one pass over the columns' contiguous
    memory (a compiled loop: no list of the entries is made)."""
    if jit.ENABLED:
        _remap(column_view(rowmap), rowmap.shape[0], _i64(cols), table)
        return
    pp, jj, rr = column_hits(rowmap, cols)
    column_view(rowmap)[map_at(rowmap.shape[0], pp, cols[jj])] = table[rr]


def _i64(a: npt.NDArray[np.integer]) -> IntArray:
    """``a`` as ``int64`` (a copy only when it is of another type): one compiled kernel."""
    return np.asarray(a, dtype=np.int64)


__all__ = ["column_hits", "column_view", "groups", "last_kept", "lookup", "map_at",
           "merge_groups", "mixed_pairs", "new_pending", "referenced", "remap_columns",
           "revive_pairs", "sender_rows", "sorted_groups", "unique_inverse"]
