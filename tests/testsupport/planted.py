"""Tiny streams with a planted pattern, for tests and smoke runs of the models."""

from __future__ import annotations

import numpy as np

from cftgnn.data.stream import EventStream


def planted_stream(num_events: int = 1200, num_src: int = 20, num_dst: int = 20,
                   feat_dim: int = 0, ties: bool = True, seed: int = 0,
                   name: str = "planted") -> EventStream:
    """A bipartite stream whose destinations are predictable from recent history.

    At any time a few destinations are *active* (the active set shifts every ``E / 8``
    events) and 90 % of events go to one of them. A model that reads the recency of a
    destination's neighbours separates true destinations from uniformly drawn negatives.

    Args:
        num_events: ``E``.
        num_src: Source nodes ``0..num_src-1``.
        num_dst: Destination nodes ``num_src..num_src+num_dst-1``.
        feat_dim: Edge feature size (noise, plus a flag for active destinations in column 0).
        ties: Draw integer time steps so that many events share a timestamp.
        seed: Random seed.
        name: Stream name.
    """
    rng = np.random.default_rng(seed)
    phase = np.arange(num_events) * 8 // max(num_events, 1)  # [E], 0..7
    offsets = rng.permutation(num_dst)
    active = offsets[(phase[:, None] * 3 + np.arange(3)[None, :]) % num_dst]  # [E, 3]
    src = rng.integers(0, num_src, num_events)
    is_active = rng.random(num_events) < 0.9
    dst = np.where(is_active, active[np.arange(num_events), rng.integers(0, 3, num_events)],
                   rng.integers(0, num_dst, num_events))
    steps = rng.integers(0, 3, num_events) if ties else rng.exponential(1.0, num_events)
    t = np.cumsum(steps).astype(np.float64)
    feat = rng.normal(size=(num_events, feat_dim)).astype(np.float32)
    if feat_dim:
        feat[:, 0] = is_active
    return EventStream(src, dst + num_src, t, feat, np.zeros(num_events, np.int64),
                       num_src + num_dst, name)


def huge_cone_stream(num_nodes: int = 40, num_events: int = 3000, seed: int = 0,
                     name: str = "huge_cone") -> EventStream:
    """The explained link ``(0, 1)`` (the last event) and its only candidates: the first 60
    events, among nodes 0, 1 and 2. Node 2 then talks to everyone for the rest of the
    stream, so removing any candidate perturbs the memory of every node (a huge causal
    cone, and perturbations that rarely die out bit for bit)."""
    rng = np.random.default_rng(seed)
    old = rng.choice([(0, 1), (0, 2), (1, 2)], size=60)
    rest = rng.integers(3, num_nodes, size=(num_events - 61, 2))
    rest[rng.random(len(rest)) < 0.2, 0] = 2
    pairs = np.concatenate([old, rest, [[0, 1]]]).astype(np.int64)
    t = np.arange(num_events, dtype=np.float64)
    return EventStream(pairs[:, 0].copy(), pairs[:, 1].copy(), t,
                       rng.normal(size=(num_events, 1)).astype(np.float32),
                       np.zeros(num_events, dtype=np.int64), num_nodes, name)
