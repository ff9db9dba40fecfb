"""GraphMixer's batched masked replay: one window pass, no replay at all.

GraphMixer has no memory and reads, for each endpoint of the explained link, the window of its
``K`` most recent interactions, so a removal changes only the windows that hold it (it leaves
them and lets an older event in). P removal sets are P masks of one pass over the endpoints'
windows, each distinct window computed once: that is TGAT's one-layer case of
``cftgnn.replay.batched.batched_logits`` (a query identified by its time and the events of
its window), with GraphMixer's link encoder in place of the attention
(``cftgnn.models.graphmixer.MixerLinkEncoder.attend``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from cftgnn.models.graphmixer import GraphMixer
from cftgnn.models.protocol import BoolArray
from cftgnn.replay.batched import NodeInputs, batched_logits
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.plans import MemorylessReplay
from cftgnn.replay.registry import register_replay


@dataclass(frozen=True)
class GraphMixerPlan:
    """What the window passes of one explained event share.

    Attributes:
        model: The GraphMixer.
        end: The explained event's id.
        removed_mask: Events removed for every set (the base state's and the plan's own),
            ``bool [E]``.
        dst: The query's destination, None for the explained event's own (another: a
            negative pair, ``MemorylessReplay.pair_plan``).
    """

    model: GraphMixer
    end: int
    removed_mask: BoolArray
    dst: int | None = None

    def logits(self, sets: RemovalSets) -> Tensor:
        """All P masks in one window pass, ``float32 [P]``."""
        model = self.model
        none = torch.zeros(model.num_nodes, 0, device=model.device)  # no node input
        return batched_logits(model, sets, self.removed_mask, self.end, NodeInputs(none, none[:0]),
                              self.dst)


@register_replay(GraphMixer)
class GraphMixerReplay(MemorylessReplay):
    """The replay of a GraphMixer (registered: ``cftgnn.replay.registry.replay_for``)."""

    make_plan = GraphMixerPlan


__all__ = ["GraphMixerPlan", "GraphMixerReplay"]
