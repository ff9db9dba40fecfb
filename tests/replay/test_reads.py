"""Which queries a removal set can change (``cftgnn.replay.reads``), on a hand-built stream:
a window of the k most recent events changes only when a set removes one of them or perturbs
the input of a node in the tree; removals older than the window change nothing."""

from __future__ import annotations

import numpy as np

from cftgnn.data import EventStream, TemporalIndex
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.reads import tree_reads

EMPTY = np.zeros(0, dtype=np.int64)


def stream() -> EventStream:
    # node 0 meets 1, 2, 3, 4 (events 0-3); node 5 meets 6 (event 4); node 7 meets 0 (event 5)
    src = np.array([0, 0, 0, 0, 5, 7])
    dst = np.array([1, 2, 3, 4, 6, 0])
    return EventStream(src, dst, np.arange(6, dtype=float), None, None, 9)


def test_a_removal_outside_the_window_changes_nothing():
    index = TemporalIndex(stream())
    # queries 0, 5, 8 at position 6, one layer of 2 slots: node 0 reads events 5 and 3
    reads = tree_reads(index, 2, 1, np.array([0, 5, 8]), 6, None)
    sets = RemovalSets.from_sets([[], [0], [3], [4], [5]])
    changed = reads.changed(sets, EMPTY, EMPTY, EMPTY)
    np.testing.assert_array_equal(changed, [[False, False, False],   # nothing removed
                                            [False, False, False],   # event 0: before 0's window
                                            [True, False, False],    # event 3: in 0's window
                                            [False, True, False],    # event 4: 5's only event
                                            [True, False, False]])   # event 5: 0 meets 7
    # a perturbed input of node 4 (in 0's window) or 8 (its own, no events) changes those
    p, n = np.array([0, 1]), np.array([4, 8])
    np.testing.assert_array_equal(reads.changed(sets.select(slice(0, 2)), p, n, EMPTY),
                                  [[True, False, False], [False, False, True]])
    # an input that may differ under any set changes every query reading it
    assert reads.changed(sets, EMPTY, EMPTY, np.array([6]))[:, 1].all()


def test_two_layers_reach_the_windows_of_the_neighbours():
    index = TemporalIndex(stream())
    reads = tree_reads(index, 2, 2, np.array([7]), 6, None)
    # 7's window holds event 5 (with 0); 0's window before event 5 holds events 3 and 2
    sets = RemovalSets.from_sets([[1], [2], [5]])
    np.testing.assert_array_equal(reads.changed(sets, EMPTY, EMPTY, EMPTY)[:, 0],
                                  [False, True, True])
    shared = np.zeros(6, dtype=bool)
    shared[2] = True  # removed for every set: 0's window is then events 3 and 1
    reads = tree_reads(index, 2, 2, np.array([7]), 6, shared)
    np.testing.assert_array_equal(reads.changed(sets, EMPTY, EMPTY, EMPTY)[:, 0],
                                  [True, False, True])
