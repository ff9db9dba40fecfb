"""DyGFormer's batched masked replay: one pass over the distinct pairs of sequences.

DyGFormer has no memory; a link's logit is a function of its time and of its two endpoints'
windows of most recent interactions (which the co-occurrence encoding and the transformer
read together). A removal changes only the windows that hold it, so P removal sets are P
masks of one pass: each set's two windows are sampled with its mask (the neighbour windows
with masks of ``cftgnn.models.neighbors.recent_kept_neighbors_where``, as TGAT's and
GraphMixer's replay), and the model runs once per distinct pair of windows. A pair equal to
the unperturbed one (the set removes nothing either window reads) gets the unperturbed logit,
computed once per plan: one transformer pass per event instead of one per such set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from cftgnn.arrays import distinct_rows
from cftgnn.data.stream import IntArray
from cftgnn.models.dygformer import DyGFormer
from cftgnn.models.neighbors import recent_kept_neighbors_where
from cftgnn.models.protocol import BoolArray
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.plans import MemorylessReplay
from cftgnn.replay.registry import register_replay


@dataclass(frozen=True)
class DyGFormerPlan:
    """What the passes of one explained event share.

    Attributes:
        model: The DyGFormer.
        end: The explained event's id (its stream position: the oracle's model is attached
            with event ids = positions).
        removed_mask: Events removed for every set (the base state's and the plan's own),
            ``bool [E]``.
        dst: The query's destination, None for the explained event's own (another: a
            negative pair, ``MemorylessReplay.pair_plan``).
    """

    model: DyGFormer
    end: int
    removed_mask: BoolArray
    dst: int | None = None
    #: The unperturbed pair of windows (its bytes) and its logit, once computed.
    unperturbed: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def logits(self, sets: RemovalSets) -> Tensor:
        """All P masks in one pass over the distinct pairs of windows that differ from the
        unperturbed one, ``float32 [P]``."""
        model, position, shared = self.model, self.end, self.removed_mask
        num_p, dev = sets.num_sets, model.device
        if num_p == 0:
            return torch.zeros(0, device=dev)
        stream = model.stream
        k = model.num_neighbors
        max_removed = int(sets.sizes(before=position).max()) + int(shared[:position].sum())
        p = np.tile(np.arange(num_p, dtype=np.int64), 2)  # [2P]: the sources, then the dsts
        query_dst = int(stream.dst[position]) if self.dst is None else int(self.dst)
        nodes = np.repeat(np.array([stream.src[position], query_dst], dtype=np.int64), num_p)

        def is_removed(eid: IntArray) -> BoolArray:
            out: BoolArray = sets.lookup(p, eid) | shared[eid]
            return out

        nbr, eid, valid = recent_kept_neighbors_where(
            model.index, nodes, np.full(2 * num_p, position), k, is_removed, max_removed)
        held = np.where(valid, eid, -1)
        pairs = np.concatenate([held[:num_p], held[num_p:]], axis=1)
        first, inverse = distinct_rows(pairs)
        known = self.unperturbed
        if "key" not in known:  # the pair of windows of no removal but the plan's own
            nbr0, eid0, valid0 = recent_kept_neighbors_where(
                model.index, nodes[[0, num_p]], np.full(2, position), k,
                lambda e: shared[e], int(shared[:position].sum()))
            known["key"] = np.where(valid0, eid0, -1).reshape(-1).tobytes()
        same = np.array([pairs[j].tobytes() == known["key"] for j in first], dtype=bool)
        todo = first if "logit" not in known else first[~same]
        out = torch.empty(len(first), device=dev)
        if len(todo):
            u = len(todo)

            def window(rows: IntArray) -> tuple[Tensor, Tensor, Tensor]:
                return (torch.as_tensor(nbr[rows], device=dev),
                        torch.as_tensor(eid[rows], device=dev),
                        torch.as_tensor(valid[rows], device=dev))

            src = torch.full((u,), int(stream.src[position]), dtype=torch.long, device=dev)
            dst = torch.full((u,), query_dst, dtype=torch.long, device=dev)
            t = torch.full((u,), float(stream.t[position]), dtype=torch.float64, device=dev)
            computed = model.logits_of_windows(src, dst, t, window(todo), window(todo + num_p))
            if "logit" not in known:
                out = computed
                if same.any():
                    known["logit"] = float(computed[int(np.flatnonzero(same)[0])].detach())
            else:
                out[torch.as_tensor(~same, device=dev)] = computed
        if "logit" in known:
            out[torch.as_tensor(same, device=dev)] = known["logit"]
        return out[torch.as_tensor(inverse, device=dev)]


@register_replay(DyGFormer)
class DyGFormerReplay(MemorylessReplay):
    """The replay of a DyGFormer (registered: ``cftgnn.replay.registry.replay_for``)."""

    make_plan = DyGFormerPlan
    many_destinations = False  # its plan takes one destination: pairs_plan stacks them


__all__ = ["DyGFormerPlan", "DyGFormerReplay"]
