"""Tiny models and streams shared by the model tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from testsupport.planted import planted_stream

from cftgnn.data.stream import EventStream
from cftgnn.models import TGAT, TGN, TemporalModel

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


@pytest.fixture(params=[tgn1, tgn2, tgat], ids=["tgn1", "tgn2", "tgat"])
def factory(request: pytest.FixtureRequest) -> ModelFactory:
    def make(stream: EventStream) -> TemporalModel:
        torch.manual_seed(0)
        model = request.param(stream)
        model.eval()
        model.attach(stream)
        return model

    return make


@pytest.fixture
def stream() -> EventStream:
    """150 events (9 full batches of 16 and a partial one), many shared timestamps, 3 features."""
    return planted_stream(num_events=150, num_src=8, num_dst=8, feat_dim=3, seed=1)
