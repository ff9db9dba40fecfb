"""Exact searches that certificates rest on: all sets by increasing size, and pruning.

Both talk to the oracle's **exact** backend only (docs/design.md §7: certificates come only from
exact evaluations), in batched calls:

* [``search_by_size``][cftgnn.explain.search_by_size] evaluates every removable set of size 1, 2, …,
  ``max_size`` (sizes in increasing order, in chunks of ``chunk_size`` sets) and stops after the
  first size that holds a counterfactual, answering the one with the largest margin there (ties →
  the better-ranked set). Nothing is skipped by monotonicity: the oracle is not monotone. Within a
  size, sets are evaluated in time order (by their earliest event, then the next): the sets of one
  chunk then share their oldest removals, whose effects the causal-cone replay computes once per
  chunk (on UCI · TGN tail events, K = 3, 1.2-1.8x faster than chunks in ranking order,
  whose every chunk names every far-back event, and on event 54454 a third fewer rows updated;
  docs/quality.md). The exhaustive explainer and every explainer's ``certify`` use it. With
  ``num_workers > 1`` the chunks of a size go to forked worker processes
  (``cftgnn.oracle.workers``), with the same chunks, logits and answer as one process.
  With the oracle's ``progress`` (``explain.py``'s ``progress=true``), an enumeration of more
  than one chunk shows a bar of its sets for the event (tqdm, on stderr, gone when it ends):
  a K = 4 certification over 64 candidates is 679,120 sets, 166 calls of 4,096.
* [``prune``][cftgnn.explain.prune] shrinks a counterfactual by dropping one event at a time (all
  ``X \\ {e}`` in one batched call) while it stays counterfactual, until no single event can be
  dropped (1-minimal).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from cftgnn.errors import ExplainerError
from cftgnn.oracle.oracle import Oracle, is_flip
from cftgnn.oracle.workers import ChunkDone, ForkedWorkers

#: Sets per batched exact call when the caller does not say (bounds memory per call).
DEFAULT_CHUNK = 4096

#: Under a deadline, the first chunk's size; later chunks are sized to the time left from the
#: previous chunk's seconds per set, so a deadline is overrun by about one small chunk.
_MIN_TIMED_CHUNK = 64


@dataclass(frozen=True)
class SizeSearch:
    """Outcome of [``search_by_size``][cftgnn.explain.search_by_size].

    Attributes:
        explanation: The counterfactual with the largest margin at the first size that holds
            one (events in ranking order), or None when none was found.
        logit: Its exact logit (None without a counterfactual).
        sizes_done: The largest size whose sets were all evaluated.
        cut_short: A call or time budget stopped the search before it was complete.
        evaluated: Sets requested from the oracle (cache hits included).
    """

    explanation: tuple[int, ...] | None
    logit: float | None
    sizes_done: int
    cut_short: bool
    evaluated: int


def _flip_margins(p_orig: float, logits: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Margin of each flipped logit, ``-inf`` where the logit does not flip, ``[P]``."""
    margins = -logits * np.sign(p_orig)
    return np.where(is_flip(p_orig, logits), margins, -np.inf)


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector, restoring its state afterwards.

    An enumeration creates tens of thousands of small frozensets that the oracle caches; each
    allocation burst triggers generational collections that walk all of them. They hold no
    reference cycles (reference counting frees them), so pausing the cyclic collector loses
    nothing. Measured on UCI · TGN, 43,744 sets: 0.22 s of Python overhead per event with it,
    0.07 s without.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def search_by_size(
    oracle: Oracle,
    ranked: Sequence[int] | npt.ArrayLike,
    max_size: int,
    chunk_size: int = DEFAULT_CHUNK,
    max_calls: int | None = None,
    deadline: float | None = None,
    num_workers: int | None = None,
    progress: bool | None = None,
) -> SizeSearch:
    """Every removal set of size ``1..max_size`` over ``ranked``, exactly, smallest first.

    Within one size, sets are evaluated in the lexicographic order of their events sorted by
    time (event ids ascending, ``itertools.combinations`` of the sorted events), so that a
    chunk's sets share their oldest removals (see the module docstring). Among
    counterfactuals of the first size that holds one, the largest margin wins, ties → the
    better-ranked set (the lexicographically smaller positions in ``ranked``), which the
    answer lists in ranking order. A search cut short by ``max_calls`` or ``deadline`` has
    evaluated the sets of its last size that come first in time.

    With ``num_workers`` ``N > 1``, the chunks of a size of more than one chunk are handed to
    ``N`` processes forked from this one (``cftgnn.oracle.workers``, started on the first
    such size): the chunks are the ones one process forms, each evaluated whole by one
    process, and the answer is merged by set (largest margin, ties → the better-ranked set),
    so answers, certificates, the oracle's cache and its counters (calls, cache hits,
    batches) are those of ``N = 1``, every logit bitwise; only the oracle's backend seconds
    are summed over the processes. Under a ``deadline`` each process sizes its chunks to the
    time left, as one process does, so which sets of the last size were evaluated depends
    on the timing (as with one process).

    Args:
        oracle: Oracle of the explained event.
        ranked: The removable events, best first (e.g. a strategy's ranking of ``R``).
        max_size: Largest size to evaluate.
        chunk_size: Sets per batched exact call.
        max_calls: Stop before the exact backend has evaluated more than this many sets in
            this search (cache hits are free); None: no bound.
        deadline: Stop when ``time.perf_counter()`` passes this value; None: no bound.
            Chunks then start at 64 sets and are sized to the time left.
        num_workers: Processes the sets of one size are split across; None: the oracle's
            ``num_workers``.
        progress: Show a bar of the sets evaluated (when there is more than one chunk of
            them); None: the oracle's ``progress``.

    Returns:
        The [``SizeSearch``][cftgnn.explain.SizeSearch].

    Raises:
        ExplainerError: For ``chunk_size < 1`` or ``num_workers < 1``.
    """
    if chunk_size < 1:
        raise ExplainerError(f"chunk_size must be >= 1, got {chunk_size}")
    workers = oracle.num_workers if num_workers is None else num_workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ExplainerError(f"num_workers must be an integer >= 1, got {workers!r}")
    events = [int(e) for e in np.asarray(ranked, dtype=np.int64).reshape(-1)]
    show = oracle.progress if progress is None else progress
    with _cyclic_gc_paused(), contextlib.ExitStack() as stack:
        bar = stack.enter_context(_bar(oracle, len(events), max_size, chunk_size, show))
        return _search_by_size(oracle, events, max_size, chunk_size, max_calls, deadline,
                               _Evaluations(oracle, workers, stack), bar)


def _bar(oracle: Oracle, num_events: int, max_size: int, chunk_size: int,
         show: bool) -> tqdm[Any]:
    """The enumeration's bar: every set of sizes ``1..max_size`` of ``num_events`` events
    (the most it evaluates), shown when ``show`` and there is more than one chunk."""
    total = sum(math.comb(num_events, size) for size in range(1, max(0, max_size) + 1))
    return tqdm(total=total, desc=f"event {oracle.event_id}: exact sets of <= {max_size}",
                unit="set", unit_scale=True, leave=False, dynamic_ncols=True,
                disable=not show or total <= chunk_size)


class _Evaluations:
    """Where a search's chunks are evaluated: in this process, one at a time, or, for a size
    of more than one chunk when ``num_workers > 1``, by forked workers (started on the first
    such size, stopped with ``stack``)."""

    def __init__(self, oracle: Oracle, num_workers: int, stack: contextlib.ExitStack) -> None:
        self.oracle, self.num_workers, self._stack = oracle, num_workers, stack
        self._workers: ForkedWorkers | None = None
        self._parallel = False
        self._local: list[ChunkDone] = []

    def size(self, sets: int, first_chunk: int) -> None:
        """A new size of ``sets`` sets, whose first chunk holds ``first_chunk``: workers for
        it when it has more than one chunk."""
        if self.num_workers > 1 and sets > first_chunk and self._workers is None:
            self._workers = self._stack.enter_context(ForkedWorkers(self.oracle,
                                                                    self.num_workers))
        self._parallel = sets > first_chunk and self._workers is not None

    @property
    def room(self) -> bool:
        """Whether a chunk can be submitted now."""
        if self._parallel and self._workers is not None:
            return self._workers.idle > 0
        return not self._local

    def submit(self, tag: int, sets: list[frozenset[int]]) -> None:
        """Evaluate a chunk (here at once, or sent to an idle worker)."""
        if self._parallel and self._workers is not None:
            self._workers.submit(tag, sets)
            return
        start = time.perf_counter()
        logits = self.oracle.exact_batch(sets)
        self._local.append(ChunkDone(tag, tuple(sets), logits, time.perf_counter() - start))

    def collect(self) -> list[ChunkDone]:
        """The chunks evaluated since the last call (waiting for a worker's when one is in
        flight); empty when nothing is pending."""
        if self._local:
            out, self._local = self._local, []
            return out
        return [] if self._workers is None else self._workers.collect()


def _search_by_size(oracle: Oracle, events: list[int], max_size: int, chunk_size: int,
                    max_calls: int | None, deadline: float | None,
                    chunks: _Evaluations, bar: tqdm[Any]) -> SizeSearch:
    p0 = oracle.original_logit
    calls = 0  # backend evaluations of the chunks submitted (their sets not cached before)
    evaluated = 0
    per_set = 0.0  # seconds per set of the last chunk (sizes the chunks under a deadline)
    position = {e: i for i, e in enumerate(events)}
    by_time = sorted(events)

    def ranked(c: Iterable[int] | None) -> tuple[int, ...] | None:
        """The set's events in ranking order (the answer's order)."""
        return None if c is None else tuple(sorted(c, key=position.__getitem__))

    def rank_key(c: Iterable[int]) -> tuple[int, ...]:
        """Orders sets as ``itertools.combinations`` over the ranking would."""
        return tuple(sorted(position[e] for e in c))

    for size in range(1, max(0, max_size) + 1):
        combos = itertools.combinations(by_time, size)
        chunks.size(math.comb(len(by_time), size),
                    chunk_size if deadline is None else min(chunk_size, _MIN_TIMED_CHUNK))
        bar.set_postfix_str(f"size {size}", refresh=False)
        best: frozenset[int] | None = None
        best_margin, best_logit = -math.inf, math.nan
        more, cut, tag = True, False, 0
        while True:
            while more and chunks.room:
                take = chunk_size
                if deadline is not None:  # start small, then fit the chunk into the time left
                    left = deadline - time.perf_counter()
                    fit = _MIN_TIMED_CHUNK if per_set <= 0 else int(left / per_set)
                    take = min(take, max(_MIN_TIMED_CHUNK, fit))
                if max_calls is not None:
                    take = min(take, max_calls - calls)
                out_of_time = deadline is not None and time.perf_counter() > deadline
                chunk = list(itertools.islice(combos, max(take, 0))) if not out_of_time else []
                if not chunk:  # cut only if a set of this size is left (the time or the
                    more = False  # calls may run out just as its last chunk was submitted)
                    cut = (out_of_time or take <= 0) and next(combos, None) is not None
                    break
                sets = [frozenset(c) for c in chunk]
                if max_calls is not None:  # as the backend will count them
                    calls += sum(oracle.cached_exact(s) is None for s in sets)
                chunks.submit(tag, sets)
                tag += 1
            done = chunks.collect()
            if not done:
                break
            for d in done:  # merged by set: the outcome does not depend on arrival order
                per_set = d.seconds / len(d.sets)
                evaluated += len(d.sets)
                bar.update(len(d.sets))
                margins = _flip_margins(p0, d.logits)
                top = float(margins.max())
                if top == -math.inf or top < best_margin:
                    continue
                for i in np.flatnonzero(margins == top):  # ties → the better-ranked set
                    if best is None or top > best_margin or (rank_key(d.sets[i])
                                                             < rank_key(best)):
                        best, best_margin, best_logit = d.sets[i], top, float(d.logits[i])
        if cut:
            return SizeSearch(ranked(best), None if best is None else best_logit,
                              size - 1, True, evaluated)
        if best is not None:
            return SizeSearch(ranked(best), best_logit, size, False, evaluated)
    return SizeSearch(None, None, max(0, max_size), False, evaluated)


def largest_chunk(removable: int, max_size: int, chunk_size: int = DEFAULT_CHUNK) -> int:
    """Sets in the largest exact call ``search_by_size`` makes over ``removable`` events up to
    ``max_size``: a size's sets, or a chunk of them when there are more (0: none)."""
    most = max((math.comb(removable, s) for s in range(1, max_size + 1)), default=0)
    return min(chunk_size, most)


def prune(oracle: Oracle, explanation: Sequence[int]) -> tuple[tuple[int, ...], float]:
    """Shrink a counterfactual to a 1-minimal one with batched exact checks.

    Each round evaluates ``X \\ {e}`` for every ``e ∈ X`` in one exact call; if some of them
    still flip, the one with the largest margin becomes ``X`` (ties → the event dropped is
    the earlier one in ``X``). It stops when no single event can be dropped, so the answer is
    1-minimal (not necessarily cardinality-minimal: the oracle is not monotone).

    Args:
        oracle: Oracle of the explained event.
        explanation: A counterfactual (confirmed exactly), in the order it was built.

    Returns:
        The pruned explanation (remaining events in their original order) and its exact
        logit.

    Raises:
        ExplainerError: If ``explanation`` is not an exact counterfactual.
    """
    current = [int(e) for e in explanation]
    p0 = oracle.original_logit
    logit = oracle.exact(frozenset(current))
    if not is_flip(p0, logit):
        raise ExplainerError(f"cannot prune {current}: it is not a counterfactual")
    while len(current) > 1:
        whole = frozenset(current)
        logits = oracle.exact_batch([whole - {e} for e in current])
        margins = _flip_margins(p0, logits)
        j = int(np.argmax(margins))
        if not np.isfinite(margins[j]):
            break
        logit = float(logits[j])
        del current[j]
    return tuple(current), logit


__all__ = ["DEFAULT_CHUNK", "SizeSearch", "largest_chunk", "prune", "search_by_size"]
