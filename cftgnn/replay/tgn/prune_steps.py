"""The first part of ``cftgnn.replay.tgn.rows.RowTable.prune`` in one pass over the rows:
which live rows are never read again, which are compared with the recording, and what the
comparison finds (about thirty NumPy passes per batch before 2026-11-27, over the live rows,
on the far-back tail's 1,074 batches of UCI · TGN 56484). A compiled loop (``cftgnn.jit``)
where the rows are read in place (on the CPU, bitwise: no tolerance), with its NumPy twin
(``cftgnn.jit.twins``), the code of ``prune`` before; both give the same arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from torch import Tensor

from cftgnn import jit
from cftgnn.arrays import as_int64
from cftgnn.replay.tgn.compare import bits, memory_equal, same_row
from cftgnn.replay.tgn.record import SharedRows
from cftgnn.replay.tgn.trajectory import BatchRecord

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class Candidates(NamedTuple):
    """What ``prune`` decides from: of the live rows ``q < size``, ``stale`` those whose
    state is never read again (``need[n] < x``), ``r`` the others whose node is in the batch
    (ascending), with their positions ``lc`` in the batch; ``mem_eq`` and ``checked``
    (``bool [size]``): whether a row's memory was compared with the recorded one (the rows
    ``r``) and found equal; then, by row of ``r``: ``same`` (memory and last-update time
    the recorded ones), ``theirs`` (the recorded pending event, ``-1``: none),
    ``reads_pending`` (the next batch applies it: ``need[n] > x``) and ``pend_ok`` (the
    row's pending event is the recorded one, or is never applied)."""

    stale: IntArray
    r: IntArray
    lc: IntArray
    mem_eq: BoolArray
    checked: BoolArray
    same: BoolArray
    theirs: IntArray
    reads_pending: BoolArray
    pend_ok: BoolArray


@jit.compiled
def _candidates(alive: BoolArray, row_n: IntArray, size: int, need: IntArray, x: int,
                loc: IntArray, mem: npt.NDArray[np.integer], table: npt.NDArray[np.integer],
                ptr: IntArray, lu: npt.NDArray[np.float64], lu_post: npt.NDArray[np.float64],
                pend: IntArray, events: IntArray, inc_k: IntArray, inc_start: IntArray,
                inc_end: IntArray
                ) -> tuple[IntArray, IntArray, IntArray, BoolArray, BoolArray, BoolArray,
                           IntArray, BoolArray, BoolArray]:
    num_stale = 0
    num_r = 0
    for q in range(size):
        if alive[q]:
            node = row_n[q]
            if need[node] < x:
                num_stale += 1
            elif loc[node] >= 0:
                num_r += 1
    stale = np.empty(num_stale, dtype=np.int64)
    r = np.empty(num_r, dtype=np.int64)
    lc = np.empty(num_r, dtype=np.int64)
    mem_eq = np.zeros(size, dtype=np.bool_)
    checked = np.zeros(size, dtype=np.bool_)
    same = np.empty(num_r, dtype=np.bool_)
    theirs = np.empty(num_r, dtype=np.int64)
    reads = np.empty(num_r, dtype=np.bool_)
    pend_ok = np.empty(num_r, dtype=np.bool_)
    i = 0
    k = 0
    for q in range(size):
        if not alive[q]:
            continue
        node = row_n[q]
        if need[node] < x:
            stale[k] = q
            k += 1
            continue
        pos = loc[node]
        if pos < 0:
            continue
        r[i], lc[i] = q, pos
        equal = same_row(mem, q, table, ptr[pos])  # compare.memory_equal, bitwise
        mem_eq[q] = equal
        checked[q] = True
        same[i] = equal and lu[q] == lu_post[pos]
        end = inc_end[pos]  # BatchRecord.pending_at
        theirs[i] = events[inc_k[end - 1]] if end > inc_start[pos] else -1
        reads[i] = need[node] > x
        pend_ok[i] = pend[q] == theirs[i] or not reads[i]
        i += 1
    return stale, r, lc, mem_eq, checked, same, theirs, reads, pend_ok


def prune_candidates(mem: Tensor, alive: BoolArray, row_n: IntArray, lu: npt.NDArray[np.float64],
                     pend: IntArray, size: int, rec: BatchRecord, loc: IntArray,
                     need: IntArray, x: int, tolerance: float) -> Candidates:
    """``Candidates`` of the rows ``q < size`` (memory ``mem``, ``alive``, nodes ``row_n``,
    last-update times ``lu``, pending events ``pend``) after batch ``x`` (``rec``; each
    node's position in it ``loc``, ``-1`` for the others; ``need`` by node), the memory
    compared as ``compare.memory_equal`` compares it (with ``tolerance``)."""
    if tolerance == 0.0:
        return _bitwise_candidates(mem, alive, row_n, lu, pend, size, rec, loc, need, x)
    return _candidates_numpy(mem, alive, row_n, lu, pend, size, rec, loc, need, x, tolerance)


def _candidates_numpy(mem: Tensor, alive: BoolArray, row_n: IntArray,
                      lu: npt.NDArray[np.float64], pend: IntArray, size: int, rec: BatchRecord,
                      loc: IntArray, need: IntArray, x: int, tolerance: float) -> Candidates:
    live = np.flatnonzero(alive[:size])
    node = row_n[live]
    stale = need[node] < x  # never read again
    where = loc[node]
    check = (where >= 0) & ~stale
    r, n, lc = live[check], node[check], where[check]
    mem_eq = np.zeros(size, dtype=bool)  # rows whose memory is the recorded one
    checked = np.zeros(size, dtype=bool)
    if len(r):
        mem_eq[r] = memory_equal(mem, r, rec.mem_post, lc, tolerance)
        checked[r] = True
    same = mem_eq[r] & (lu[r] == rec.lu_post[lc])
    theirs = rec.pending_at(lc)
    reads_pending = need[n] > x  # the next batch applies the pending message
    pend_ok = (pend[r] == theirs) | ~reads_pending
    return Candidates(live[stale], r, lc, mem_eq, checked, same, theirs, reads_pending, pend_ok)


def _bitwise_candidates_numpy(mem: Tensor, alive: BoolArray, row_n: IntArray,
                              lu: npt.NDArray[np.float64], pend: IntArray, size: int,
                              rec: BatchRecord, loc: IntArray, need: IntArray, x: int
                              ) -> Candidates:
    return _candidates_numpy(mem, alive, row_n, lu, pend, size, rec, loc, need, x, 0.0)


@jit.twins(numpy=_bitwise_candidates_numpy, host=True)
def _bitwise_candidates(mem: Tensor, alive: BoolArray, row_n: IntArray,
                        lu: npt.NDArray[np.float64], pend: IntArray, size: int,
                        rec: BatchRecord, loc: IntArray, need: IntArray, x: int) -> Candidates:
    """``prune_candidates`` bit for bit: one compiled pass, the rows read in place."""
    recorded = rec.mem_post
    if isinstance(recorded, SharedRows):
        table, ptr = recorded.table, as_int64(recorded.ptr.numpy())
    else:
        table, ptr = recorded, np.arange(len(recorded), dtype=np.int64)
    return Candidates(*_candidates(
        alive, row_n, size, need, x, loc, bits(mem).numpy(), bits(table).numpy(), ptr, lu,
        rec.lu_post, pend, rec.events, *rec.incidences()))


__all__ = ["Candidates", "prune_candidates"]
