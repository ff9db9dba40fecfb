"""TGAT: temporal graph attention over the most recent neighbours, without memory.

Xu et al., "Inductive Representation Learning on Temporal Graphs" (ICLR 2020). Node inputs are
zero (the streams used here have no node features), so the embedding is built from edge
features, time encodings and structure alone; the model has no state besides the history
position and the removal mask.
"""

from __future__ import annotations

import torch
from torch import Tensor

from cftgnn.models.base import MemorylessModel
from cftgnn.models.layers import LinkDecoder, TemporalAttentionEmbedding
from cftgnn.models.state import State


class TGAT(MemorylessModel):
    """Temporal Graph Attention network.

    Soft removal (``predict_soft``) weights every
    attention slot that reads an event, at every layer. Without memory, weight 0 equals
    removing the event whenever no neighbour window holding it is full: a removal then lets
    an older neighbour into the ``num_neighbors`` most recent, a zero weight does not
    (docs/design.md §8, "Soft removal").

    Args:
        num_nodes: Number of nodes ``N``.
        edge_dim: Edge feature size ``F``.
        node_dim: Size of the (zero) node input.
        time_dim: Time encoding size.
        embedding_dim: Node embedding size.
        num_layers: Attention layers (2 in the paper).
        num_heads: Attention heads.
        num_neighbors: Most recent neighbours per node and layer.
        dropout: Attention dropout.
        batch_size: History batch size ``B``.
    """

    def __init__(self, num_nodes: int, edge_dim: int, node_dim: int = 100, time_dim: int = 100,
                 embedding_dim: int = 100, num_layers: int = 2, num_heads: int = 2,
                 num_neighbors: int = 10, dropout: float = 0.1, batch_size: int = 200) -> None:
        super().__init__(num_nodes, edge_dim, batch_size, num_neighbors, memory_dim=0)
        self.hparams = dict(num_nodes=num_nodes, edge_dim=edge_dim, node_dim=node_dim,
                            time_dim=time_dim, embedding_dim=embedding_dim,
                            num_layers=num_layers, num_heads=num_heads,
                            num_neighbors=num_neighbors, dropout=dropout,
                            batch_size=batch_size)
        self.node_dim = node_dim
        self.num_layers = num_layers
        self.embedding = TemporalAttentionEmbedding(node_dim, edge_dim, time_dim, embedding_dim,
                                                    num_layers, num_heads, dropout)
        self.decoder = LinkDecoder(embedding_dim, embedding_dim)

    def node_input(self, state: State) -> Tensor:
        return torch.zeros(self.num_nodes, self.node_dim, device=self.device)
