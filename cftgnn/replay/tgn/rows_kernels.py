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

The other kernels (row lookups, ``last_kept``, ``revive_pairs``, ``groups``, ``key_groups``,
``remap_columns``, ``referenced``, ``move_rows``) are loops compiled by numba, each paired
with its NumPy twin (``cftgnn.jit.twins``: the same integers); ``row_steps`` holds the loops
of whole steps built on them.
``column_hits`` stays NumPy; the two scans whose hits are then worked on entry by entry,
``row_steps.mixed_pairs`` (``RowTable.split_mixed``) and ``revive_pairs``
(``RowTable.revive``), are compiled loops that do that work where they read the entry, in
the order of ``column_hits``. Two things made such a loop 2-4x slower than
``np.flatnonzero`` and the NumPy passes after it (measured 2026-11-27): a call of another compiled
function with arrays in its innermost loop (numba counts the arrays' references at every
call, even inlined), and a list grown inside the loop (the same, at every step); so the
lookup is written out there and the lists are allocated to their bounds, or to a few
entries first (``row_steps.mixed_pairs``, ``row_steps.split_pairs``, ``revive_pairs``: lists
of megabytes a call slowed the steps around it), a loop that fills them going on from where
it stopped, with longer lists, rather than scanning again. The compiled scans of whole
columns (those two, ``row_steps.split_pairs``, ``referenced``, ``remap_columns``) visit
only the entries the table's occupancy bitmap marks (``cftgnn.replay.tgn.occupancy``: a bit
per entry, set exactly where it holds a row), in the same order, rather than every entry of
the columns; their twins read every entry.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn import jit
from cftgnn.arrays import SMALL, as_int64
from cftgnn.data.index import concat_ranges
from cftgnn.models.tgn import other_endpoint
from cftgnn.replay.tgn.occupancy import Bits, lowest_bit, set_columns

IntArray = npt.NDArray[np.int64]

#: The pairs ``revive_pairs``' compiled loop makes room for at first (more: it goes on with
#: lists 16 times longer, from where it stopped).
FEW_REVIVED = 8192


def column_view(rowmap: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
    """The flat view of a column-major row map ``[P, C]``: entry ``(p, c)`` at ``c * P + p``
    (writes go to the map)."""
    # (the flag, not ``np.shares_memory``: a few microseconds a call, thousands of calls)
    assert rowmap.flags.f_contiguous, "the row map must be column-major (order='F')"
    return rowmap.T.reshape(-1)


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


def _lookup_numpy(rowmap: npt.NDArray[np.int32], columns: IntArray, p: IntArray, n: IntArray
                  ) -> IntArray:
    col = columns[n]
    out = np.full(len(n), -1, dtype=np.int64)
    has = np.flatnonzero(col >= 0)
    out[has] = column_view(rowmap)[map_at(len(rowmap), p[has], col[has])]
    return out


@jit.twins(numpy=_lookup_numpy)
def lookup(rowmap: npt.NDArray[np.int32], columns: IntArray, p: IntArray, n: IntArray
           ) -> IntArray:
    """Row of node ``n[m]`` under set ``p[m]`` in a column-major row map whose node ``n`` has
    column ``columns[n]`` (``-1``: none, then the answer is ``-1``), ``int64 [M]``."""
    return _lookup(column_view(rowmap), rowmap.shape[0], columns, as_int64(p), as_int64(n))


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


def _sender_rows_numpy(rowmap: npt.NDArray[np.int32], columns: IntArray, p: IntArray,
                       pend: IntArray, n: IntArray, src: IntArray, dst: IntArray) -> IntArray:
    out = np.full(len(p), -2, dtype=np.int64)
    has = np.flatnonzero(pend >= 0)
    out[has] = lookup(rowmap, columns, p[has], other_endpoint(src, dst, pend[has], n[has]))
    return out


@jit.twins(numpy=_sender_rows_numpy)
def sender_rows(rowmap: npt.NDArray[np.int32], columns: IntArray, p: IntArray,
                pend: IntArray, n: IntArray, src: IntArray, dst: IntArray) -> IntArray:
    """Row of the sender (``cftgnn.models.tgn.other_endpoint``) of node ``n[m]``'s pending
    event ``pend[m]`` under set ``p[m]``: ``-1`` for the recorded state, ``-2`` where there
    is no pending event (``pend[m] < 0``), ``int64 [M]``."""
    return _sender_rows(column_view(rowmap), rowmap.shape[0], columns, as_int64(p),
                        as_int64(pend), as_int64(n), src, dst)


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


def _last_kept_numpy(events: IntArray, inc_k: IntArray, inc_start: IntArray,
                     inc_end: IntArray, rem: npt.NDArray[np.bool_], p: IntArray, pos: IntArray
                     ) -> IntArray:
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


@jit.twins(numpy=_last_kept_numpy)
def last_kept(events: IntArray, inc_k: IntArray, inc_start: IntArray, inc_end: IntArray,
              rem: npt.NDArray[np.bool_], p: IntArray, pos: IntArray) -> IntArray:
    """``cftgnn.replay.tgn.trajectory.BatchRecord.last_kept``: the largest event of node
    ``pos[m]``'s incidences ``inc_k[inc_start[pos[m]]:inc_end[pos[m]]]`` that set ``p[m]``
    keeps (``rem [P, K]``), ``-1`` where it removes them all, ``int64 [M]``."""
    return _last_kept(events, inc_k, inc_start, inc_end, rem, as_int64(p), as_int64(pos))


@jit.compiled
def _revive_scan(view: npt.NDArray[np.int32], num_p: int, occupied: Bits, columns: IntArray,
                 sender_cols: IntArray, differs: npt.NDArray[np.bool_], start: IntArray,
                 count: IntArray, by_sender: IntArray, n: IntArray, at: int, bound: int
                 ) -> tuple[IntArray, IntArray, IntArray, int]:
    """``revive_pairs`` compiled, from entry ``at`` (``u * num_p + 64 w``, the start of a
    word) of the senders' columns, 64 sets at a time, by the words of ``occupied``: the
    sets where the sender holds a row and some receiver of it none, of those the sets whose
    sender row is one of ``differs`` (each read once), then for each receiver the sets of
    those where it holds no row (the sets whose receivers all hold a row already, most, are
    never read one by one, and where the sender's rows mostly do not differ each is read
    once, not once per receiver), up to ``bound`` pairs (the last value: the entry to go on from,
    ``len(sender_cols) * num_p`` when all were; ``bound`` must hold 64 sets of any one
    sender's receivers). (Lists are allocated to a bound, never grown in a loop: a list
    reassigned in the loop costs numba reference counting at every step.)"""
    out_p = np.empty(bound, dtype=np.int64)
    out_j = np.empty(bound, dtype=np.int64)
    out_r = np.empty(bound, dtype=np.int64)
    rows = np.empty(64, dtype=np.int64)  # the sender's rows of the word's sets
    m = 0
    first = at // num_p
    for u in range(first, len(sender_cols)):
        base = sender_cols[u] * num_p
        for w in range((at - first * num_p) >> 6 if u == first else 0, occupied.shape[1]):
            held = occupied[sender_cols[u], w]
            if held == np.uint64(0):
                continue
            word = np.uint64(0)  # the sets where some receiver holds no row
            for i in range(start[u], start[u] + count[u]):
                c = columns[n[by_sender[i]]]
                word |= held & ~occupied[c, w] if c >= 0 else held
            differ = np.uint64(0)  # of those, the sets whose sender row is one of differs
            while word != np.uint64(0):
                b = lowest_bit(word)
                word &= word - np.uint64(1)
                r = view[base + (w << 6) + b]
                if differs[r]:
                    rows[b] = r
                    differ |= np.uint64(1) << np.uint64(b)
            if differ == np.uint64(0):
                continue
            if m + 64 * count[u] > bound:
                return out_p[:m], out_j[:m], out_r[:m], u * num_p + (w << 6)
            for i in range(start[u], start[u] + count[u]):
                j = by_sender[i]
                c = columns[n[j]]
                word = differ  # of those, the sets where the receiver holds no row
                if c >= 0:
                    word &= ~occupied[c, w]
                while word != np.uint64(0):
                    b = lowest_bit(word)
                    word &= word - np.uint64(1)
                    out_p[m], out_j[m], out_r[m] = (w << 6) + b, j, rows[b]
                    m += 1
    return out_p[:m].copy(), out_j[:m].copy(), out_r[:m].copy(), len(sender_cols) * num_p


def revive_pairs(rowmap: npt.NDArray[np.int32], occupied: Bits, columns: IntArray,
                 differs: npt.NDArray[np.bool_], senders: IntArray, of: IntArray,
                 n: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """The pairs ``RowTable.revive`` gives rows: receiver ``j`` (node ``n[j]``, whose pending
    message comes from sender ``senders[of[j]]``) under set ``p`` where the sender holds a
    row of ``differs`` (``bool``, by row) and the receiver holds none. (The compiled loop
    visits only the entries of the senders' columns that ``occupied`` marks,
    ``cftgnn.replay.tgn.occupancy``; the twins read every entry.)

    Returns:
        ``(pp, jj, key)``: the set, the receiver and the sender's row under the set,
        ``int64``, sender by sender, then by 64 sets (``p // 64`` ascending), then receiver
        by receiver in the order of ``j``, sets ascending: so the pairs of one receiver are
        in the order of their sets, which is all its caller's grouping by (receiver, sender
        row) reads (``key_groups``: each group's first pair, the smallest set, and the
        groups in the order of their keys).
    """
    if rowmap.shape[0] == 1 and len(of) <= SMALL:  # one set, a few receivers: in Python
        return _one_set_pairs(rowmap, columns, differs, senders, of, n)
    by_sender = np.argsort(of, kind="stable")
    count = np.bincount(of, minlength=len(senders))
    start = np.cumsum(count) - count
    return _revived(rowmap, occupied, columns, differs, senders, of, n, by_sender, count, start)


def _revived_numpy(rowmap: npt.NDArray[np.int32], occupied: Bits, columns: IntArray,
                   differs: npt.NDArray[np.bool_], senders: IntArray, of: IntArray,
                   n: IntArray, by_sender: IntArray, count: IntArray, start: IntArray
                   ) -> tuple[IntArray, IntArray, IntArray]:
    pp, uu, rr = column_hits(rowmap, columns[senders], member=differs)
    if not len(pp):
        return pp, uu, rr
    reps = count[uu]
    pp, rr = np.repeat(pp, reps), np.repeat(rr, reps)
    jj = by_sender[concat_ranges(start[uu], start[uu] + reps)]
    unrowed = lookup(rowmap, columns, pp, n[jj]) < 0
    pp, jj, rr = pp[unrowed], jj[unrowed], rr[unrowed]
    order = np.lexsort((pp, jj, pp >> 6, of[jj]))  # the compiled loop's order (below)
    return pp[order], jj[order], rr[order]


@jit.twins(numpy=_revived_numpy)
def _revived(rowmap: npt.NDArray[np.int32], occupied: Bits, columns: IntArray,
             differs: npt.NDArray[np.bool_], senders: IntArray, of: IntArray, n: IntArray,
             by_sender: IntArray, count: IntArray, start: IntArray
             ) -> tuple[IntArray, IntArray, IntArray]:
    """``revive_pairs`` of more than one set or a few receivers (``by_sender``: ``count[u]``
    receivers of sender ``u`` from ``start[u]`` on), compiled: lists of a few thousand pairs
    first, 16 times longer at each overflow, the scan going on from where it stopped."""
    args = (column_view(rowmap), rowmap.shape[0], occupied, columns,
            as_int64(columns[senders]), differs, start, count, by_sender, as_int64(n))
    end = len(senders) * rowmap.shape[0]
    bound = max(FEW_REVIVED, 64 * int(count.max(initial=0)))
    *part, at = _revive_scan(*args, 0, bound)
    if at == end:
        pp, jj, key = part
        return pp, jj, key
    parts = [part]
    while at < end:
        bound *= 16
        *part, at = _revive_scan(*args, at, bound)
        parts.append(part)
    pp, jj, key = (np.concatenate(column) for column in zip(*parts, strict=True))
    return pp, jj, key


def _one_set_pairs(rowmap: npt.NDArray[np.int32], columns: IntArray,
                   differs: npt.NDArray[np.bool_], senders: IntArray, of: IntArray,
                   n: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """``revive_pairs`` of a row map of one set, a loop in Python over a few receivers
    (cheaper than the scans and the compiled loop's call on so few): the same pairs in the
    same order, sender by sender, each sender's receivers in the order of ``j``."""
    row = rowmap[0]
    held = row[columns[senders]].tolist()  # each sender's row (as ``column_hits`` reads it)
    target = columns[n].tolist()
    owner = of.tolist()
    jj: list[int] = []
    rr: list[int] = []
    for u, r in enumerate(held):
        if r < 0 or not differs[r]:
            continue
        for j, s in enumerate(owner):  # the receiver holds no row (or has no column)
            if s == u and (target[j] < 0 or row[target[j]] < 0):
                jj.append(j)
                rr.append(r)
    return (np.zeros(len(jj), dtype=np.int64), np.array(jj, dtype=np.int64),
            np.array(rr, dtype=np.int64))


def map_at(num_p: int, p: IntArray, c: IntArray) -> IntArray:
    """Positions of entries ``(p[m], c[m])`` of a column-major ``[num_p, C]`` row map in its
    ``column_view`` (a 1-D gather there is cheaper than a 2-D one in the map)."""
    return c * num_p + p


@jit.compiled
def hash_groups(key: npt.NDArray[np.int64]) -> tuple[IntArray, IntArray]:
    """``groups``, compiled: by an open-addressing hash table of the rows (linear probing), each row
    compared whole with its slot's group's first row: a collision costs a probe, never a
    wrong group; a row equal to the row before it is in that row's group at once."""
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
        if i > 0:  # a row equal to the one before is in its group (no hashing: the steps'
            same = True  # keys come in runs, sets of one key one after another)
            for c in range(k):
                if key[i - 1, c] != key[i, c]:
                    same = False
                    break
            if same:
                inverse[i] = inverse[i - 1]
                continue
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


def _groups_numpy(key: npt.NDArray[np.int64]) -> tuple[IntArray, IntArray]:
    m = len(key)
    if m == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
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


@jit.twins(numpy=_groups_numpy)
def groups(key: npt.NDArray[np.int64]) -> tuple[IntArray, IntArray]:
    """``(first, inverse)`` of the distinct rows of ``key [M, k]``, as
    ``cftgnn.arrays.distinct_rows`` gives them up to the numbering of the groups:
    ``first[g]`` is the first row of group ``g`` (the smallest index) and ``inverse[m]`` the
    group of row ``m``. Groups are numbered in the order of their first rows
    (``distinct_rows``: in the order of their keys' bytes), so only callers that use the
    partition and its first rows, not the numbers, may swap one for the other.

    A hash table of the rows in a compiled loop, every row proved equal to its group's first
    (the equality is exact, the hash only finds the candidate): one pass instead of a
    ``lexsort`` of ``k`` columns (``merge`` groups millions of rows per search;
    on UCI · TGN 54454, K = 3, its two groupings took 0.86 CPU s by ``lexsort``, ``np.unique``
    of the rows as bytes before that was slower still). The twin's groups are numbered in
    the order of their keys."""
    if len(key) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return hash_groups(np.ascontiguousarray(key, dtype=np.int64))


def sorted_groups(key: npt.NDArray[np.int64], order_by: tuple[npt.NDArray[Any], ...]
                  ) -> tuple[IntArray, IntArray]:
    """The groups of equal rows of ``key [M, k]`` in the order a stable ``np.lexsort`` of
    the rows by ``order_by`` (``lexsort``'s keys, the last one primary; equal exactly when
    the rows of ``key`` are) lists them: ``(heads, group)``, ``heads[g]`` the first row
    (smallest index) of the ``g``-th group in that order, ``group[m]`` the rank of row ``m``'s
    group. The same as sorting the rows and cutting the sorted list where the key changes,
    but only one row per group is sorted (``groups`` finds them by hashing).

    Where the primary key (``order_by[-1]``) strictly increases along the rows, as with one
    removal set (one row per node, listed by node), every row is a group of its own, in its
    place: ``(0, 1, ..., M - 1)`` twice, without hashing or sorting."""
    if _increasing(order_by[-1]):
        return np.arange(len(key), dtype=np.int64), np.arange(len(key), dtype=np.int64)
    first, inverse = groups(key)
    order = np.lexsort(tuple(k[first] for k in order_by))
    rank = np.empty(len(first), dtype=np.int64)
    rank[order] = np.arange(len(first), dtype=np.int64)
    return first[order], rank[inverse]


@jit.compiled
def _key_groups(key: npt.NDArray[np.int64], unsigned_from: int) -> tuple[IntArray, IntArray]:
    first, inverse = hash_groups(key)
    count = len(first)
    order = np.arange(count)
    values = np.empty(count, dtype=np.int64)
    for c in range(key.shape[1] - 1, -1, -1):  # stable sorts, the last column's first
        for i in range(count):
            values[i] = key[first[order[i]], c]
            if c >= unsigned_from:  # as uint64: the sign bit flipped keeps their order
                values[i] ^= np.int64(-9223372036854775808)
        order = order[np.argsort(values, kind="mergesort")]
    rank = np.empty(count, dtype=np.int64)
    for i in range(count):
        rank[order[i]] = i
    group = np.empty(len(inverse), dtype=np.int64)
    for m in range(len(inverse)):
        group[m] = rank[inverse[m]]
    return first[order], group


def key_groups(key: npt.NDArray[np.int64], unsigned_from: int | None = None
               ) -> tuple[IntArray, IntArray]:
    """``sorted_groups`` of the rows of ``key [M, k]`` in the order of their columns (the
    first primary; those from ``unsigned_from`` on compared as ``uint64``): the steps'
    groupings, each in one compiled call (hashing, then the groups' first rows sorted) where
    there are more than a few rows, else ``sorted_groups`` itself (the same answer)."""
    at = key.shape[1] if unsigned_from is None else unsigned_from
    if len(key) > SMALL:
        return _hashed_key_groups(key, at)
    return _key_groups_numpy(key, at)


def _key_groups_numpy(key: npt.NDArray[np.int64], unsigned_from: int
                      ) -> tuple[IntArray, IntArray]:
    columns = [key[:, c].view(np.uint64) if c >= unsigned_from else key[:, c]
               for c in range(key.shape[1])]
    return sorted_groups(key, tuple(columns[::-1]))


@jit.twins(numpy=_key_groups_numpy)
def _hashed_key_groups(key: npt.NDArray[np.int64], unsigned_from: int
                       ) -> tuple[IntArray, IntArray]:
    return _key_groups(np.ascontiguousarray(key, dtype=np.int64), unsigned_from)


def _increasing(values: npt.NDArray[Any]) -> bool:
    """Whether ``values`` strictly increase (checked in Python for a few, else by NumPy)."""
    if len(values) <= SMALL:
        v = values.tolist()
        return all(a < b for a, b in zip(v, v[1:], strict=False))
    return bool((values[1:] > values[:-1]).all())


@jit.compiled
def _referenced(view: npt.NDArray[np.int32], num_p: int, occupied: Bits, cols: IntArray,
                size: int) -> npt.NDArray[np.bool_]:
    out = np.zeros(size, dtype=np.bool_)
    for j in range(len(cols)):
        base = cols[j] * num_p
        for w in range(occupied.shape[1]):  # the entries holding a row only
            word = occupied[cols[j], w]
            while word != np.uint64(0):
                out[view[base + (w << 6) + lowest_bit(word)]] = True
                word &= word - np.uint64(1)
    return out


def _referenced_numpy(rowmap: npt.NDArray[np.int32], occupied: Bits, cols: IntArray,
                      size: int) -> npt.NDArray[np.bool_]:
    out = np.zeros(size, dtype=bool)
    out[column_hits(rowmap, cols)[2]] = True
    return out


@jit.twins(numpy=_referenced_numpy)
def referenced(rowmap: npt.NDArray[np.int32], occupied: Bits, cols: IntArray, size: int
               ) -> npt.NDArray[np.bool_]:
    """Which of rows ``0..size-1`` some entry of ``rowmap[:, cols]`` holds, ``bool [size]``
    (compiled: the entries ``occupied`` marks, ``cftgnn.replay.tgn.occupancy``)."""
    return _referenced(column_view(rowmap), rowmap.shape[0], occupied, as_int64(cols), size)


@jit.compiled
def _remap(view: npt.NDArray[np.int32], num_p: int, occupied: Bits, cols: IntArray,
           table: npt.NDArray[np.int32]) -> None:
    for j in range(len(cols)):
        base = cols[j] * num_p
        for w in range(occupied.shape[1]):  # the entries holding a row only
            word = occupied[cols[j], w]
            left = word
            while word != np.uint64(0):
                b = lowest_bit(word)
                low = word & (np.uint64(0) - word)
                word ^= low
                r = table[view[base + (w << 6) + b]]
                view[base + (w << 6) + b] = r
                if r < 0:  # the recorded state again: no row held
                    left ^= low
            occupied[cols[j], w] = left


def _remap_columns_numpy(rowmap: npt.NDArray[np.int32], occupied: Bits, cols: IntArray,
                         table: npt.NDArray[np.int32]) -> None:
    pp, jj, rr = column_hits(rowmap, cols)
    column_view(rowmap)[map_at(rowmap.shape[0], pp, cols[jj])] = table[rr]
    set_columns(rowmap, occupied, cols)


@jit.twins(numpy=_remap_columns_numpy)
def remap_columns(rowmap: npt.NDArray[np.int32], occupied: Bits, cols: IntArray,
                  table: npt.NDArray[np.int32]) -> None:
    """Rewrite in place every entry of ``rowmap[:, cols]`` that holds a row ``r`` to
    ``table[r]`` (``-1``: the recorded state again, its bit of ``occupied`` cleared), a
    compiled loop over the entries ``occupied`` marks (``cftgnn.replay.tgn.occupancy``; no
    list of the entries is made)."""
    _remap(column_view(rowmap), rowmap.shape[0], occupied, as_int64(cols), table)


@jit.compiled
def _move_rows(rows: npt.NDArray[Any], keep: IntArray) -> None:
    for i in range(len(keep)):
        k = keep[i]
        if k != i:
            for c in range(rows.shape[1]):
                rows[i, c] = rows[k, c]


def _move_rows_torch(mem: Tensor, keep: IntArray) -> None:
    mem[:len(keep)] = mem[torch.as_tensor(keep, device=mem.device)]


@jit.twins(numpy=_move_rows_torch, host=True)
def move_rows(mem: Tensor, keep: IntArray) -> None:
    """``mem[:len(keep)] = mem[keep]`` in place, for ``keep`` ascending with
    ``keep[i] >= i`` (a compaction's rows kept: each row moves down over rows already
    moved or dropped), without a gathered copy (on the CPU: a compiled loop; the twin, a
    gather by torch on ``mem``'s device)."""
    _move_rows(mem.numpy(), as_int64(keep))


__all__ = ["column_hits", "column_view", "groups", "hash_groups", "key_groups", "last_kept",
           "lookup", "map_at", "move_rows", "referenced", "remap_columns", "revive_pairs",
           "sender_rows", "sorted_groups"]
