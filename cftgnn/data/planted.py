"""Seeded event streams whose causes are known (``dataset=planted``), for measuring how often
an explainer finds the true cause of an event.

Two kinds of stream, both returned as an [`EventStream`][cftgnn.data.EventStream] whose
``causes`` side table ([`EventCauses`][cftgnn.data.EventCauses]) lists, for every event, the
earlier events that caused it (none for background events):

* ``hawkes``: a multivariate Hawkes process in the spirit of the two synthetic datasets of
  T-GNNExplainer (Xia et al., ICLR 2023, arXiv:2209.14576). Each of ``num_types`` event types
  is a fixed ordered node pair; type ``k`` has a base rate ``base_rate`` and is excited by the
  earlier events of the types ``j`` with ``A[j, k] > 0`` through the exponential kernel
  ``A[j, k] * decay * exp(-decay * dt)``. It is simulated by its branching (cluster)
  representation (Hawkes and Oakes, 1974): background events arrive as a Poisson process and
  each event of type ``j`` begets ``Poisson(A[j, k])`` children of type ``k`` after
  ``Exponential(decay)`` delays, so every event has exactly one parent (the event that
  excited it) or none (a background event).
* ``rule``: a deterministic rule. Motif events come in two legs, ``u -> w`` (kind 1) and then
  ``w -> v`` (kind 2) at most ``window`` time units later (strictly later, ``u != v``); every
  such pair, planted or formed by chance between planted legs, is followed ``delay`` time
  units after its second leg by the effect ``u -> v`` (kind 3), whose causes are the two legs.
  An effect happens if and only if its motif occurred, so removing the cause set removes the
  effect. The rest are noise events (kind 0) between random nodes that the rule ignores.

``labels`` holds the event type (``hawkes``) or kind (``rule``). With ``feat_dim > 0`` a rule
stream's first feature columns flag the kinds 1, 2 and 3 (as far as ``feat_dim`` reaches) and
the other columns, and all columns of a Hawkes stream, are Gaussian noise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cftgnn.arrays import check_fits_memory
from cftgnn.data.stream import EventCauses, EventStream, IntArray
from cftgnn.data.synthetic import dataset_count
from cftgnn.errors import ConfigError
from cftgnn.options import number

#: The stream kinds ``dataset.kind`` accepts.
KINDS = ("hawkes", "rule")
#: Bytes per generated event (endpoints, times, kinds, parents, sort keys and their temporaries).
_BYTES_PER_EVENT = 256
#: Bytes of one feature value (``float32``) plus its ``float64`` draw.
_BYTES_PER_FEATURE = 12


def _real(name: str, value: object, minimum: float, *, strict: bool = True,
          maximum: float | None = None, below: float | None = None) -> float:
    """``value`` as a finite number ``> minimum`` (``>=`` when not ``strict``) and, with
    ``maximum``, ``<= maximum``, with ``below``, ``< below`` (``cftgnn.options.number``'s
    rule and message)."""
    key = f"dataset.{name}"
    got = number({key: value}, key, minimum=minimum, maximum=maximum,
                 strict_minimum=strict, finite=True)
    assert got is not None
    if below is not None and not got < below:
        raise ConfigError(f"{key} must be < {below:g}, got {value!r}")
    return got


def _features(rng: np.random.Generator, num_events: int, feat_dim: int,
              flags: list[np.ndarray]) -> np.ndarray:
    """``float32 [E, feat_dim]``: the ``flags`` columns first (as far as they fit), then noise."""
    feat = np.zeros((num_events, feat_dim), dtype=np.float32)
    used = min(len(flags), feat_dim)
    for j in range(used):
        feat[:, j] = flags[j]
    if feat_dim > used:
        feat[:, used:] = rng.normal(size=(num_events, feat_dim - used))
    return feat


def _causes_from_parent(parent: IntArray) -> EventCauses:
    """The CSR table of at most one cause per event (``parent[i] == -1``: none)."""
    has = parent >= 0
    indptr = np.zeros(parent.size + 1, dtype=np.int64)
    np.cumsum(has, out=indptr[1:])
    return EventCauses(indptr, parent[has])


# ------------------------------------------------------------------------------------ hawkes


def excitation_matrix(rng: np.random.Generator, num_types: int, excitation: float,
                      num_excited: int) -> np.ndarray:
    """``A [K, K]``: each type excites ``num_excited`` random types (itself possibly among
    them) with random weights that sum to ``excitation``, the mean number of children of an
    event; its spectral radius is therefore ``excitation`` (< 1: the process is stable)."""
    matrix = np.zeros((num_types, num_types))
    k = min(num_excited, num_types)
    for j in range(num_types):
        targets = rng.choice(num_types, size=k, replace=False)
        weights = rng.random(k) + 0.5
        matrix[j, targets] = excitation * weights / weights.sum()
    return matrix


def _simulate_hawkes(rng: np.random.Generator, matrix: np.ndarray, base_rate: float,
                     decay: float, horizon: float) -> tuple[np.ndarray, IntArray, IntArray]:
    """All events in ``[0, horizon)`` of the cluster process: ``(t, type, parent)``, in
    generation order (a parent always before its children; ``parent`` indexes that order)."""
    num_types = matrix.shape[0]
    n0 = rng.poisson(base_rate * horizon * num_types)
    times = [rng.uniform(0.0, horizon, n0)]
    types = [rng.integers(0, num_types, n0)]
    parents = [np.full(n0, -1, dtype=np.int64)]
    gen_t, gen_k, start = times[0], types[0], 0
    while gen_t.size:
        counts = rng.poisson(matrix[gen_k])  # [n, K] children of each parent by type
        per_parent = counts.sum(axis=1)
        child_parent = np.repeat(np.arange(start, start + gen_t.size), per_parent)
        child_k = np.repeat(np.tile(np.arange(num_types), gen_t.size), counts.reshape(-1))
        child_t = np.repeat(gen_t, per_parent) + rng.exponential(1.0 / decay, child_k.size)
        keep = child_t < horizon
        start += gen_t.size
        gen_t, gen_k = child_t[keep], child_k[keep]
        times.append(gen_t)
        types.append(gen_k)
        parents.append(child_parent[keep])
    return np.concatenate(times), np.concatenate(types), np.concatenate(parents)


def make_hawkes_stream(
    num_nodes: int = 20,
    num_events: int = 2000,
    seed: int = 0,
    feat_dim: int = 0,
    num_types: int = 8,
    num_excited: int = 2,
    base_rate: float = 0.05,
    excitation: float = 0.7,
    decay: float = 1.0,
    name: str = "planted_hawkes",
) -> EventStream:
    """A multivariate Hawkes stream whose every event records the event that excited it.

    See the module docstring for the process. The stream is the first ``num_events`` events
    of the process started empty at time 0; ``meta`` holds the type pairs and the excitation
    matrix.

    Args:
        num_nodes: Number of nodes (at least 2).
        num_events: Number of events (at least 1).
        seed: Random seed; the same arguments always give the same stream.
        feat_dim: Edge feature dimension (Gaussian noise).
        num_types: Number of event types, each a distinct ordered node pair (at most
            ``num_nodes * (num_nodes - 1)``).
        num_excited: Number of types each type excites.
        base_rate: Background rate of each type, events per time unit (> 0).
        excitation: Mean number of events an event excites, the branching ratio, in ``[0, 1)``.
        decay: Rate of the exponential kernel (> 0); the mean parent-child delay is
            ``1 / decay``.
        name: Stream name.

    Returns:
        The stream with ``causes`` (one parent or none per event).

    Raises:
        ConfigError: For an option out of range or sizes that would not fit in memory.
    """
    num_nodes = dataset_count("num_nodes", num_nodes, 2)
    num_events = dataset_count("num_events", num_events, 1)
    feat_dim = dataset_count("feat_dim", feat_dim, 0)
    num_types = dataset_count("num_types", num_types, 1)
    num_excited = dataset_count("num_excited", num_excited, 1)
    base_rate = _real("base_rate", base_rate, 0.0)
    excitation = _real("excitation", excitation, 0.0, strict=False, below=1.0)
    decay = _real("decay", decay, 0.0)
    pairs_available = num_nodes * (num_nodes - 1)
    if num_types > pairs_available:
        raise ConfigError(f"dataset.num_types ({num_types}) exceeds the {pairs_available} "
                          f"ordered node pairs of {num_nodes} nodes")
    check_fits_memory(num_events * (_BYTES_PER_EVENT + _BYTES_PER_FEATURE * feat_dim)
                      + 8 * num_types * num_types,
                      f"a planted Hawkes stream of {num_events:,} events")
    rng = np.random.default_rng(seed)
    codes = rng.choice(pairs_available, size=num_types, replace=False)
    pair_src = codes // (num_nodes - 1)
    pair_dst = codes % (num_nodes - 1)
    pair_dst = pair_dst + (pair_dst >= pair_src)  # skip the self-loop
    matrix = excitation_matrix(rng, num_types, excitation, num_excited)
    rate = num_types * base_rate / (1.0 - excitation)  # stationary events per time unit
    horizon = 1.2 * num_events / rate
    while True:
        t, kind, parent = _simulate_hawkes(rng, matrix, base_rate, decay, horizon)
        if t.size >= num_events:
            break
        horizon *= 1.5
    generation_order = np.arange(t.size)
    order = np.lexsort((generation_order, t))[:num_events]  # by time; a parent first on a tie
    new_id = np.full(t.size, -1, dtype=np.int64)
    new_id[order] = np.arange(num_events)
    parent = parent[order]
    parent = np.where(parent >= 0, new_id[np.maximum(parent, 0)], -1)
    kind = kind[order]
    return EventStream(
        pair_src[kind],
        pair_dst[kind],
        t[order],
        _features(rng, num_events, feat_dim, []),
        kind,
        num_nodes,
        name,
        meta={"generator": "make_hawkes_stream", "seed": seed,
              "pairs": np.stack([pair_src, pair_dst], axis=1).tolist(),
              "excitation_matrix": matrix.tolist()},
        causes=_causes_from_parent(parent),
    )


# -------------------------------------------------------------------------------------- rule


def motif_matches(src: IntArray, dst: IntArray, t: np.ndarray, first: IntArray,
                  second: IntArray, window: int) -> tuple[IntArray, IntArray]:
    """Every pair (``a`` in ``first``, ``b`` in ``second``) that forms the rule's motif:
    ``dst[a] == src[b]``, ``t[a] < t[b] <= t[a] + window`` and ``src[a] != dst[b]``.

    Times must be integers (as float or int). Vectorised: the first legs sorted by (middle
    node, time), each second leg's matches are one ``searchsorted`` range.

    Returns:
        ``(a, b)``, ids into the arrays, ordered by ``b`` then ``a``'s time.
    """
    ta = np.asarray(t[first], dtype=np.int64)
    tb = np.asarray(t[second], dtype=np.int64)
    if first.size == 0 or second.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    low = int(min(ta.min(), tb.min()))
    span = int(max(ta.max(), tb.max())) - low + window + 2
    key_a = dst[first] * span + (ta - low) + window
    order = np.argsort(key_a, kind="stable")
    key_a = key_a[order]
    base = src[second] * span + (tb - low)
    lo = np.searchsorted(key_a, base, side="left")  # t_a >= t_b - window
    hi = np.searchsorted(key_a, base + window, side="left")  # t_a < t_b
    counts = hi - lo
    b_rep = np.repeat(np.arange(second.size), counts)
    offset = np.arange(b_rep.size) - np.repeat(np.cumsum(counts) - counts, counts)
    a_pos = order[np.repeat(lo, counts) + offset]
    a, b = first[a_pos], second[b_rep]
    keep = src[a] != dst[b]
    return a[keep], b[keep]


def make_rule_stream(
    num_nodes: int = 100,
    num_events: int = 2000,
    seed: int = 0,
    feat_dim: int = 0,
    window: int = 50,
    delay: int = 1,
    motif_share: float = 0.3,
    mean_gap: float = 10.0,
    name: str = "planted_rule",
) -> EventStream:
    """A stream where ``u -> v`` (kind 3) happens iff ``u -> w`` (kind 1) and then ``w -> v``
    (kind 2) happened within ``window`` time units; its causes are those two events.

    ``floor(num_events * motif_share / 3)`` motifs are planted on random distinct nodes at
    random integer times in ``[0, num_events * mean_gap)``; the effects are then computed by
    the rule from all first and second legs (`motif_matches`),
    so a chance motif between two planted legs has its effect too, and noise events (kind 0)
    fill the stream to ``num_events``. Timestamps are integers.

    Args:
        num_nodes: Number of nodes (at least 3).
        num_events: Number of events; at least 3 / ``motif_share`` so that one motif fits.
        seed: Random seed; the same arguments always give the same stream.
        feat_dim: Edge feature dimension; the first columns flag kinds 1, 2, 3.
        window: Longest time from the first leg to the second, an integer >= 1.
        delay: Time from the second leg to the effect, an integer >= 1.
        motif_share: Share of the events that belong to planted motifs, in ``(0, 1]``.
        mean_gap: Time units per event of the stream's span (> 0).
        name: Stream name.

    Returns:
        The stream with ``causes`` (two per effect, none for the other events).

    Raises:
        ConfigError: For an option out of range, a stream too small to hold one motif, motifs
            so dense that chance effects leave no room for noise, or sizes that would not fit
            in memory.
    """
    num_nodes = dataset_count("num_nodes", num_nodes, 3)
    num_events = dataset_count("num_events", num_events, 0)
    feat_dim = dataset_count("feat_dim", feat_dim, 0)
    window = dataset_count("window", window, 1)
    delay = dataset_count("delay", delay, 1)
    motif_share = _real("motif_share", motif_share, 0.0, maximum=1.0)
    mean_gap = _real("mean_gap", mean_gap, 0.0)
    num_motifs = int(num_events * motif_share // 3)
    if num_motifs < 1:
        raise ConfigError(f"dataset.num_events={num_events} with motif_share={motif_share:g} is "
                          "too small to hold one motif (3 events); raise num_events or "
                          "motif_share")
    check_fits_memory(num_events * (_BYTES_PER_EVENT + _BYTES_PER_FEATURE * feat_dim),
                      f"a planted rule stream of {num_events:,} events")
    rng = np.random.default_rng(seed)
    span = max(1, int(num_events * mean_gap))
    # planted motifs: three distinct nodes u, w, v
    u = rng.integers(0, num_nodes, num_motifs)
    w = (u + rng.integers(1, num_nodes, num_motifs)) % num_nodes
    v = rng.integers(0, num_nodes - 2, num_motifs)
    lo_, hi_ = np.minimum(u, w), np.maximum(u, w)
    v = v + (v >= lo_)
    v = v + (v >= hi_)
    t1 = rng.integers(0, span, num_motifs)
    t2 = t1 + rng.integers(1, window + 1, num_motifs)
    legs_src = np.concatenate([u, w])
    legs_dst = np.concatenate([w, v])
    legs_t = np.concatenate([t1, t2])
    firsts = np.arange(num_motifs)
    a, b = motif_matches(legs_src, legs_dst, legs_t, firsts, firsts + num_motifs, window)
    num_effects = a.size
    num_noise = num_events - 2 * num_motifs - num_effects
    if num_noise < 0:
        raise ConfigError(f"the planted motifs form {num_effects - num_motifs:,} chance motifs "
                          "too many to fit num_events; lower dataset.motif_share or "
                          "dataset.window, or raise dataset.num_nodes or dataset.mean_gap")
    noise_src = rng.integers(0, num_nodes, num_noise)
    noise_dst = (noise_src + rng.integers(1, num_nodes, num_noise)) % num_nodes
    noise_t = rng.integers(0, span, num_noise)
    src = np.concatenate([noise_src, legs_src, legs_src[a]])
    dst = np.concatenate([noise_dst, legs_dst, legs_dst[b]])
    t = np.concatenate([noise_t, legs_t, legs_t[b] + delay])
    kind = np.concatenate([np.zeros(num_noise, np.int64), np.ones(num_motifs, np.int64),
                           np.full(num_motifs, 2, np.int64), np.full(num_effects, 3, np.int64)])
    order = np.lexsort((kind, t))  # by time; stable, so the result depends on the seed only
    new_id = np.empty(num_events, dtype=np.int64)
    new_id[order] = np.arange(num_events)
    # the causes of the effect at (old) position num_noise + 2M + i are legs a[i], b[i]
    effect_new = new_id[num_noise + 2 * num_motifs + np.arange(num_effects)]
    cause_pair = np.sort(np.stack([new_id[num_noise + a], new_id[num_noise + b]], axis=1), axis=1)
    counts = np.zeros(num_events, dtype=np.int64)
    counts[effect_new] = 2
    indptr = np.zeros(num_events + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    parents = cause_pair[np.argsort(effect_new, kind="stable")].reshape(-1)
    kind = kind[order]
    flags = [(kind == k).astype(np.float32) for k in (1, 2, 3)]
    return EventStream(
        src[order],
        dst[order],
        t[order].astype(np.float64),
        _features(rng, num_events, feat_dim, flags),
        kind,
        num_nodes,
        name,
        meta={"generator": "make_rule_stream", "seed": seed, "window": window,
              "delay": delay, "planted_motifs": num_motifs,
              "chance_motifs": num_effects - num_motifs},
        causes=EventCauses(indptr, parents),
    )


def make_planted_stream(kind: str = "rule", name: str | None = None,
                        **options: Any) -> EventStream:
    """The planted stream of ``kind`` (``dataset=planted``).

    Args:
        kind: ``hawkes`` (`make_hawkes_stream`) or
            ``rule`` (`make_rule_stream`).
        name: Stream name (default ``planted_<kind>``).
        **options: That kind's options; an option of the other kind only is ignored, an
            option neither kind has is refused.

    Raises:
        ConfigError: For an unknown kind or option, or an option the generator refuses.
    """
    hawkes_only = {"num_types", "num_excited", "base_rate", "excitation", "decay"}
    rule_only = {"window", "delay", "motif_share", "mean_gap"}
    common = {"num_nodes", "num_events", "seed", "feat_dim"}
    unknown = sorted(set(options) - hawkes_only - rule_only - common)
    if unknown:
        raise ConfigError(f"dataset=planted has no option {unknown[0]!r}")
    if kind not in KINDS:
        raise ConfigError(f"dataset.kind must be one of {', '.join(KINDS)}, got {kind!r}")
    own = (hawkes_only if kind == "hawkes" else rule_only) | common
    chosen = {k: v for k, v in options.items() if k in own}
    label = name if name is not None else f"planted_{kind}"
    if kind == "hawkes":
        return make_hawkes_stream(name=label, **chosen)
    return make_rule_stream(name=label, **chosen)


__all__ = ["KINDS", "excitation_matrix", "make_hawkes_stream", "make_planted_stream",
           "make_rule_stream", "motif_matches"]
