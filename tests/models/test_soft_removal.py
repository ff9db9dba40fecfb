"""Soft removal in TGN and TGAT (docs/design.md §8): weight 1 is the model's logit, weight 0
is the hard removal where the relaxation claims it (TGAT, no full neighbour window), gradients
reach the weights, and the aggregated attention is a distribution per target."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from testsupport.models import named_model

from cftgnn.data import EventStream, TemporalIndex, make_synthetic_stream
from cftgnn.models import TGAT, GraphMixer, TemporalModel
from cftgnn.models.protocol import SoftRemovalModel
from cftgnn.oracle.engine import naive_logit

ATOL = 1e-5


@pytest.fixture(scope="module")
def stream() -> EventStream:
    return make_synthetic_stream(25, 400, seed=7, feat_dim=2, p_tie=0.3)


def make(stream: EventStream, name: str, num_neighbors: int = 5) -> TemporalModel:
    model = named_model(stream, name, num_neighbors)
    model.eval()
    model.attach(stream)
    return model


def at_event(model: TemporalModel, stream: EventStream, i: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Advance ``model`` to the full history before event ``i``; the query ``(src, dst, t)``."""
    model.reset()
    model.advance(0, i)
    sl = slice(i, i + 1)
    return stream.src[sl].copy(), stream.dst[sl].copy(), stream.t[sl].copy()


def max_degree_before(stream: EventStream, i: int) -> int:
    return int(np.bincount(np.concatenate([stream.src[:i], stream.dst[:i]])).max())


MODELS = ["tgn1", "tgn2", "tgat1", "tgat2"]


@pytest.mark.parametrize("name", MODELS)
def test_weight_one_reproduces_the_logit(stream, name):
    model = make(stream, name)
    assert isinstance(model, SoftRemovalModel)
    for i in (37, 211, 399):
        q = at_event(model, stream, i)
        cand = stream_index(stream).candidates(i, model.num_layers, 30).ids
        with torch.no_grad():
            logit = model.predict(*q)
            soft = model.predict_soft(*q, cand, torch.ones(len(cand)))
        assert abs(float(soft[0]) - float(logit[0])) <= 1e-6
        assert abs(float(soft[0]) - naive_logit(model, stream, i)) <= ATOL


_INDEX: dict[int, TemporalIndex] = {}


def stream_index(stream: EventStream) -> TemporalIndex:
    return _INDEX.setdefault(id(stream), TemporalIndex(stream))


@pytest.mark.parametrize("name", ["tgat1", "tgat2"])
def test_weight_zero_is_hard_removal_when_no_window_is_full(stream, name):
    i = 300
    n = max_degree_before(stream, i) + 1  # every node's whole history fits its window
    model = make(stream, name, num_neighbors=n)
    q = at_event(model, stream, i)
    cand = stream_index(stream).candidates(i, model.num_layers, 40).ids
    rng = np.random.default_rng(0)
    sets = [cand[-3:], cand[:1], cand, cand[rng.random(len(cand)) < 0.4]]
    for removed in sets:
        w = torch.ones(len(cand))
        w[torch.from_numpy(np.isin(cand, removed))] = 0.0
        with torch.no_grad():
            soft = float(model.predict_soft(*q, cand, w)[0])
        hard = naive_logit(model, stream, i, removed.tolist())
        assert soft == pytest.approx(hard, abs=ATOL)
    # and removing something does move the logit (the check is not vacuous)
    with torch.no_grad():
        logit = float(model.predict(*q)[0])
    assert abs(naive_logit(model, stream, i, cand.tolist()) - logit) > 1e-4


def test_weight_zero_differs_from_hard_removal_in_a_full_window(stream):
    """The documented limit: removing the most recent neighbour of a full window lets an
    older one in; a zero weight leaves the slot empty."""
    i, n = 300, 3
    model = make(stream, "tgat1", num_neighbors=n)
    q = at_event(model, stream, i)
    index = stream_index(stream)
    nbr, eid, valid = index.recent_neighbors(q[0], np.array([i]), n + 1)
    assert valid.all()  # the source has more than n past events: its window is full
    newest = eid[0, -1:]
    with torch.no_grad():
        soft = float(model.predict_soft(*q, newest, torch.zeros(1))[0])
    hard = naive_logit(model, stream, i, newest.tolist())
    assert abs(soft - hard) > 1e-4


@pytest.mark.parametrize("name", MODELS)
def test_gradients_reach_the_weights(stream, name):
    model = make(stream, name)
    q = at_event(model, stream, 250)
    cand = stream_index(stream).candidates(250, model.num_layers, 30).ids
    for start in (0.5, 1.0):
        w = torch.full((len(cand),), start, requires_grad=True)
        model.predict_soft(*q, cand, w).sum().backward()
        assert w.grad is not None
        assert torch.isfinite(w.grad).all()
        assert (w.grad != 0).any()
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())


def computation_tree(index: TemporalIndex, src: int, dst: int, i: int, n: int,
                     layers: int) -> tuple[int, set[int]]:
    """From the index alone: the targets with at least one neighbour slot in the computation
    tree of the link at ``i`` (each counted as often as it occurs) and the events the slots
    read."""
    queries = [(src, i), (dst, i)]
    total, read = 0, set()
    for _ in range(layers):
        nodes = np.array([v for v, _ in queries], dtype=np.int64)
        before = np.array([b for _, b in queries], dtype=np.int64)
        nbr, eid, valid = index.recent_neighbors(nodes, before, n)
        total += int(valid.any(axis=1).sum())
        read |= set(eid[valid].tolist())
        rows, cols = np.nonzero(valid)
        # one layer down: each target's own embedding and each slot's neighbour embedding
        queries = queries + list(zip(nbr[rows, cols].tolist(), eid[rows, cols].tolist(),
                                     strict=True))
    return total, read


@pytest.mark.parametrize("name", MODELS)
def test_attention_mass_is_one_per_target(stream, name):
    model = make(stream, name, num_neighbors=4)
    index = stream_index(stream)
    for i in (60, 333):
        q = at_event(model, stream, i)
        with torch.no_grad():
            mass = model.attention_by_event(*q, np.arange(i)).numpy()
        targets, read = computation_tree(index, int(q[0][0]), int(q[1][0]), i, 4,
                                         model.num_layers)
        assert targets > 0 and mass.shape == (i,)
        assert mass.sum() == pytest.approx(targets, rel=1e-5)
        assert (mass[sorted(read)] > 0).all()
        outside = np.setdiff1d(np.arange(i), sorted(read))
        assert len(outside) and (mass[outside] == 0).all()


def test_attention_is_the_convolutions_own(stream):
    """One layer: each event's mass is PyG's attention (averaged over heads) on the slots
    that read it, from ``TransformerConv`` itself."""
    model = make(stream, "tgat1", num_neighbors=4)
    assert isinstance(model, TGAT)
    i = 333
    q = at_event(model, stream, i)
    index = stream_index(stream)
    nodes = np.concatenate(q[:2])
    _, eid, valid = index.recent_neighbors(nodes, np.array([i, i]), 4)
    rows, cols = np.nonzero(valid)
    slot_eid = eid[rows, cols]
    conv = model.embedding.convs[0]
    with torch.no_grad():
        dt = torch.from_numpy(stream.t[i] - stream.t[slot_eid]).float()
        edge_attr = torch.cat([model.embedding.time_enc(dt),
                               torch.from_numpy(stream.edge_feat[slot_eid]).float()], dim=1)
        h_self = torch.zeros(2, model.node_dim)
        h_src = torch.zeros(len(rows), model.node_dim)
        edge_index = torch.stack([torch.arange(len(rows)), torch.from_numpy(rows)])
        _, (_, alpha) = conv((h_src, h_self), edge_index, edge_attr,
                             return_attention_weights=True)
        expected = np.zeros(i)
        np.add.at(expected, slot_eid, alpha.mean(dim=1).double().numpy())
        mass = model.attention_by_event(*q, np.arange(i)).numpy()
    np.testing.assert_allclose(mass, expected, atol=1e-6)
    assert len(np.unique(slot_eid)) > 2


def test_a_bias_is_added_to_the_attention_scores(stream):
    """``attention_by_event(bias=b)`` (T-GNNExplainer's PG navigator): on one layer each slot's
    probability is PyG's softmax of its score plus ``b_e``, i.e. ``α_k e^{b_k} / Σ_j α_j
    e^{b_j}`` per target from ``TransformerConv``'s own ``α``; a zero bias is no bias."""
    model = make(stream, "tgat1", num_neighbors=4)
    assert model.has_attention
    i = 333
    q = at_event(model, stream, i)
    nodes = np.concatenate(q[:2])
    _, eid, valid = stream_index(stream).recent_neighbors(nodes, np.array([i, i]), 4)
    rows, cols = np.nonzero(valid)
    slot_eid = eid[rows, cols]
    bias = np.random.default_rng(0).uniform(-2, 2, i)
    conv = model.embedding.convs[0]
    with torch.no_grad():
        dt = torch.from_numpy(stream.t[i] - stream.t[slot_eid]).float()
        edge_attr = torch.cat([model.embedding.time_enc(dt),
                               torch.from_numpy(stream.edge_feat[slot_eid]).float()], dim=1)
        edge_index = torch.stack([torch.arange(len(rows)), torch.from_numpy(rows)])
        _, (_, alpha) = conv((torch.zeros(len(rows), model.node_dim),
                              torch.zeros(2, model.node_dim)), edge_index, edge_attr,
                             return_attention_weights=True)
        w = alpha.double().numpy() * np.exp(bias[slot_eid])[:, None]  # [K, H]
        per_target = np.zeros((2, w.shape[1]))
        np.add.at(per_target, rows, w)
        expected = np.zeros(i)
        np.add.at(expected, slot_eid, (w / per_target[rows]).mean(axis=1))
        mass = model.attention_by_event(*q, np.arange(i), bias=torch.from_numpy(bias))
        plain = model.attention_by_event(*q, np.arange(i))
        zero = model.attention_by_event(*q, np.arange(i), bias=torch.zeros(i))
    np.testing.assert_allclose(mass.numpy(), expected, atol=1e-6)
    assert not np.allclose(mass.numpy(), plain.numpy(), atol=1e-3)  # the bias acts
    np.testing.assert_allclose(zero.numpy(), plain.numpy(), atol=1e-7)


@pytest.mark.parametrize("name", ["tgn2", "tgat2"])
def test_a_large_bias_draws_the_attention_of_every_slot_reading_the_event(stream, name):
    """Two layers: a bias of +30 on one read event takes (almost) all the attention of every
    target it is a slot of, so its mass is the number of such targets; -30 takes it away."""
    model = make(stream, name, num_neighbors=4)
    i = 333
    q = at_event(model, stream, i)
    with torch.no_grad():
        plain = model.attention_by_event(*q, np.arange(i)).numpy()
        e = int(np.argmax(plain))
        up, down = np.zeros(i), np.zeros(i)
        up[e], down[e] = 30.0, -30.0
        high = model.attention_by_event(*q, np.arange(i), bias=torch.from_numpy(up)).numpy()
        low = model.attention_by_event(*q, np.arange(i), bias=torch.from_numpy(down)).numpy()
    assert high[e] > plain[e] and high[e] == pytest.approx(round(high[e]), abs=1e-4)
    assert low[e] == pytest.approx(0.0, abs=1e-9)
    assert high.sum() == pytest.approx(plain.sum(), rel=1e-5)  # still one per target


def test_a_bias_is_refused_without_attention_or_of_another_length(stream):
    model = make(stream, "tgat1")
    q = at_event(model, stream, 100)
    with pytest.raises(ValueError, match="one weight per event"):
        model.attention_by_event(*q, [5, 6], bias=torch.zeros(3))
    mixer = GraphMixer(stream.num_nodes, stream.feat_dim, time_dim=8, channels=12,
                       embedding_dim=12, num_neighbors=4, batch_size=20).eval()
    mixer.attach(stream)
    assert not mixer.has_attention
    with pytest.raises(ValueError, match="has no attention to bias"):
        mixer.attention_by_event(*q, [5, 6], bias=torch.zeros(2))


def test_bad_input_is_refused(stream):
    model = make(stream, "tgat2")
    q = at_event(model, stream, 100)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        model.predict_soft(*q, [5, 6], torch.tensor([0.5, 1.5]))
    with pytest.raises(ValueError, match="one weight per event"):
        model.predict_soft(*q, [5, 6], torch.tensor([0.5]))
    with pytest.raises(ValueError, match="twice"):
        model.predict_soft(*q, [5, 5], torch.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match="not events"):
        model.predict_soft(*q, [stream.num_events + 3], torch.tensor([0.5]))
    model.train()
    with pytest.raises(RuntimeError, match="eval mode"):
        model.predict_soft(*q, [5], torch.tensor([0.5]))
