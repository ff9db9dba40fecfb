"""Tiny hand-made event streams the replay tests share."""

from __future__ import annotations

import numpy as np

from cftgnn.data.stream import EventStream


def dense_stream(seed: int, num_nodes: int, num_events: int) -> EventStream:
    """Events between random pairs of a few nodes, one time step apart: many perturbed rows
    shared, merged, revived and split by message in the cone replay."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_events)
    dst = (src + rng.integers(1, num_nodes, num_events)) % num_nodes
    return EventStream(src, dst, np.arange(1.0, num_events + 1),
                       np.zeros((num_events, 0), np.float32), np.zeros(num_events, np.int64),
                       num_nodes, "dense")
