"""Tiny streams with a planted pattern, for tests and smoke runs of the models."""

from __future__ import annotations

import numpy as np

from cftgnn.data.stream import EventStream


def planted_stream(num_events: int = 1200, num_src: int = 20, num_dst: int = 20,
                   feat_dim: int = 0, ties: bool = True, seed: int = 0,
                   name: str = "planted") -> EventStream:
    """A bipartite stream whose destinations are predictable from recent history.

    Each source has a partner destination it contacts with probability 0.7 (else a destination
    drawn from a skewed popularity law), so a model that attends to recent neighbours separates
    true destinations from uniformly drawn negatives.

    Args:
        num_events: ``E``.
        num_src: Source nodes ``0..num_src-1``.
        num_dst: Destination nodes ``num_src..num_src+num_dst-1``.
        feat_dim: Edge feature size (features are noise plus a flag for partner contacts).
        ties: Draw integer time steps so that many events share a timestamp.
        seed: Random seed.
        name: Stream name.
    """
    rng = np.random.default_rng(seed)
    partner = rng.integers(0, num_dst, num_src)
    popularity = 1.0 / np.arange(1, num_dst + 1)
    popularity /= popularity.sum()
    src = rng.integers(0, num_src, num_events)
    is_partner = rng.random(num_events) < 0.7
    dst = np.where(is_partner, partner[src], rng.choice(num_dst, num_events, p=popularity))
    steps = rng.integers(0, 3, num_events) if ties else rng.exponential(1.0, num_events)
    t = np.cumsum(steps).astype(np.float64)
    feat = rng.normal(size=(num_events, feat_dim)).astype(np.float32)
    if feat_dim:
        feat[:, 0] = is_partner
    return EventStream(src, dst + num_src, t, feat, np.zeros(num_events, np.int64),
                       num_src + num_dst, name)
