"""TGAT's batched masked replay: one embedding pass, no replay at all.

Without memory, a removal only changes neighbour sampling, so P removal sets are P masks of
one embedding pass (``cftgnn.replay.batched.batched_logits``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from cftgnn.models.protocol import BoolArray
from cftgnn.models.tgat import TGAT
from cftgnn.replay.batched import NodeInputs, batched_logits
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.plans import MemorylessReplay
from cftgnn.replay.registry import register_replay


@dataclass(frozen=True)
class TGATPlan:
    """What the embedding passes of one explained event share.

    Attributes:
        model: The TGAT.
        end: The explained event's id.
        removed_mask: Events removed for every set (the base state's and the plan's own),
            ``bool [E]``.
        dst: The query's destination, None for the explained event's own (another: a
            negative pair, ``MemorylessReplay.pair_plan``).
    """

    model: TGAT
    end: int
    removed_mask: BoolArray
    dst: int | None = None

    def logits(self, sets: RemovalSets) -> Tensor:
        """All P masks in one embedding pass, ``float32 [P]``."""
        model = self.model
        zeros = torch.zeros(1, model.node_dim, device=model.device).expand(model.num_nodes, -1)
        return batched_logits(model, sets, self.removed_mask, self.end,
                              NodeInputs(zeros, zeros[:0]), self.dst)


@register_replay(TGAT)
class TGATReplay(MemorylessReplay):
    """The replay of a TGAT (registered: ``cftgnn.replay.registry.replay_for``)."""

    make_plan = TGATPlan


__all__ = ["TGATPlan", "TGATReplay"]
