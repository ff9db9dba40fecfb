"""Replay backends: how the oracle evaluates removal sets with a model.

A backend is made once per model (:func:`replay_backend`) and answers two calls: ``plan`` (once
per explained event, from the unperturbed snapshot at the batch boundary ``b0`` at or before
the oldest candidate) and ``logits`` (for each batch of removal sets).

* :class:`GenericReplay` works for every :class:`~cftgnn.models.protocol.ReplayableModel`:
  for each set it restores the snapshot, advances ``[b0, i)`` with the set (plus the plan's
  own removals) masked, and predicts event ``i``. It is exact by construction (the model's
  own replay, batches fixed by original id) and costs one replay of ``[b0, i)`` per set,
  never one of the whole stream.
* :class:`NativeReplay` hands the work to a model that implements
  :class:`~cftgnn.models.protocol.BatchedReplay` (TGN: causal-cone replay of P sets at once;
  TGAT: one embedding pass), which must give the same logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from cftgnn.data.stream import IntArray
from cftgnn.models.masks import RemovalSets
from cftgnn.models.protocol import BatchedReplay, BoolArray, ReplayableModel


@dataclass(frozen=True)
class GenericPlan:
    """What every masked replay of one explained event shares.

    Attributes:
        base: The model's snapshot at ``start`` (restored, never modified).
        start: A batch boundary (original id) where ``base`` stands.
        end: The explained event's id; history is ``[start, end)``.
        removed: Events removed for every set (the approximate history's), ``bool [E]``.
    """

    base: Any
    start: int
    end: int
    removed: BoolArray


class ReplayBackend(Protocol):
    """The two calls the oracle makes (see the module docstring)."""

    def plan(self, base: Any, start: int, end: int, removed: BoolArray | None = None,
             removable: IntArray | None = None) -> Any:
        """Shared work of the masked replays of ``[start, end)`` from ``base``."""

    def logits(self, plan: Any, removed: RemovalSets) -> Tensor:
        """Logits ``[P]`` of event ``end`` with each of the P sets removed as well."""


class GenericReplay:
    """One masked replay per removal set through the model's state verbs.

    Args:
        model: Any model with the state verbs, attached to the explained stream.
    """

    def __init__(self, model: ReplayableModel) -> None:
        self.model = model

    def plan(self, base: Any, start: int, end: int, removed: BoolArray | None = None,
             removable: IntArray | None = None) -> GenericPlan:
        """Keep the inputs (``removable`` is not needed: every set is replayed in full)."""
        num_events = self.model.stream.num_events
        mask = np.zeros(num_events, dtype=bool) if removed is None else removed.copy()
        return GenericPlan(base, int(start), int(end), mask)

    def logits(self, plan: GenericPlan, removed: RemovalSets) -> Tensor:
        """Restore, advance ``[start, end)`` with the set masked, predict; for each set.

        Returns:
            ``float32 [P]``.
        """
        model = self.model
        stream = model.stream
        query = slice(plan.end, plan.end + 1)
        src, dst, t = stream.src[query].copy(), stream.dst[query].copy(), stream.t[query].copy()
        out = []
        for row in removed.table:
            mask = plan.removed.copy()
            mask[removed.events[row]] = True
            model.restore(plan.base)
            model.advance(plan.start, plan.end, mask)
            out.append(model.predict(src, dst, t).reshape(-1).float().cpu())
        return torch.cat(out) if out else torch.zeros(0)


class NativeReplay:
    """A model's own batched replay (:class:`~cftgnn.models.protocol.BatchedReplay`).

    Args:
        model: A model with ``replay_plan`` and ``masked_logits``; its snapshots carry their
            position (``base.position == start``).
    """

    def __init__(self, model: BatchedReplay) -> None:
        self.model = model

    def plan(self, base: Any, start: int, end: int, removed: BoolArray | None = None,
             removable: IntArray | None = None) -> Any:
        """The model's ``replay_plan`` (``start`` is the snapshot's own position)."""
        return self.model.replay_plan(base, end, removed, removable)

    def logits(self, plan: Any, removed: RemovalSets) -> Tensor:
        """The model's ``masked_logits``."""
        return self.model.masked_logits(plan, removed)


def replay_backend(model: ReplayableModel) -> ReplayBackend:
    """The model's own batched replay when it has one, else the generic per-set replay."""
    if isinstance(model, BatchedReplay):
        return NativeReplay(model)
    return GenericReplay(model)


__all__ = ["GenericPlan", "GenericReplay", "NativeReplay", "ReplayBackend", "replay_backend"]
