"""The oracle: the explained event's logit as a function of the removed past events.

Every explainer talks to the model only through an [``Oracle``][cftgnn.oracle.Oracle]. The oracle is
bound to one explained event (its candidate set ``C`` and its original logit ``p_orig``) and wraps
two *backends*, batched functions from removal sets to logits
([``LogitFn``][cftgnn.oracle.LogitFn]):

* the **exact** backend, ``f(G(t_i) \\ s, ε_i)`` (docs/design.md §2), and
* optionally an **approximate** backend (history = events before ``ε_min`` plus ``C \\ s``).

The oracle's *search mode* ([``OracleMode``][cftgnn.oracle.OracleMode]) decides which backend
answers ``oracle(s)`` / ``oracle.batch(...)``, the calls that steer a search. ``oracle.exact(s)``
always uses the exact backend, and [``Oracle.confirm``][cftgnn.oracle.Oracle.confirm] is the
two-stage check: a set the search mode calls counterfactual is re-evaluated exactly before anything
reports it. Both values are stored per set, so approximation/exact agreement can be reported.

The oracle also carries the explained event's *search space* (docs/design.md §7): the removable
events ``R ⊆ C`` left after user constraints (``cftgnn.oracle.constraints``) and an
optional maximum explanation size. Removal sets must be subsets of ``R``, so protected events
stay in every history. [``Oracle.certificate``][cftgnn.oracle.Oracle.certificate] derives the
minimality lower bound from the exact evaluations made so far.

Results are cached per removed *set* (a ``frozenset``); a hit costs no backend evaluation.
Counters separate search-mode and exact evaluations, cache hits and time spent in backends.
The cache lives on the oracle instance (one per explained event), never at module level.

(One module of under 600 lines: the cache, the counters, the two-stage check and the
certificate all read and write the one per-event state of [``Oracle``][cftgnn.oracle.Oracle].)
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, overload

import numpy as np
import numpy.typing as npt

from cftgnn.data.index import Candidates
from cftgnn.errors import ExplainerError, OracleError

if TYPE_CHECKING:  # the probe needs torch and a model; the oracle itself does not
    from cftgnn.data.stream import EventStream
    from cftgnn.oracle.fingerprint import ModelFingerprint
    from cftgnn.oracle.probe import ModelProbe
    from cftgnn.oracle.target import RankScores

FloatArray = npt.NDArray[np.float64]

#: A batched logit backend: P removal sets (candidate event ids) -> float logits ``[P]``.
LogitFn = Callable[[Sequence[frozenset[int]]], npt.ArrayLike]

#: A batched consequence measure: P removal sets -> how many later history events each one
#: changes, ``int [P]`` (``cftgnn.replay.consequence``).
ConsequenceFn = Callable[[Sequence[frozenset[int]]], npt.ArrayLike]
#: Exact logits of the explained source and time with another destination under removal
#: sets: ``pair(sets, dst)`` (``EventReplay.pair_logits``; the ``tempme`` negative pairs).
PairFn = Callable[[Sequence[frozenset[int]], int], npt.ArrayLike]

RemovalSet = frozenset[int]


class OracleMode(str, Enum):
    """Which backend answers the search-mode calls of an [``Oracle``][cftgnn.oracle.Oracle]."""

    EXACT = "exact"
    APPROXIMATE = "approximate"


# ---------------------------------------------------------------------------- semantics
def delta(p_orig: float, p: float) -> float:
    """Shift of a logit towards the opposite prediction (docs/design.md §2, seed eq. for Δ).

    ``Δ(p_orig, p) = p_orig − p`` if ``p_orig ≥ 0`` else ``p − p_orig``.

    Args:
        p_orig: Original logit.
        p: Logit after a perturbation.

    Returns:
        The signed shift; positive means "towards a flip".
    """
    return p_orig - p if p_orig >= 0 else p - p_orig


def node_score(p_orig: float, p: float) -> float:
    """Exploitation score ``max(0, Δ(p_orig, p) / |p_orig|)``; ``> 1`` iff the sign flipped.

    Raises:
        ExplainerError: If ``p_orig == 0`` (such events get the ``zero_logit`` status upstream).
    """
    if p_orig == 0:
        raise ExplainerError("node_score is undefined for an original logit of exactly 0")
    return max(0.0, delta(p_orig, p) / abs(p_orig))


@overload
def is_flip(p_orig: float, p: float) -> bool: ...


@overload
def is_flip(p_orig: npt.ArrayLike, p: npt.ArrayLike) -> npt.NDArray[np.bool_]: ...


def is_flip(p_orig: npt.ArrayLike, p: npt.ArrayLike) -> bool | npt.NDArray[np.bool_]:
    """Whether ``p`` is counterfactual to ``p_orig``: ``p_orig · p < 0`` (docs/design.md §2).

    The one flip test: the oracle, the searches, the metrics, the records and the reports all
    call it. A logit of exactly 0 is not a flip, nothing flips an original logit of 0, and a
    NaN never flips.

    Args:
        p_orig: Original logit(s).
        p: Logit(s) after a perturbation (broadcast against ``p_orig``).

    Returns:
        A ``bool`` for two scalars, else a ``bool`` array of the broadcast shape.
    """
    if np.ndim(p_orig) == 0 and np.ndim(p) == 0:
        return bool(float(p_orig) * float(p) < 0)  # type: ignore[arg-type]
    return np.asarray(np.asarray(p_orig, dtype=np.float64) * np.asarray(p, dtype=np.float64)
                      < 0.0, dtype=np.bool_)


def margin(p_orig: float, p: float) -> float:
    """How far past zero a logit moved, ``-p · sign(p_orig)`` (docs/design.md §7).

    Positive iff ``p`` flips ``p_orig``; among counterfactuals of one size the largest wins.
    """
    return -p if p_orig > 0 else (p if p_orig < 0 else 0.0)


# ---------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Confirmation:
    """Outcome of the two-stage counterfactual check of one removal set.

    Attributes:
        removed: The removal set.
        search_logit: Logit in the oracle's search mode.
        exact_logit: Exact logit, or None when the search mode did not call it a flip (no
            exact evaluation was needed).
        is_counterfactual: True iff the exact logit flips the original prediction.
    """

    removed: RemovalSet
    search_logit: float
    exact_logit: float | None
    is_counterfactual: bool

    @property
    def logit(self) -> float:
        """The best-known logit: the exact one when computed, else the search-mode one."""
        return self.search_logit if self.exact_logit is None else self.exact_logit


@dataclass(frozen=True)
class OracleStats:
    """Counters of an [``Oracle``][cftgnn.oracle.Oracle] (cumulative; subtract two snapshots for a
    delta).

    Attributes:
        search_calls: Removal sets evaluated by the search-mode backend.
        exact_calls: Removal sets evaluated by the exact backend on behalf of ``exact`` /
            ``confirm`` (in exact mode, sets already evaluated in search mode are hits).
        cache_hits: Requested sets answered without a backend evaluation (including duplicates
            inside one batch).
        search_batches: Backend invocations in search mode.
        exact_batches: Backend invocations for exact / confirm.
        search_time_s: Seconds spent inside the search-mode backend.
        exact_time_s: Seconds spent inside the exact backend for exact / confirm.
    """

    search_calls: int = 0
    exact_calls: int = 0
    cache_hits: int = 0
    search_batches: int = 0
    exact_batches: int = 0
    search_time_s: float = 0.0
    exact_time_s: float = 0.0

    @property
    def calls(self) -> int:
        """All backend evaluations (search + exact)."""
        return self.search_calls + self.exact_calls

    @property
    def time_s(self) -> float:
        """All seconds spent in backends."""
        return self.search_time_s + self.exact_time_s

    def __sub__(self, other: OracleStats) -> OracleStats:
        return OracleStats(
            search_calls=self.search_calls - other.search_calls,
            exact_calls=self.exact_calls - other.exact_calls,
            cache_hits=self.cache_hits - other.cache_hits,
            search_batches=self.search_batches - other.search_batches,
            exact_batches=self.exact_batches - other.exact_batches,
            search_time_s=self.search_time_s - other.search_time_s,
            exact_time_s=self.exact_time_s - other.exact_time_s,
        )


class _Channel:
    """One backend with its cache and counters (search or exact)."""

    def __init__(self, fn: LogitFn, cache: dict[RemovalSet, float]) -> None:
        self.fn = fn
        self.cache = cache
        self.calls = 0
        self.batches = 0
        self.time_s = 0.0


# ---------------------------------------------------------------------------- oracle
class Oracle:
    """Cached, counted access to the logit of one explained event under removals.

    Args:
        candidates: Candidate events of the explained event; removal sets must be subsets.
        original_logit: ``p_orig = f(G(t_i), ε_i)``. It is stored as the exact value of the
            empty removal set (so ``exact(∅)`` costs nothing).
        exact: Exact backend.
        approximate: Approximate backend; required when ``mode`` is approximate.
        mode: Search mode, ``"exact"`` or ``"approximate"``. In exact mode the search-mode
            and exact channels share one backend and one cache.
        removable: The events explainers may remove, ``R ⊆ C`` (default: all candidates).
            Every evaluated removal set must be a subset of it.
        max_size: Largest explanation explainers may answer (None: no bound). Explainers
            honour it; the oracle itself still evaluates larger sets (e.g. ``R \\ s`` for
            fidelity−).
        consequence: Optional consequence measure of removal sets (the number of later
            history events whose input a removal changes), for explainers that weigh it.
        probe: Optional window onto the model for explainers that need attention, soft
            removal or candidate features (``ModelProbe``, over
            the same removable events in the same order); stored as
            [``probe``][cftgnn.oracle.Oracle.probe], None when the model offers none.
        num_workers: Processes the exact searches may split one size's sets across
            (``num_workers``; [``search_by_size``][cftgnn.explain.search_by_size] forks them
            from this process, ``cftgnn.oracle.workers``); 1: this process only. It never
            changes a logit, an answer or a counter.
        progress: Exact enumerations show a bar of their sets (the engine's ``progress``).
        fingerprint: The run's model and stream (``fingerprint`` below; the engine's).
        pair: Negative-pair logits (``pair`` below; the engine's).
        stream: The event's stream (``stream`` below; the engine's).
        tallies: Counter objects the backends update (``tallies`` below).
        target: The rank target's backends (``target`` below), or None.

    Raises:
        OracleError: On a non-finite original logit, a missing approximate backend, removable
            events outside the candidates, ``max_size < 1``, ``num_workers < 1`` or a probe
            over other events.
    """

    def __init__(
        self,
        candidates: Candidates,
        original_logit: float,
        exact: LogitFn,
        approximate: LogitFn | None = None,
        mode: OracleMode | str = OracleMode.EXACT,
        removable: Iterable[int] | None = None,
        max_size: int | None = None,
        consequence: ConsequenceFn | None = None,
        probe: ModelProbe | None = None,
        num_workers: int = 1,
        progress: bool = False,
        fingerprint: ModelFingerprint | None = None,
        pair: PairFn | None = None,
        stream: EventStream | None = None,
        tallies: Iterable[object] = (),
        target: RankScores | None = None,
    ) -> None:
        self.candidates = candidates
        self._consequence = consequence
        self.original_logit = float(original_logit)
        if not np.isfinite(self.original_logit):
            raise OracleError(f"original logit must be finite, got {original_logit!r}")
        try:
            self.mode = OracleMode(mode)
        except ValueError as err:
            raise OracleError(f"unknown oracle mode {mode!r}; expected one of "
                              f"{[m.value for m in OracleMode]}") from err
        self.candidate_ids: frozenset[int] = frozenset(int(e) for e in candidates.ids)
        if removable is None:
            self.removable: npt.NDArray[np.int64] = np.asarray(candidates.ids, dtype=np.int64)
        else:
            self.removable = np.unique(np.asarray(list(removable), dtype=np.int64))
            outside = set(self.removable.tolist()) - self.candidate_ids
            if outside:
                raise OracleError(f"removable events {sorted(outside)} are not candidates of "
                                  f"event {candidates.event_id}")
        self.removable_ids: frozenset[int] = frozenset(self.removable.tolist())
        if probe is not None and not np.array_equal(probe.removable, self.removable):
            raise OracleError("the probe is over other events than the oracle's removable ones")
        self.probe: ModelProbe | None = probe
        #: The run's model and stream (the engine's; None for toy oracles), which a trained
        #: explainer checks its checkpoint against (docs/design.md §8).
        self.fingerprint: ModelFingerprint | None = fingerprint
        #: Exact logits of the explained source with another destination (``PairFn``; the
        #: engine's, None for toy oracles): not counted, not cached, never an explainer's.
        self.pair: PairFn | None = pair
        #: The event's stream (the engine's, None for toy oracles): its times and endpoints,
        #: for explainers that read the neighbourhood (TemGX's window); never a model.
        self.stream: EventStream | None = stream
        #: The rank target's backends (``RankScores``: k, the ranks), None for the logit's.
        self.target: RankScores | None = target
        if max_size is not None and int(max_size) < 1:
            raise OracleError(f"max_size must be >= 1, got {max_size}")
        self.max_size = None if max_size is None else int(max_size)
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise OracleError(f"num_workers must be an integer >= 1, got {num_workers!r}")
        self.num_workers = num_workers
        self.progress = bool(progress)
        #: Counters the backends update in place (the engine's ``ReplayCounters``); worker
        #: processes' additions are added back (``cftgnn.oracle.workers``; ``peak_*``: max).
        self.tallies: list[object] = list(tallies)
        exact_cache: dict[RemovalSet, float] = {frozenset(): self.original_logit}
        self._exact = _Channel(exact, exact_cache)
        if self.mode is OracleMode.EXACT:
            self._search = _Channel(exact, exact_cache)
        else:
            if approximate is None:
                raise OracleError("approximate mode needs an approximate backend")
            self._search = _Channel(approximate, {})
        self._hits = 0
        # exact evaluations of non-empty sets per size, and the sizes where one flips (every
        # evaluated set is a subset of R): the certificate without a pass over the cache
        self._exact_sizes: Counter[int] = Counter()
        self._flip_sizes: set[int] = set()

    # ------------------------------------------------------------------ properties
    @property
    def event_id(self) -> int:
        """Id of the explained event."""
        return self.candidates.event_id

    @property
    def stats(self) -> OracleStats:
        """A snapshot of the counters."""
        return OracleStats(
            search_calls=self._search.calls,
            exact_calls=self._exact.calls,
            cache_hits=self._hits,
            search_batches=self._search.batches,
            exact_batches=self._exact.batches,
            search_time_s=self._search.time_s,
            exact_time_s=self._exact.time_s,
        )

    # ------------------------------------------------------------------ evaluation
    def __call__(self, removed: Iterable[int]) -> float:
        """Search-mode logit with the events in ``removed`` taken out of history."""
        return float(self._evaluate(self._search, [removed])[0])

    def batch(self, sets: Sequence[Iterable[int]]) -> FloatArray:
        """Search-mode logits of several removal sets, ``float64 [P]``.

        Only cache misses reach the backend, deduplicated, in one call.
        """
        return self._evaluate(self._search, sets)

    def exact(self, removed: Iterable[int]) -> float:
        """Exact logit with the events in ``removed`` taken out of history."""
        return float(self._evaluate(self._exact, [removed])[0])

    def exact_batch(self, sets: Sequence[Iterable[int]]) -> FloatArray:
        """Exact logits of several removal sets, ``float64 [P]``."""
        return self._evaluate(self._exact, sets)

    def confirm(self, removed: Iterable[int]) -> Confirmation:
        """Two-stage check: search-mode logit, then the exact logit if the former flips.

        In exact mode the second stage is a cache hit. Nothing should be reported as a
        counterfactual unless ``confirm(...).is_counterfactual`` is True.
        """
        key = self._key(removed)
        p_search = self(key)
        p_exact: float | None = None
        if is_flip(self.original_logit, p_search):
            p_exact = self.exact(key)
        return Confirmation(
            removed=key,
            search_logit=p_search,
            exact_logit=p_exact,
            is_counterfactual=p_exact is not None and is_flip(self.original_logit, p_exact),
        )

    def is_counterfactual(self, removed: Iterable[int]) -> bool:
        """Whether ``removed`` flips the prediction, confirmed exactly (see
        [``confirm``][cftgnn.oracle.Oracle.confirm])."""
        return self.confirm(removed).is_counterfactual

    @property
    def has_consequence(self) -> bool:
        """Whether [``consequence``][cftgnn.oracle.Oracle.consequence] is available."""
        return self._consequence is not None

    def consequence(self, sets: Sequence[Iterable[int]]) -> npt.NDArray[np.int64]:
        """How many later history events each removal set changes, ``int64 [P]``.

        Not a model evaluation: no counter moves.

        Raises:
            OracleError: The oracle was built without a consequence measure.
        """
        if self._consequence is None:
            raise OracleError("this oracle has no consequence measure")
        keys = [self._validate(self._key(s)) for s in sets]
        out = np.asarray(self._consequence(keys), dtype=np.int64).reshape(-1)
        if out.shape != (len(keys),):
            raise OracleError(f"consequence returned {out.shape} values for {len(keys)} sets")
        return out

    def size_limit(self, size: int | None = None) -> int:
        """The largest explanation size allowed: ``min(size, max_size, |R|)``."""
        top = len(self.removable)
        if self.max_size is not None:
            top = min(top, self.max_size)
        return top if size is None else min(top, int(size))

    # ------------------------------------------------------------------ inspection
    def certificate(self) -> int:
        """The minimality lower bound ``L`` the exact evaluations so far prove (docs/design.md §7).

        ``L`` is the smallest size ``s ≥ 1`` for which not every removable set of size ``s``
        has been evaluated exactly without a flip: every removable set smaller than ``L`` was
        evaluated exactly and none flips. A counterfactual of size ``L`` is therefore
        cardinality-minimal. Only exact evaluations count (in exact mode that includes the
        search's own calls); nothing is inferred by monotonicity, which the oracle lacks.

        Returns:
            ``L ≥ 1``; ``|R| + 1`` when no removable set at all flips.
        """
        n = len(self.removable)
        size = 1
        while (size <= n and size not in self._flip_sizes
               and self._exact_sizes[size] == math.comb(n, size)):
            size += 1
        return size

    def exact_share(self, size: int) -> float | None:
        """The share of the removable sets of ``size`` events whose exact logit is known.

        With [``certificate``][cftgnn.oracle.Oracle.certificate] ``L``, ``exact_share(L)``
        says how far an enumeration cut short got into the first size it did not complete
        (the record's ``next_size_share``). It counts the same exact evaluations as the
        certificate (whichever search made them, in this process or a worker's).

        Returns:
            A share in ``[0, 1]``; None when no removable set has ``size`` events
            (``size < 1`` or ``size > |R|``).
        """
        total = math.comb(len(self.removable), size) if size >= 1 else 0
        return self._exact_sizes[size] / total if total else None

    def cached_search(self, removed: Iterable[int]) -> float | None:
        """The stored search-mode logit of a set, or None (never calls a backend)."""
        return self._search.cache.get(self._key(removed))

    def cached_exact(self, removed: Iterable[int]) -> float | None:
        """The stored exact logit of a set, or None (never calls a backend)."""
        return self._exact.cache.get(self._key(removed))

    def agreement(self) -> tuple[int, int]:
        """Agreement of search mode and exact on the flip decision.

        Returns:
            ``(agree, compared)`` over the sets that have both values stored (the empty set
            excluded). In exact mode both are the same value, so ``agree == compared``.
        """
        if self._search.cache is self._exact.cache:  # exact mode: one value per set
            compared = len(self._exact.cache) - (frozenset() in self._exact.cache)
            return compared, compared
        agree = compared = 0
        p0 = self.original_logit
        for key, p_exact in self._exact.cache.items():
            if not key:
                continue
            p_search = self._search.cache.get(key)
            if p_search is None:
                continue
            compared += 1
            agree += is_flip(p0, p_search) == is_flip(p0, p_exact)
        return agree, compared

    # ------------------------------------------------------------------ internals
    def _key(self, removed: Iterable[int]) -> RemovalSet:
        if isinstance(removed, frozenset):
            return removed
        return frozenset(removed)

    def _validate(self, key: RemovalSet) -> RemovalSet:
        if key <= self.removable_ids and all(type(e) is int for e in key):
            return key  # the common case, checked at C speed
        clean: list[int] = []
        for e in key:
            if isinstance(e, (bool, np.bool_)) or not isinstance(e, (int, np.integer)):
                raise OracleError(f"removed event ids must be integers, got {e!r}")
            clean.append(int(e))
        out = frozenset(clean)
        bad = out - self.removable_ids
        if bad:
            outside = sorted(bad - self.candidate_ids)
            if outside:
                raise OracleError(
                    f"removed events {outside} are not candidates of event {self.event_id} "
                    f"(|C| = {len(self.candidate_ids)})")
            raise OracleError(f"removed events {sorted(bad)} are protected by the constraints "
                              f"of event {self.event_id}")
        return out

    def _evaluate(self, ch: _Channel, sets: Sequence[Iterable[int]]) -> FloatArray:
        """Logits of ``sets`` from ``ch``'s cache, the ``missing`` ones (deduplicated,
        validated) from one call of its backend. One name per form of a removal set on its
        way to the model (docs/design.md §5, "A removal set's way to the model")."""
        out = np.empty(len(sets), dtype=np.float64)
        cache = ch.cache
        missing: dict[RemovalSet, list[int]] = {}  # sets to evaluate -> their positions
        for i, s in enumerate(sets):
            removed = s if isinstance(s, frozenset) else frozenset(s)
            value = cache.get(removed)
            if value is not None:
                out[i] = value
                self._hits += 1
                continue
            if not (removed <= self.removable_ids and all(type(e) is int for e in removed)):
                removed = self._validate(removed)  # NumPy ids converted, or an error
            missing.setdefault(removed, []).append(i)
        if not missing:
            return out
        self._hits += sum(len(pos) - 1 for pos in missing.values())
        start = time.perf_counter()
        raw = ch.fn(list(missing))
        ch.time_s += time.perf_counter() - start
        values = np.asarray(raw, dtype=np.float64).reshape(-1)
        if values.shape != (len(missing),):
            raise OracleError(
                f"backend returned {np.shape(raw)} logits for {len(missing)} removal sets")
        if not np.all(np.isfinite(values)):
            raise OracleError(f"backend returned non-finite logits: {values}")
        ch.calls += len(missing)
        ch.batches += 1
        exact = cache is self._exact.cache
        p0 = self.original_logit
        for (removed, positions), value in zip(missing.items(), values.tolist(), strict=True):
            if exact and removed not in cache:
                self._exact_sizes[len(removed)] += 1
                if is_flip(p0, value):
                    self._flip_sizes.add(len(removed))
            cache[removed] = value
            out[positions] = value
        return out

    def record_exact(self, sets: Sequence[RemovalSet], logits: FloatArray,
                     work: OracleStats) -> None:
        """Enter exact logits that a copy of this oracle evaluated in another process (a
        worker of ``cftgnn.oracle.workers``, forked from this one) as if this oracle had
        evaluated them: the sets not cached yet join the cache and the certificate's tally,
        and ``work`` (the copy's counters for that call, ``OracleStats`` difference) is added
        to this oracle's counters.

        Args:
            sets: The removal sets of the call, validated by the copy.
            logits: Their exact logits, ``[P]``.
            work: The copy's counters after the call minus before it.
        """
        cache = self._exact.cache
        p0 = self.original_logit
        for removed, value in zip(sets, np.asarray(logits, dtype=np.float64).tolist(),
                                  strict=True):
            if removed not in cache:
                self._exact_sizes[len(removed)] += 1
                if is_flip(p0, value):
                    self._flip_sizes.add(len(removed))
                cache[removed] = value
        self._exact.calls += work.exact_calls
        self._exact.batches += work.exact_batches
        self._exact.time_s += work.exact_time_s
        self._hits += work.cache_hits


__all__ = [
    "Confirmation",
    "ConsequenceFn",
    "LogitFn",
    "Oracle",
    "OracleMode",
    "OracleStats",
    "RemovalSet",
    "delta",
    "is_flip",
    "margin",
    "node_score",
]
