"""State verbs and the exactness of masked replay (docs/design.md §2)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from testsupport.models import BATCH, ModelFactory, tgn2
from testsupport.planted import planted_stream

from cftgnn.data.stream import EventStream
from cftgnn.models import ModelStateError, TemporalModel


def queries(stream: EventStream, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The event ``i`` and a few other pairs at its time."""
    src = np.r_[stream.src[i], np.arange(4)]
    dst = np.r_[stream.dst[i], stream.num_nodes - 1 - np.arange(4)]
    return src, dst, np.full(len(src), stream.t[i])


def masked_vs_reduced(factory: ModelFactory, stream: EventStream, removed: np.ndarray,
                      i: int) -> tuple[torch.Tensor, torch.Tensor]:
    q = queries(stream, i)
    full = factory(stream)
    mask = np.zeros(stream.num_events, dtype=bool)
    mask[removed] = True
    full.advance(0, i, mask)
    sub, kept = stream.without(removed)
    reduced = factory(sub)
    reduced.attach(sub, kept)
    reduced.advance(0, i)
    with torch.no_grad():
        return full.predict(*q), reduced.predict(*q)


def shared_timestamp_events(stream: EventStream, below: int) -> np.ndarray:
    t = stream.t[:below]
    dup = np.flatnonzero(np.r_[False, t[1:] == t[:-1]])
    return np.unique(np.r_[dup, dup - 1])


@pytest.mark.parametrize("i", [BATCH * 6, BATCH * 6 + 5, 149])
def test_masked_advance_equals_reduced_stream(factory: ModelFactory, stream: EventStream,
                                              i: int) -> None:
    ties = shared_timestamp_events(stream, i)
    assert len(ties) > 4
    rng = np.random.default_rng(i)
    removed = np.unique(np.r_[rng.choice(ties, 4, replace=False), rng.choice(i, 6),
                              np.arange(i - i % BATCH, i)[:3]])  # incl. the partial last batch
    a, b = masked_vs_reduced(factory, stream, removed, i)
    assert torch.allclose(a, b, atol=1e-5, rtol=0)


def test_removing_a_whole_batch(factory: ModelFactory, stream: EventStream) -> None:
    removed = np.arange(BATCH * 2, BATCH * 3)
    a, b = masked_vs_reduced(factory, stream, removed, BATCH * 5 + 3)
    assert torch.allclose(a, b, atol=1e-5, rtol=0)


def test_removal_changes_the_prediction(factory: ModelFactory, stream: EventStream) -> None:
    i = BATCH * 6 + 5
    removed = np.arange(BATCH * 4, i)
    q = queries(stream, i)
    model = factory(stream)
    model.advance(0, i)
    with torch.no_grad():
        base = model.predict(*q)
    a, _ = masked_vs_reduced(factory, stream, removed, i)
    assert not torch.allclose(a, base, atol=1e-6)


@settings(max_examples=8, deadline=None)
@given(removed=st.sets(st.integers(0, 99), max_size=12), i=st.integers(1, 100))
def test_masked_replay_property(removed: set[int], i: int) -> None:
    stream = planted_stream(num_events=100, num_src=6, num_dst=6, feat_dim=2, seed=3)
    ids = np.array(sorted(x for x in removed if x < i), dtype=np.int64)

    def make(s: EventStream) -> TemporalModel:
        torch.manual_seed(0)
        m = tgn2(s)
        m.eval()
        m.attach(s)
        return m

    a, b = masked_vs_reduced(make, stream, ids, min(i, 99))
    assert torch.allclose(a, b, atol=1e-5, rtol=0)


def test_predict_does_not_change_state(factory: ModelFactory, stream: EventStream) -> None:
    model = factory(stream)
    mask = np.zeros(stream.num_events, dtype=bool)
    mask[[3, 40, 41]] = True
    model.advance(0, BATCH * 4 + 7, mask)
    before = model.snapshot()
    q = queries(stream, BATCH * 4 + 7)
    with torch.no_grad():
        first = model.predict(*q)
    model.train()
    model.predict(*q).sum().backward()  # with gradients, in training mode
    model.eval()
    assert model.state.equals(before)
    with torch.no_grad():
        assert torch.equal(model.predict(*q), first)


def test_snapshot_restore_round_trip(factory: ModelFactory, stream: EventStream) -> None:
    q = queries(stream, 120)
    scratch = factory(stream)
    scratch.advance(0, 120)
    with torch.no_grad():
        expected = scratch.predict(*q)

    model = factory(stream)
    model.advance(0, BATCH * 3)
    snap = model.snapshot()
    model.advance(BATCH * 3, BATCH * 5 + 2)  # partial batch: closes the state
    with pytest.raises(ModelStateError):
        model.advance(BATCH * 5 + 2, 120)
    model.restore(snap)
    assert model.state.equals(snap)
    model.advance(BATCH * 3, 120)
    assert model.state.equals(scratch.state)
    with torch.no_grad():
        assert torch.equal(model.predict(*q), expected)
    model.restore(snap)  # the snapshot is unaffected by the replay from it
    assert model.state.equals(snap) and model.position == BATCH * 3


def test_advance_checks_its_start(factory: ModelFactory, stream: EventStream) -> None:
    model = factory(stream)
    with pytest.raises(ModelStateError, match="state is at 0"):
        model.advance(BATCH, BATCH * 2)
    with pytest.raises(ModelStateError, match="shape"):
        model.advance(0, BATCH, np.zeros(3, dtype=bool))


def test_model_rejects_a_stream_of_another_shape(factory: ModelFactory,
                                                 stream: EventStream) -> None:
    model = factory(stream)
    other = planted_stream(num_events=50, num_src=5, num_dst=5, feat_dim=3)
    with pytest.raises(ModelStateError, match="nodes"):
        model.attach(other)


def test_attaching_on_the_cpu_shares_the_streams_arrays_and_writes_none(
        factory: ModelFactory, stream: EventStream) -> None:
    """On the CPU the model reads the stream's own arrays (no copy of ``src``, ``dst``,
    ``t`` and the features per attached stream), and replaying, predicting and resetting
    leave them as they were."""
    before = [np.array(a) for a in (stream.src, stream.dst, stream.t, stream.edge_feat)]
    model = factory(stream)
    model.attach(stream)
    tensors = (*model.endpoints, model.event_times, model.edge_features)
    for tensor, array in zip(tensors, (stream.src, stream.dst, stream.t, stream.edge_feat),
                             strict=True):
        assert tensor.device.type == "cpu"
        assert np.shares_memory(tensor.numpy(), array)
    mask = np.zeros(stream.num_events, dtype=bool)
    mask[::7] = True
    model.advance(0, BATCH * 6, mask)
    with torch.no_grad():
        model.predict(*queries(stream, BATCH * 6))
    model.reset()
    for array, copy in zip((stream.src, stream.dst, stream.t, stream.edge_feat), before,
                           strict=True):
        np.testing.assert_array_equal(array, copy)
