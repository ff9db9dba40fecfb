"""RemovalSets: the compact table of P removal sets the batched replays read."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cftgnn.replay.masks import RemovalSets, bitmask

sets_st = st.lists(st.sets(st.integers(0, 150), max_size=12), min_size=1, max_size=6)


@given(sets_st)
def test_table_matches_dense_masks(sets: list[set[int]]) -> None:
    rs = RemovalSets.from_sets(sets)
    dense = np.zeros((len(sets), 160), dtype=bool)
    for p, s in enumerate(sets):
        dense[p, sorted(s)] = True
    np.testing.assert_array_equal(rs.dense(160), dense)
    back = RemovalSets.from_dense(dense)
    np.testing.assert_array_equal(back.events, rs.events)
    np.testing.assert_array_equal(back.table, rs.table)
    ev = np.arange(160)
    np.testing.assert_array_equal(rs.columns(ev), dense)
    p = np.arange(len(sets)).repeat(2)
    queries = np.stack([ev[:40], ev[40:80]] * len(sets))  # [2P, 40]
    np.testing.assert_array_equal(rs.lookup(p, queries), dense[p[:, None], queries])
    np.testing.assert_array_equal(rs.sizes(), dense.sum(axis=1))
    np.testing.assert_array_equal(rs.sizes(before=75), dense[:, :75].sum(axis=1))


@given(sets_st, st.integers(0, 3))
def test_words_are_bitmasks_over_the_universe(sets: list[set[int]], extra: int) -> None:
    rs = RemovalSets.from_sets(sets)
    universe = np.union1d(rs.events, np.arange(1000, 1000 + 64 * extra))  # several words
    words = rs.words(universe)
    assert words.shape == (len(sets), max(1, -(-len(universe) // 64)))
    for p, s in enumerate(sets):
        got = {int(universe[j]) for j in range(len(universe))
               if (int(words[p, j // 64]) >> (j % 64)) & 1}
        assert got == s


def test_words_need_every_removed_event_in_the_universe() -> None:
    rs = RemovalSets.from_sets([{3, 9}])
    with pytest.raises(ValueError, match="universe"):
        rs.words(np.array([3, 4]))


def test_bitmask_sets_one_bit_per_column() -> None:
    table = np.array([[True, False, True], [False, True, True]])
    out = bitmask(table, np.array([0, 63, 64]), num_bits=65)
    assert out.dtype == np.uint64 and out.shape == (2, 2)
    assert int(out[0, 0]) == 1 and int(out[0, 1]) == 1
    assert int(out[1, 0]) == 1 << 63 and int(out[1, 1]) == 1


def test_empty_sets_and_bad_tables() -> None:
    rs = RemovalSets.from_sets([(), ()])
    assert rs.num_sets == 2 and len(rs.events) == 0
    assert not rs.columns(np.array([1, 2])).any()
    assert not rs.lookup(np.array([0, 1]), np.array([[1], [2]])).any()
    with pytest.raises(ValueError, match="shape"):
        RemovalSets(np.array([1, 2]), np.zeros((1, 3), dtype=bool))
    with pytest.raises(ValueError, match="ascending"):
        RemovalSets(np.array([2, 1]), np.zeros((1, 2), dtype=bool))


def test_select_keeps_the_events_of_the_chosen_sets():
    rs = RemovalSets.from_sets([{3, 9}, {9}, {4}])
    sub = rs.select(slice(0, 2))
    assert sub.events.tolist() == [3, 9] and sub.table.tolist() == [[True, True], [False, True]]
    assert rs.select(np.array([2])).events.tolist() == [4]
