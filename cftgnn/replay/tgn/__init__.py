"""TGN's batched masked replay: local replay of short histories, causal-cone replay otherwise.

``TGNReplay`` is the replay registered for ``TGN``. Its
plan records the explained event's history once, every row stored once
(``cftgnn.replay.tgn.record.record_trajectory``)
and, for a short masked history (the approximate oracle's), prepares the local replay too
(``cftgnn.replay.local.local_plan``); each call then picks one by the number of sets and
ends in one embedding pass over the distinct embeddings
(``cftgnn.replay.batched.batched_logits``).

The exact causal-cone replay is this package's, a module per part of it:

* ``cftgnn.replay.tgn.trajectory``: the recording (``Trajectory``, one ``BatchRecord`` per
  history batch) and the dependency sets over it (``Dependencies``);
* ``cftgnn.replay.tgn.record``: the recorder (``record_trajectory``: every row stored once,
  only the rows the cone replay reads, held within a byte limit in segments);
* ``cftgnn.replay.tgn.cone``: the driver (``cone_replay``: a history batch's steps in
  order) and its counters (``ConeStats``);
* ``cftgnn.replay.tgn.rows``: the table of perturbed rows (``RowTable``: its invariants, and
  each step of a batch on it as a method: ``split``, ``split_mixed``, ``new_pending``,
  ``prune``, ``merge``, ``revive``, ``compact``);
* ``cftgnn.replay.tgn.row_store``: the rows' buffers (``RowStore``: memory, last update,
  pending event, representative set, node; grown and compacted in place);
* ``cftgnn.replay.tgn.occupancy``: the bitmap of the row map's entries that hold a row,
  which the scans of whole columns visit instead of every entry;
* ``cftgnn.replay.tgn.rows_kernels``: the row map's kernels (lookups of a set's row of a
  node, the column scans, the groupings of equal keys, remapping and moving rows);
* ``cftgnn.replay.tgn.row_steps``: the compiled loops of whole steps of ``RowTable``
  (``split``'s pairs, ``split_mixed``'s rows and pairs, ``new_pending``, ``revive``'s
  receivers, ``other_memory``'s unique rows);
* ``cftgnn.replay.tgn.prune_steps``: ``prune``'s first part, which rows are compared with
  the recording and what the comparison finds;
* ``cftgnn.replay.tgn.merge_steps``: ``merge``'s groups of rows of one node with equal
  states;
* ``cftgnn.replay.tgn.row_times``: the optional CPU seconds of each of ``RowTable``'s steps
  (``RowStepTimes``, asked for with ``ConeStats(steps=...)``; no clock read otherwise);
* ``cftgnn.replay.tgn.compare``: the comparisons of memory rows with the recording (bit for
  bit, or within the opt-in tolerance), on the rows' device;
* ``cftgnn.replay.tgn.passes``: what a pass may hold (the memory budget, a share of a
  GPU's memory) and what one set needs;
* ``cftgnn.replay.tgn.dense``: the device-resident form of the same replay
  (``dense_replay``: a row per set and node in fixed buffers, no bookkeeping between the
  kernels), which the options choose on a GPU (``TGNReplayOptions.cone``).

The bookkeeping's loops are compiled by numba; each step that runs one is a pair of twins
(``cftgnn.jit.twins``: the compiled body and its NumPy or torch twin, defined side by side
in the step's module and listed in ``cftgnn.jit.PAIRS``), and ``twins`` alone decides which
runs (``tests/replay/test_twins.py`` holds every compiled loop to a pair, and compares each
pair's bodies on a replay's calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import torch
from torch import Tensor

from cftgnn.arrays import mask_words
from cftgnn.data.index import M_MAX
from cftgnn.data.stream import IntArray
from cftgnn.models.protocol import BoolArray
from cftgnn.models.state import State
from cftgnn.models.tgn import TGN
from cftgnn.replay.batched import NodeInputs, batched_logits
from cftgnn.replay.local import LocalPlan, local_plan, local_replay
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.registry import register_replay
from cftgnn.replay.tgn.cone import ConeBudgetExceeded, ConeStats, cone_replay
from cftgnn.replay.tgn.dense import dense_nbytes_per_set, dense_replay
from cftgnn.replay.tgn.passes import (
    DEVICE_PASS_SHARE,
    check_one_set,
    device_memory_bytes,
    pass_budget_bytes,
)
from cftgnn.replay.tgn.record import record_trajectory
from cftgnn.replay.tgn.trajectory import Trajectory

#: The least memory a pass of the cone replay gets, GiB, whatever the engine's budget:
#: splitting a call into smaller passes can change a logit in its last bits (torch's
#: matrix products round differently below five rows), so a budget below it must not split
#: passes, or it would change records.
MIN_PASS_BUDGET_GB = 1.0

# An upper bound of a recorded plan's bytes (``TGNReplay.plan_nbytes``), by what it holds.
# A batch's record holds its ``V`` nodes (``BatchRecord``): those with a pending message
# before it (the endpoints of the previous batch's events) and its own endpoints, so at
# most ``PLAN_SLOTS_PER_EVENT`` per history event (and the base's pending ones, at most
# two per event of a batch); 3.0-3.7 measured on synthetic streams of 3k-20k events.
#: Node slots of the per-batch records per history event, at most.
PLAN_SLOTS_PER_EVENT = 4
#: Bytes per node slot: ``nodes`` (``int32``, 4), ``lu_post`` (``float64``, 8), the
#: incidences' offsets ``inc_off`` (``int32``, 4; one more per batch, counted in
#: ``PLAN_BYTES_PER_BATCH``) and the two ``int32`` row pointers of ``mem_pre`` /
#: ``mem_post`` (4 each). Before 2026-12-03: 48 (every array eight bytes a node, and a
#: start and an end per node instead of one offsets array).
PLAN_BYTES_PER_SLOT = 24
#: Bytes per history event beyond its slots: its position (``int64``, 8), its two
#: incidences (``int32``, 8), the dependency sets' nodes (two per event, ``int32``, 8) and
#: the receivers' pairs the cone replay caches during the search
#: (``Dependencies.receivers``: two per event, ``int32`` sender and position, 16). Before
#: 2026-12-03: 72.
PLAN_BYTES_PER_EVENT = 40
#: Bytes per node slot and per history event more than the two above where the ``int32``
#: arrays would not hold their values (``BatchRecord``: a stream of more than ``2**31 - 1``
#: nodes, a segment of more rows): every such array eight bytes an entry.
PLAN_WIDE_BYTES_PER_SLOT = 24
PLAN_WIDE_BYTES_PER_EVENT = 16
#: Bytes per history event and 64-bit word of a dependency mask (two masks per event).
PLAN_BYTES_PER_WORD = 16
#: Bytes per recorded batch beyond its arrays' data: the record, its arrays', tensors' and
#: row views' objects, its dependency and receiver entries (about 2.5 KB by
#: ``sys.getsizeof``, torch's tensor objects estimated), and its first and last event.
PLAN_BYTES_PER_BATCH = 4096
#: Memory rows per history event, at most: a row per applied pending message (two per
#: event) and a row per node read for the first time (at most two per event).
PLAN_ROWS_PER_EVENT = 4


#: On the CPU, ``Cone.AUTO`` replays a call of at most this many sets through at least
#: ``DENSE_MIN_BATCHES`` history batches (counted from the batch of its oldest removal)
#: with the dense replay rather than the row table. Such a call is a single exact check of
#: a far-back set on a long stream (a confirmation, ``keep_logit``), whose cone spreads
#: until nearly every node the prediction reads holds a perturbed row: the row table's
#: per-batch bookkeeping then passes over its whole table (tens of thousands of rows), and
#: sharing between sets saves nothing with one set. Measured 2026-12-06 on seeded synthetic
#: streams, one thread, one exact call of the oldest candidate alone (docs/benchmarks.md,
#: "One far-back set on a long stream runs densely"): the dense replay took 0.33-0.83 of
#: the row table's time (0.41-0.45 where the cone reached every node), logits within 1e-7.
#: With more sets the row table shares rows between them and the dense replay computes
#: every set's row, so the rule stops at one. The histories of UCI and Wikipedia (at most
#: about 800 batches of the models' 200 events) never reach the count: their calls are
#: unchanged.
DENSE_MAX_SETS = 1
DENSE_MIN_BATCHES = 2000


class Cone(str, Enum):
    """Which form of the exact cone replay runs (``TGNReplayOptions.cone``).

    ``ROWS``: the table of shared perturbed rows (``cftgnn.replay.tgn.cone``), its
    bookkeeping on the host (compiled loops); the least work, the default on the CPU.
    ``DENSE``: a row per set and node in fixed buffers on the oracle's device
    (``cftgnn.replay.tgn.dense``); more arithmetic, no host steps between the kernels.
    ``AUTO``: ``DENSE`` where the trajectory's device is not the CPU; on the CPU ``ROWS``,
    but ``DENSE`` for a call of at most ``DENSE_MAX_SETS`` sets that replays at least
    ``DENSE_MIN_BATCHES`` history batches and whose dense rows fit its pass
    (``TGNReplayOptions.dense_alone``).
    """

    AUTO = "auto"
    ROWS = "rows"
    DENSE = "dense"


@dataclass
class TGNReplayOptions:
    """When each replay is used, and how large a pass is.

    Attributes:
        local_max_events: Masked histories (the approximate oracle's) of at most this many
            kept events are replayed on their touched nodes (``cftgnn.replay.local``).
            Everything else uses the causal cone, which recomputes only what a removal
            reaches and so stays cheap for large P on long, dense histories.
        local_max_sets: The local replay restarts every set at the earliest step any of them
            touches and recomputes all touched nodes, so its cost grows with P; it is used for
            at most this many sets per call, and larger batches of a short history go
            through the causal cone too (``python scripts/benchmark_oracle.py``: a batch of
            64 approximate sets costs about 4-5 single calls that way, against 22-27 with the
            local replay).
        max_sets_per_pass: Calls with more sets than this are evaluated in passes of at most
            this many: rows of the cone replay and embedding tables grow with P, and past a
            few thousand sets larger passes share little more and run slower (all 43,744 sets
            of up to three of 64 candidates of a Wikipedia event: 4.4 s in passes of 4096,
            10.3 s in one pass).
        prune_perturbations: Perturbation pruning in the causal-cone replay (exact, on by
            default; not the answer pruning of the explainers' ``prune``): a perturbed row
            whose state after a batch equals the recorded one bit for bit is
            retired, so a removal whose effect has died out stops costing anything
            (``cftgnn.replay.tgn.cone.cone_replay``). Off only to measure what it saves.
        prune_tolerance: ``0.0`` (the default): the pruning above compares memories bit
            for bit and is exact. ``τ > 0`` (opt-in, **not exact**): a perturbed memory
            within ``τ`` of the recorded one in every coordinate counts as the recorded one
            (the last-update time and pending message are still compared exactly), which
            removes most of the cone work of far-back removals on long histories (docs/quality.md;
            "Tolerance pruning" in ``cftgnn.replay.tgn.cone``). The logits then differ from
            a fresh replay by an amount that is not soundly bounded, so nothing computed
            with it is a proof: it is for measurements (``scripts/benchmark_tail.py
            prune_tolerance=…``), never for records or certificates. Used only with
            ``prune_perturbations``.
        stats: Counters of the cone replay's work (rows updated, retired, sets settled),
            summed over calls, or None (benchmarks set one).
        memory_budget_gb: Memory budget of one pass, GiB (2**30 bytes), or None for
            none: the replay engine's ``memory_budget_gb``, but never below
            ``MIN_PASS_BUDGET_GB``, which the engine sets here
            (``TGNReplay.set_memory_budget``; one option, docs/design.md §5). A pass of
            P sets holds a row map of P entries per node its cone may reach and the
            perturbed rows it keeps, checked after every batch, plus the embedding tables
            of its sets (estimated): a pass that outgrows the budget is split into halves,
            and later passes of the plan start from the size that fitted, so the
            exhaustive search and every batched call stay within it whatever the cone
            size (a pass can overshoot by the rows one history batch adds before it is
            stopped). One set is always evaluated (it holds at most one row per node).
        cone: Which form of the exact cone replay runs (``Cone``): ``"auto"`` (the
            default: the device-resident dense replay on a GPU, the row table on the CPU
            but for one set through a long history, ``dense_alone``),
            ``"rows"`` or ``"dense"`` on any device. Both are exact; ``stats`` counts the
            dense replay's calls, sets and row updates (nothing is pruned or shared there).
    """

    local_max_events: int = 512
    local_max_sets: int = 1
    max_sets_per_pass: int = 4096
    prune_perturbations: bool = True
    prune_tolerance: float = 0.0
    stats: ConeStats | None = None
    memory_budget_gb: float | None = MIN_PASS_BUDGET_GB  # what the engine's default gives
    cone: Cone | str = Cone.AUTO

    def __post_init__(self) -> None:
        try:
            self.cone = Cone(self.cone)
        except ValueError:
            raise ValueError(f"cone must be one of {', '.join(c.value for c in Cone)}, "
                             f"got {self.cone!r}") from None

    def dense_on(self, device: torch.device) -> bool:
        """Whether the dense replay runs for every call of a trajectory on ``device``."""
        cone = Cone(self.cone)
        return cone is Cone.DENSE or (cone is Cone.AUTO and device.type != "cpu")

    def dense_alone(self, model: TGN, traj: Trajectory, sets: RemovalSets,
                    budget: int | None) -> bool:
        """Whether ``Cone.AUTO`` runs this call of a trajectory on the CPU densely all the
        same (elsewhere ``dense_on`` decides): at most
        ``DENSE_MAX_SETS`` sets, at least ``DENSE_MIN_BATCHES`` batches replayed from the
        batch of the oldest removal on, and the dense rows of the call's columns (its
        dependency sets', which either replay reads next) within ``budget`` bytes (None: no
        bound)."""
        if (Cone(self.cone) is not Cone.AUTO or traj.final_input.device.type != "cpu"
                or sets.num_sets > DENSE_MAX_SETS
                or not len(sets.events) or len(traj.batches) < DENSE_MIN_BATCHES):
            return False
        _, last = traj.event_bounds()
        replayed = len(traj.batches) - int(np.searchsorted(last, int(sets.events[0])))
        if replayed < DENSE_MIN_BATCHES:
            return False
        columns = traj.dependencies_for(model, sets.events).num_columns
        need = sets.num_sets * dense_nbytes_per_set(columns, model.memory_dim)
        return budget is None or need <= budget


@dataclass(frozen=True)
class TGNPlan:
    """A TGN replay plan: the recorded trajectory, and the local plan of a short history.

    Attributes:
        model: The TGN.
        trajectory: The history recorded for the causal-cone replay.
        local: The same history prepared for the local replay, or None when it is long.
        options: The replay's options (read at every call).
        dst: The query's destination, None for the explained event's own; another (a
            negative pair, ``TGNReplay.pair_plan``) is predicted instead, or ``int64 [D]``
            destinations (``TGNReplay.pairs_plan``: ``logits`` is ``[P, D]``), and their
            calls are not added to the options' ``stats`` (the explained event's work).
    """

    model: TGN
    trajectory: Trajectory
    local: LocalPlan | None
    options: TGNReplayOptions
    fitted: list[int] = field(default_factory=list)  # the pass size that fitted the budget
    dst: int | IntArray | None = None
    #: The D destinations' unperturbed embeddings, kept between calls (``batched_logits``),
    #: one store for the local replay's inputs and one for the cone replay's.
    unperturbed: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False,
                                                   repr=False)

    def _budget(self) -> int | None:
        """Bytes a pass may hold on the trajectory's device (``pass_budget_bytes``: the
        memory budget, or a share of a GPU's memory), None for no bound."""
        return pass_budget_bytes(self.options.memory_budget_gb,
                                 self.trajectory.final_input.device, MIN_PASS_BUDGET_GB)

    def _pass_size(self) -> int:
        """Sets per pass: ``max_sets_per_pass``, fewer where the memory budget says so."""
        opts = self.options
        step = max(1, opts.max_sets_per_pass)
        budget = self._budget()
        if budget is None:
            return step
        model = self.model
        deps = self.trajectory.deps
        columns = deps.num_columns if deps is not None else model.num_nodes
        k, layers = model.num_neighbors, model.embedding.num_layers
        # per set: its row-map entries, and the embedding tables of its link's computation
        # trees (one row of the memory size per tree node): the source and the destination,
        # or the source and each of D destinations
        tree = sum(k ** layer for layer in range(layers + 1))
        ends = 1 + len(self.dst) if isinstance(self.dst, np.ndarray) else 2
        per_set = 4 * columns + ends * tree * model.memory_dim * 4
        if opts.dense_on(self.trajectory.final_input.device):
            per_set += dense_nbytes_per_set(columns, model.memory_dim)
        step = min(step, max(1, int(budget // (2 * per_set))))
        return min([step, *self.fitted])

    def _relative(self, inputs: NodeInputs) -> NodeInputs:
        """The local replay's inputs relative to the empty set's: the unperturbed input of
        a touched node is the empty set's final row (kept in ``unperturbed``), and a set's
        row equal to it bit for bit is no perturbed row, so that the D destinations a set
        does not reach read their unperturbed embedding (``batched_logits``; the local
        replay gives every set a row of every node it touches)."""
        assert self.local is not None and inputs.rowmap is not None
        loc = self.local.loc
        touched = np.flatnonzero(loc >= 0)
        store = self.unperturbed.setdefault("local_inputs", {})
        if not store:
            empty = local_replay(self.model, self.local, RemovalSets.from_sets([frozenset()]))
            base = empty.base.clone()
            dev = base.device
            base[torch.as_tensor(touched, device=dev)] = empty(
                np.zeros(len(touched), dtype=np.int64), touched)
            store["base"] = base
        base = store["base"]
        rowmap = np.asarray(inputs.rowmap).copy()
        node_of = np.full(rowmap.shape[1], -1, dtype=np.int64)
        node_of[loc[touched]] = touched
        p, c = np.nonzero(rowmap >= 0)
        dev = base.device
        same = (inputs.extra[torch.as_tensor(rowmap[p, c], device=dev)]
                == base[torch.as_tensor(node_of[c], device=dev)]).all(dim=1).cpu().numpy()
        rowmap[p[same], c[same]] = -1
        return NodeInputs(base, inputs.extra, rowmap, loc)

    def final_state(self) -> State:
        """The recorded state at the explained event, the trajectory's final snapshot
        (``RecordedPlan``)."""
        return self.trajectory.final

    def logits(self, sets: RemovalSets) -> Tensor:
        """All P sets at once (in passes of at most ``max_sets_per_pass``, fewer where the
        memory budget asks for it): local or causal-cone replay, then one embedding pass
        over their distinct embeddings."""
        step = self._pass_size()
        if sets.num_sets > step:
            return torch.cat([self.logits(sets.select(slice(lo, lo + step)))
                              for lo in range(0, sets.num_sets, step)])
        model, traj, opts = self.model, self.trajectory, self.options
        if self.local is not None and sets.num_sets <= opts.local_max_sets:
            inputs = local_replay(model, self.local, sets)
            if isinstance(self.dst, np.ndarray):
                inputs = self._relative(inputs)
            shared: BoolArray | None = self.local.removed_mask
            replay = "local"
        else:
            whole = self._budget()
            budget = None if whole is None else whole // 2
            try:
                stats = opts.stats if self.dst is None else None
                if opts.dense_on(traj.final_input.device) or opts.dense_alone(
                        model, traj, sets, budget):
                    inputs = dense_replay(model, traj, sets, stats, budget)
                else:
                    inputs = cone_replay(model, traj, sets, opts.prune_perturbations, stats,
                                         budget, opts.prune_tolerance)
            except ConeBudgetExceeded:  # too many sets for the budget: halve the passes
                self.fitted[:] = [max(1, sets.num_sets // 2)]
                return self.logits(sets)
            shared = traj.removed_mask
            replay = "cone"
        # the local and the cone replay's inputs: one store of unperturbed rows each
        kept = self.unperturbed.setdefault(replay, {})
        return batched_logits(model, sets, shared, traj.end, inputs, self.dst, kept)


@register_replay(TGN)
class TGNReplay:
    """The replay of a TGN (see the module docstring).

    Args:
        model: The TGN, attached to the explained stream.
        options: Replay options (defaults of ``TGNReplayOptions``).
    """

    def __init__(self, model: TGN, options: TGNReplayOptions | None = None) -> None:
        self.model = model
        self.options = options if options is not None else TGNReplayOptions()
        #: Bytes of recorded rows a plan holds (None: all); the rest are spilled to a
        #: temporary file and read back when read
        #: (``record_trajectory``).
        self.record_bytes: int | None = None

    def set_memory_budget(self, memory_budget_gb: float | None) -> None:
        """Keep each batched pass within the engine's ``memory_budget_gb``, or within
        ``MIN_PASS_BUDGET_GB`` when that is larger, so that no budget changes a logit,
        and hold at most a quarter of it of a plan's recorded rows (the engine's snapshots
        make room for the plans, so they must not take the whole budget)
        (``BudgetedReplay``)."""
        self.options.memory_budget_gb = (None if memory_budget_gb is None
                                         else max(float(memory_budget_gb), MIN_PASS_BUDGET_GB))
        self.record_bytes = (None if memory_budget_gb is None
                             else int(float(memory_budget_gb) * 2**30) // 4)

    def check_one_set(self) -> None:
        """Refuse, before any work, a pass budget that cannot hold one removal set's
        evaluation on the model's device (``cftgnn.replay.tgn.passes.check_one_set``: a row
        for every node of the stream, in the form ``cone`` chooses there).

        Raises:
            ConfigError: Naming the sizes and what to change.
        """
        device = self.model.device
        memory = device_memory_bytes(device)
        where = ("memory_budget_gb, at least 1 GiB" if memory is None
                 else f"{DEVICE_PASS_SHARE:g} of the device's {memory / 2**30:.3g} GiB")
        budget = pass_budget_bytes(self.options.memory_budget_gb, device, MIN_PASS_BUDGET_GB,
                                   memory)
        check_one_set(self.model, budget, self.options.dense_on(device), where)

    def plan_nbytes(self, base: Any, start: int, end: int, kept: int | None = None,
                    removable: int = M_MAX) -> int:
        """An upper bound of the bytes of the plan of ``[start, end)`` from ``base``, before it
        is recorded (``BudgetedReplay``), by what a plan holds (the ``PLAN_*`` constants):
        its final state and node input, the dependency sets' per-node arrays, three removal
        masks, per history event its slots, incidences, dependency and receiver entries,
        per batch its objects, and the memory rows, which a budget caps at
        ``record_bytes``; a masked history of at most ``local_max_events`` kept events adds
        the local replay's per-step states.

        Args:
            base: The base state (any state of the model's shapes: the cursor serves).
            start: Its position, a batch boundary.
            end: The explained event.
            kept: History events the plan keeps, the approximate history's: those before
                the oldest candidate in its batch and the candidates, in at most
                ``1 + removable`` batches; None: all of ``[start, end)``.
            removable: The removable events (the candidates, at most ``m_max``): the width
                of a dependency mask.
        """
        state: State = base
        model = self.model
        span = max(0, int(end) - int(start))
        kept = span if kept is None else min(span, max(0, int(kept)))
        batch, nodes, events = model.batch_size, model.num_nodes, model.stream.num_events
        batches = -(-span // batch) + 1
        if kept < span:  # kept batches and an empty one after each (``history_steps``)
            batches = min(batches, 2 * min(kept, 1 + int(removable)) + 1)
        slots = PLAN_SLOTS_PER_EVENT * kept + 2 * batch
        per_slot, per_event = PLAN_BYTES_PER_SLOT, PLAN_BYTES_PER_EVENT
        if max(nodes, PLAN_ROWS_PER_EVENT * kept + 2 * batch) > np.iinfo(np.int32).max:
            per_slot += PLAN_WIDE_BYTES_PER_SLOT  # int64 node ids or row pointers
            per_event += PLAN_WIDE_BYTES_PER_EVENT
        index = ((per_event + PLAN_BYTES_PER_WORD * mask_words(removable)) * kept
                 + per_slot * slots + PLAN_BYTES_PER_BATCH * batches)
        row = model.memory_dim * state.memory.element_size()
        rows = (PLAN_ROWS_PER_EVENT * kept + 2 * batch) * row
        if self.record_bytes is not None:
            rows = min(rows, self.record_bytes)
        # the final state (memory, last updates, pending nodes, removals) and its input,
        # the dependency sets' two [N] arrays, and the removal mask the plan is given
        memory = state.memory.untyped_storage().nbytes()
        fixed = 2 * memory + (8 + 8 + 16) * nodes + 16 * batch + 2 * events
        local = 0
        if kept < span and kept <= self.options.local_max_events:  # the local replay's
            # plan: its base (held with it), a removal mask, the nodes' local index and a
            # local state of the touched nodes before each step
            held = sum(t.untyped_storage().nbytes() for t in (
                state.memory, state.last_update, state.pending, state.removed))
            touched = min(nodes, 2 * kept + 2 * batch)
            local = held + events + 8 * nodes + batches * touched * (row + 16)
        return fixed + index + rows + local

    def plan(self, base: Any, start: int, end: int, removed_mask: BoolArray | None = None,
             removable: IntArray | None = None) -> TGNPlan:
        """Record ``[start, end)`` under ``removed_mask`` with the dependency sets of the
        ``removable`` events; a short masked history is prepared for the local replay too."""
        return self._plan(base, end, removed_mask, removable, None)

    def pair_plan(self, base: Any, start: int, end: int, dst: int,
                  removed_mask: BoolArray | None = None,
                  removable: IntArray | None = None) -> TGNPlan:
        """The plan of the pair ``(src_end, dst, t_end)`` (``cftgnn.replay.plans.PairReplay``):
        the same history recorded again, keeping the rows and dependency sets of the states
        that pair's prediction reads (``Trajectory.dst``); the local replay's rows serve any
        query."""
        return self._plan(base, end, removed_mask, removable, int(dst))

    def pairs_plan(self, base: Any, start: int, end: int, dsts: IntArray,
                   removed_mask: BoolArray | None = None,
                   removable: IntArray | None = None) -> TGNPlan:
        """The plan of the pairs ``(src_end, dsts[j], t_end)``
        (``cftgnn.replay.plans.PairsReplay``): one recording whose rows and dependency sets
        are those of the states any of the D predictions reads (``Trajectory.dst``), one
        cone replay per call for all of them, and one embedding pass in which the source's
        rows and every destination's are computed once per distinct value
        (``batched_logits``): logits ``[P, D]``."""
        return self._plan(base, end, removed_mask, removable,
                          np.asarray(dsts, dtype=np.int64).reshape(-1))

    def _plan(self, base: Any, end: int, removed_mask: BoolArray | None,
              removable: IntArray | None, dst: int | IntArray | None) -> TGNPlan:
        state: State = base
        model = self.model
        local = None
        if removed_mask is not None:
            local = local_plan(model, state, end, removed_mask, self.options.local_max_events)
        # batches of more sets than local_max_sets go through the cone replay of the same
        # history: record it now, as per-event setup, rather than in the first such call
        history = removed_mask if local is None else local.removed_mask
        trajectory = record_trajectory(model, state, end, history, removable,
                                       self.record_bytes, dst)
        return TGNPlan(model, trajectory, local, self.options, dst=dst)


__all__ = ["DENSE_MAX_SETS", "DENSE_MIN_BATCHES", "MIN_PASS_BUDGET_GB", "PLAN_BYTES_PER_BATCH",
           "PLAN_BYTES_PER_EVENT", "PLAN_BYTES_PER_SLOT", "PLAN_BYTES_PER_WORD",
           "PLAN_ROWS_PER_EVENT", "PLAN_SLOTS_PER_EVENT", "PLAN_WIDE_BYTES_PER_EVENT",
           "PLAN_WIDE_BYTES_PER_SLOT", "Cone", "TGNPlan", "TGNReplay", "TGNReplayOptions"]
