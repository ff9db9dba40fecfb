"""TempME's temporal walks, their anonymisation and the null-model prior (Chen and Ying,
NeurIPS 2023, §4.1 and Algorithm 1).

A **temporal walk** (a sampled temporal motif instance) of length ``L`` grows backwards in time
from a root node ``r`` (the explained event's source, its destination, or a negative
destination). The walk's node set starts as ``{r}``; step ``j`` picks one event uniformly among
the ``degree`` most recent events of each node of the walk that come before the previous
step's event (step 1: before the end of the explained event's history), and adds the event's
other endpoint to the node set. Every event of a walk is therefore strictly earlier (smaller
id, in stream order) than the one before it and than the history end ``h``: with
``history=event`` ``h`` is the explained event, with ``history=batch_start`` the start of its
batch (``cftgnn.oracle.history``), so no event of the explained event's batch is walked. A
walk whose nodes have no earlier event stops early; its missing steps are padded with ``-1``.

**Anonymisation** replaces each node by the order of its first appearance in the walk (the root
is 0). An event becomes the unordered pair of its endpoints' anonymous ids, and the walk's
**motif class** is the sequence of those pairs (``None`` for missing steps): it depends on the
walk's structure, not on node identities. ``motif_classes`` enumerates every class of a length.
The reference code keeps 12 hand-listed classes of length 3 (it restricts the third step);
here the walk is Algorithm 1's general one, and all classes are enumerated.

The **structural features** of a walk event (the reference's ``edge_identify``) count how often
the event appears at each position among the root's walks, divided by the number of walks.

The **null-model prior** ``π`` is the class distribution of walks sampled on the stream with
its ``(src, dst)`` pairs permuted over the events, timestamps kept (the reference's
``load_data_shuffle``): the motif frequencies that temporal structure alone would give.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import EventStream

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Pair = tuple[int, int]
MotifClass = tuple[Pair | None, ...]


@dataclass(frozen=True)
class Walks:
    """``W`` temporal walks of length ``L`` from one root.

    Attributes:
        root: The root node.
        events: Event ids, step 1 first (most recent), ``-1`` for missing steps, ``int [W, L]``.
        src: Each step's event endpoint that was already in the walk, ``int [W, L]`` (-1).
        dst: The other endpoint, ``int [W, L]`` (-1).
        anon: Anonymous ids of ``src`` and ``dst``, ``int [W, L, 2]`` (-1 when missing).
        classes: Motif class index of each walk (``motif_classes``), ``int [W]``.
    """

    root: int
    events: IntArray
    src: IntArray
    dst: IntArray
    anon: IntArray
    classes: IntArray

    @property
    def valid(self) -> npt.NDArray[np.bool_]:
        """Which steps hold an event, ``bool [W, L]``."""
        return self.events >= 0


@lru_cache(maxsize=8)
def motif_classes(length: int) -> tuple[MotifClass, ...]:
    """Every motif class of walks of ``length`` steps, in a fixed order (the one-hot order).

    A step joins a node of the walk (anonymous id ``x < n``) to a node of the walk or a new one
    (``y <= n``), self-loops included; a walk may stop after any step (the rest ``None``),
    even before the first (a root without history).
    """
    out: list[MotifClass] = []

    def grow(prefix: list[Pair | None], n: int) -> None:
        if len(prefix) == length:
            out.append(tuple(prefix))
            return
        out.append(tuple(prefix + [None] * (length - len(prefix))))  # stops here
        for x in range(n):  # unordered pairs {x, y}, x <= y, one end in the walk
            for y in range(x, n + 1):
                grow(prefix + [(x, y)], n + (y == n))

    grow([], 1)
    return tuple(sorted(set(out), key=lambda c: [(-1, -1) if p is None else p for p in c]))


def class_index(length: int) -> dict[MotifClass, int]:
    """``motif_classes(length)`` as ``class → index``."""
    return {c: i for i, c in enumerate(motif_classes(length))}


def anonymise(root: int, src: npt.ArrayLike, dst: npt.ArrayLike
              ) -> tuple[IntArray, list[MotifClass]]:
    """Anonymous ids of walks' endpoints and the walks' motif classes.

    Args:
        root: The walks' root node (anonymous id 0).
        src: Per step, the endpoint already in the walk, ``int [W, L]`` (-1: missing step).
        dst: The other endpoint, ``int [W, L]``.

    Returns:
        ``(anon [W, L, 2], classes)``: the anonymous ids of ``src`` and ``dst`` (-1 for a missing
        step), and each walk's class (a tuple of sorted anonymous pairs, None for missing steps).
    """
    s = np.asarray(src, dtype=np.int64)
    d = np.asarray(dst, dtype=np.int64)
    w, length = s.shape
    anon = np.full((w, length, 2), -1, dtype=np.int64)
    classes: list[MotifClass] = []
    for i in range(w):
        ids = {int(root): 0}
        pairs: list[Pair | None] = []
        for j in range(length):
            if s[i, j] < 0:
                pairs.extend([None] * (length - j))
                break
            for k, node in enumerate((int(s[i, j]), int(d[i, j]))):
                if node not in ids:
                    ids[node] = len(ids)
                anon[i, j, k] = ids[node]
            a, b = int(anon[i, j, 0]), int(anon[i, j, 1])
            pairs.append((min(a, b), max(a, b)))
        classes.append(tuple(pairs))
    return anon, classes


def sample_walks(index: TemporalIndex, root: int, end: int, n_walks: int, length: int,
                 degree: int, rng: np.random.Generator) -> Walks:
    """``n_walks`` temporal walks from ``root`` over the events with id ``< end`` (see the
    module docstring).

    Args:
        index: The stream's temporal index.
        root: The root node.
        end: The history end ``h`` (exclusive): every walked event has an id ``< end``.
        n_walks: ``W``.
        length: ``L``, events per walk.
        degree: Each step draws among the ``degree`` most recent earlier events of each node
            of the walk.
        rng: The random generator (seed it for reproducible walks).

    Returns:
        The walks.
    """
    w, n_max = int(n_walks), int(length) + 1
    nodes = np.full((w, n_max), -1, dtype=np.int64)  # the walk's node set, in order of arrival
    nodes[:, 0] = int(root)
    count = np.ones(w, dtype=np.int64)
    bound = np.full(w, int(end), dtype=np.int64)
    alive = np.ones(w, dtype=bool)
    events = np.full((w, length), -1, dtype=np.int64)
    src = np.full((w, length), -1, dtype=np.int64)
    dst = np.full((w, length), -1, dtype=np.int64)
    for j in range(int(length)):
        k = j + 1  # the walk holds at most k nodes before this step
        q_nodes = nodes[:, :k]
        live = (q_nodes >= 0) & alive[:, None]
        flat = np.where(live, q_nodes, 0).reshape(-1)
        nbr, eid, ok = index.recent_neighbors(flat, np.repeat(bound, k), int(degree))
        nbr = nbr.reshape(w, k, -1)
        eid = eid.reshape(w, k, -1)
        ok = ok.reshape(w, k, -1) & live[:, :, None]
        # an event between two nodes of the walk is listed by both: keep it at its earlier node
        earlier = np.zeros_like(ok)
        for a in range(1, k):
            for b in range(a):
                earlier[:, a, :] |= (nbr[:, a, :] == q_nodes[:, b, None]) & (q_nodes[:, b, None]
                                                                              >= 0)
        ok &= ~earlier
        key = np.where(ok, rng.random(ok.shape), -1.0).reshape(w, -1)
        pick = key.argmax(axis=1)
        found = key[np.arange(w), pick] >= 0
        which = pick // eid.shape[2]
        rows = np.flatnonzero(found)
        e = eid.reshape(w, -1)[rows, pick[rows]]
        other = nbr.reshape(w, -1)[rows, pick[rows]]
        here = q_nodes[rows, which[rows]]
        events[rows, j] = e
        src[rows, j] = here
        dst[rows, j] = other
        bound[rows] = e
        new = ~np.any(nodes[rows] == other[:, None], axis=1)
        nodes[rows[new], count[rows[new]]] = other[new]
        count[rows[new]] += 1
        alive &= found
    anon, classes = anonymise(root, src, dst)
    lookup = class_index(int(length))
    return Walks(int(root), events, src, dst, anon,
                 np.asarray([lookup[c] for c in classes], dtype=np.int64))


def position_counts(walks: Walks) -> FloatArray:
    """How often each walk event appears at each step among the root's walks, divided by the
    number of walks, ``float [W, L, L]`` (0 for missing steps): the reference's structural
    event features (``edge_identify``)."""
    ev = walks.events
    w, length = ev.shape
    out = np.zeros((w, length, length), dtype=np.float64)
    for p in range(length):
        col = ev[:, p]
        out[:, :, p] = (ev[:, :, None] == col[None, None, :]).sum(axis=2)
    out[ev < 0] = 0.0
    return out / max(w, 1)


def null_stream(stream: EventStream, seed: int) -> EventStream:
    """The null model: ``stream`` with its ``(src, dst)`` pairs permuted over the events,
    timestamps, features and order kept."""
    perm = np.random.default_rng(seed).permutation(stream.num_events)
    return EventStream(src=stream.src[perm].copy(), dst=stream.dst[perm].copy(),
                       t=np.asarray(stream.t).copy(), edge_feat=np.asarray(stream.edge_feat),
                       labels=np.asarray(stream.labels).copy(), num_nodes=stream.num_nodes,
                       name=f"{stream.name}_null")


def null_prior(stream: EventStream, events: npt.ArrayLike, n_walks: int, length: int,
               degree: int, seed: int) -> FloatArray:
    """The null-model prior ``π``: motif class frequencies of walks from the source and the
    destination of each of ``events`` on ``null_stream`` (each bounded by its event), with
    add-one smoothing so that every class has a positive prior, ``float [C]``, summing to 1."""
    null = null_stream(stream, seed)
    index = TemporalIndex(null)
    rng = np.random.default_rng(seed)
    counts = np.ones(len(motif_classes(int(length))), dtype=np.float64)
    for e in np.asarray(events, dtype=np.int64).tolist():
        for root in (int(null.src[e]), int(null.dst[e])):
            walks = sample_walks(index, root, int(e), n_walks, length, degree, rng)
            counts += np.bincount(walks.classes, minlength=len(counts))
    return counts / counts.sum()


_INDEX: dict[int, tuple[EventStream, TemporalIndex]] = {}


def stream_index(stream: EventStream) -> TemporalIndex:
    """The temporal index of ``stream``, built on first use and kept for the last stream
    (``explain.py`` builds a fresh explainer per event)."""
    kept = _INDEX.get(id(stream))
    if kept is None or kept[0] is not stream:
        _INDEX.clear()
        kept = (stream, TemporalIndex(stream))
        _INDEX[id(stream)] = kept
    return kept[1]


__all__ = ["MotifClass", "Walks", "anonymise", "class_index", "motif_classes", "null_prior",
           "null_stream", "position_counts", "sample_walks", "stream_index"]
