"""What a removal changes downstream of itself: the *consequence* of a removal set.

Removing past events changes more than the explained prediction: later events of the history
see different inputs. NSGA-II (seed 003) counts an action's consequences as a cost; here the
consequence of a removal set ``s`` is the number of kept history events between the oldest
candidate and the explained event whose input the removal changes. What "input" means depends
on the model:

* **memory models** (TGN and any model with state): an event's input is its endpoints' memory.
  TGN applies a batch's messages at the start of the next batch and keeps, per node, only
  its last message of the batch; so removing ``e`` changes a node's memory when ``e`` is (or,
  with later candidates removed too, may become) that node's last message, and every later
  event that reads a changed memory changes the memory of its endpoints in turn: the causal
  cone of ``e`` (``memory_reach``). It is conservative: it never misses an event whose
  input changes, but counts one whose changed memory happens to be equal, and an earlier
  message whose later ones are removable counts for every set. The attention over sampled
  neighbours that TGN's embedding adds is not counted.
* **memoryless models** (TGAT): an event's input is the sampled neighbourhood of its
  endpoints, the ``n`` most recent events of each before it. Removing ``e`` changes the
  neighbourhood of the next ``n`` events of each endpoint of ``e`` (``neighbourhood_reach``;
  one hop, the neighbourhoods the first layer samples).

Both give, per kept event, the candidates in its past that reach it (``Reach``, bit words
over the candidates); the consequence of ``P`` sets is then one vectorised count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cftgnn.arrays import mask_words
from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import EventStream, IntArray

Words = npt.NDArray[np.uint64]


def _bits(positions: IntArray, n: int) -> Words:
    """One row of bit words per position: bit ``p`` set, ``uint64 [len(positions), W]``."""
    out = np.zeros((len(positions), mask_words(n)), dtype=np.uint64)
    rows = np.arange(len(positions))
    out[rows, positions // 64] = np.left_shift(np.uint64(1), (positions % 64).astype(np.uint64))
    return out


@dataclass(frozen=True)
class Reach:
    """Which candidates reach which kept history events.

    Attributes:
        candidates: Candidate event ids, ascending, ``int64 [M]`` (bit ``j`` is candidate j).
        words: Distinct non-zero reach words of the non-candidate events, ``uint64 [U, W]``.
        counts: How many non-candidate events have each of those words, ``int64 [U]``.
        candidate_words: Reach word of each candidate event itself, ``uint64 [M, W]`` (a
            candidate counts only when it is kept).
    """

    candidates: IntArray
    words: Words
    counts: IntArray
    candidate_words: Words

    def consequence(self, sets: Sequence[frozenset[int]]) -> IntArray:
        """Kept events whose input each removal set changes, ``int64 [P]``.

        Args:
            sets: Removal sets, subsets of the candidates.

        Raises:
            ValueError: A set holds an event that is not a candidate.
        """
        m = len(self.candidates)
        pos_of = {int(e): j for j, e in enumerate(self.candidates.tolist())}
        masks = np.zeros((len(sets), mask_words(m)), dtype=np.uint64)
        removed = np.zeros((len(sets), m), dtype=bool)
        for p, s in enumerate(sets):
            try:
                pos = np.fromiter((pos_of[int(e)] for e in s), dtype=np.int64, count=len(s))
            except KeyError as exc:
                raise ValueError(f"event {exc.args[0]} is not a candidate") from None
            removed[p, pos] = True
            if len(pos):
                np.bitwise_or.reduce(_bits(pos, m), axis=0, out=masks[p])
        hit_other = (self.words[None, :, :] & masks[:, None, :]).any(axis=2)  # [P, U]
        hit_cand = (self.candidate_words[None, :, :] & masks[:, None, :]).any(axis=2)  # [P, M]
        return (hit_other @ self.counts + (hit_cand & ~removed).sum(axis=1)).astype(np.int64)


def _reach(per_event: Words, events: IntArray, candidates: IntArray) -> Reach:
    """Fold per-event reach words into a ``Reach``."""
    is_cand = np.isin(events, candidates)
    cand_words = np.zeros((len(candidates), per_event.shape[1]), dtype=np.uint64)
    cand_words[np.searchsorted(candidates, events[is_cand])] = per_event[is_cand]
    other = per_event[~is_cand]
    other = other[other.any(axis=1)]
    if len(other):
        words, counts = np.unique(other, axis=0, return_counts=True)
    else:
        words, counts = other, np.zeros(0, dtype=np.int64)
    return Reach(candidates, words, counts.astype(np.int64), cand_words)


def memory_reach(stream: EventStream, end: int, candidates: IntArray,
                 batch_size: int) -> Reach:
    """The candidates whose removal changes each kept event's endpoint memory (TGN).

    Batches are fixed by original id (``[b·B, (b+1)·B)``): an event reads its endpoints'
    memory as of its batch's start, and a node's memory after a batch depends on what it held
    before plus its **last** message of the batch (TGN aggregates by the last message): the
    last event touching it, what that event read, and the event itself. An earlier event of
    the batch counts too when every later event of the node in the batch is a candidate
    (removing them all makes it the last), so the reach never misses a dependency.

    Args:
        stream: The event stream.
        end: The explained event's id (history ends before it).
        candidates: Candidate event ids, ascending, all ``< end``.
        batch_size: The model's batch size.

    Returns:
        The reach of the events in ``[min(candidates), end)``.
    """
    candidates = np.asarray(candidates, dtype=np.int64)
    m = len(candidates)
    mem = np.zeros((stream.num_nodes, mask_words(m)), dtype=np.uint64)
    first = int(candidates[0]) if m else end
    events = np.arange(first, end, dtype=np.int64)
    per_event = np.zeros((len(events), mask_words(m)), dtype=np.uint64)
    own = np.zeros_like(per_event)
    is_cand = np.isin(events, candidates)
    own[is_cand] = _bits(np.searchsorted(candidates, events[is_cand]), m)
    b = (first // batch_size) * batch_size
    while b < end:
        lo, hi = max(b, first), min(b + batch_size, end)
        if lo < hi:
            sl = slice(lo - first, hi - first)
            u, v = stream.src[lo:hi], stream.dst[lo:hi]
            seen = mem[u] | mem[v]
            per_event[sl] = seen
            k = np.arange(hi - lo)
            node, ev = np.concatenate([u, v]), np.concatenate([k, k])
            order = np.lexsort((ev, node))
            node, ev = node[order], ev[order]
            # an incidence counts when no later incidence of its node is a kept-for-sure
            # (non-candidate) event: suffix count of non-candidates within the node's group
            plain = (~is_cand[sl][ev]).astype(np.int64)
            after = np.cumsum(plain[::-1])[::-1] - plain  # non-candidates after, all groups
            group_end = np.r_[np.flatnonzero(node[1:] != node[:-1]), len(node) - 1]
            group_of = np.repeat(np.arange(len(group_end)),
                                 np.diff(np.r_[-1, group_end]))
            tail = np.cumsum(plain[::-1])[::-1]  # non-candidates from here to the very end
            beyond = np.r_[tail[group_end[:-1] + 1], 0]  # after each group's end
            counts = (after - beyond[group_of]) == 0
            out = seen[ev[counts]] | own[sl][ev[counts]]
            np.bitwise_or.at(mem, node[counts], out)
        b += batch_size
    return _reach(per_event, events, candidates)


def neighbourhood_reach(index: TemporalIndex, end: int, candidates: IntArray,
                        num_neighbors: int) -> Reach:
    """The candidates inside each kept event's sampled one-hop neighbourhoods (TGAT).

    Event ``e'`` samples, for each endpoint ``w``, the ``n`` most recent events of ``w``
    before it; removing a candidate ``e`` of ``w`` changes that sample for the next ``n``
    events of ``w`` after ``e`` (before ``end``).

    Args:
        index: Index of the stream.
        end: The explained event's id.
        candidates: Candidate event ids, ascending, all ``< end``.
        num_neighbors: ``n``, the neighbours sampled per node.

    Returns:
        The reach of the events in ``[min(candidates), end)``.
    """
    candidates = np.asarray(candidates, dtype=np.int64)
    m = len(candidates)
    first = int(candidates[0]) if m else end
    events = np.arange(first, end, dtype=np.int64)
    per_event = np.zeros((len(events), mask_words(m)), dtype=np.uint64)
    stream = index.stream
    for j, e in enumerate(candidates.tolist()):
        bit = _bits(np.array([j]), m)[0]
        for w in {int(stream.src[e]), int(stream.dst[e])}:
            lo, hi = int(index.indptr[w]), int(index.indptr[w + 1])
            pos = lo + int(np.searchsorted(index.adj_eid[lo:hi], e, side="right"))
            later = index.adj_eid[pos : min(pos + num_neighbors, hi)]
            later = later[later < end]
            per_event[later - first] |= bit
    return _reach(per_event, events, candidates)


__all__ = ["Reach", "memory_reach", "neighbourhood_reach"]
