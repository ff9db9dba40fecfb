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
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


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


def column_rows(rowmap: npt.NDArray[np.int32], cols: npt.NDArray[np.int64]
                ) -> tuple[IntArray, IntArray]:
    """Every entry of ``rowmap[:, cols]`` that holds a row: ``(at, rr)``, its position in
    ``column_view(rowmap)`` and its row, ``int64`` (to rewrite those entries in place)."""
    num_p = rowmap.shape[0]
    block = rowmap.T[cols].reshape(-1)  # [k * P]
    hit = np.flatnonzero(block >= 0)
    jj, pp = np.divmod(hit, num_p)
    return cols[jj].astype(np.int64) * num_p + pp, block[hit].astype(np.int64)


def map_at(num_p: int, p: IntArray, c: IntArray) -> IntArray:
    """Positions of entries ``(p[m], c[m])`` of a column-major ``[num_p, C]`` row map in its
    ``column_view`` (a 1-D gather there is cheaper than a 2-D one in the map)."""
    return c * num_p + p


def groups(key: npt.NDArray[np.int64]) -> tuple[IntArray, IntArray]:
    """``(first, inverse)`` of the distinct rows of ``key [M, k]``, as
    ``cftgnn.arrays.distinct_rows`` gives them up to the numbering of the groups:
    ``first[g]`` is the first row of group ``g`` (the smallest index) and ``inverse[m]`` the
    group of row ``m``. Groups are numbered in the numeric order of their keys
    (``distinct_rows``: the order of their bytes), so only callers that use the partition
    and its first rows, not the numbers, may swap one for the other. A stable ``lexsort``
    of the columns: several times faster than ``np.unique`` of the rows as bytes on the few
    hundred rows of a batch."""
    m = len(key)
    if m == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort(key.T[::-1])  # stable: ties keep their order, the first row leads
    ranked = key[order]
    head = np.empty(m, dtype=bool)
    head[0] = True
    np.any(ranked[1:] != ranked[:-1], axis=1, out=head[1:])
    inverse = np.empty(m, dtype=np.int64)
    inverse[order] = np.cumsum(head) - 1
    return order[head], inverse


__all__ = ["column_hits", "column_rows", "column_view", "groups", "map_at"]
