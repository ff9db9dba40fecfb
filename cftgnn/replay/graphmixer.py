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

from cftgnn.models.graphmixer import GraphMixer
from cftgnn.replay.batched import WindowPlan
from cftgnn.replay.plans import MemorylessReplay
from cftgnn.replay.registry import register_replay

#: GraphMixer's plan: its windows read no node input (``WindowPlan``'s default width, 0).
GraphMixerPlan = WindowPlan


@register_replay(GraphMixer)
class GraphMixerReplay(MemorylessReplay):
    """The replay of a GraphMixer (registered: ``cftgnn.replay.registry.replay_for``)."""

    make_plan = GraphMixerPlan


__all__ = ["GraphMixerPlan", "GraphMixerReplay"]
