"""Sampling the events to explain: groups, thresholds, seeds, screening logits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cftgnn.data import make_synthetic_stream
from cftgnn.models import TGAT, TGN
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.runs.sampling import (
    SamplingError,
    event_range,
    explicit_events,
    plan_events,
    sample_events,
    screen_logits,
)

LOGITS = np.array([2.0, -1.0, 0.5, -0.2, 3.0, -4.0, 0.0, 1.5, -0.7, 0.1])


def test_both_takes_half_from_each_group():
    plan = sample_events(LOGITS, first_id=100, n=4, prediction="both", seed=0)
    assert list(plan.columns) == ["event_id", "group", "screen_logit"]
    assert (plan.group == "correct").sum() == 2 and (plan.group == "incorrect").sum() == 2
    assert plan.event_id.is_monotonic_increasing
    np.testing.assert_array_equal(plan.screen_logit, LOGITS[plan.event_id - 100])
    # correct = positive logit (every event really happened); a logit of 0 is incorrect
    assert ((plan.screen_logit > 0) == (plan.group == "correct")).all()


def test_odd_n_gives_the_extra_event_to_correct():
    plan = sample_events(LOGITS, 0, n=5, prediction="both")
    assert (plan.group == "correct").sum() == 3


@pytest.mark.parametrize("prediction, sign", [("correct", 1), ("incorrect", -1)])
def test_single_group(prediction, sign):
    plan = sample_events(LOGITS, 0, n=3, prediction=prediction)
    assert len(plan) == 3 and (plan.group == prediction).all()
    assert (np.sign(plan.screen_logit) * sign >= 0).all()


def test_threshold_and_short_groups():
    # |logit| >= 1: correct {0, 4, 7}, incorrect {1, 5}
    plan = sample_events(LOGITS, 0, n=10, prediction="both", min_abs_logit=1.0)
    assert sorted(plan.event_id) == [0, 1, 4, 5, 7]
    plan = sample_events(LOGITS, 0, n=10, prediction="any", min_abs_logit=0.5,
                         max_abs_logit=2.0)
    assert sorted(plan.event_id) == [0, 1, 2, 7, 8]


def test_seeded_and_seed_sensitive():
    logits = np.random.default_rng(1).normal(size=500)
    a = sample_events(logits, 0, 20, seed=3)
    b = sample_events(logits, 0, 20, seed=3)
    c = sample_events(logits, 0, 20, seed=4)
    assert a.equals(b) and not a.event_id.equals(c.event_id)


def test_zero_events_and_bad_input():
    assert sample_events(LOGITS, 0, 0).empty
    with pytest.raises(SamplingError, match="n_events"):
        sample_events(LOGITS, 0, -1)
    with pytest.raises(ValueError):
        sample_events(LOGITS, 0, 2, prediction="wrong")
    stream = make_synthetic_stream(num_nodes=10, num_events=50)
    assert event_range(stream, [0.5, 1.0]) == (25, 50)
    for bad in ([0.9, 0.5], [0.0, 1.5], [0.5]):
        with pytest.raises(SamplingError, match="sample.range"):
            event_range(stream, bad)
    with pytest.raises(SamplingError, match="outside the stream"):
        explicit_events([3, 50], stream)
    assert explicit_events([7, 3, 7], stream).tolist() == [3, 7]


def test_tgat_screening_logits_equal_the_oracles_original_logit():
    stream = make_synthetic_stream(num_nodes=30, num_events=400, seed=2)
    torch.manual_seed(0)
    model = TGAT(num_nodes=30, edge_dim=0, node_dim=8, time_dim=8, embedding_dim=8, num_layers=1,
                 num_heads=1, num_neighbors=5, batch_size=32)
    logits = screen_logits(model, stream, 150, 400)
    engine = ReplayEngine(model, stream)
    for i in (150, 161, 300, 399):
        assert logits[i - 150] == pytest.approx(engine.oracle(i).original_logit,
                                                abs=1e-5)


def test_plan_events_samples_the_range_and_accepts_explicit_ids():
    stream = make_synthetic_stream(num_nodes=30, num_events=400, seed=2)
    torch.manual_seed(0)
    model = TGN(num_nodes=30, edge_dim=0, memory_dim=8, time_dim=8, embedding_dim=8,
                num_layers=1, num_heads=1, num_neighbors=5, batch_size=32)
    plan = plan_events(model, stream, 10, share=[0.5, 1.0], prediction="any", seed=1)
    assert len(plan) == 10 and plan.event_id.min() >= 200
    again = plan_events(model, stream, 10, share=[0.5, 1.0], prediction="any", seed=1)
    assert plan.equals(again)
    chosen = plan_events(model, stream, 0, events=[390, 210])
    assert chosen.event_id.tolist() == [210, 390]
    np.testing.assert_allclose(
        chosen.screen_logit, plan_events(model, stream, 0, events=[210]).screen_logit.tolist()
        + plan_events(model, stream, 0, events=[390]).screen_logit.tolist(), atol=1e-5)
