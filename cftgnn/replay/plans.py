"""The typed contract between the oracle and a batched masked replay.

The oracle evaluates removal sets of one explained event in two steps: once per event, the
model's *replay* (``ModelReplay``) makes a ``ReplayPlan`` (the work every masked
replay of ``[b0, i)`` shares: a recorded trajectory, a local history, or just the snapshot);
then, for each batch of P removal sets, the plan answers ``ReplayPlan.logits``. Every
plan is complete when it is made and knows how to evaluate itself, so nothing downstream
switches on a plan's type.

A model that brings its own batched replay implements ``BatchedReplay``
(``replay_plan`` / ``masked_logits``); ``cftgnn.replay.generic.NativeReplay`` wraps it.
Which replay a model gets is ``cftgnn.replay.registry.replay_for``'s answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor

from cftgnn.data.index import M_MAX
from cftgnn.data.stream import IntArray
from cftgnn.models.protocol import BoolArray, ReplayableModel
from cftgnn.models.state import State
from cftgnn.replay.masks import RemovalSets


@runtime_checkable
class ReplayPlan(Protocol):
    """The shared work of the masked replays of one explained event."""

    def logits(self, sets: RemovalSets) -> Tensor:
        """Logits ``float32 [P]`` of the explained event with each of the P sets removed
        (on top of the plan's own removals)."""


class ModelReplay(Protocol):
    """Makes an explained event's ``ReplayPlan`` (one replay per model)."""

    def plan(self, base: Any, start: int, end: int, removed_mask: BoolArray | None = None,
             removable: IntArray | None = None) -> ReplayPlan:
        """The plan of the masked replays of ``[start, end)`` from the snapshot ``base``.

        Args:
            base: The unperturbed snapshot at the batch boundary ``start``.
            start: Where ``base`` stands.
            end: The explained event's id.
            removed_mask: Events removed for every set (the approximate history's), ``bool [E]``.
            removable: The events later sets may remove (the candidates), so that the plan
                can prepare for them; sets removing other events stay correct, only slower.
        """


@runtime_checkable
class PairReplay(Protocol):
    """A replay whose plans can predict another pair than the explained event's own: the
    explained source and time with another destination (a negative pair, the ``tempme``
    curve protocol's), over the same history and removals.

    ``GenericReplay``, the memoryless replays (``MemorylessReplay``: TGAT, GraphMixer,
    DyGFormer) and TGN's (``cftgnn.replay.tgn.TGNReplay``) are; a model's own batched replay
    (``NativeReplay``) is not, and its negative pairs go through ``GenericReplay`` (one
    masked replay per set).
    """

    def pair_plan(self, base: Any, start: int, end: int, dst: int,
                  removed_mask: BoolArray | None = None,
                  removable: IntArray | None = None) -> ReplayPlan:
        """``ModelReplay.plan`` of the same history, whose logits are those of the pair
        ``(src_end, dst, t_end)`` instead of the event at ``end``."""


@runtime_checkable
class PairsReplay(Protocol):
    """A replay whose plans predict D pairs at once: the explained source and time with each
    of D destinations (the rank target's positive and negatives), over the same history and
    removals, in one batched call whose logits are ``[P, D]``.

    ``GenericReplay`` (one masked replay per set, the D pairs predicted together), the
    memoryless replays (``MemorylessReplay``) and TGN's are; a model's own batched replay
    (``NativeReplay``) is not, and goes through ``GenericReplay``.
    """

    def pairs_plan(self, base: Any, start: int, end: int, dsts: IntArray,
                   removed_mask: BoolArray | None = None,
                   removable: IntArray | None = None) -> ReplayPlan:
        """``ModelReplay.plan`` of the same history, whose ``logits`` are those of the
        pairs ``(src_end, dsts[j], t_end)``, ``float32 [P, D]``."""


@runtime_checkable
class RecordedPlan(Protocol):
    """A plan that replayed its history when it was made and kept the model's state at its
    end (TGN's recorded trajectory): whoever needs that state (the oracle's probe) restores
    it instead of replaying ``[start, end)`` once more."""

    def final_state(self) -> Any:
        """The model's state after the plan's history, the plan's own removals applied (a
        snapshot: restore it, never modify it)."""


@runtime_checkable
class BudgetedReplay(Protocol):
    """A replay whose batched calls can hold much memory at once (TGN's cone replay): the
    replay engine gives it its own ``memory_budget_gb``, one option for the engine's
    snapshots and plans and for each pass of a batched call (docs/design.md §5)."""

    def set_memory_budget(self, memory_budget_gb: float | None) -> None:
        """Keep each pass of a batched call within ``memory_budget_gb`` GiB (None: no
        bound)."""

    def plan_nbytes(self, base: Any, start: int, end: int, kept: int | None = None,
                    removable: int = M_MAX) -> int:
        """An upper bound of the bytes of ``ModelReplay.plan`` of ``[start, end)``
        from ``base``, before it is made (of a history keeping ``kept`` of those events,
        None: all, with ``removable`` removable events): the engine's snapshots make room
        for it first, so that recording it does not take the process past the budget, and
        an event whose plans cannot fit is refused before any work
        (``cftgnn.oracle.plan_room``)."""


@runtime_checkable
class BatchedReplay(Protocol):
    """A model's own way of evaluating P removal sets at once (the fast path).

    ``replay_plan`` is called once per explained event with the unperturbed state ``base``
    at a batch boundary, ``masked_logits`` for every batch of removal sets; the result must
    equal the generic path's (``cftgnn.replay.generic.GenericReplay``).
    """

    def replay_plan(self, base: Any, end: int, removed_mask: BoolArray | None = None,
                    removable: IntArray | None = None) -> Any:
        """Work shared by every masked replay of ``[base.position, end)``."""

    def masked_logits(self, plan: Any, sets: RemovalSets) -> Tensor:
        """Logits ``[P]`` of the event at ``end`` after replaying with each set removed."""


@dataclass(frozen=True)
class StackedPairsPlan:
    """D one-destination plans read as one plan of D pairs (``PairsReplay``): each call
    asks every plan and stacks their logits, ``[P, D]``. For a replay whose plans take one
    destination (DyGFormer's window pass); exact as each of them is."""

    plans: tuple[ReplayPlan, ...]

    def logits(self, sets: RemovalSets) -> Tensor:
        """Every plan's logits, column by column, ``float32 [P, D]``."""
        return torch.stack([plan.logits(sets).reshape(-1) for plan in self.plans], dim=1)


class MemorylessReplay:
    """The replay of a model without memory (TGAT, GraphMixer, DyGFormer): nothing to replay,
    so the plan is the explained event and the removals every set shares; a subclass names
    its plan class (``make_plan``), which evaluates the sets from the masked neighbour
    windows.

    Args:
        model: The model, attached to the explained stream.
    """

    #: The plan class: called with the model, the explained event's id, the shared
    #: removal mask (the base state's and the plan's own), ``bool [E]``, and the query's
    #: destination (None: the explained event's own; ``pair_plan``), or destinations
    #: (``int64 [D]``; ``pairs_plan``).
    make_plan: Callable[..., ReplayPlan]

    #: Whether ``make_plan`` takes an array of destinations (``WindowPlan``); else
    #: ``pairs_plan`` stacks one plan per destination (``StackedPairsPlan``).
    many_destinations: bool = True

    def __init__(self, model: ReplayableModel) -> None:
        self.model = model

    def plan(self, base: Any, start: int, end: int, removed_mask: BoolArray | None = None,
             removable: IntArray | None = None) -> ReplayPlan:
        """Keep the removals (``removable`` is not needed)."""
        return self._plan(base, end, removed_mask, None)

    def pair_plan(self, base: Any, start: int, end: int, dst: int,
                  removed_mask: BoolArray | None = None,
                  removable: IntArray | None = None) -> ReplayPlan:
        """The plan of the pair ``(src_end, dst, t_end)`` (``PairReplay``): the same
        neighbour windows, sampled for ``dst`` instead of the event's own destination."""
        return self._plan(base, end, removed_mask, int(dst))

    def pairs_plan(self, base: Any, start: int, end: int, dsts: IntArray,
                   removed_mask: BoolArray | None = None,
                   removable: IntArray | None = None) -> ReplayPlan:
        """The plan of the pairs ``(src_end, dsts[j], t_end)`` (``PairsReplay``): the
        source's windows and every destination's in one pass, logits ``[P, D]`` (one plan
        per destination, stacked, where ``many_destinations`` is false)."""
        ends = np.asarray(dsts, dtype=np.int64).reshape(-1)
        if not self.many_destinations:
            return StackedPairsPlan(tuple(self._plan(base, end, removed_mask, int(d))
                                          for d in ends.tolist()))
        return self._plan(base, end, removed_mask, ends)

    def _plan(self, base: Any, end: int, removed_mask: BoolArray | None,
              dst: int | IntArray | None) -> ReplayPlan:
        state: State = base
        shared = state.removed.numpy().copy()
        if removed_mask is not None:
            shared |= removed_mask
        return type(self).make_plan(self.model, int(end), shared, dst)


__all__ = ["BatchedReplay", "BudgetedReplay", "MemorylessReplay", "ModelReplay", "PairReplay",
           "PairsReplay", "RecordedPlan", "ReplayPlan", "StackedPairsPlan"]
