"""Tiny models and the planted stream shared by the model, replay, oracle and training tests."""

from __future__ import annotations

from collections.abc import Callable

from cftgnn.data.stream import EventStream
from cftgnn.models import TGAT, TGN, DyGFormer, GraphMixer, TemporalModel

BATCH = 16

ModelFactory = Callable[[EventStream], TemporalModel]


def tgn1(stream: EventStream) -> TemporalModel:
    return TGN(stream.num_nodes, stream.feat_dim, memory_dim=12, time_dim=8, embedding_dim=12,
               num_layers=1, num_heads=2, num_neighbors=4, batch_size=BATCH)


def tgn2(stream: EventStream) -> TemporalModel:
    return TGN(stream.num_nodes, stream.feat_dim, memory_dim=12, time_dim=8, embedding_dim=8,
               num_layers=2, num_heads=2, num_neighbors=3, batch_size=BATCH)


def tgat(stream: EventStream) -> TemporalModel:
    return TGAT(stream.num_nodes, stream.feat_dim, node_dim=6, time_dim=8, embedding_dim=8,
                num_layers=2, num_heads=2, num_neighbors=3, batch_size=BATCH)


def graphmixer(stream: EventStream) -> TemporalModel:
    return GraphMixer(stream.num_nodes, stream.feat_dim, time_dim=8, channels=8,
                      embedding_dim=8, num_neighbors=3, dropout=0.1, batch_size=BATCH)


def dygformer(stream: EventStream) -> TemporalModel:
    return DyGFormer(stream.num_nodes, stream.feat_dim, time_dim=8, channel_dim=4,
                     embedding_dim=8, max_input_sequence_length=4, patch_size=2,
                     batch_size=BATCH)


def named_model(stream: EventStream, name: str, num_neighbors: int = 5) -> TemporalModel:
    """A small TGN or TGAT by name (``tgn1``, ``tgn2``, ``tgat1``, ``tgat2``: the digit is the
    number of layers), seeded, batch 20, not attached (the soft-removal and probe tests)."""
    import torch

    torch.manual_seed(0)
    small = dict(time_dim=8, embedding_dim=16, num_heads=2, num_neighbors=num_neighbors,
                 batch_size=20)
    if name.startswith("tgn"):
        return TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, num_layers=int(name[-1]),
                   **small)
    return TGAT(stream.num_nodes, stream.feat_dim, node_dim=8, num_layers=int(name[-1]),
                **small)
