"""``cftgnn.replay.tgn.rows.RowTable.merge``'s step that finds the rows of one node with
equal states: ``merge_groups``, a compiled loop (``cftgnn.jit``) over the rows' memory read
in place on the CPU, and its twin, ``merge``'s NumPy (and torch) code before (2026-11-27),
which runs on any device and gives the same groups with the same first rows.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from torch import Tensor

from cftgnn import jit
from cftgnn.arrays import SMALL
from cftgnn.replay.tgn.compare import bits, probe_columns, probed_bits, rows_equal
from cftgnn.replay.tgn.rows_kernels import column_view, groups, hash_groups, sender_rows

IntArray = npt.NDArray[np.int64]


@jit.compiled
def _merge_groups(r: IntArray, row_n: IntArray, mem_bits: npt.NDArray[np.integer],
                 mem_eq: npt.NDArray[np.bool_], checked: npt.NDArray[np.bool_],
                 lu_bits: IntArray, pend: IntArray, rep: IntArray, need: IntArray, x: int,
                 view: npt.NDArray[np.int32], num_p: int, columns: IntArray, src: IntArray,
                 dst: IntArray, size: int) -> tuple[IntArray, IntArray, IntArray]:
    """``merge_groups`` compiled, the rows' memory read in place as bits (``mem_bits
    [capacity, d]``), each step as the twin takes it."""
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
    first, inv = hash_groups(lead)
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
    head, group = hash_groups(key)
    return rows, head, group


def _merge_groups_numpy(mem: Tensor, r: IntArray, row_n: IntArray, mem_eq: npt.NDArray[np.bool_],
                        checked: npt.NDArray[np.bool_], lu: npt.NDArray[np.float64],
                        pend: IntArray, rep: IntArray, need: IntArray, x: int,
                        rowmap: npt.NDArray[np.int32], columns: IntArray, src: IntArray,
                        dst: IntArray, size: int) -> tuple[IntArray, IntArray, IntArray]:
    none = np.zeros(0, dtype=np.int64)
    n = row_n[r]
    if len(r) <= SMALL and len(set(n.tolist())) == len(r):  # few, of distinct nodes
        return none, none, none  # (what the test below finds, without a count by node id)
    multi = np.bincount(n)[n] > 1  # only nodes with several rows can merge
    if not multi.any():  # one row per node (always with one set): nothing to merge
        return none, none, none
    r, n = r[multi], n[multi]
    # memory identity: -1 the recorded memory, else one id per distinct memory of a node
    mem_id = size + np.arange(size, dtype=np.int64)  # by default, every row its own
    mem_id[np.flatnonzero(checked[:size] & mem_eq[:size])] = -1
    d = np.flatnonzero(~mem_eq[r])  # rows whose memory is not the recorded one
    cols = probe_columns(mem.shape[1], device=mem.device)  # the leading pair first
    probe = probed_bits(mem, r[d], cols)  # [R', k]
    first, inv = groups(np.column_stack([n[d], probe[:, :2].astype(np.int64)]))
    cnt = np.bincount(inv, minlength=len(first))
    grp = np.flatnonzero(cnt[inv] > 1)
    # equal leading coordinates are not proof: rows that agree with the group's first row
    # on the probed coordinates too are compared with it whole (the compiled loop compares
    # every row of a group whole: it stops at a pair's first differing coordinate and
    # gathers nothing, so probing first would only add work there)
    grp = grp[(probe[grp] == probe[first[inv[grp]]]).all(axis=1)]
    if len(grp):
        same = rows_equal(mem, r[d[grp]], r[d[first[inv[grp]]]])
        mem_id[r[d[grp[same]]]] = inv[grp[same]]
    pend_r = pend[r]
    # the sender's memory identity, -1 for the recorded one or no message applied next
    ro = sender_rows(rowmap, columns, rep[r], np.where(need[n] > x, pend_r, -1), n, src, dst)
    sid = np.where(ro >= 0, mem_id[np.maximum(ro, 0)], -1)
    key = np.stack([n, mem_id[r], lu[r].view(np.int64), pend_r, sid], axis=1)
    head, group = groups(key)
    return r, head, group


@jit.twins(numpy=_merge_groups_numpy, host=True)
def merge_groups(mem: Tensor, r: IntArray, row_n: IntArray, mem_eq: npt.NDArray[np.bool_],
                 checked: npt.NDArray[np.bool_], lu: npt.NDArray[np.float64], pend: IntArray,
                 rep: IntArray, need: IntArray, x: int, rowmap: npt.NDArray[np.int32],
                 columns: IntArray, src: IntArray, dst: IntArray, size: int
                 ) -> tuple[IntArray, IntArray, IntArray]:
    """``RowTable.merge``'s groups of rows ``r`` (of nodes ``row_n[r]``, memory ``mem``) with
    equal states: the rows of nodes with several rows among ``r``, and ``(head, group)`` of
    ``groups`` over their keys (node, memory identity, last-update time ``lu`` as bits,
    pending event ``pend``, the sender's memory identity). The memory identity is ``-1`` for
    a row ``checked`` and ``mem_eq`` (the recorded memory), else its group by (node, two
    leading coordinates) where the row equals that group's first row bit for bit in a group
    of several, else the row's own (``size + row``); the sender's is the identity of the row
    of the sender of the row's pending event under its representative set ``rep`` (in
    ``rowmap``, by ``columns``; ``-1`` where the sender holds the recorded state, or the
    event is not applied next: ``need[node] <= x``).

    Returns:
        ``(rows, head, group)``: the rows kept, ``int64``, and the groups over them (the
        twin's are numbered otherwise: the same partition, the same first rows).
    """
    return _merge_groups(r, row_n, bits(mem).numpy(), mem_eq, checked, lu.view(np.int64), pend,
                         rep, need, x, column_view(rowmap), len(rowmap), columns, src, dst, size)


__all__ = ["merge_groups"]
