"""The replays every model gets: one masked replay per set, or the model's own batched one.

* ``GenericReplay`` works for every ``ReplayableModel``:
  for each set it restores the snapshot, advances ``[b0, i)`` with the set (plus the plan's
  own removals) masked, and predicts event ``i``. It is exact by construction (the model's
  own replay, batches fixed by original id) and costs one replay of ``[b0, i)`` per set,
  never one of the whole stream. It is also the reference every faster replay must equal.
* ``NativeReplay`` hands the work to a model that implements
  ``BatchedReplay`` itself.

Which one a model gets is decided by ``cftgnn.replay.registry.replay_for``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from cftgnn.data.stream import IntArray
from cftgnn.models.protocol import BoolArray, ReplayableModel
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.plans import BatchedReplay


@dataclass(frozen=True)
class GenericPlan:
    """What every masked replay of one explained event shares.

    Attributes:
        model: The replayed model.
        base: The model's snapshot at ``start`` (restored, never modified).
        start: A batch boundary (original id) where ``base`` stands.
        end: The explained event's id; history is ``[start, end)``.
        removed_mask: Events removed for every set (the approximate history's), ``bool [E]``.
        dst: The query's destination, None for the explained event's own (another: a
            negative pair, ``GenericReplay.pair_plan``), or ``int64 [D]`` destinations
            (``GenericReplay.pairs_plan``: ``logits`` is ``[P, D]``, the D pairs predicted
            together after each set's one replay).
    """

    model: ReplayableModel
    base: Any
    start: int
    end: int
    removed_mask: BoolArray
    dst: int | IntArray | None = None

    def logits(self, sets: RemovalSets) -> Tensor:
        """Restore, advance ``[start, end)`` with the set masked, predict; for each set.

        Returns:
            ``float32 [P]`` (``[P, D]`` for D destinations).
        """
        model = self.model
        stream = model.stream
        query = slice(self.end, self.end + 1)
        src, dst, t = stream.src[query].copy(), stream.dst[query].copy(), stream.t[query].copy()
        if self.dst is not None:
            dst = np.asarray(self.dst, dtype=stream.dst.dtype).reshape(-1)
            src, t = np.repeat(src, len(dst)), np.repeat(t, len(dst))
        out = [model.predict(src, dst, t).reshape(-1).float().cpu()
               for _ in self._replayed(sets)]
        if isinstance(self.dst, np.ndarray):  # [P, D]
            return torch.stack(out) if out else torch.zeros(0, len(dst))
        return torch.cat(out) if out else torch.zeros(0)

    def _replayed(self, sets: RemovalSets) -> Iterator[None]:
        """Restore and advance ``[start, end)`` with each set masked, in turn (the model
        holds each set's state while the caller predicts)."""
        model = self.model
        for row in sets.table:
            mask = self.removed_mask.copy()
            mask[sets.events[row]] = True
            model.restore(self.base)
            model.advance(self.start, self.end, mask)
            yield


class GenericReplay:
    """One masked replay per removal set through the model's state verbs.

    Args:
        model: Any model with the state verbs, attached to the explained stream.
    """

    def __init__(self, model: ReplayableModel) -> None:
        self.model = model

    def plan(self, base: Any, start: int, end: int, removed_mask: BoolArray | None = None,
             removable: IntArray | None = None) -> GenericPlan:
        """Keep the inputs (``removable`` is not needed: every set is replayed in full)."""
        num_events = self.model.stream.num_events
        mask = np.zeros(num_events, dtype=bool) if removed_mask is None else removed_mask.copy()
        return GenericPlan(self.model, base, int(start), int(end), mask)

    def pair_plan(self, base: Any, start: int, end: int, dst: int,
                  removed_mask: BoolArray | None = None,
                  removable: IntArray | None = None) -> GenericPlan:
        """The plan of the pair ``(src_end, dst, t_end)`` (``cftgnn.replay.plans.PairReplay``):
        the same replays, then that pair's prediction."""
        plan = self.plan(base, start, end, removed_mask, removable)
        return GenericPlan(plan.model, plan.base, plan.start, plan.end, plan.removed_mask,
                           int(dst))

    def pairs_plan(self, base: Any, start: int, end: int, dsts: IntArray,
                   removed_mask: BoolArray | None = None,
                   removable: IntArray | None = None) -> GenericPlan:
        """The plan of the pairs ``(src_end, dsts[j], t_end)``
        (``cftgnn.replay.plans.PairsReplay``): one replay per set, then the D pairs'
        prediction in one call, ``[P, D]``."""
        plan = self.plan(base, start, end, removed_mask, removable)
        return GenericPlan(plan.model, plan.base, plan.start, plan.end, plan.removed_mask,
                           np.asarray(dsts, dtype=np.int64).reshape(-1))


@dataclass(frozen=True)
class NativePlan:
    """A plan of a model's own batched replay (opaque to the oracle)."""

    model: BatchedReplay
    plan: Any

    def logits(self, sets: RemovalSets) -> Tensor:
        """The model's ``masked_logits``."""
        return self.model.masked_logits(self.plan, sets)


class NativeReplay:
    """A model's own batched replay (``BatchedReplay``).

    Args:
        model: A model with ``replay_plan`` and ``masked_logits``; its snapshots carry their
            position (``base.position == start``).
    """

    def __init__(self, model: BatchedReplay) -> None:
        self.model = model

    def plan(self, base: Any, start: int, end: int, removed_mask: BoolArray | None = None,
             removable: IntArray | None = None) -> NativePlan:
        """The model's ``replay_plan`` (``start`` is the snapshot's own position)."""
        return NativePlan(self.model, self.model.replay_plan(base, end, removed_mask, removable))


__all__ = ["GenericPlan", "GenericReplay", "NativePlan", "NativeReplay"]
