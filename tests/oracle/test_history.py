"""``history=batch_start``: the explained prediction reads only the batches completed before
the event's own batch; exact and approximate oracles equal fresh replays with the same
semantics (1e-5), candidates lie before the batch, and ``history=event`` is unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.errors import ConfigError
from cftgnn.models import TGAT, TGN
from cftgnn.models.base import eval_mode
from cftgnn.oracle import OracleMode
from cftgnn.oracle.engine import EventReplay, ReplayEngine, naive_logit
from cftgnn.oracle.history import History, check_history, history_end
from cftgnn.replay.tgn import TGNReplay

ATOL = 1e-5
B = 20


def tgn(stream: EventStream, layers: int) -> TGN:
    torch.manual_seed(0)
    return TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8, embedding_dim=16,
               num_layers=layers, num_heads=2, num_neighbors=5, batch_size=B)


@pytest.fixture(scope="module")
def stream() -> EventStream:
    return make_synthetic_stream(25, 400, seed=7, feat_dim=2, p_tie=0.3)


def test_history_end_is_the_event_or_its_batch_start():
    assert history_end(247, 20, "event") == 247
    assert history_end(247, 20, History.BATCH_START) == 240
    assert history_end(240, 20, "batch_start") == 240  # at a boundary both are the event
    with pytest.raises(ConfigError, match="history must be one of event, batch_start"):
        check_history("batch", True)
    with pytest.raises(ConfigError, match="history=batch_start applies to models with memory"):
        check_history("batch_start", False, "TGAT")


@pytest.mark.parametrize("local_max_events", [0, 10**9])
@pytest.mark.parametrize("layers", [1, 2])
def test_batch_start_equals_a_fresh_replay_of_the_completed_batches(stream, layers,
                                                                   local_max_events):
    model = tgn(stream, layers)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    assert isinstance(engine.replay, TGNReplay)
    engine.replay.options.local_max_events = local_max_events
    rng = np.random.default_rng(1)
    seen_difference = False
    for i in (123, 259, 260, 399):  # mid-batch, last of a batch, a boundary, the last event
        h = (i // B) * B
        oracle = engine.oracle(i, m_max=12, mode=OracleMode.APPROXIMATE,
                               history="batch_start")
        cand = oracle.candidates.ids
        assert len(cand) and int(cand.max()) < h  # no event of the explained event's batch
        p = naive_logit(model, stream, i, history="batch_start")
        assert oracle.original_logit == pytest.approx(p, abs=ATOL)
        if i > h:
            seen_difference |= abs(p - naive_logit(model, stream, i)) > 1e-4
        sets = [frozenset(cand.tolist()), frozenset([int(cand[-1])])]
        sets += [frozenset(cand[rng.random(len(cand)) < 0.4].tolist()) for _ in range(3)]
        for s in sets:
            ref = naive_logit(model, stream, i, sorted(s), history="batch_start")
            assert oracle.exact(s) == pytest.approx(ref, abs=ATOL)
            drop = sorted(set(range(int(cand[0]), h)) - (set(cand.tolist()) - s))
            assert oracle(s) == pytest.approx(  # approximate: before ε_min plus C \ s
                naive_logit(model, stream, i, drop, history="batch_start"), abs=ATOL)
    assert seen_difference  # the own batch matters, so the test tells the two apart


def test_batch_start_is_the_models_own_batch_evaluation_without_own_batch_neighbours(stream):
    """State after the completed batches, then predict with neighbours of consumed history
    only: what the oracle's original logit is (and what the screening pass of a
    batch-start run scores)."""
    model = tgn(stream, 1)
    engine = ReplayEngine(model, stream)
    i = 247
    p = engine.oracle(i, history="batch_start").original_logit
    fresh = tgn(stream, 1)
    fresh.load_state_dict(model.state_dict())
    with eval_mode(fresh):
        fresh.attach(stream)
        fresh.advance(0, 240)
        want = float(fresh.predict(stream.src[i:i + 1], stream.dst[i:i + 1],
                                   stream.t[i:i + 1])[0])
    assert p == pytest.approx(want, abs=ATOL)


def test_event_history_is_the_default_and_unchanged(stream):
    model = tgn(stream, 1)
    engine = ReplayEngine(model, stream)
    default = EventReplay(engine, 247, m_max=12)
    event = EventReplay(engine, 247, m_max=12, history="event")
    assert default.history is History.EVENT and default.history_end == 247
    np.testing.assert_array_equal(default.candidates.ids, event.candidates.ids)
    assert int(default.candidates.ids.max()) >= 240  # own-batch events are candidates here
    sets = [frozenset(), frozenset(default.candidates.ids[::2].tolist())]
    np.testing.assert_array_equal(default.exact(sets), event.exact(sets))


def test_probe_reads_the_batch_start_history(stream):
    model = tgn(stream, 1)
    engine = ReplayEngine(model, stream)
    oracle = engine.oracle(247, history="batch_start")
    assert oracle.probe is not None
    ones = torch.ones(len(oracle.removable), dtype=torch.float32)
    assert float(oracle.probe.soft_logit(ones)) == pytest.approx(oracle.original_logit,
                                                                 abs=1e-5)


def test_batch_start_is_refused_for_a_model_without_memory(stream):
    torch.manual_seed(0)
    model = TGAT(stream.num_nodes, stream.feat_dim, node_dim=8, time_dim=8, embedding_dim=16,
                 num_layers=1, num_heads=2, num_neighbors=5, batch_size=B)
    engine = ReplayEngine(model, stream)
    with pytest.raises(ConfigError, match="TGAT has none"):
        engine.oracle(247, history="batch_start")
