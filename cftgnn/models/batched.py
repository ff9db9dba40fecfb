"""Predictions for P removal masks in one pass (the leading perturbation dimension).

P perturbations of one history are embedded as one graph made of P disjoint copies: node ``n``
of perturbation ``p`` is the *virtual* node ``p·N + n``. Each copy samples its neighbours with
its own removal mask, and reads its layer-0 input from a per-perturbation table, so one call of
the attention embedding and the decoder scores the explained event under all P masks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.data.index import TemporalIndex
from cftgnn.models.masks import RemovalSets
from cftgnn.models.neighbors import recent_kept_neighbors_where

if TYPE_CHECKING:
    from cftgnn.models.base import TemporalModel


def batched_logits(model: TemporalModel, index: TemporalIndex, stream_t: Tensor,
                   stream_feat: Tensor, removed: RemovalSets,
                   shared: npt.NDArray[np.bool_] | None, position: int,
                   node_input: Callable[[Tensor, Tensor], Tensor], num_nodes: int,
                   num_neighbors: int, src: int, dst: int, t: float) -> Tensor:
    """Logits of one link ``(src, dst, t)`` under P removal masks, ``[P]``.

    Args:
        model: A model with ``embedding`` (:class:`TemporalAttentionEmbedding`) and
            ``decoder`` (:class:`LinkDecoder`).
        index: Index of the attached stream.
        stream_t: Event times, ``float64 [E]``.
        stream_feat: Edge features, ``float32 [E, F]``.
        removed: The P removal sets; history is positions ``< position``.
        shared: Events removed for every set as well, ``bool [E]`` (e.g. the approximate
            oracle's history), or None.
        position: Stream position of the explained event (history bound).
        node_input: ``(p [M], n [M]) -> [M, in_dim]``, the layer-0 input of node ``n`` in
            perturbation ``p``.
        num_nodes: ``N``.
        num_neighbors: Neighbours per node and layer.
        src: Source node.
        dst: Destination node.
        t: Query time.
    """
    num_p = removed.num_sets
    dev = stream_t.device
    max_removed = int(removed.sizes(before=position).max()) if num_p else 0
    if shared is not None:
        max_removed += int(shared[:position].sum())

    def neighbors(vnodes: Tensor, before: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        v = vnodes.cpu().numpy()
        p, real = v // num_nodes, v % num_nodes

        def is_removed(eid: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
            out = removed.lookup(p, eid)
            return out if shared is None else out | shared[eid]

        nbr, eid, valid = recent_kept_neighbors_where(index, real, before.cpu().numpy(),
                                                      num_neighbors, is_removed, max_removed)
        vnbr = np.where(valid, p[:, None] * num_nodes + nbr, -1)
        return (torch.from_numpy(vnbr).to(dev), torch.from_numpy(eid).to(dev),
                torch.from_numpy(valid).to(dev))

    def inputs(vnodes: Tensor) -> Tensor:
        return node_input(vnodes // num_nodes, vnodes % num_nodes)

    offsets = torch.arange(num_p, device=dev) * num_nodes
    nodes = torch.cat([offsets + src, offsets + dst])  # [2P]
    before = torch.full_like(nodes, position)
    times = torch.full((2 * num_p,), float(t), dtype=torch.float64, device=dev)
    z = model.embedding(inputs, neighbors, stream_t, stream_feat, nodes, before, times)
    out: Tensor = model.decoder(z[:num_p], z[num_p:])
    return out
