"""The oracle's probe (cftgnn.oracle.probe): attention, soft-removal logits and candidate
features of one explained event, without disturbing the exact backend or the model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from testsupport.models import named_model

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.data.index import Candidates
from cftgnn.errors import OracleError
from cftgnn.models import PyGTGN, TemporalModel
from cftgnn.models.protocol import SoftRemovalModel
from cftgnn.oracle import Constraints, Oracle, OracleMode
from cftgnn.oracle.engine import EventReplay, ReplayEngine, naive_logit
from cftgnn.oracle.probe import ModelProbe
from cftgnn.replay.plans import RecordedPlan

ATOL = 1e-5


@pytest.fixture(scope="module")
def stream() -> EventStream:
    return make_synthetic_stream(25, 400, seed=7, feat_dim=2, p_tie=0.3)


def make(stream: EventStream, name: str, num_neighbors: int = 5) -> TemporalModel:
    return named_model(stream, name, num_neighbors)


@pytest.mark.parametrize("name", ["tgn1", "tgn2", "tgat2"])
def test_probe_leaves_the_exact_backend_and_the_model_alone(stream, name):
    model = make(stream, name)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    rng = np.random.default_rng(0)
    for i in (123, 261, 399):  # forward, so the cursor moves between events
        replay = EventReplay(engine, i, m_max=12)
        oracle = replay.oracle(OracleMode.EXACT)
        probe = oracle.probe
        assert isinstance(probe, ModelProbe)
        cand = oracle.removable
        sets = [frozenset(), frozenset(cand.tolist()),
                frozenset(cand[rng.random(len(cand)) < 0.5].tolist())]
        before = replay.exact(sets)
        live = model.snapshot()
        model.train()
        probe.attention()
        probe.features()
        probe.soft_logit(torch.rand(len(cand)))
        assert model.training  # the mode is restored
        model.eval()
        assert model.state.equals(live)  # the live state is restored
        np.testing.assert_array_equal(replay.exact(sets), before)
        for s in sets:
            assert before[sets.index(s)] == pytest.approx(
                naive_logit(model, stream, i, sorted(s)), abs=ATOL)


@pytest.mark.parametrize("name", ["tgn1", "tgn2", "tgat1", "tgat2"])
def test_soft_logit_of_ones_is_the_original_logit(stream, name):
    model = make(stream, name)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    read = 0
    for i in (5, 240, 399):
        oracle = engine.oracle(i, k=1, m_max=12, mode=OracleMode.EXACT)
        probe = oracle.probe
        assert probe is not None
        w = torch.ones(len(oracle.removable), requires_grad=True)
        with torch.no_grad():  # gradients flow regardless
            logit = probe.soft_logit(w)
        assert logit.shape == ()
        assert abs(float(logit.detach()) - oracle.original_logit) <= 1e-6
        if len(w):
            logit.backward()
            assert w.grad is not None and torch.isfinite(w.grad).all()
            # an event no attention slot reads has no gradient; the others have one
            attended = probe.attention() > 0
            np.testing.assert_array_equal(w.grad.numpy() != 0, attended)
            read += int(attended.sum())
    assert read > 0
    assert all(p.grad is None for p in model.parameters())  # the model is not trained


def test_soft_logit_of_zeros_is_the_exact_removal_for_tgat_without_full_windows(stream):
    deg = int(np.bincount(np.concatenate([stream.src, stream.dst])).max())
    model = make(stream, "tgat2", num_neighbors=deg + 1)
    engine = ReplayEngine(model, stream)
    oracle = engine.oracle(350, m_max=16, mode=OracleMode.EXACT)
    assert oracle.probe is not None
    cand = oracle.removable
    rng = np.random.default_rng(1)
    for _ in range(4):
        drop = rng.random(len(cand)) < 0.4
        w = torch.from_numpy((~drop).astype(np.float32))
        soft = float(oracle.probe.soft_logit(w))
        assert soft == pytest.approx(oracle.exact(cand[drop].tolist()), abs=ATOL)


@pytest.mark.parametrize("name", ["tgn2", "tgat1"])
def test_features_and_attention_follow_the_removable_events(stream, name):
    model = make(stream, name)
    engine = ReplayEngine(model, stream)
    i = 300
    full = engine.oracle(i, m_max=16)
    protected = full.removable[::3].tolist()
    oracle = engine.oracle(i, m_max=16, constraints=Constraints(events=tuple(protected)))
    probe = oracle.probe
    assert probe is not None
    np.testing.assert_array_equal(probe.removable, oracle.removable)
    m = len(oracle.removable)
    assert 0 < m < len(full.removable)
    feats = probe.features()
    d, f, t = 16, stream.feat_dim, 8  # embedding, edge feature and time encoding sizes
    assert feats.shape == (m, 4 * d + f + t) and feats.dtype == torch.float32
    assert not feats.requires_grad and torch.isfinite(feats).all()
    # the edge-feature columns are the stream's own, in the order of R
    np.testing.assert_array_equal(feats[:, 4 * d:4 * d + f].numpy(),
                                  stream.edge_feat[oracle.removable])
    # the explained pair's columns repeat; the candidate's own do not
    assert torch.equal(feats[:, 2 * d:4 * d], feats[:1, 2 * d:4 * d].expand(m, -1))
    att = probe.attention()
    assert att.shape == (m,) and att.dtype == np.float64 and (att >= 0).all()
    # per event, the same as over all candidates (the order of R is kept)
    pos = np.searchsorted(full.removable, oracle.removable)
    np.testing.assert_allclose(att, full.probe.attention()[pos], atol=1e-12)


@pytest.mark.parametrize("name", ["tgn2", "tgat1"])
def test_attention_with_a_bias_per_removable_event(stream, name):
    """The probe hands a bias per event of R to the model (the model's own test checks the
    arithmetic); zero is no bias, and a bias of another length is refused."""
    oracle = ReplayEngine(make(stream, name), stream).oracle(300, m_max=16)
    probe = oracle.probe
    assert probe is not None and probe.has_attention
    m = len(oracle.removable)
    plain = probe.attention()
    np.testing.assert_allclose(probe.attention(np.zeros(m)), plain, atol=1e-7)
    bias = np.zeros(m)
    e = int(np.argmax(plain))
    bias[e] = 30.0
    biased = probe.attention(bias)
    assert biased.shape == (m,) and biased[e] > plain[e]
    with pytest.raises(ValueError, match=f"needs {m} biases"):
        probe.attention(np.zeros(m + 1))


@pytest.mark.parametrize("name", ["tgn1", "tgn2", "tgat2"])
def test_the_probe_reads_the_exact_plans_recording_as_the_replayed_state(stream, name):
    # the engine hands the probe the exact plan's recorded state (TGN) instead of a second
    # replay of [b0, i): features, attention and soft logits are bitwise those of a probe
    # that advances the base state itself
    model = make(stream, name)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    for i in (123, 261, 399):
        replay = EventReplay(engine, i, m_max=12)
        oracle = replay.oracle(OracleMode.EXACT)
        probe = oracle.probe
        assert isinstance(probe, ModelProbe)
        recorded = isinstance(replay._plan, RecordedPlan)
        assert recorded == name.startswith("tgn")
        assert (probe._state is not None) == recorded  # no replay is left to do
        own = ModelProbe(model, replay.base, replay.start, i, oracle.removable)
        assert own._state is None
        w = torch.rand(len(oracle.removable), generator=torch.Generator().manual_seed(i))
        assert torch.equal(probe.features(), own.features())
        np.testing.assert_array_equal(probe.attention(), own.attention())
        assert torch.equal(probe.soft_logit(w), own.soft_logit(w))
        assert own._state.equals(probe._state)


def test_no_probe_for_a_model_without_soft_removal(stream):
    model = PyGTGN(stream.num_nodes, stream.feat_dim, memory_dim=8, time_dim=8,
                   embedding_dim=8, batch_size=20)
    engine = ReplayEngine(model, stream)
    assert not isinstance(model, SoftRemovalModel)
    assert engine.oracle(50, m_max=6).probe is None


def test_an_oracle_refuses_a_probe_over_other_events(stream):
    model = make(stream, "tgat1")
    engine = ReplayEngine(model, stream)
    oracle = engine.oracle(200, m_max=8)
    assert oracle.probe is not None
    cand: Candidates = oracle.candidates
    with pytest.raises(OracleError, match="probe"):
        Oracle(cand, oracle.original_logit, exact=lambda sets: np.zeros(len(sets)),
               removable=cand.ids[1:], probe=oracle.probe)
    with pytest.raises(ValueError, match="weights"):
        oracle.probe.soft_logit(torch.ones(len(cand) + 1))
    assert Oracle(cand, 1.0, exact=lambda sets: np.zeros(len(sets))).probe is None
