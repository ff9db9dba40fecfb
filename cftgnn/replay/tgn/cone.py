"""Exact masked replay of TGN that recomputes only the causal cone of the removed events.

The driver of the ``cftgnn.replay.tgn`` package: ``cone_replay`` follows P removal sets
through a recording (``cftgnn.replay.tgn.trajectory.Trajectory``, made by
``cftgnn.replay.tgn.record.record_trajectory``), batch by batch, keeping the perturbed rows in
a ``cftgnn.replay.tgn.rows.RowTable`` whose methods are the steps below.

Removing events changes the memory of their endpoints, then of every node that later receives a
message from an affected node, and nothing else (docs/design.md §5, "touch only what changes").
``record_trajectory`` replays the *unperturbed* history once per explained event and keeps,
for every batch, the state rows of the nodes it touches. ``cone_replay`` then follows P
removal sets at once, keeping perturbed rows only where a removal reaches and reading every
other value from the recording, so a batch costs in proportion to the affected rows it
touches, not to the batch. The result feeds ``cftgnn.replay.batched.batched_logits``.

**Rows are shared between removal sets.** The state of node ``n`` after a batch is a function
of which events in its causal past ``D(n)`` are removed: the events that reached ``n`` through
messages, and the events that could have (TGN keeps only the last message of a batch, and a
removal makes an earlier one the last). ``dependencies`` computes ``D(n)``, restricted to
the removable events (the candidates), once per trajectory as bitmasks. A perturbed row is then
keyed by ``(n, s ∩ D(n))`` rather than by ``(set, n)``: sets that agree on the removals in a
node's past share its row, and a row is split only when ``D(n)`` grows to tell them apart. The
64 children of an MCTS node share all but one removal; even independent random sets share the
rows that only their common old removals reach. Sets with ``s ∩ D(n) = ∅`` read the recorded
row, so the cone of a set is exactly the nodes whose past meets it; the cone is conservative
(``D(n)`` over-approximates the dependencies), so the result is exact by construction, and the
tests compare it with fresh replays.

**Only states the prediction can read are computed.** The prediction reads the final input of
the few nodes its embedding can attend to (``cftgnn.models.neighbors.reachable_nodes``),
and those read, batch by batch, the states of the nodes they met. ``needed_until`` sweeps
the recording backwards once per trajectory and gives, for every node, the last batch whose
state of it is read; after that batch a node gets no new rows and no messages. On long
histories (Wikipedia, ``ε_min`` far back) most of the forward cone is never read.

**Effects that die out stop costing (perturbation pruning, exact).** ``D(n)`` says which
removals *may* change a node; most far-back removals do not, in the end: a removed event
that was not a node's last message of its batch changes nothing, two events can carry the
same message, and a perturbed memory that is never sent on is left behind. At the end of
every batch, ``cone_replay`` retires the rows whose whole state (memory bit for bit,
last update, pending message and its sender's memory) equals the recording, merges rows of
one node whose states are equal bit for bit, and gives a set a row again only when its
state can differ (it removes the node's pending message, or the sender of that message
holds a perturbed memory). A row merged or revived that way can hold sets whose causal
pasts differ; such a *mixed* row is split by the message each of its sets receives
whenever its node has an event (``RowTable.split_mixed``), since a later message can tell the
sets apart without the node's dependency set growing (missing that split made some logits
wrong by up to 1e-3 on UCI · TGN until the tail run of 2026-11-25 found it). No value is
approximated, so the logits are those of the replay without pruning (up to the float
rounding any two replays differ by), and so are the answers and certificates built on
them; the tests compare them.

**Tolerance pruning (opt-in, not exact).** With a tolerance ``τ > 0`` (``tolerance`` of
``cone_replay``, ``prune_tolerance`` of ``cftgnn.replay.tgn.TGNReplayOptions``)
a row's memory counts as the recorded one when ``max |mem − recorded| ≤ τ`` rather than
bit for bit, wherever the pruning asks (retiring a row, the sender of its pending message,
merging rows, reviving pairs); the last-update time and the pending message's identity
are still compared exactly. Far-back removals on long histories spread perturbations of a
few ulps through thousands of nodes that never become bitwise equal; snapping them back
removes most of that work (~90 % at τ = 1e-4 on Wikipedia · TGN, measured 2026-11-25). It is **not
exact**: the snapped differences pass through the GRU and the embedding, and the logits
differ from a fresh replay by an amount no sound bound is known for (the measured
differences were of the order of τ / 10, but that is an observation, not a guarantee), so
nothing computed with ``τ > 0`` is a proof: no record or certificate may rest on it.
``τ = 0`` (the default) is the bitwise path, unchanged.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from cftgnn import jit
from cftgnn.models.tgn import TGN, other_endpoint
from cftgnn.replay.batched import NodeInputs
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.tgn.row_times import RowStepTimes
from cftgnn.replay.tgn.rows import RowTable
from cftgnn.replay.tgn.trajectory import BatchRecord, Dependencies, Trajectory


class ConeBudgetExceeded(RuntimeError):
    """The rows of a call of several sets outgrew its memory budget (the caller splits
    the sets and tries again)."""


@dataclass
class ConeStats:
    """What the causal-cone replay computed, summed over the calls it is passed to.

    Attributes:
        calls: Calls of ``cone_replay``.
        sets: Removal sets followed.
        row_updates: Perturbed rows that went through the GRU (pending messages applied).
        rows_made: Perturbed rows created (split off or re-created).
        rows_pruned: Rows retired because their state equals the recorded one.
        peak_rows: Most rows held at once in one call.
        peak_bytes: Most bytes held at once by the rows and their map in one call.
        settled_sets: Sets whose perturbation died out before the end: no node the
            prediction reads holds a perturbed row (their logit differs from the unperturbed
            one only through the neighbours the removals hide).
        replay_s: Seconds spent in ``cone_replay`` (measured only when the call is given
            ``stats``: the wall and CPU clocks read twice per call and twice per batch with
            a pending message).
        update_s: Of ``replay_s``, the seconds of the memory updates (the message and the
            GRU applied to the perturbed rows, ``TGN.message_update_shared``): the model's
            arithmetic. The rest, ``replay_s - update_s``, is the bookkeeping: the row
            table's steps (``RowTable``), the index building, the row comparisons of the
            pruning, and the dependency sets (``Dependencies``, once per plan).
        replay_cpu_s: ``replay_s`` in CPU seconds of the process (``time.process_time``,
            read at the same points): what a loaded machine disturbs least, and, summed over
            worker processes, comparable with the CPU seconds of all of them.
        update_cpu_s: ``update_s`` in CPU seconds the same way.
        steps: Where the row table's steps add their CPU seconds (``RowStepTimes``, one
            entry per ``RowTable`` step), or None (the default: no step is timed). Set it to
            see where the bookkeeping goes; it counts this process's replays only (a worker
            process's steps stay in that process).
    """

    calls: int = 0
    sets: int = 0
    row_updates: int = 0
    rows_made: int = 0
    rows_pruned: int = 0
    peak_rows: int = 0
    peak_bytes: int = 0
    settled_sets: int = 0
    replay_s: float = 0.0
    update_s: float = 0.0
    replay_cpu_s: float = 0.0
    update_cpu_s: float = 0.0
    steps: RowStepTimes | None = None


def checked_tolerance(tolerance: float, name: str = "tolerance") -> float:
    """``tolerance`` as a float, if it is a finite number ``>= 0`` (a pruning tolerance).

    Raises:
        ValueError: Otherwise.
    """
    value = float(tolerance)
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{name} must be a finite number >= 0, got {tolerance!r}")
    return value


def cone_replay(model: TGN, traj: Trajectory, sets: RemovalSets, prune: bool = True,
                stats: ConeStats | None = None, max_bytes: int | None = None,
                tolerance: float = 0.0, check: bool = False) -> NodeInputs:
    """``_cone_replay`` (below), with the compiled bookkeeping loops where the number of
    sets or of recorded batches pays for numba's start (``cftgnn.jit.for_sets``); the same
    logits either way."""
    with jit.for_sets(sets.table.shape[0], len(traj.batches)):
        return _cone_replay(model, traj, sets, prune, stats, max_bytes, tolerance, check)


def _cone_replay(model: TGN, traj: Trajectory, sets: RemovalSets, prune: bool = True,
                 stats: ConeStats | None = None, max_bytes: int | None = None,
                 tolerance: float = 0.0, check: bool = False) -> NodeInputs:
    """Follow P removal sets through the recorded batches, touching only affected rows.

    Rows are computed only for the states the prediction can read (``need`` of
    ``Dependencies``); the returned inputs cover the nodes the embedding of the
    explained event can read, and refuse to answer for the other perturbed nodes.

    **Perturbation pruning** (``prune``, exact): at the end of every batch, a perturbed row
    whose whole state equals the recorded one bit for bit (memory, last-update time, and a
    pending message built from the same sender, time and features, the sender's memory
    being the recorded one too) is retired, and its sets read the recording again; a removal
    whose effect has died out stops costing anything. A node whose dependency set says it
    may differ gets a fresh copy of the recorded state as before, kept only if it then
    differs; and a retired pair gets a row again when its recorded pending message comes
    from a sender whose memory differs under the set. Nothing is approximated: every row
    retired holds exactly the values the recording holds, so the logits are those of the
    replay without pruning (up to the float rounding of evaluating the same GRU updates in
    differently composed batches, as between any two replays).

    Args:
        model: The TGN the trajectory was recorded with.
        traj: The unperturbed trajectory.
        sets: The P removal sets; only events in ``[traj.start, traj.end)`` that the
            recording kept may be removed.
        prune: Retire rows equal to the recording (see above).
        stats: Counters to add this call's work to, or None.
        max_bytes: Memory budget of the rows and their map: when a call of several sets
            outgrows it (after freeing retired rows), ``ConeBudgetExceeded`` is
            raised for the caller to split the sets. One set is never refused: it holds at
            most one live row per node.
        tolerance: ``0.0`` (the default): memories are compared bit for bit, as above.
            ``τ > 0``: with ``prune``, a memory within ``τ`` of the recorded one (largest
            absolute coordinate difference) counts as the recorded one (see "Tolerance
            pruning" in the module docstring). **Not exact**: the logits then differ from a
            fresh replay by an amount that is not soundly bounded, so nothing computed with
            it is a proof. Ignored without ``prune``.
        check: Assert the invariants of the table of perturbed rows after every batch
            (``RowTable.check``; for tests, it costs a few passes over the row map).

    Returns:
        The node inputs (memory with pending messages applied) under each set: node ``n``
        under set ``p`` reads its perturbed row where it has one, else the recorded input.
    """
    began = time.perf_counter() if stats is not None else 0.0
    began_cpu = time.process_time() if stats is not None else 0.0
    tolerance = checked_tolerance(tolerance)
    src, dst = model.stream.src, model.stream.dst
    num_nodes = model.num_nodes
    if len(sets.events) == 0:
        return NodeInputs(traj.final_input, traj.final_input[:0])
    deps = traj.dependencies_for(model, sets.events)
    dev = traj.final_input.device
    rows = RowTable(sets.num_sets, deps.columns, deps.num_columns, model.memory_dim, dev)
    rows.step_times = stats.steps if stats is not None else None
    words = sets.words(deps.universe)  # [P, W]
    # with check: each column's dependency set so far, [C, W]
    dep = np.zeros((deps.num_columns, words.shape[1]), dtype=np.uint64) if check else None
    first = int(sets.events[0])
    removing = _removing(traj, sets.events)
    loc = np.full(num_nodes, -1, dtype=np.int64)
    nothing = np.zeros(0, dtype=bool)  # the removals of batches no set removes from
    settled: _Settled | None = None  # the live rows, while only quiet batches pass
    counts = ConeStats(calls=1, sets=sets.num_sets)
    clock = counts if stats is not None else None  # where the memory updates' time goes
    with torch.no_grad():
        for x, (rec, dn, dm) in enumerate(zip(traj.batches, deps.nodes, deps.masks,
                                              strict=True)):
            if dep is not None:
                dep[deps.columns[dn]] = dm
            if rows.size == 0 and (not len(rec.events) or rec.events[-1] < first):
                continue  # nothing differs from the unperturbed run yet
            removes = removing[x]
            if prune and not removes:
                if settled is None:
                    settled = _Settled(rows, deps.need)
                if _quiet(settled, rec.nodes):
                    # no perturbed row meets the batch and it removes nothing: of the steps
                    # below, only the pruning's retiring of rows never read again does
                    # anything (``RowTable.drop`` of the live rows ``settled`` keeps)
                    stale = settled.need < x
                    if stale.any():
                        rows.drop(settled.live[stale])
                        counts.peak_rows = max(counts.peak_rows,
                                               int(rows.alive[:rows.size].sum()))
                        rows.compact()
                        settled = None
                    else:  # nothing changed: compact would do nothing either
                        counts.peak_rows = max(counts.peak_rows, len(settled.live))
                    counts.peak_bytes = max(counts.peak_bytes, rows.nbytes())
                    if dep is not None:
                        rows.check(words, dep, prune)
                    continue
            settled = None  # the steps below change the table
            loc[rec.nodes] = np.arange(len(rec.nodes))
            counts.row_updates += _apply_pending(model, rows, rec, loc, src, dst, clock)
            made = rows.size
            if removes:  # [P, K], and which of the batch's events some set removes [K]
                rem, touched = sets.columns(rec.events), _removed(sets.events, rec.events)
            else:  # no set removes an event of the batch: none (the same arrays, cheaper:
                # the first entries of one all-false buffer of the call, which no step writes)
                if len(nothing) < sets.num_sets * len(rec.events):
                    nothing = np.zeros(2 * sets.num_sets * len(rec.events), dtype=bool)
                rem = nothing[:sets.num_sets * len(rec.events)].reshape(sets.num_sets,
                                                                       len(rec.events))
                touched = nothing[:len(rec.events)]
            rows.split(rec, loc, words, dn, dm, rem if prune else None, touched)
            counts.rows_made += rows.size - made
            read = deps.need > x
            rows.new_pending(rec, rem, loc, read, touched)
            if prune:
                counts.rows_made += rows.split_mixed(rec, rem, loc, read, src, dst, touched)
                made = rows.size
                counts.rows_pruned += rows.prune(model, rec, loc, x, deps.need, src, dst,
                                                 tolerance, deps.receivers(rec, x, src, dst))
                counts.rows_made += rows.size - made
                counts.peak_rows = max(counts.peak_rows, int(rows.alive[:rows.size].sum()))
                rows.compact()
            else:
                counts.peak_rows = max(counts.peak_rows, rows.size)
            if max_bytes is not None and sets.num_sets > 1 and rows.nbytes() > max_bytes:
                rows.compact(force=True)
                if rows.nbytes() > max_bytes:
                    raise ConeBudgetExceeded(f"{rows.nbytes()} bytes of rows for "
                                             f"{sets.num_sets} sets")
            counts.peak_bytes = max(counts.peak_bytes, rows.nbytes())
            loc[rec.nodes] = -1
            if dep is not None:
                rows.check(words, dep, prune)
                assert not nothing.any(), "a step wrote to the removals of a batch"
        out = _final_inputs(model, rows, traj, deps, src, dst, clock)
    if stats is not None:
        read = (deps.columns >= 0) & (deps.need >= len(traj.batches))
        cols = deps.columns[read]
        live = (rows.rowmap.T[cols] >= 0).any(axis=0) if len(cols) else np.zeros(
            sets.num_sets, dtype=bool)
        counts.settled_sets = int((~live).sum())
        counts.row_updates += int((rows.pend[:rows.size] >= 0).sum())
        counts.replay_s = time.perf_counter() - began
        counts.replay_cpu_s = time.process_time() - began_cpu
        for name in ("calls", "sets", "row_updates", "rows_made", "rows_pruned",
                     "settled_sets", "replay_s", "update_s", "replay_cpu_s", "update_cpu_s"):
            setattr(stats, name, getattr(stats, name) + getattr(counts, name))
        stats.peak_rows = max(stats.peak_rows, counts.peak_rows)
        stats.peak_bytes = max(stats.peak_bytes, counts.peak_bytes)
    return out


def _removed(removed: npt.NDArray[np.int64], events: npt.NDArray[np.int64]
             ) -> npt.NDArray[np.bool_]:
    """Which of a batch's ``events`` some set removes (``removed``, ascending: the sets'
    ``RemovalSets.events``), ``bool [K]``: the columns of ``RemovalSets.columns`` that can
    hold a true entry, found without reading them."""
    at = np.minimum(np.searchsorted(removed, events), len(removed) - 1)
    out: npt.NDArray[np.bool_] = removed[at] == events
    return out


def _removing(traj: Trajectory, removed: npt.NDArray[np.int64]) -> list[bool]:
    """For every batch of ``traj``, whether it has an event in ``removed`` (ascending): two
    binary searches per call over the batches' first and last events
    (``Trajectory.event_bounds``) rather than two per batch. Where it is false, no set
    removes an event of the batch, and its removals (``rem``) are all false."""
    lows, highs = traj.event_bounds()
    return (np.searchsorted(removed, lows)
            != np.searchsorted(removed, highs, side="right")).tolist()


class _Settled:
    """The live rows of a table (``live``), their nodes (``nodes``) and the last batch whose
    state of each is read (``need``), and whether a row holds a pending message
    (``pending``): made in the first batch after the table changed, and kept over the
    quiet batches that follow (``_quiet``), in which only retiring rows changes it (a few
    reads of these short arrays per batch instead of passes over the whole table)."""

    def __init__(self, rows: RowTable, need: npt.NDArray[np.int64]) -> None:
        size = rows.size
        self.pending = bool((rows.pend[:size] >= 0).any())
        self.live = np.flatnonzero(rows.alive[:size])
        self.nodes = rows.n[self.live]
        self.need = need[self.nodes]


def _quiet(settled: _Settled, nodes: npt.NDArray[np.integer]) -> bool:
    """Whether a batch none of whose events a set removes leaves every row as it is but
    for retiring the rows never read again (with pruning): no row holds a pending message
    and no live row's node is among the batch's nodes (``nodes``, ascending; the rows of
    ``settled``).
    Then ``_apply_pending`` has nothing to apply, ``RowTable.split`` gives a
    row only to pairs that hold one of a node of the batch or remove its pending message
    (none), ``new_pending`` and ``split_mixed`` look only at rows of the batch's nodes,
    and ``prune`` compares none, so it only retires the rows whose state is never read
    again: skipping the rest leaves bitwise the same rows, counters and logits. After a
    far-back removal, most batches are of this kind once pruning has retired most of its
    effects (a few array reads instead of a few dozen NumPy calls each)."""
    if settled.pending:
        return False
    live = settled.nodes
    if not len(live) or not len(nodes):
        return True
    at = np.minimum(np.searchsorted(nodes, live), len(nodes) - 1)
    return not bool((nodes[at] == live).any())


def _clocks() -> tuple[float, float]:
    """The wall and CPU clocks now (``perf_counter``, ``process_time``)."""
    return time.perf_counter(), time.process_time()


def _add_update(clock: ConeStats, began: tuple[float, float]) -> None:
    """Add the wall and CPU seconds since ``began`` (``_clocks``) to ``clock``'s memory
    updates."""
    wall, cpu = _clocks()
    clock.update_s += wall - began[0]
    clock.update_cpu_s += cpu - began[1]


def _apply_pending(model: TGN, rows: RowTable, rec: BatchRecord, loc: npt.NDArray[np.int64],
                   src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64],
                   clock: ConeStats | None = None) -> int:
    """Step 1 of a batch: apply the pending messages of perturbed rows; returns their number
    (the memory updates' seconds added to ``clock.update_s`` when given).

    A node whose recorded pending message comes from a perturbed state is perturbed itself
    (the sender's dependencies are in its own; with pruning, ``RowTable.prune`` gives it a row
    again), so unperturbed nodes need nothing here.
    """
    size = rows.size
    ra = np.flatnonzero(rows.pend[:size] >= 0)
    if len(ra):
        rep, n, ev = rows.rep[ra], rows.n[ra], rows.pend[ra]
        o = other_endpoint(src, dst, ev, n)
        lo_ = loc[o]
        assert (lo_ >= 0).all(), "the other endpoint of a pending message must be recorded"
        rat = torch.as_tensor(ra, device=rows.mem.device)
        mem_other, of = rows.other_memory(rep, o, rec.mem_pre, lo_)
        began = _clocks() if clock is not None else (0.0, 0.0)
        # the rows gathered by ``index_select`` (indexing with a tensor takes torch's general
        # path: 4x slower on a few hundred rows), written back in place
        new = model.message_update_shared(ev, rows.mem.index_select(0, rat), rows.lu[ra],
                                          mem_other, of)
        rows.mem.index_copy_(0, rat, new)
        if clock is not None:
            _add_update(clock, began)
        rows.lu[ra] = model.stream.t[ev]
    rows.pend[:size] = -1
    return len(ra)


def _final_inputs(model: TGN, rows: RowTable, traj: Trajectory, deps: Dependencies,
                  src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64],
                  clock: ConeStats | None = None) -> NodeInputs:
    """Node inputs at the end: the pending messages of perturbed rows applied (their
    seconds added to ``clock.update_s`` when given)."""
    size = rows.size
    # nodes whose final input is not read have stale rows: make reading them an error
    final = len(traj.batches)
    columns = np.where((rows.columns >= 0) & (deps.need < final), -2, rows.columns)
    if size == 0:
        return NodeInputs(traj.final_input, traj.final_input[:0])
    extra = rows.mem[:size]
    ra = np.flatnonzero(rows.pend[:size] >= 0)
    if len(ra):
        dev = rows.mem.device
        rep, n, ev = rows.rep[ra], rows.n[ra], rows.pend[ra]
        o = other_endpoint(src, dst, ev, n)
        rat = torch.as_tensor(ra, device=dev)
        mem_other, of = rows.other_memory(rep, o, traj.final.memory, o)
        extra = extra.clone()
        began = _clocks() if clock is not None else (0.0, 0.0)
        extra[rat] = model.message_update_shared(ev, rows.mem[rat], rows.lu[ra], mem_other, of)
        if clock is not None:
            _add_update(clock, began)
    return NodeInputs(traj.final_input, extra, rows.rowmap, columns)


__all__ = ["ConeBudgetExceeded", "ConeStats", "checked_tolerance", "cone_replay"]
