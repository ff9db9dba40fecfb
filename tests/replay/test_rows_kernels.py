"""The row map's scan kernels (``cftgnn.replay.tgn.rows_kernels``) find what the 2-D NumPy
operations they replace find: the same entries, column by column, and the same groups of
equal rows with the same first rows."""

from __future__ import annotations

import numpy as np
import pytest

from cftgnn.arrays import distinct_rows
from cftgnn.replay.tgn.rows_kernels import column_hits, column_rows, column_view, groups, map_at


def _rowmap(seed: int, num_p: int = 37, num_c: int = 11, size: int = 9) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((num_p, num_c)) < 0.3, rng.integers(0, size, (num_p, num_c)), -1)
    return np.asfortranarray(dense.astype(np.int32))


@pytest.mark.parametrize("seed", range(5))
def test_column_scans_find_the_entries_of_np_nonzero_column_by_column(seed):
    rowmap = _rowmap(seed)
    rng = np.random.default_rng(seed + 100)
    cols = np.sort(rng.choice(rowmap.shape[1], size=5, replace=False))
    member = rng.random(9) < 0.5
    also = rng.random((rowmap.shape[0], len(cols))) < 0.1
    sub = rowmap[:, cols]
    for kwargs, mask in (({}, sub >= 0), ({"member": member}, (sub >= 0) & member[sub]),
                         ({"also": also}, (sub >= 0) | also)):
        pp, jj, rr = column_hits(rowmap, cols, **kwargs)
        want_j, want_p = np.nonzero(mask.T)  # column by column, sets ascending
        assert np.array_equal(pp, want_p) and np.array_equal(jj, want_j)
        assert np.array_equal(rr, sub[want_p, want_j])
    at, rr = column_rows(rowmap, cols)
    view = column_view(rowmap)
    want_j, want_p = np.nonzero((sub >= 0).T)
    assert np.array_equal(at, map_at(rowmap.shape[0], want_p, cols[want_j]))
    assert np.array_equal(view[at], rr) and np.array_equal(rr, sub[want_p, want_j])
    view[at] = -1  # the view writes through to the map
    assert (rowmap[:, cols] == -1).all()


def test_column_view_refuses_a_row_major_map():
    with pytest.raises(AssertionError, match="column-major"):
        column_view(np.ascontiguousarray(_rowmap(0)))


@pytest.mark.parametrize("seed", range(5))
def test_groups_partition_rows_as_distinct_rows_with_the_same_first_rows(seed):
    rng = np.random.default_rng(seed)
    key = rng.integers(-2, 3, size=(60, 4)) * np.array([1, 10**12, -(2**40), 1])
    first, inverse = groups(key)
    want_first, want_inverse = distinct_rows(key)
    assert np.array_equal(first[inverse], want_first[want_inverse])  # same first row per row
    assert np.array_equal(key[first][inverse], key)
    assert (first == np.array([np.flatnonzero(inverse == g).min()
                               for g in range(len(first))])).all()
    empty_first, empty_inverse = groups(key[:0])
    assert len(empty_first) == len(empty_inverse) == 0
