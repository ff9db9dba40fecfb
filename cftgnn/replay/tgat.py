"""TGAT's batched masked replay: one embedding pass, no replay at all.

Without memory, a removal only changes neighbour sampling, so P removal sets are P masks of
one embedding pass (:func:`cftgnn.replay.batched.batched_logits`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from cftgnn.data.stream import IntArray
from cftgnn.models.protocol import BoolArray
from cftgnn.models.state import State
from cftgnn.models.tgat import TGAT
from cftgnn.replay.batched import NodeInputs, batched_logits
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.registry import register_replay


@dataclass(frozen=True)
class TGATPlan:
    """What the embedding passes of one explained event share.

    Attributes:
        model: The TGAT.
        end: The explained event's id.
        removed_mask: Events removed for every set (the base state's and the plan's own),
            ``bool [E]``.
    """

    model: TGAT
    end: int
    removed_mask: BoolArray

    def logits(self, sets: RemovalSets) -> Tensor:
        """All P masks in one embedding pass, ``float32 [P]``."""
        model = self.model
        zeros = torch.zeros(1, model.node_dim, device=model.device).expand(model.num_nodes, -1)
        return batched_logits(model, sets, self.removed_mask, self.end,
                              NodeInputs(zeros, zeros[:0]))


@register_replay(TGAT)
class TGATReplay:
    """The replay of a TGAT (registered: :func:`cftgnn.replay.registry.replay_for`).

    Args:
        model: The TGAT, attached to the explained stream.
    """

    def __init__(self, model: TGAT) -> None:
        self.model = model

    def plan(self, base: Any, start: int, end: int, removed_mask: BoolArray | None = None,
             removable: IntArray | None = None) -> TGATPlan:
        """Keep the removals (``removable`` is not needed)."""
        state: State = base
        own = (np.zeros(self.model.stream.num_events, dtype=bool) if removed_mask is None
               else removed_mask.copy())
        return TGATPlan(self.model, int(end), state.removed.numpy() | own)


__all__ = ["TGATPlan", "TGATReplay"]
