"""Seeded synthetic event streams with planted structure, for tests and the debug config."""

from __future__ import annotations

import numpy as np

from cftgnn.arrays import check_fits_memory
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError, DataFormatError
from cftgnn.options import as_integer

#: Bytes a generated stream holds per event besides its features (``src``, ``dst``, ``t``,
#: ``labels``: 8 each) plus the generator's temporaries of that length (about as much again).
_BYTES_PER_EVENT = 64
#: Bytes of one feature value (``float32``; its ``float64`` draws are made in chunks).
_BYTES_PER_FEATURE = 4
#: Rows of features drawn at a time (the same values as one draw of them all).
_FEATURE_ROWS = 1 << 16


def dataset_count(name: str, value: object, minimum: int) -> int:
    """``value`` as an integer ``>= minimum`` (``as_integer``: ``1e3`` is
    ``1000``, ``2.5`` and ``"ten"`` are refused)."""
    whole = as_integer(value)
    if whole is None or whole < minimum:
        raise ConfigError(f"dataset.{name} must be an integer >= {minimum}, got {value!r}")
    return whole


def synthetic_bytes(num_nodes: int, num_events: int, feat_dim: int,
                    num_partners: int = 3) -> int:
    """About the peak bytes [``make_synthetic_stream``][cftgnn.data.make_synthetic_stream] allocates
    for these sizes."""
    per_node = 8 * (4 + num_partners)  # community, partners, activity, pool
    per_event = _BYTES_PER_EVENT + _BYTES_PER_FEATURE * feat_dim
    return num_nodes * per_node + num_events * per_event


def make_synthetic_stream(
    num_nodes: int = 100,
    num_events: int = 2000,
    seed: int = 0,
    feat_dim: int = 0,
    num_communities: int = 4,
    num_partners: int = 3,
    p_partner: float = 0.7,
    p_tie: float = 0.1,
    mean_gap: float = 10.0,
    name: str = "synthetic",
) -> EventStream:
    """A stream whose links are predictable from history.

    Planted structure: nodes fall into ``num_communities`` communities and each node has
    ``num_partners`` fixed partners inside its community. A source node is drawn with a skewed
    (Zipf-like) activity; with probability ``p_partner`` its destination is one of its partners,
    otherwise a uniformly random node. A model that remembers past contacts therefore beats
    random guessing, and removing a node's past contacts with a partner changes what it
    predicts. A share ``p_tie`` of events repeat the previous timestamp, so equal timestamps
    occur. With ``feat_dim > 0`` the first feature is 1 for partner events and 0 otherwise, the
    rest is Gaussian noise.

    Args:
        num_nodes: Number of nodes (at least 2).
        num_events: Number of events.
        seed: Random seed; the same arguments always give the same stream.
        feat_dim: Edge feature dimension.
        num_communities: Number of communities.
        num_partners: Partners per node.
        p_partner: Probability that an event goes to a partner.
        p_tie: Probability that an event shares the previous event's timestamp.
        mean_gap: Mean gap between distinct timestamps (exponential).
        name: Stream name.

    Returns:
        The stream; ``meta`` holds the generator's arguments and the partner table.

    Raises:
        ConfigError: For a size that is not an integer (``2.5``, ``ten``) or out of range,
            or sizes whose arrays would not fit the machine's memory (checked before
            allocating).
        DataFormatError: For probabilities outside ``[0, 1]``.
    """
    num_nodes = dataset_count("num_nodes", num_nodes, 2)
    num_events = dataset_count("num_events", num_events, 0)
    feat_dim = dataset_count("feat_dim", feat_dim, 0)
    num_partners = dataset_count("num_partners", num_partners, 1)
    num_communities = dataset_count("num_communities", num_communities, 1)
    check_fits_memory(synthetic_bytes(num_nodes, num_events, feat_dim, num_partners),
                      f"a synthetic stream of {num_events:,} events, {num_nodes:,} nodes and "
                      f"feat_dim {feat_dim:,}")
    if not (0 <= p_partner <= 1 and 0 <= p_tie <= 1):
        raise DataFormatError("p_partner and p_tie must be probabilities")
    rng = np.random.default_rng(seed)
    num_communities = max(1, min(num_communities, num_nodes // 2))
    community = rng.integers(0, num_communities, size=num_nodes)
    partners = np.empty((num_nodes, num_partners), dtype=np.int64)
    members = [np.flatnonzero(community == c) for c in range(num_communities)]
    for node in range(num_nodes):  # the node's community but itself (each member list sorted)
        own = members[community[node]]
        pool = np.delete(own, np.searchsorted(own, node))
        if pool.size == 0:
            pool = np.setdiff1d(np.arange(num_nodes), [node])
        partners[node] = rng.choice(pool, size=num_partners, replace=pool.size < num_partners)
    activity = 1.0 / np.arange(1, num_nodes + 1) ** 0.8
    activity = rng.permutation(activity / activity.sum())
    src = rng.choice(num_nodes, size=num_events, p=activity)
    to_partner = rng.random(num_events) < p_partner
    dst = np.where(
        to_partner,
        partners[src, rng.integers(0, num_partners, num_events)],
        rng.integers(0, num_nodes, num_events),
    )
    loop = dst == src
    dst[loop] = (dst[loop] + 1) % num_nodes
    gaps = rng.exponential(mean_gap, size=num_events)
    gaps[rng.random(num_events) < p_tie] = 0.0
    if num_events:
        gaps[0] = 0.0
    t = np.floor(np.cumsum(gaps))
    feat = np.zeros((num_events, feat_dim), dtype=np.float32)
    if feat_dim:
        feat[:, 0] = to_partner
        for lo in range(0, num_events, _FEATURE_ROWS):
            hi = min(num_events, lo + _FEATURE_ROWS)
            feat[lo:hi, 1:] = rng.normal(size=(hi - lo, feat_dim - 1))
    labels = to_partner.astype(np.int64)
    del to_partner, gaps
    for array in (src, dst, t, feat, labels):  # frozen: the stream keeps them, no copies
        array.setflags(write=False)
    return EventStream(
        src,
        dst,
        t,
        feat,
        labels,
        num_nodes,
        name,
        meta={"generator": "make_synthetic_stream", "seed": seed, "partners": partners.tolist()},
    )
