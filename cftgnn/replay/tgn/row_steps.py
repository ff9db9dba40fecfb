"""Compiled loops of whole steps of ``cftgnn.replay.tgn.rows.RowTable`` (for fewer
NumPy passes per batch), built on the kernels of ``cftgnn.replay.tgn.rows_kernels`` (whose
module docstring says how their loops are written, and why): ``new_pending``,
``split_pairs`` (``RowTable.split``), ``mixed_rows`` and ``mixed_pairs``
(``RowTable.split_mixed``), ``revive_receivers`` (``RowTable.revive``) and ``unique_inverse``
(``RowTable.other_memory``). Each is paired with its NumPy twin, the steps' code before
(``cftgnn.jit.twins``, which decides which runs), that gives the same integers in the same
order, so the logits are the same bit for bit either way. (``merge``'s groups:
``cftgnn.replay.tgn.merge_steps``.)
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cftgnn import jit
from cftgnn.arrays import SMALL, as_int64, unique
from cftgnn.data.index import concat_ranges
from cftgnn.models.tgn import other_endpoint
from cftgnn.replay.tgn.occupancy import Bits, lowest_bit
from cftgnn.replay.tgn.rows_kernels import (
    column_hits,
    column_view,
    last_kept,
    sender_rows,
)
from cftgnn.replay.tgn.trajectory import BatchRecord

IntArray = npt.NDArray[np.int64]
Words = npt.NDArray[np.uint64]

#: The pairs ``split_pairs``' compiled loop makes room for at first (more: as ``FEW_PAIRS``).
FEW_SPLIT = 8192

#: The pairs ``mixed_pairs``' compiled loop makes room for at first (more: it goes on with
#: lists 16 times longer, from where it stopped).
FEW_PAIRS = 256


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


def _new_pending_numpy(row_n: IntArray, alive: npt.NDArray[np.bool_], rep: IntArray,
                       pend: IntArray, size: int, read: npt.NDArray[np.bool_], loc: IntArray,
                       events: IntArray, inc_k: IntArray, inc_start: IntArray,
                       inc_end: IntArray, rem: npt.NDArray[np.bool_],
                       touched: npt.NDArray[np.bool_]) -> None:
    node = row_n[:size]
    at = np.where(read[node] & alive[:size], loc[node], -1)
    r = np.flatnonzero(at >= 0)
    r = r[inc_end[at[r]] > inc_start[at[r]]]  # nodes with events in the batch
    if len(r):
        pend[r] = last_kept(events, inc_k, inc_start, inc_end, rem, rep[r], at[r])


@jit.twins(numpy=_new_pending_numpy)
def new_pending(row_n: IntArray, alive: npt.NDArray[np.bool_], rep: IntArray, pend: IntArray,
                size: int, read: npt.NDArray[np.bool_], loc: IntArray, events: IntArray,
                inc_k: IntArray, inc_start: IntArray, inc_end: IntArray,
                rem: npt.NDArray[np.bool_], touched: npt.NDArray[np.bool_]) -> None:
    """``RowTable.new_pending``: every live row ``q < size`` whose node's later state is
    read (``read``, by node) and has events in the batch (position ``loc``) gets as pending
    event (``pend``, written in place) the last of them its representative set keeps
    (``last_kept`` over ``events``, ``inc_k``, ``inc_start``, ``inc_end``, ``rem``;
    ``touched`` as for ``mixed_pairs``). One pass over the rows, compiled."""
    _new_pending(row_n, alive, rep, pend, size, read, loc, events, inc_k, inc_start,
                 inc_end, rem, touched)


@jit.compiled
def _split_pairs(view: npt.NDArray[np.int32], num_p: int, occupied: Bits, cols: IntArray,
                 rem: npt.NDArray[np.bool_], touched: npt.NDArray[np.bool_], last: IntArray,
                 words: Words, masks: Words, at: int, bound: int
                 ) -> tuple[IntArray, IntArray, Words, int]:
    """``split_pairs`` in one pass over the columns from entry ``at`` (``j * num_p + p``),
    each hit's key made and tested where it is read, up to ``bound`` pairs (the last value:
    the entry to go on from, ``len(cols) * num_p`` when all were). The entries visited are
    those ``occupied`` marks, and, where some set removes the column's event (``touched``),
    those whose set removes it, 64 sets at a time, in the order of the sets."""
    width = words.shape[1]
    out_p = np.empty(bound, dtype=np.int64)
    out_j = np.empty(bound, dtype=np.int64)
    out_k = np.empty((bound, width), dtype=np.uint64)
    m = 0
    first = at // num_p
    for j in range(first, len(cols)):
        k = last[j]
        begin = at - first * num_p if j == first else 0
        for v in range(begin >> 6, occupied.shape[1]):
            word = occupied[cols[j], v]  # the entries holding a row, and the removing sets
            if touched[k]:
                for b in range(min(64, num_p - (v << 6))):
                    if rem[(v << 6) + b, k]:
                        word |= np.uint64(1) << np.uint64(b)
            if v == begin >> 6:
                word &= ~np.uint64(0) << np.uint64(begin & 63)
            while word != np.uint64(0):
                p = (v << 6) + lowest_bit(word)
                word &= word - np.uint64(1)
                some = False
                for w in range(width):
                    some |= (words[p, w] & masks[j, w]) != 0
                if not some:
                    continue
                if m == bound:
                    return out_p, out_j, out_k, j * num_p + p
                for w in range(width):
                    out_k[m, w] = words[p, w] & masks[j, w]
                out_p[m], out_j[m] = p, j
                m += 1
    return out_p[:m].copy(), out_j[:m].copy(), out_k[:m].copy(), len(cols) * num_p


def _split_pairs_numpy(rowmap: npt.NDArray[np.int32], occupied: Bits, cols: IntArray,
                       rem: npt.NDArray[np.bool_], touched: npt.NDArray[np.bool_],
                       last: IntArray, words: Words, masks: Words
                       ) -> tuple[IntArray, IntArray, Words]:
    hp, hj, _ = column_hits(rowmap, cols, also=rem[:, last])
    keys: Words = np.bitwise_and(words[hp], masks[hj])
    nonempty = keys.any(axis=1)
    return hp[nonempty], hj[nonempty], keys[nonempty]


@jit.twins(numpy=_split_pairs_numpy)
def split_pairs(rowmap: npt.NDArray[np.int32], occupied: Bits, cols: IntArray,
                rem: npt.NDArray[np.bool_], touched: npt.NDArray[np.bool_], last: IntArray,
                words: Words, masks: Words) -> tuple[IntArray, IntArray, Words]:
    """The (set, node) pairs ``RowTable.split`` (with pruning) gives the rows of their new
    keys: the entries of ``rowmap[:, cols]`` that hold a row or whose set removes the
    node's last event of the batch (``rem[:, last] [P, k]``), whose key (the set's removals
    ``words [P, W]`` in the node's dependency set ``masks [k, W]``) is not empty.
    ``touched`` (``bool [K]``): which of the batch's events some set removes, or more
    (``rem.any(axis=0)``); the compiled loop reads the removals of those columns only, and
    of the rest the entries ``occupied`` marks (``cftgnn.replay.tgn.occupancy``).

    Returns:
        ``(pp, jj, key)``: each pair's set and index into ``cols``, ``int64``, and its key,
        ``uint64 [Q, W]``, in the order of ``column_hits`` (column by column, sets
        ascending).
    """
    # one pass, the keys tested where they are read (few lists, as below)
    args = (column_view(rowmap), rowmap.shape[0], occupied, as_int64(cols), rem, touched,
            as_int64(last), words, masks)
    end = len(cols) * rowmap.shape[0]
    bound = min(FEW_SPLIT, end)
    pp, jj, key, at = _split_pairs(*args, 0, bound)
    parts = [(pp, jj, key)]
    while at < end:
        bound = min(16 * bound, end - at)
        pp, jj, key, at = _split_pairs(*args, at, bound)
        parts.append((pp, jj, key))
    if len(parts) == 1:
        return pp, jj, key
    return (np.concatenate([part[0] for part in parts]),
            np.concatenate([part[1] for part in parts]),
            np.concatenate([part[2] for part in parts]))


@jit.compiled
def _mixed_pairs(view: npt.NDArray[np.int32], num_p: int, occupied: Bits, columns: IntArray,
                 cols: IntArray, is_m: npt.NDArray[np.bool_], row_n: IntArray, row_pend: IntArray,
                 mine: IntArray, loc: IntArray, events: IntArray, inc_k: IntArray,
                 inc_start: IntArray, inc_end: IntArray, rem: npt.NDArray[np.bool_],
                 touched: npt.NDArray[np.bool_], src: IntArray, dst: IntArray, at: int,
                 bound: int) -> tuple[IntArray, IntArray, IntArray, IntArray, int]:
    """``mixed_pairs`` in one pass over the columns from entry ``at`` (``j * num_p + p``):
    each hit's message (``_last_kept``, the node's last event at once where no set removes
    it) and sender row (``_sender_rows``) found where it is read; the pairs that move (few:
    most batches move none) are listed, with their values, as they are found, up to
    ``bound`` of them (the last value: the entry to go on from, ``len(cols) * num_p`` when
    all were)."""
    out_p = np.empty(bound, dtype=np.int64)
    out_r = np.empty(bound, dtype=np.int64)
    out_e = np.empty(bound, dtype=np.int64)
    out_s = np.empty(bound, dtype=np.int64)
    m = 0
    # what a hit reads that is the same for every set of its row, kept from the last hit
    # (a column's sets of one row often come one after another): the row, its node and
    # position, and whether its message is the node's last event whatever the set removes
    # (``fixed``: then that event and its sender's column)
    prev, node, pos, fixed, e_row, c_row = -1, 0, 0, False, -1, -1
    first = at // num_p
    for j in range(first, len(cols)):
        base = cols[j] * num_p
        begin = at - first * num_p if j == first else 0
        for w in range(begin >> 6, occupied.shape[1]):  # the entries holding a row only
            word = occupied[cols[j], w]
            if w == begin >> 6:
                word &= ~np.uint64(0) << np.uint64(begin & 63)
            while word != np.uint64(0):
                p = (w << 6) + lowest_bit(word)
                word &= word - np.uint64(1)
                r = view[base + p]
                if not is_m[r]:
                    continue
                if r != prev:
                    prev, node = r, row_n[r]
                    pos = loc[node]
                    fixed = not touched[inc_k[inc_end[pos] - 1]]
                    if fixed:
                        e_row = events[inc_k[inc_end[pos] - 1]]
                        c_row = columns[dst[e_row] if src[e_row] == node else src[e_row]]
                e, c = e_row, c_row
                if not fixed:
                    e = -1
                    for i in range(inc_end[pos] - 1, inc_start[pos] - 1, -1):
                        if not rem[p, inc_k[i]]:
                            e = events[inc_k[i]]
                            break
                    if e >= 0:
                        c = columns[dst[e] if src[e] == node else src[e]]
                sender = -2
                if e >= 0:  # _row_at, written out
                    sender = -1 if c < 0 else view[c * num_p + p]
                if e != row_pend[r] or sender != mine[r]:
                    if m == bound:
                        return out_p, out_r, out_e, out_s, j * num_p + p
                    out_p[m], out_r[m], out_e[m], out_s[m] = p, r, e, sender
                    m += 1
    return (out_p[:m].copy(), out_r[:m].copy(), out_e[:m].copy(), out_s[:m].copy(),
            len(cols) * num_p)


@jit.compiled
def _mixed_rows(mixed: npt.NDArray[np.bool_], alive: npt.NDArray[np.bool_], row_n: IntArray,
                size: int, read: npt.NDArray[np.bool_], loc: IntArray, inc_start: IntArray,
                inc_end: IntArray, rep: IntArray, row_pend: IntArray,
                view: npt.NDArray[np.int32], num_p: int, num_columns: int, columns: IntArray,
                src: IntArray, dst: IntArray
                ) -> tuple[npt.NDArray[np.bool_], IntArray, IntArray]:
    is_m = np.zeros(size + 1, dtype=np.bool_)
    mine = np.empty(size, dtype=np.int64)
    held = np.zeros(num_columns, dtype=np.bool_)  # by column
    count = 0
    for q in range(size):
        node = row_n[q]
        if not (mixed[q] and alive[q] and read[node]) or loc[node] < 0:
            continue
        if inc_end[loc[node]] <= inc_start[loc[node]]:
            continue
        is_m[q] = True
        e = row_pend[q]  # sender_rows, written out
        mine[q] = -2
        if e >= 0:
            c = columns[dst[e] if src[e] == node else src[e]]
            mine[q] = -1 if c < 0 else view[c * num_p + rep[q]]
        count += not held[columns[node]]
        held[columns[node]] = True
    cols = np.empty(count, dtype=np.int64)
    count = 0
    for c in range(len(held)):
        if held[c]:
            cols[count] = c
            count += 1
    return is_m, mine, cols


def _mixed_rows_numpy(rowmap: npt.NDArray[np.int32], columns: IntArray,
                      mixed: npt.NDArray[np.bool_], alive: npt.NDArray[np.bool_],
                      row_n: IntArray, size: int, read: npt.NDArray[np.bool_], loc: IntArray,
                      inc_start: IntArray, inc_end: IntArray, rep: IntArray,
                      row_pend: IntArray, src: IntArray, dst: IntArray
                      ) -> tuple[npt.NDArray[np.bool_], IntArray, IntArray]:
    node = row_n[:size]
    m = np.flatnonzero(mixed[:size] & alive[:size] & read[node] & (loc[node] >= 0))
    lk = loc[node[m]]
    m = m[inc_end[lk] > inc_start[lk]]  # a new message in this batch
    is_m = np.zeros(size + 1, dtype=bool)  # the last entry stands for -1 (no row)
    is_m[m] = True
    mine = np.empty(size, dtype=np.int64)
    mine[m] = sender_rows(rowmap, columns, rep[m], row_pend[m], row_n[m], src, dst)
    cols = columns[node[m]]  # their columns, distinct and ascending (marked)
    return is_m, mine, np.flatnonzero(np.bincount(cols))


@jit.twins(numpy=_mixed_rows_numpy)
def mixed_rows(rowmap: npt.NDArray[np.int32], columns: IntArray, mixed: npt.NDArray[np.bool_],
               alive: npt.NDArray[np.bool_], row_n: IntArray, size: int,
               read: npt.NDArray[np.bool_], loc: IntArray, inc_start: IntArray,
               inc_end: IntArray, rep: IntArray, row_pend: IntArray, src: IntArray,
               dst: IntArray) -> tuple[npt.NDArray[np.bool_], IntArray, IntArray]:
    """The rows ``RowTable.split_mixed`` splits (``mixed_pairs``' ``is_m``): the live mixed
    rows ``q < size`` whose node's later state is read (``read``, by node) and has a new
    message in the batch (position ``loc``, incidences ``inc_start:inc_end``); each such
    row's own sender row (``mine``, as ``sender_rows`` gives it for its representative
    ``rep`` and pending event ``row_pend``; other entries unset), and their nodes'
    columns, distinct and ascending (empty where there is no such row).
    """
    # one compiled pass over the rows
    return _mixed_rows(mixed, alive, row_n, size, read, loc, inc_start, inc_end, rep,
                       row_pend, column_view(rowmap), rowmap.shape[0], rowmap.shape[1],
                       columns, src, dst)


def _mixed_pairs_numpy(rowmap: npt.NDArray[np.int32], occupied: Bits, columns: IntArray,
                       cols: IntArray, is_m: npt.NDArray[np.bool_], row_n: IntArray,
                       row_pend: IntArray, mine: IntArray, loc: IntArray, events: IntArray,
                       inc_k: IntArray, inc_start: IntArray, inc_end: IntArray,
                       rem: npt.NDArray[np.bool_], touched: npt.NDArray[np.bool_],
                       src: IntArray, dst: IntArray
                       ) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    pp, _, rr = column_hits(rowmap, cols, member=is_m)
    n = row_n[rr]
    pend = last_kept(events, inc_k, inc_start, inc_end, rem, pp, loc[n])
    sender = sender_rows(rowmap, columns, pp, pend, n, src, dst)
    off = np.flatnonzero((pend != row_pend[rr]) | (sender != mine[rr]))
    return pp[off], rr[off], pend[off], sender[off]


@jit.twins(numpy=_mixed_pairs_numpy)
def mixed_pairs(rowmap: npt.NDArray[np.int32], occupied: Bits, columns: IntArray,
                cols: IntArray, is_m: npt.NDArray[np.bool_], row_n: IntArray, row_pend: IntArray,
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
        The compiled loop visits only the entries ``occupied`` marks (the entries holding a
        row, ``cftgnn.replay.tgn.occupancy``), the twin reads every entry of the columns.
    """
    # lists of a few pairs first (most batches move none), 16 times longer at each
    # overflow, the scan going on from where it stopped: lists of every entry at once
    # (megabytes a call) slowed the steps around this one, and scanning again from the
    # start cost a second pass
    args = (column_view(rowmap), rowmap.shape[0], occupied, columns, as_int64(cols), is_m,
            row_n, row_pend, mine, loc, events, inc_k, inc_start, inc_end, rem, touched,
            src, dst)
    end = len(cols) * rowmap.shape[0]
    bound = min(FEW_PAIRS, end)
    *part, at = _mixed_pairs(*args, 0, bound)
    if at == end:
        pp, rr, pend, sender = part
        return pp, rr, pend, sender
    parts = [part]
    while at < end:
        bound = min(16 * bound, end - at)
        *part, at = _mixed_pairs(*args, at, bound)
        parts.append(part)
    pp, rr, pend, sender = (np.concatenate(column) for column in zip(*parts, strict=True))
    return pp, rr, pend, sender


@jit.compiled
def _revive_receivers(differs: npt.NDArray[np.bool_], row_n: IntArray, num_nodes: int,
                      by_sender: IntArray, at: IntArray, rec_nodes: IntArray,
                      events: IntArray, inc_k: IntArray, inc_start: IntArray,
                      inc_end: IntArray, src: IntArray, dst: IntArray
                      ) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
    held = np.zeros(num_nodes, dtype=np.bool_)  # the nodes of the rows that differ
    for q in range(len(differs) - 1):
        if differs[q]:
            held[row_n[q]] = True
    count = 0
    for i in range(len(by_sender)):
        count += held[by_sender[i]]
    v = np.empty(count, dtype=np.int64)  # the receivers of those senders, ascending
    count = 0
    for i in range(len(by_sender)):
        if held[by_sender[i]]:
            v[count] = at[i]
            count += 1
    v.sort()
    n = np.empty(count, dtype=np.int64)
    pend = np.empty(count, dtype=np.int64)
    o = np.empty(count, dtype=np.int64)
    for i in range(count):  # BatchRecord.pending_at, then models.tgn.other_endpoint
        n[i] = rec_nodes[v[i]]
        end = inc_end[v[i]]
        pend[i] = events[inc_k[end - 1]] if end > inc_start[v[i]] else -1
        e = pend[i]
        o[i] = dst[e] if src[e] == n[i] else src[e]
    senders = np.unique(o)
    return v, n, pend, senders, np.searchsorted(senders, o)


def _revive_receivers_numpy(differs: npt.NDArray[np.bool_], row_n: IntArray, num_nodes: int,
                            receivers: tuple[IntArray, IntArray], rec: BatchRecord,
                            src: IntArray, dst: IntArray
                            ) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
    none = np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(differs[:-1])
    if not len(rows):
        return none, none, none, none, none
    by_sender, at = receivers
    held = row_n[rows]  # their nodes, distinct and ascending (many: marked, not sorted)
    nodes = unique(held) if len(held) <= SMALL else np.flatnonzero(np.bincount(held))
    lo = np.searchsorted(by_sender, nodes)
    hi = np.searchsorted(by_sender, nodes, side="right")
    if not (hi > lo).any():
        return none, none, none, none, none
    v = np.sort(at[concat_ranges(lo, hi)])
    n = as_int64(rec.nodes[v])
    pend = rec.pending_at(v)
    senders, of = unique(other_endpoint(src, dst, pend, n), return_inverse=True)
    return v, n, pend, senders, of.reshape(-1)


@jit.twins(numpy=_revive_receivers_numpy)
def revive_receivers(differs: npt.NDArray[np.bool_], row_n: IntArray, num_nodes: int,
                     receivers: tuple[IntArray, IntArray], rec: BatchRecord, src: IntArray,
                     dst: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
    """``RowTable.revive``'s receivers: of the batch's receivers (``receivers``: their
    senders ascending and positions ``v`` in ``rec.nodes``,
    ``cftgnn.replay.tgn.trajectory.receivers``), those whose sender holds a row of
    ``differs`` (``bool``, by row; the last entry stands for ``-1``; ``row_n`` the rows'
    nodes, below ``num_nodes``).

    Returns:
        ``(v, n, pend, senders, of)``: the receivers' positions ``v`` (ascending), nodes and
        recorded pending events, ``int64``, and their distinct senders (ascending) and each
        receiver's among them; all empty where there are none.
    """
    # in one compiled call, the nodes marked rather than sorted
    return _revive_receivers(differs, row_n, num_nodes, receivers[0], receivers[1],
                             as_int64(rec.nodes), rec.events, *rec.incidences(), src, dst)


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
    the range is the batch's recorded rows and the table's rows, a few thousand); up to
    ``cftgnn.arrays.SMALL`` entries (one set's few rows) sorted in Python."""
    if len(key) <= SMALL:
        out: tuple[IntArray, IntArray] = unique(key, return_inverse=True)
        return out
    return _marked_unique(key, lo, hi)


def _marked_unique_numpy(key: IntArray, lo: int, hi: int) -> tuple[IntArray, IntArray]:
    uniq, inverse = np.unique(key, return_inverse=True)
    return uniq.astype(np.int64), inverse.reshape(-1).astype(np.int64)


@jit.twins(numpy=_marked_unique_numpy)
def _marked_unique(key: IntArray, lo: int, hi: int) -> tuple[IntArray, IntArray]:
    """``unique_inverse`` of more than a few entries, by marking (the twin sorts)."""
    return _unique_inverse(as_int64(key), lo, hi)


__all__ = ["FEW_PAIRS", "FEW_SPLIT", "mixed_pairs", "mixed_rows",
           "new_pending", "revive_receivers", "split_pairs", "unique_inverse"]
