"""TGAT's batched masked replay: one embedding pass, no replay at all.

Without memory, a removal only changes neighbour sampling, so P removal sets are P masks of
one embedding pass (``cftgnn.replay.batched.batched_logits``).
"""

from __future__ import annotations

from dataclasses import dataclass

from cftgnn.models.tgat import TGAT
from cftgnn.replay.batched import WindowPlan
from cftgnn.replay.plans import MemorylessReplay
from cftgnn.replay.registry import register_replay


@dataclass(frozen=True)
class TGATPlan(WindowPlan):
    """TGAT's plan: ``WindowPlan`` with zero node inputs of the model's ``node_dim``."""

    model: TGAT

    def node_width(self) -> int:
        return int(self.model.node_dim)


@register_replay(TGAT)
class TGATReplay(MemorylessReplay):
    """The replay of a TGAT (registered: ``cftgnn.replay.registry.replay_for``)."""

    make_plan = TGATPlan


__all__ = ["TGATPlan", "TGATReplay"]
