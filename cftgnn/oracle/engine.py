"""Model-backed oracles: truncated-history inference by masked replay from snapshots.

``f(G(t_i) \\ s, ε_i)`` — the model's logit for the explained event ``ε_i`` with the events in
``s`` removed from its history — is what every explainer spends its time on (docs/design.md §1).
The naive way replays the whole stream without ``s`` for every call. Here:

* a [``ReplayEngine``][cftgnn.oracle.ReplayEngine] owns the model attached to the stream and keeps
  the *unperturbed* state at batch boundaries: a cursor carried forward when events are explained in
  stream order, plus sparse checkpoints to go back to (docs/design.md §5, "snapshots, not replays");
* for an explained event, [``EventReplay``][cftgnn.oracle.EventReplay] takes the unperturbed state
  at the batch boundary ``b0`` at or before the oldest candidate ``ε_min`` once, and answers each
  removal set by restoring it and replaying ``[b0, i)`` with a removal mask (no index is rebuilt;
  the model samples neighbours from the prebuilt index, filtered by the mask). The model's replay
  (``cftgnn.replay.registry.replay_for``) does that for P sets at once when it has a batched one;
  any other model with the state verbs of ``ReplayableModel`` is replayed set by set
  (``GenericReplay``);
* the **exact** backend masks ``s``; the **approximate** one (seed, "prediction^approximation")
  keeps the events before ``ε_min`` plus ``C \\ s`` and masks every other event of
  ``[ε_min, i)``.

Because events before ``b0`` are never removed, both equal a fresh replay of the stream with
the same events deleted (batches are fixed by original id, docs/design.md §2); the tests assert it.

The engine builds oracles and never runs an explainer:
[``cftgnn.explain.explain_event``][cftgnn.explain.explain_event] does that on top of it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from cftgnn.data.index import M_MAX, Candidates, TemporalIndex, candidate_hops
from cftgnn.data.stream import EventStream
from cftgnn.errors import OracleError
from cftgnn.models.base import eval_mode
from cftgnn.models.protocol import ReplayableModel, SoftRemovalModel
from cftgnn.oracle.constraints import NO_CONSTRAINTS, Constraints
from cftgnn.oracle.counters import ReplayCounters
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.oracle.history import History, check_history, history_end
from cftgnn.oracle.oracle import Oracle, OracleMode
from cftgnn.oracle.plan_room import announced_bases, check_plans_fit
from cftgnn.oracle.probe import ModelProbe
from cftgnn.oracle.reference import naive_logit as naive_logit  # noqa: F401 (re-exported)
from cftgnn.oracle.snapshots import (
    DEFAULT_MEMORY_BUDGET_GB,
    SnapshotStore,
    budget_bytes,
    release_freed_memory,
    snapshot_nbytes,
)
from cftgnn.oracle.target import RankScores, RankTarget
from cftgnn.replay.consequence import Reach, memory_reach, neighbourhood_reach
from cftgnn.replay.generic import GenericReplay
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.plans import (
    BudgetedReplay,
    ModelReplay,
    PairReplay,
    PairsReplay,
    RecordedPlan,
    ReplayPlan,
)
from cftgnn.replay.registry import replay_for
from cftgnn.training.checkpoint import load_checkpoint


class ReplayEngine:
    """Shared work for explaining many events of one stream with one model.

    Args:
        model: A trained temporal model with the state verbs of
            ``ReplayableModel`` (its mode is restored after
            every use).
        stream: The event stream whose events are explained.
        index: A prebuilt index of ``stream`` (built when omitted).
        checkpoint_every: Keep unperturbed snapshots at most this densely (every this many
            batches) while the cursor moves forward, so that going back costs at most that
            many batches of replay when the budget allows.
        replay: How removal sets are evaluated (default: ``replay_for`` the model, its
            fastest exact replay).
        memory_budget_gb: GiB (2**30 bytes) the replay may hold; None for no bound. The
            unperturbed snapshots, the cursor and the explained event's plans stay within
            it together, and so does each pass of a batched call of a replay that has
            passes (``BudgetedReplay``: TGN's cone replay, whose
            passes get at least 1 GiB, so that no budget changes a logit). The
            spacing of the snapshots is chosen from it and the stream's length
            (``SnapshotStore``): a longer stream gets sparser snapshots, never more
            memory. Going back in the stream then costs replay from the nearest kept
            snapshot (or from the start), never memory. A budget below one snapshot keeps
            only the cursor.
        num_workers: Processes every oracle's exact searches may split one size's sets
            across ([``Oracle``][cftgnn.oracle.Oracle]'s ``num_workers``; 1: this process).
    """

    def __init__(
        self,
        model: ReplayableModel,
        stream: EventStream,
        index: TemporalIndex | None = None,
        checkpoint_every: int = 64,
        replay: ModelReplay | None = None,
        memory_budget_gb: float | None = DEFAULT_MEMORY_BUDGET_GB,
        num_workers: int = 1,
    ) -> None:
        if memory_budget_gb is not None:  # freed snapshots and plans leave the process
            release_freed_memory()
        self.model = model
        #: Handed to every oracle (``explain.py``'s and the tail benchmark's ``num_workers``).
        self.num_workers = num_workers
        #: Handed to every oracle: its exact enumerations show a progress bar per event
        #: (``explain.py``'s ``progress`` sets it; off by default).
        self.progress = False
        self.replay: ModelReplay = replay if replay is not None else replay_for(model)
        self.stream = stream
        self.index = index if index is not None else TemporalIndex(stream)
        self.batch_size = model.batch_size
        self.checkpoint_every = max(1, int(checkpoint_every))
        self.counters = ReplayCounters()
        #: The run's model and stream, handed to every oracle (``explain.py`` sets it).
        self.fingerprint: ModelFingerprint | None = None
        model.attach(stream, index=self.index)
        self._cursor: Any = model.snapshot()  # unperturbed, at a batch boundary
        self._cursor_at = 0  # its position
        self.snapshots = SnapshotStore(
            budget_bytes(memory_budget_gb), snapshot_nbytes(self._cursor),
            stream.num_events, self.batch_size, self.checkpoint_every)
        if isinstance(self.replay, BudgetedReplay):  # its passes: the same budget
            self.replay.set_memory_budget(memory_budget_gb)

    @classmethod
    def from_checkpoint(
        cls,
        path: str | os.PathLike[str],
        stream: EventStream,
        device: torch.device | str = "cpu",
        checkpoint_every: int = 64,
        memory_budget_gb: float | None = DEFAULT_MEMORY_BUDGET_GB,
    ) -> ReplayEngine:
        """Load a committed checkpoint for ``stream`` and wrap it in an engine.

        Raises:
            CheckpointMismatchError: If the checkpoint was trained on another dataset.
        """
        model = load_checkpoint(path, stream, device=device, attach=False)
        return cls(model, stream, checkpoint_every=checkpoint_every,
                   memory_budget_gb=memory_budget_gb)

    # ------------------------------------------------------------------ base states
    def boundary(self, event_id: int) -> int:
        """The batch boundary at or before ``event_id``."""
        return (int(event_id) // self.batch_size) * self.batch_size

    def base_state(self, boundary: int) -> Any:
        """The unperturbed state at a batch boundary (history = ids ``< boundary``).

        Moving forward advances the cursor (or the latest kept snapshot past it) incrementally,
        keeping snapshots on the way as the budget allows (``SnapshotStore``); going back
        restarts from the latest kept snapshot at or before ``boundary``, or from the empty
        state. The returned state must
        not be modified.
        """
        if boundary % self.batch_size or not 0 <= boundary <= self.stream.num_events:
            raise OracleError(f"{boundary} is not a batch boundary of this stream")
        if boundary == self._cursor_at:
            return self._cursor
        start = time.perf_counter()
        model = self.model
        store = self.snapshots
        with eval_mode(model):
            back = store.latest(boundary)
            if self._cursor_at > boundary or (back is not None and back[0] > self._cursor_at):
                if back is None:
                    model.reset()  # the state before any event: nothing to keep for it
                    pos = 0
                else:
                    pos, snap = back
                    model.restore(snap)
            else:
                pos = self._cursor_at
                model.restore(self._cursor)
            while pos < boundary:  # stopping where the store may keep a state
                nxt = store.next_stop(pos, boundary)
                model.advance(pos, nxt)
                self.counters.setup_events += nxt - pos
                pos = nxt
                if pos < boundary and store.keeps(pos):
                    store.offer(pos, model.snapshot)
            kept = store.get(pos)
            self._cursor = kept if kept is not None else model.snapshot()
            self._cursor_at = pos
            if kept is None and store.keeps(pos):
                store.offer(pos, lambda: self._cursor)
        self.counters.setup_s += time.perf_counter() - start
        return self._cursor

    def expect(self, event_ids: Sequence[int], k: int | None = None, m_max: int = M_MAX,
               history: History | str = History.EVENT) -> None:
        """Announce the events about to be explained, in the order they will be (the same
        ``k``, ``m_max`` and ``history`` as their [``oracle``][cftgnn.oracle.ReplayEngine.oracle]
        calls): the walk forward keeps a snapshot at each one's base state, within the budget
        (``SnapshotStore.want``); it saves replay, never changes an answer. An event whose
        plans cannot fit the budget refuses the run here (``cftgnn.oracle.plan_room``).

        Raises:
            ConfigError: From ``announced_bases``, before any replay."""
        hist = check_history(history, bool(self.model.has_memory), type(self.model).__name__)
        k = candidate_hops(k, self.model.num_layers)
        self.snapshots.want(announced_bases(self, self._cursor, event_ids, k, m_max, hist))

    # ------------------------------------------------------------------ evaluation
    def oracle(
        self,
        event_id: int,
        k: int | None = None,
        m_max: int = M_MAX,
        mode: OracleMode | str = OracleMode.APPROXIMATE,
        constraints: Constraints = NO_CONSTRAINTS,
        history: History | str = History.EVENT,
        target: RankTarget | None = None,
    ) -> Oracle:
        """Build the oracle of one explained event (candidates, base state, backends).

        Args:
            event_id: The explained event ``i``.
            k: Hop radius of the candidate set (default: the model's number of layers).
            m_max: Maximum number of candidates.
            mode: Search mode of the oracle (exact or approximate); confirmation is exact.
            constraints: User constraints; they set the oracle's removable events and
                ``max_size`` (the candidates and every history stay as without them).
            history: The explained prediction's history (``cftgnn.oracle.history``):
                every earlier event (``event``) or the batches before the event's own
                (``batch_start``, models with memory only).
            target: None for the logit target; a ``RankTarget`` (the event's negatives and
                k) for the rank target (``cftgnn.oracle.target``).
        """
        return EventReplay(self, event_id, k, m_max, history, target).oracle(
            mode, constraints, target)


class EventReplay:
    """Exact and approximate backends of one explained event (see the module docstring).

    Args:
        engine: The shared replay engine.
        event_id: The explained event ``i``.
        k: Hop radius (default: the model's number of layers).
        m_max: Maximum number of candidates.
        history: The prediction's history (``cftgnn.oracle.history``). With
            ``batch_start`` it ends at the start ``h`` of the event's batch: candidates are
            events before ``h``, and every replay of ``[b0, i)`` has the events ``[h, i)``
            removed, which is the state after the completed batches (an empty final batch
            adds nothing to a batch evaluation loop's state; docs/design.md §2).
        target: The rank target ``oracle`` will answer, if known: the exact plan recorded
            at setup is then its pairs plan (``pairs_logits``; the probe's state too), and
            the logit's is made only if an exact logit is asked for. None: the logit's.
    """

    def __init__(
        self, engine: ReplayEngine, event_id: int, k: int | None = None, m_max: int = M_MAX,
        history: History | str = History.EVENT, target: RankTarget | None = None,
    ) -> None:
        self.engine = engine
        model = engine.model
        self.history = check_history(history, bool(model.has_memory),
                                     type(model).__name__)
        k = candidate_hops(k, model.num_layers)
        self.event_id = int(event_id)
        #: Where the prediction's history ends (exclusive): ``i``, or its batch's start.
        self.history_end = history_end(self.event_id, engine.batch_size, self.history)
        until = None if self.history is History.EVENT else self.history_end
        self.candidates: Candidates = engine.index.candidates(event_id, k, m_max, until)
        oldest = self.candidates.oldest
        self.eps_min = self.history_end if oldest is None else oldest
        self.start = engine.boundary(self.eps_min)
        check_plans_fit(engine, engine._cursor, self.event_id, self.start, self.eps_min,
                        len(self.candidates.ids), self.history_end)  # before any replay
        self.base = engine.base_state(self.start)
        engine.snapshots.used(self.start)  # one announced use of it, if any (expect)
        self._cand = self.candidates.ids
        self._reach: Reach | None = None
        start = time.perf_counter()
        # the events of the explained event's batch before it, removed from every history
        # with batch_start (None: nothing is, history=event)
        self._own: npt.NDArray[np.bool_] | None = None
        if self.history_end < self.event_id:
            self._own = np.zeros(engine.stream.num_events, dtype=bool)
            self._own[self.history_end : self.event_id] = True
        approx_mask = self._mask(frozenset(), approximate=True)
        span = self.event_id - self.start
        own = self.event_id - self.history_end
        # history events each replay covers when no candidate is removed
        self._kept = {False: span - own, True: span - int(approx_mask[self.start :].sum())}
        # room before recording, so that snapshots and plans do not meet past the budget:
        # the replay's own estimate where it has one, else one learnt from earlier plans
        if isinstance(engine.replay, BudgetedReplay):
            engine.snapshots.make_room(engine.replay.plan_nbytes(self.base, self.start,
                                                                 self.event_id))
        else:
            engine.snapshots.expect_plans(span)
        # the approximate plan is made on the first approximate call (``_plan_of``): an
        # explainer that only calls the exact backend (the factual ones, exact mode) never
        # pays for recording the approximate history
        self._approx_plan: ReplayPlan | None = None
        # the plans of negative pairs, by destination (``pair_logits``), made on first use
        self._pair_plans: dict[int, ReplayPlan] = {}
        # the plans of D pairs at once, by (approximate, destinations) (``pairs_logits``)
        self._pairs_plans: dict[tuple[bool, bytes], ReplayPlan] = {}
        self._plan: ReplayPlan | None = None  # the logit's; a rank target's: on use (_plan_of)
        if target is None:  # each records in eval mode
            recorded = self._plan = self._record_exact()
        else:  # the rank target's exact plan in its place (one recording, not two)
            dsts = np.unique(self.target_destinations(target))
            recorded = self._record_pairs(dsts, approximate=False)
        engine.snapshots.plans_built(span, snapshot_nbytes(recorded))
        engine.counters.setup_s += time.perf_counter() - start
        engine.counters.setup_events += self.event_id - self.base.position

    def _record_exact(self) -> ReplayPlan:
        """Record the logit's exact plan, in eval mode (the caller makes room for it)."""
        with eval_mode(self.engine.model):
            return self.engine.replay.plan(self.base, self.start, self.event_id, self._own,
                                           removable=self._cand)

    def _plan_of(self, approximate: bool) -> ReplayPlan:
        """The exact plan, or the approximate one (made on first use, and accounted for in
        the engine's memory budget with the exact one)."""
        if not approximate:
            if self._plan is None:  # a rank target's replay asked for an exact logit
                engine, start = self.engine, time.perf_counter()
                if isinstance(engine.replay, BudgetedReplay):  # room before recording
                    self._account_plans(engine.replay.plan_nbytes(self.base, self.start,
                                                                  self.event_id))
                self._plan = self._record_exact()
                self._account_plans()
                engine.counters.setup_s += time.perf_counter() - start
            return self._plan
        if self._approx_plan is None:
            engine = self.engine
            start = time.perf_counter()
            if isinstance(engine.replay, BudgetedReplay):  # room before recording, as for _plan
                self._account_plans(engine.replay.plan_nbytes(self.base, self.start, self.event_id))
            with eval_mode(engine.model):
                self._approx_plan = engine.replay.plan(
                    self.base, self.start, self.event_id,
                    self._mask(frozenset(), approximate=True), removable=self._cand)
            # accounted for, not learnt from: its history is the candidates alone, so its
            # size says nothing about bytes per history event (expect_plans)
            self._account_plans()
            engine.counters.setup_s += time.perf_counter() - start
        return self._approx_plan

    def _account_plans(self, extra: int = 0) -> None:
        """Account for every plan of the event in the engine's memory budget (``make_room``),
        and ``extra`` bytes of one about to be made."""
        plans = (self._plan, self._approx_plan, *self._pair_plans.values(),
                 *self._pairs_plans.values())
        self.engine.snapshots.make_room(snapshot_nbytes(plans) + extra)

    def _pair_plan(self, dst: int) -> ReplayPlan:
        """The plan of the pair ``(src_i, dst, t_i)`` over the exact history (made on first
        use per ``dst``, and accounted for in the engine's memory budget with the others):
        the engine's replay's ``pair_plan`` where it has one (``PairReplay``), else
        ``GenericReplay``'s (one masked replay per set)."""
        if dst not in self._pair_plans:
            engine = self.engine
            replay = engine.replay
            if not isinstance(replay, PairReplay):
                replay = GenericReplay(engine.model)
            if isinstance(replay, BudgetedReplay):  # room before recording, as for _plan
                self._account_plans(replay.plan_nbytes(self.base, self.start, self.event_id))
            with eval_mode(engine.model):
                self._pair_plans[dst] = replay.pair_plan(
                    self.base, self.start, self.event_id, dst, self._own, removable=self._cand)
            self._account_plans()
        return self._pair_plans[dst]

    def _pairs_plan(self, dsts: npt.NDArray[np.int64], approximate: bool) -> ReplayPlan:
        """The plan of the pairs ``(src_i, dsts[j], t_i)`` over the exact or the approximate
        history, made on first use and accounted for in the memory budget: the replay's
        ``pairs_plan`` (``PairsReplay``), else ``GenericReplay``'s."""
        key = (approximate, dsts.tobytes())
        if key not in self._pairs_plans:
            start = time.perf_counter()
            self._record_pairs(dsts, approximate)
            self.engine.counters.setup_s += time.perf_counter() - start
        return self._pairs_plans[key]

    def _record_pairs(self, dsts: npt.NDArray[np.int64], approximate: bool) -> ReplayPlan:
        """Record the pairs plan of ``dsts`` (``_pairs_plan``'s, not timed), kept and
        accounted for in the memory budget."""
        engine = self.engine
        replay = engine.replay
        if not isinstance(replay, PairsReplay):
            replay = GenericReplay(engine.model)
        if isinstance(replay, BudgetedReplay):  # room before recording, as for _plan
            self._account_plans(replay.plan_nbytes(self.base, self.start, self.event_id))
        mask = self._mask(frozenset(), approximate=True) if approximate else self._own
        with eval_mode(engine.model):
            plan = replay.pairs_plan(self.base, self.start, self.event_id, dsts, mask,
                                     removable=self._cand)
        self._pairs_plans[(approximate, dsts.tobytes())] = plan
        self._account_plans()
        return plan

    def pairs_logits(self, sets: Sequence[frozenset[int]], dsts: npt.ArrayLike,
                     approximate: bool = False) -> npt.NDArray[np.float64]:
        """Logits of the pairs ``(src_i, dsts[j], t_i)`` (the explained source and time with
        each of D destinations: the rank target's) under P removal sets, ``[P, D]``, in one
        batched call over ``exact``'s history (or, with ``approximate``, the approximate
        one). The D destinations (repeats scored once) share one plan, made on first use
        (``_pairs_plan``). Each column equals ``pair_logits(sets, dsts[j])`` and
        ``naive_logit(..., dst=dsts[j])`` (tested). Counted as ``exact``'s evaluations.
        """
        ends = np.asarray(dsts, dtype=np.int64).reshape(-1)
        uniq, inv = np.unique(ends, return_inverse=True)
        if not sets:
            return np.zeros((0, len(ends)), dtype=np.float64)
        plan = self._pairs_plan(uniq, approximate)
        start = time.perf_counter()
        with eval_mode(self.engine.model), torch.no_grad():
            logits = plan.logits(RemovalSets.from_sets([frozenset(int(e) for e in s)
                                                        for s in sets]))
            out = logits.double().cpu().numpy().reshape(len(sets), len(uniq))[:, inv]
        self._count(sets, approximate, start)
        return np.ascontiguousarray(out)

    def _mask(self, removed: frozenset[int], approximate: bool) -> npt.NDArray[np.bool_]:
        mask = np.zeros(self.engine.stream.num_events, dtype=bool)
        if approximate:  # [h, i) is masked too: candidates lie before h
            mask[self.eps_min : self.event_id] = True
            kept = [e for e in self._cand.tolist() if e not in removed]
            mask[kept] = False
        else:
            mask[list(removed)] = True
            if self._own is not None:
                mask |= self._own
        return mask

    def _logits(self, sets: Sequence[frozenset[int]], approximate: bool,
                reference: bool = False) -> npt.NDArray[np.float64]:
        """Logits of P removal sets in one call of the engine's replay, or, with
        ``reference``, of the generic one-replay-per-set replay. The oracle's backends call
        this through [``exact``][cftgnn.oracle.EventReplay.exact] and
        [``approximate``][cftgnn.oracle.EventReplay.approximate]."""
        if not sets:
            return np.zeros(0, dtype=np.float64)
        model = self.engine.model
        plan = None if reference else self._plan_of(approximate)  # setup, not evaluation
        start = time.perf_counter()
        with eval_mode(model):
            if plan is None:  # whole masks; the plans hold the approximate history
                generic = GenericReplay(model).plan(self.base, self.start, self.event_id)
                logits = generic.logits(RemovalSets.from_dense(
                    np.stack([self._mask(s, approximate) for s in sets])))
            else:
                logits = plan.logits(RemovalSets.from_sets(sets))
            out = logits.double().cpu().numpy()
        self._count(sets, approximate, start)
        return out

    def _count(self, sets: Sequence[frozenset[int]], approximate: bool, start: float) -> None:
        """Count P evaluated sets, their replayed events and the seconds since ``start``."""
        counters = self.engine.counters
        counters.evaluations += len(sets)
        counters.events_replayed += self._kept[approximate] * len(sets) - sum(map(len, sets))
        counters.eval_s += time.perf_counter() - start

    def exact(self, sets: Sequence[frozenset[int]]) -> npt.NDArray[np.float64]:
        """Exact logits ``f(G(t_i) \\ s, ε_i)`` of P removal sets, ``[P]``.

        All P sets go to the engine's replay in one call, from a plan made once per
        explained event: the model's batched masked replay in one pass
        (``cftgnn.replay``), or one replay of ``[b0, i)`` per set for a
        model with only the state verbs.
        """
        return self._logits(sets, approximate=False)

    def approximate(self, sets: Sequence[frozenset[int]]) -> npt.NDArray[np.float64]:
        """Approximate logits (history = events before ``ε_min`` plus ``C \\ s``), ``[P]``.

        The plan records the approximate history with nothing removed from ``C``; each set is
        then a small perturbation of it, replayed in one batched pass.
        """
        return self._logits(sets, approximate=True)

    def exact_replay(self, sets: Sequence[frozenset[int]]) -> npt.NDArray[np.float64]:
        """Exact logits by one full masked replay per set (reference path of ``exact``)."""
        return self._logits(sets, approximate=False, reference=True)

    def approximate_replay(self, sets: Sequence[frozenset[int]]) -> npt.NDArray[np.float64]:
        """Approximate logits by one full masked replay per set (reference path)."""
        return self._logits(sets, approximate=True, reference=True)

    def pair_logits(self, sets: Sequence[frozenset[int]], dst: int) -> npt.NDArray[np.float64]:
        """Exact logits of the pair ``(src_i, dst, t_i)`` — the explained source and time with
        another destination (a negative pair) — with each removal set removed, ``[P]``.

        The history is ``exact``'s (``history=batch_start``'s own batch removed too); all P
        sets go to one batched call of a plan of that history whose query is the pair, made
        once per ``dst`` (``PairReplay.pair_plan`` of the engine's replay: TGN's cone and
        local replays, TGAT's, GraphMixer's and DyGFormer's window passes). A model's own
        batched replay (``NativeReplay``) has no such plan, and its pairs cost one masked
        replay per set (``GenericReplay``). It equals ``naive_logit(..., dst=dst)`` (a test
        checks it). The engine's counters and the cone replay's ``stats`` are not touched:
        they count the explained event's work.
        """
        if not sets:
            return np.zeros(0, dtype=np.float64)
        plan = self._pair_plan(int(dst))
        with eval_mode(self.engine.model), torch.no_grad():
            logits = plan.logits(RemovalSets.from_sets([frozenset(int(e) for e in s)
                                                        for s in sets]))
        return logits.double().cpu().numpy()

    def consequence(self, sets: Sequence[frozenset[int]]) -> npt.NDArray[np.int64]:
        """Kept history events whose input each removal set changes, ``int64 [P]``
        (``cftgnn.replay.consequence``): the memory cone for a model with memory, the
        sampled one-hop neighbourhoods for a memoryless one (``has_memory`` false, TGAT).
        The reach is computed on the first call."""
        if self._reach is None:
            model = self.engine.model
            if not model.has_memory:
                self._reach = neighbourhood_reach(self.engine.index, self.event_id, self._cand,
                                                  int(model.num_neighbors))
            else:
                self._reach = memory_reach(self.engine.stream, self.history_end,
                                           self._cand, self.engine.batch_size)
        return self._reach.consequence(sets)

    def target_destinations(self, target: RankTarget) -> npt.NDArray[np.int64]:
        """The rank target's destinations, ``int64 [1 + N]``: the true one, then the
        negatives (the columns of ``rank_scores``' pairs)."""
        own = [int(self.engine.stream.dst[self.event_id])]
        return np.concatenate([own, target.negatives]).astype(np.int64)

    def _recorded_state(self) -> Any:
        """The state at the event from the recorded exact plan (``RecordedPlan``): the
        logit's, else a rank target's pairs plan (the same replay, other rows kept)."""
        if self._own is not None:  # its batch removed: not the probe's state
            return None
        exact = ([self._plan] if self._plan is not None  # the logit's, where it is made
                 else [p for (approx, _), p in self._pairs_plans.items() if not approx])
        for plan in exact:
            if isinstance(plan, RecordedPlan):
                return plan.final_state()
        return None

    def rank_scores(self, target: RankTarget) -> RankScores:
        """The rank target's backends (``cftgnn.oracle.target``): the true destination and
        the negatives in one ``pairs_logits`` call per batch, exact or approximate."""
        dsts = self.target_destinations(target)
        return RankScores(target, lambda sets: self.pairs_logits(sets, dsts),
                          lambda sets: self.pairs_logits(sets, dsts, approximate=True))

    def oracle(
        self,
        mode: OracleMode | str = OracleMode.APPROXIMATE,
        constraints: Constraints = NO_CONSTRAINTS,
        target: RankTarget | None = None,
    ) -> Oracle:
        """An [``Oracle``][cftgnn.oracle.Oracle] over these backends; its original logit is
        ``exact(∅)``.

        ``constraints`` decide its removable events ``R`` and ``max_size``. With a
        ``target`` (``RankTarget``), the oracle's scalar is the rank margin of the true
        destination among the target's negatives instead of the logit (``RankScores``,
        kept as ``oracle.target``): its original value is the margin with nothing removed.
        """
        scores = None if target is None else self.rank_scores(target)
        exact = self.exact if scores is None else scores.exact
        approximate = self.approximate if scores is None else scores.approximate
        p_orig = float(exact([frozenset()])[0])
        removable = np.unique(constraints.removable(self.candidates, self.engine.stream))
        probe = None
        model = self.engine.model
        if isinstance(model, SoftRemovalModel):  # over R in the oracle's order
            # the exact plan's recording (the logit's, or the rank target's pairs plan)
            # ends in the probe's state when nothing of the history is removed
            # (history=event): no second replay of [b0, i)
            state = self._recorded_state()
            probe = ModelProbe(model, self.base, self.start, self.event_id, removable,
                               self.history_end, state)
        oracle = Oracle(
            self.candidates, p_orig, exact=exact, approximate=approximate, mode=mode,
            removable=removable, max_size=constraints.max_size, consequence=self.consequence,
            probe=probe, num_workers=self.engine.num_workers, progress=self.engine.progress,
            fingerprint=self.engine.fingerprint, pair=self.pair_logits, stream=self.engine.stream,
            tallies=[self.engine.counters],  # worker processes' replays counted too
            target=scores,
        )
        return oracle
