"""Masked most-recent-neighbour sampling equals sampling on the reduced stream."""

from __future__ import annotations

import numpy as np
from testsupport.planted import planted_stream

from cftgnn.data.index import TemporalIndex
from cftgnn.models.neighbors import recent_kept_neighbors


def test_recent_kept_neighbors_matches_reduced_index() -> None:
    stream = planted_stream(num_events=300, num_src=6, num_dst=6, seed=2)
    rng = np.random.default_rng(0)
    removed_ids = np.unique(rng.choice(250, 40))
    removed = np.zeros(stream.num_events, dtype=bool)
    removed[removed_ids] = True
    sub, kept = stream.without(removed_ids)
    nodes = np.arange(stream.num_nodes)
    before = np.full(len(nodes), 250)
    nbr, eid, valid = recent_kept_neighbors(TemporalIndex(stream), nodes, before, 5, removed,
                                            len(removed_ids))
    sub_before = np.searchsorted(kept, before)
    nbr2, eid2, valid2 = TemporalIndex(sub).recent_neighbors(nodes, sub_before, 5)
    assert np.array_equal(valid, valid2)
    assert np.array_equal(nbr, nbr2)
    assert np.array_equal(eid[valid], kept[eid2[valid2]])
    assert not removed[eid[valid]].any()
