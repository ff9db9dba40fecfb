"""Unperturbed snapshots kept within a memory budget.

The replay engine carries the unperturbed model state forward in stream order and keeps
snapshots at batch boundaries, so that an explained event whose oldest candidate lies behind
the cursor is reached by replay from a nearby snapshot rather than from the start of the
stream. On a stream of millions of events, one snapshot every few batches would take more
memory than the machine has, so ``SnapshotStore`` keeps them within a budget:

* the **spacing** is chosen from the budget and the stream's length: with room for ``K``
  snapshots besides the cursor, one every ``⌈batches / K⌉`` batches (never denser than the
  engine's ``checkpoint_every``), so a stream of any length fits the same budget and a longer
  stream only gets sparser snapshots (more replay when going back, never more memory);
* the explained event's replay plans (the recorded history from its base state, which grows
  with how far back its oldest candidate lies) share the budget: they are needed, so
  snapshots make room for them (``SnapshotStore.make_room``);
* when a snapshot would exceed the budget (snapshots that grow with the history, plans, or a
  budget below the stream's even spacing), the **least useful** one is dropped first: the one whose
  removal merges the two shortest neighbouring gaps, that is, adds the least replay to the
  worst way back. Dropping is always exact: a missing snapshot is replayed again;
* when the caller says which base states it will ask for, in order
  (``SnapshotStore.want``, [``expect``][cftgnn.oracle.ReplayEngine.expect]), the walk
  forward keeps a snapshot at each of them, and they are dropped last (the one needed
  latest first), so that a run going back and forth in the stream replays each part of the
  stream about once instead of once per explained event.

A snapshot's size is measured by ``snapshot_nbytes`` (the bytes of the tensors and arrays
it holds); the built-in models' unperturbed snapshots are ``O(N·d)`` whatever the stream's
length (``State`` stores "nothing removed" in one byte).
"""

from __future__ import annotations

import bisect
import ctypes
import math
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor

from cftgnn.errors import ConfigError

#: The engine's default budget for unperturbed snapshots, GiB.
DEFAULT_MEMORY_BUDGET_GB = 0.5

#: Blocks of at least this many bytes are mapped on their own by the C library and given
#: back to the system when freed (``release_freed_memory``).
RELEASE_BLOCK_BYTES = 4 * 2**20
#: glibc's ``mallopt`` parameters: that size (``M_MMAP_THRESHOLD``), and how much free
#: memory the top of the heap keeps before it is given back (``M_TRIM_THRESHOLD``: twice
#: it, glibc's own rule for the threshold it adjusts).
_M_MMAP_THRESHOLD = -3
_M_TRIM_THRESHOLD = -1
_released: bool | None = None  # whether the setting took (None: not tried yet)


def release_freed_memory() -> bool:
    """Make the C library give large freed blocks back to the system, so that the process's
    resident memory follows the bytes a budget counts (snapshots and plans dropped), not
    the most it ever held; returns whether it does (glibc only; other C libraries are left
    as they are). Process-wide, set on the first call.

    glibc maps a block of at least ``M_MMAP_THRESHOLD`` bytes on its own and unmaps it
    when freed; by default that threshold rises to the size of every such block freed (up to
    32 MiB), after which blocks of that size (a snapshot of ``O(N·d)`` bytes: 20 MB at 50k
    nodes and memory 100) come from the heap, where a freed one stays resident, and the
    holes that snapshots dropped and made again leave between smaller blocks make the heap
    grow. This fixes the threshold at ``RELEASE_BLOCK_BYTES`` (and the free memory the
    heap's top keeps at twice it, as glibc's adjusted threshold does, so that smaller blocks
    are not given back and faulted in again batch after batch): on the 1M-event synthetic
    stream it takes about 0.2 GiB off the peak RSS of ``explain.py``, and the explained
    events cost the same time (docs/benchmarks.md).
    """
    global _released
    if _released is None:
        _released = False
        if sys.platform.startswith("linux"):
            try:
                mallopt = ctypes.CDLL(None).mallopt
                mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                mallopt.restype = ctypes.c_int
                _released = bool(mallopt(_M_MMAP_THRESHOLD, RELEASE_BLOCK_BYTES)
                                 and mallopt(_M_TRIM_THRESHOLD, 2 * RELEASE_BLOCK_BYTES))
            except (OSError, AttributeError):  # a C library without it
                pass
    return _released


def budget_bytes(memory_budget_gb: float | None) -> int | None:
    """A budget in GiB as bytes (None stays None: no bound).

    Raises:
        ConfigError: When it is not a number ``>= 0``.
    """
    if memory_budget_gb is None:
        return None
    if isinstance(memory_budget_gb, bool) or not isinstance(memory_budget_gb, int | float) \
            or not memory_budget_gb >= 0 or math.isinf(memory_budget_gb):
        raise ConfigError(f"memory_budget_gb must be a number >= 0 or null, got "
                          f"{memory_budget_gb!r}")
    return int(memory_budget_gb * 2**30)


def snapshot_nbytes(snapshot: Any) -> int:
    """Bytes held by the tensors and arrays of a snapshot or a replay plan (its attributes
    or dataclass fields, and lists, tuples and dicts of them, a few levels deep; modules,
    whose parameters and attached stream belong to the model, are not counted); storage
    shared between them counts once, a broadcast tensor counts its storage (one byte for
    an expanded scalar)."""
    seen: set[tuple[int, int]] = set()
    total = 0

    def visit(x: Any, depth: int) -> None:
        nonlocal total
        if isinstance(x, Tensor):
            storage = x.untyped_storage()
            key = (int(storage.data_ptr()), int(storage.nbytes()))
            if key not in seen:
                seen.add(key)
                total += key[1]
        elif isinstance(x, np.ndarray):
            base = x if x.base is None else x.base
            key = (id(base), int(getattr(base, "nbytes", x.nbytes)))
            if key not in seen:
                seen.add(key)
                total += key[1]
        elif depth > 8 or isinstance(x, torch.nn.Module):
            return
        elif isinstance(x, list | tuple):
            for y in x:
                visit(y, depth + 1)
        elif isinstance(x, dict):
            for y in x.values():
                visit(y, depth + 1)
        elif is_dataclass(x) and not isinstance(x, type):
            for f in fields(x):
                visit(getattr(x, f.name), depth + 1)
        elif hasattr(x, "__dict__"):
            for y in vars(x).values():
                visit(y, depth + 1)

    visit(snapshot, 0)
    return total


class SnapshotStore:
    """Unperturbed snapshots by position, within a byte budget (see the module docstring).

    Args:
        budget: Bytes the snapshots may take, the engine's cursor included (one snapshot is
            reserved for it); None for no bound.
        snapshot_size: Bytes of one snapshot (the first one's), to choose the spacing.
        num_events: Events of the stream.
        batch_size: The model's history batch size ``B``.
        min_batches: The densest spacing, in batches (the engine's ``checkpoint_every``).
    """

    def __init__(self, budget: int | None, snapshot_size: int, num_events: int,
                 batch_size: int, min_batches: int = 64) -> None:
        self.budget = budget
        self.num_events = int(num_events)
        self._reserve = max(1, int(snapshot_size))  # the cursor's share of the budget
        self._per_event = 0.0  # largest plan bytes per history event seen
        num_batches = max(1, -(-int(num_events) // int(batch_size)))
        batches = max(1, int(min_batches))
        capacity = self.capacity
        if capacity is not None:
            batches = max(batches, -(-num_batches // max(1, capacity)))
        #: Distance between kept snapshots, in events (a multiple of the batch size).
        self.spacing = batches * int(batch_size)
        self._kept: dict[int, Any] = {}
        self._size: dict[int, int] = {}
        self._plans = 0  # bytes of the current explained event's replay plans
        self._wanted: dict[int, deque[int]] = {}  # position -> the turns it is wanted at
        self._announced: list[int] = []  # those positions, ascending
        self._turns = 0  # wanted positions announced so far (their order of use)
        self._passed = -1  # turns up to this one are done (or were skipped)

    @property
    def capacity(self) -> int | None:
        """How many snapshots of the first one's size fit besides the cursor (None: any)."""
        if self.budget is None:
            return None
        return max(0, self.budget // self._reserve - 1)

    @property
    def nbytes(self) -> int:
        """Bytes of the kept snapshots (the cursor not included)."""
        return sum(self._size.values())

    @property
    def cursor_nbytes(self) -> int:
        """Bytes the budget reserves for the engine's cursor (one snapshot's, the latest
        offered)."""
        return self._reserve

    @property
    def plans_nbytes(self) -> int:
        """Bytes of the explained event's replay plans, as last accounted (``make_room``)."""
        return self._plans

    def __len__(self) -> int:
        return len(self._kept)

    def positions(self) -> list[int]:
        """Positions of the kept snapshots, ascending."""
        return sorted(self._kept)

    def get(self, position: int) -> Any | None:
        """The snapshot kept at ``position``, or None."""
        return self._kept.get(position)

    def want(self, positions: list[int]) -> None:
        """Announce base states that will be asked for, in the order they will be: each is
        kept when the walk passes it (``wanted``) and dropped after every other kept
        snapshot, the one needed latest first."""
        for position in map(int, positions):
            if position not in self._wanted:
                self._wanted[position] = deque()
                bisect.insort(self._announced, position)
            self._wanted[position].append(self._turns)
            self._turns += 1

    def _turns_of(self, position: int) -> deque[int] | None:
        """The turns still to come at ``position`` (None: none), forgetting those of turns
        already passed (``used``)."""
        turns = self._wanted.get(position)
        while turns and turns[0] <= self._passed:
            turns.popleft()
        if turns is not None and not turns:
            del self._wanted[position]
            self._announced.remove(position)
            return None
        return turns

    def wanted(self, position: int) -> bool:
        """Whether a base state at ``position`` was announced and is still to be used."""
        return self._turns_of(int(position)) is not None

    def next_wanted(self, position: int) -> int | None:
        """The first announced position after ``position`` still to be used, or None."""
        j = bisect.bisect_right(self._announced, int(position))
        while j < len(self._announced):
            p = self._announced[j]
            if self._turns_of(p) is not None:
                return p
            # p was used up and left the list: the next one is at j now
        return None

    def used(self, position: int) -> None:
        """One announced use of ``position`` is done (``want``); unannounced ones are
        ignored. Announced uses of an earlier turn that never came (an event skipped) are
        forgotten (lazily, by ``_turns_of``), so that they do not hold snapshots for
        nothing."""
        turns = self._turns_of(int(position))
        if turns is not None:
            self._passed = max(self._passed, turns[0])

    def next_stop(self, position: int, end: int) -> int:
        """Where a walk forward from ``position`` towards ``end`` stops next: at ``end``,
        the next multiple of the spacing or the next announced position, whichever comes
        first (a state there may be kept, ``keeps``)."""
        stop = min(int(end), (int(position) // self.spacing + 1) * self.spacing)
        wanted = self.next_wanted(position)
        return stop if wanted is None else min(stop, wanted)

    def keeps(self, position: int) -> bool:
        """Whether a walk offers the state at ``position``: a multiple of the spacing or an
        announced position still to be used."""
        return int(position) % self.spacing == 0 or self.wanted(position)

    def latest(self, position: int) -> tuple[int, Any] | None:
        """The kept snapshot closest at or before ``position`` as ``(its position, it)``, or
        None when there is none (then replay starts from the empty state)."""
        before = [p for p in self._kept if p <= position]
        if not before:
            return None
        p = max(before)
        return p, self._kept[p]

    @property
    def _plan_fixed(self) -> int:
        """Bytes of an event's plans whatever its history: two plans, each holding about
        two snapshots (the state at the explained event and its node input)."""
        return 4 * self._reserve

    def expect_plans(self, span: int) -> None:
        """Make room, before it is recorded, for the exact plan of an explained event whose
        history from its base state holds ``span`` events, estimated as its fixed part plus
        the largest bytes per history event beyond it seen so far in exact plans (nothing
        is known before the first; the approximate plan, whose history is the candidates
        alone, is accounted for when it is made, ``make_room``)."""
        if self._per_event:
            self.make_room(self._plan_fixed + int(self._per_event * max(0, span)))

    def plans_built(self, span: int, plan_bytes: int) -> None:
        """The exact plan of the explained event is recorded: account for its real size
        (``make_room``) and learn its bytes per history event for the next ones."""
        if span > 0:
            self._per_event = max(self._per_event,
                                  max(0, plan_bytes - self._plan_fixed) / span, 1e-9)
        self.make_room(plan_bytes)

    def make_room(self, plan_bytes: int) -> None:
        """Account for the replay plans of the explained event (``plan_bytes``, replacing
        the previous event's): drop the least useful snapshots until the snapshots, the
        cursor and the plans fit the budget (the plans are needed; snapshots only save
        replay)."""
        self._plans = max(0, int(plan_bytes))
        self._fit()

    def _fit(self) -> None:
        if self.budget is None:
            return
        while self._kept and self.nbytes + self._reserve + self._plans > self.budget:
            self._drop(self._least_useful())

    def offer(self, position: int, make: Callable[[], Any]) -> bool:
        """Keep the snapshot ``make()`` at ``position`` if the budget allows, dropping the
        least useful ones first; returns whether it is kept."""
        if position in self._kept or position <= 0:
            return position in self._kept
        if self.budget is not None and self.capacity == 0:
            return False
        snap = make()
        size = snapshot_nbytes(snap)
        self._reserve = max(1, size)
        self._kept[position], self._size[position] = snap, size
        self._fit()
        return position in self._kept

    def _least_useful(self) -> int:
        """The kept position whose removal leaves the shortest merged gap (the oldest among
        equals): dropping it adds the least replay to any way back. Announced positions
        (``want``) go last, the one needed latest first."""
        pos = self.positions()
        turns = {p: self._turns_of(p) for p in pos}
        free = [j for j, p in enumerate(pos) if turns[p] is None]
        if not free:
            return max(pos, key=lambda p: cast("deque[int]", turns[p])[0])
        edges = [0, *pos, self.num_events]
        return pos[min(free, key=lambda j: edges[j + 2] - edges[j])]

    def _drop(self, position: int) -> None:
        del self._kept[position], self._size[position]


__all__ = ["DEFAULT_MEMORY_BUDGET_GB", "RELEASE_BLOCK_BYTES", "SnapshotStore", "budget_bytes",
           "release_freed_memory", "snapshot_nbytes"]
