"""TemGX on a 6-event toy stream whose influences are computed by hand.

The stream: ``0:(0,1,t=1) 1:(1,2,t=2) 2:(2,3,t=4) 3:(3,4,t=6) 4:(0,4,t=8)``, explained event
``5:(0,1,t=10)``. Its median gap is 2 (``steps``: λ' = 24·0.01 = 0.24, window 1000); events
0, 1 and 4 share a node with it (path length 1), 2 and 3 do not (length 2). Without node
embeddings TemGX's constants give the activation ``σ(0.8 − 0.1 + 0.5·ln e^{−0.3}) = σ(0.55)``
for a shared node and ``σ(0.3 − 0.2 + 0.5·ln e^{−1.5}) = σ(−0.65)`` otherwise, times
``exp(−0.24·Δt)`` with ``Δt = 9, 8, 6, 4, 2``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cftgnn.data.stream import EventStream
from cftgnn.errors import ExplainerError
from cftgnn.explain.temgx import (
    StreamIndex,
    TemGXExplainer,
    TemGXParams,
    TimeScale,
    adapted_lambda,
    detect_time_scale,
    embedding_terms,
    embeddings_note,
    influence_order,
    select,
    set_influence,
    single_influence,
    verified,
    window_rule,
)
from cftgnn.testing import AdditiveBackend, make_candidates, make_oracle

SRC = [0, 1, 2, 3, 0, 0]
DST = [1, 2, 3, 4, 4, 1]
T = [1.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


#: The hand-computed influences of events 0..4 (module docstring).
P = [sig(0.55) * math.exp(-0.24 * 9), sig(0.55) * math.exp(-0.24 * 8),
     sig(-0.65) * math.exp(-0.24 * 6), sig(-0.65) * math.exp(-0.24 * 4),
     sig(0.55) * math.exp(-0.24 * 2)]


def toy_stream() -> EventStream:
    n = len(SRC)
    return EventStream(src=np.array(SRC), dst=np.array(DST), t=np.array(T),
                       edge_feat=np.zeros((n, 0), np.float32), labels=None, num_nodes=5)


def toy_oracle(weights: dict[int, float], base: float = 1.0, ids=(0, 1, 2, 3, 4)):
    oracle = make_oracle(make_candidates(list(ids), event_id=5), AdditiveBackend(base, weights))
    oracle.stream = toy_stream()
    return oracle


def test_single_influence_matches_the_hand_computation():
    shared = [True, True, False, False, True]
    dt = [9, 8, 6, 4, 2]
    p = single_influence(shared, dt, lam=0.24)
    assert p == pytest.approx(P, abs=1e-8)
    # the explicit numbers: σ(0.55) = 0.634136, σ(-0.65) = 0.342990
    assert p[4] == pytest.approx(0.634136 * 0.618783, abs=1e-5)
    assert p[3] == pytest.approx(0.342990 * 0.382893, abs=1e-5)


def test_set_influence_is_one_minus_the_product_of_misses():
    assert set_influence([P[3], P[4]]) == pytest.approx(1 - (1 - P[3]) * (1 - P[4]))
    assert set_influence([0.5, 0.5, 0.5]) == pytest.approx(0.875)
    assert set_influence([]) == 0.0


def test_embedding_terms_and_their_influence():
    """With embeddings: sim = (cos + 1)/2 and TRD = |z_e − z_i| of the two sources."""
    z_i = np.array([1.0, 0.0])
    z_e = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])
    sim, trd = embedding_terms(z_e, z_i)
    assert sim == pytest.approx([1.0, 0.5, 0.0], abs=1e-7)
    assert trd == pytest.approx([0.0, math.sqrt(5), 2.0])
    p = single_influence([True, False, True], [0, 0, 0], 0.0, sim, trd)
    assert p[0] == pytest.approx(sig(1.0 - 0.1 + 0.5 * math.log(1 + 1e-8)))
    assert p[1] == pytest.approx(sig(0.5 - 0.2 + 0.5 * math.log(math.exp(-math.sqrt(5)) + 1e-8)))


@pytest.mark.parametrize(("gap", "scale", "window", "lam"), [
    (2.0, TimeScale.STEPS, 1000.0, 0.24),
    (30.0, TimeScale.SECONDS, 3600.0, 0.01 / 3600),      # 100·30 = 3000 → at least 3600
    (120.0, TimeScale.SECONDS, 12000.0, 0.01 / 3600),    # 100·120
    (2000.0, TimeScale.SECONDS, 86400.0, 0.01 / 3600),   # 100·2000 → at most 86400
    (7200.0, TimeScale.HOURS, 1000.0, 0.01),
    (90000.0, TimeScale.DAYS, 1000.0, 0.24),
])
def test_time_scale_and_window_rule_on_streams_of_each_scale(gap, scale, window, lam):
    t = np.cumsum(np.full(50, gap))
    assert detect_time_scale(t) is scale
    assert window_rule(t, scale) == pytest.approx(window)
    assert adapted_lambda(0.01, scale) == pytest.approx(lam)


def test_the_scale_reads_the_median_gap():
    t = np.array([0.0, 1.0, 2.0, 3.0, 10_000.0])  # gaps 1, 1, 1, 9997: median 1
    assert detect_time_scale(t) is TimeScale.STEPS
    assert detect_time_scale([5.0]) is TimeScale.STEPS


def test_neighbourhood_window_and_hops():
    index = StreamIndex(SRC, DST, T)
    assert index.neighbourhood(5, 2, 1000.0) == [0, 1, 2, 3, 4]
    assert index.neighbourhood(5, 1, 1000.0) == [0, 1, 4]
    # window [10 − 5, 10): events 3 (t=6) and 4 (t=8); 3 is reached through node 4
    assert index.neighbourhood(5, 2, 5.0) == [3, 4]
    assert index.neighbourhood(5, 1, 5.0) == [4]


def test_influence_order_puts_the_least_influential_first_as_published():
    """TemGX's normalisation ranks the smallest influence highest (``(n − rank) / n``)."""
    assert influence_order(P).tolist() == [0, 2, 1, 3, 4]
    assert influence_order([0.3, 0.3, 0.3]).tolist() == [0, 1, 2]  # all equal: as given
    assert influence_order([0.2, 0.1, 0.2]).tolist() == [1, 0, 2]  # ties keep the order


def test_select_greedy_order_and_the_preselection():
    assert select(P, 2) == [4, 3]  # all five pre-selected (max(6, 20) > 5): the largest
    assert select(P, 5) == [0, 1, 2, 3, 4]  # at most k: all of them, as given
    # k = 1, pre-selection max(3, 2) = 3: the three least influential (0, 2, 1), then the
    # largest of those
    assert select(P, 1, preselect_min=2) == [1]


def test_verification_is_a_probability_move_above_the_threshold():
    assert verified(0.0, 0.05) is True        # σ moves 0.0125
    assert verified(0.0, 0.03) is False       # 0.0075
    assert verified(0.0, -0.05) is True       # either direction
    assert verified(0.0, 0.05, threshold=0.02) is False


def test_select_verify_on_a_toy_oracle():
    """k = 2: events 4 then 3; the answer is scored both ways: removing {3, 4} flips (our
    question), keeping only them moves the probability by σ(1) − σ(1 − 0.2 − 0.5 − 0.4)."""
    weights = {0: 0.2, 1: 0.5, 2: 0.4, 3: 0.6, 4: 0.6}
    oracle = toy_oracle(weights)
    result = TemGXExplainer(k=2).explain(oracle)
    assert result.explanation == (4, 3)
    assert result.is_counterfactual  # 1 − 1.2 < 0
    assert result.ranking[:2] == (4, 3)
    assert sorted(result.ranking) == [0, 1, 2, 3, 4]
    assert result.ranking[2:] == (0, 2, 1)  # the rest in TemGX's (inverted) order
    (trace,) = result.trace
    assert trace["candidates"] == 5 and trace["embeddings"] == "fallback"
    assert trace["time_scale"] == "steps" and trace["window"] == 1000.0
    assert trace["verified"] is True  # keep {3, 4}: logit 1 − 1.1 = −0.1
    assert oracle.cached_exact(frozenset({0, 1, 2})) == pytest.approx(-0.1)
    # one verification and the confirmation: two exact evaluations
    assert result.exact_calls == 2


def test_the_influence_cap_keeps_its_order_and_the_ranking_reads_all_candidates():
    """influence_cap = 3 keeps events 0, 2, 1 (TemGX's order: the least influential); the
    greedy picks 1 then 2; the ranking then lists every candidate of the random cap."""
    result = TemGXExplainer(k=2, influence_cap=3).explain(toy_oracle({1: 0.6, 2: 0.6}))
    assert result.explanation == (1, 2)
    assert result.ranking == (1, 2, 0, 3, 4)


def test_the_answer_stays_within_the_removable_events_and_max_size():
    oracle = toy_oracle({3: 2.0}, ids=(1, 2, 3))  # 0 and 4 are not candidates
    result = TemGXExplainer(k=5).explain(oracle)
    assert set(result.explanation) == {1, 2, 3}
    oracle = make_oracle(make_candidates([0, 1, 2, 3, 4], event_id=5),
                         AdditiveBackend(1.0, {4: 2.0}))
    oracle.max_size = 1
    oracle.stream = toy_stream()
    assert TemGXExplainer(k=2).explain(oracle).explanation == (4,)


def test_the_random_cap_is_seeded_by_the_event():
    runs = [TemGXExplainer(k=2, candidate_cap=3, seed=s).explain(toy_oracle({4: 2.0}))
            for s in (0, 0, 1, 2, 3)]
    assert runs[0].explanation == runs[1].explanation
    assert all(r.trace[0]["candidates"] == 3 for r in runs)
    assert len({r.explanation for r in runs}) > 1


def test_an_oracle_without_a_stream_is_refused():
    oracle = make_oracle(make_candidates([0, 1], event_id=2), AdditiveBackend(1.0, {}))
    with pytest.raises(ExplainerError, match="has no stream"):
        TemGXExplainer().explain(oracle)


def test_the_fallback_is_said_once_per_run(capsys):
    from cftgnn.oracle.fingerprint import ModelFingerprint

    fp = ModelFingerprint("uci", "x", "pyg_tgn", "w", None, "checkpoints", probe=False)
    TemGXExplainer().supports(fp)
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "fallback constants" in out[0] and "no node embeddings" in out[0]
    assert "from the model" in embeddings_note(TemGXParams(), probe=True)
    assert "embeddings=fallback" in embeddings_note(TemGXParams(embeddings="fallback"), True)


@pytest.mark.parametrize(("options", "words"), [
    ({"k": 0}, "k must be an integer >= 1, got 0"),
    ({"trd_scale": 0}, "trd_scale must be a number > 0"),
    ({"threshold": 2}, "threshold must be a number in [0, 1]"),
    ({"time_scale": "weeks"}, "time_scale must be one of steps | seconds | hours | days"),
    ({"embeddings": "raw"}, "embeddings must be one of auto | fallback"),
    ({"time_window": -1.0}, "time_window must be a number > 0 or null"),
    ({"sparsity": 5}, "unknown option sparsity of TemGXParams"),
])
def test_bad_options_are_refused_by_name(options, words):
    with pytest.raises(ExplainerError) as err:
        TemGXExplainer(**options)
    assert words in str(err.value)


# --------------------------------------------------------------------------- real models


@pytest.fixture(scope="module")
def synthetic():
    from cftgnn.data import make_synthetic_stream

    return make_synthetic_stream(25, 400, seed=7, feat_dim=2, p_tie=0.3)


def test_the_model_embeddings_are_the_probes_and_the_answer_is_confirmed(synthetic):
    """On a TGN: the probe's node embeddings are the ones its PGExplainer features hold, the
    oracle carries the engine's stream, and TemGX reads the model's embeddings."""
    from testsupport.models import named_model

    from cftgnn.oracle.engine import ReplayEngine, naive_logit

    model = named_model(synthetic, "tgn2")
    engine = ReplayEngine(model, synthetic)
    oracle = engine.oracle(300, k=2, m_max=64, mode="exact")
    assert oracle.stream is synthetic and oracle.probe is not None
    ev = oracle.removable
    z = oracle.probe.node_embeddings(synthetic.src[ev])
    feats = oracle.probe.features().numpy()
    np.testing.assert_allclose(z, feats[:, :z.shape[1]], atol=1e-6)
    result = TemGXExplainer(time_window=1e9).explain(oracle)
    (trace,) = result.trace
    assert trace["embeddings"] == "model" and 0 < len(result.explanation) <= 5
    assert set(result.explanation) <= set(ev.tolist())
    assert result.final_logit == pytest.approx(
        naive_logit(model, synthetic, 300, sorted(result.explanation)), abs=1e-5)
    fallback = TemGXExplainer(time_window=1e9, embeddings="fallback").explain(
        engine.oracle(300, k=2, m_max=64, mode="exact"))
    assert fallback.trace[0]["embeddings"] == "fallback"


def test_a_model_without_node_embeddings_falls_back(synthetic):
    from cftgnn.models import PyGTGN
    from cftgnn.oracle.engine import ReplayEngine

    model = PyGTGN(synthetic.num_nodes, synthetic.feat_dim, memory_dim=8, time_dim=8,
                   embedding_dim=8, batch_size=20)
    oracle = ReplayEngine(model, synthetic).oracle(300, k=2, m_max=32, mode="exact")
    assert oracle.probe is None and oracle.stream is synthetic
    result = TemGXExplainer(time_window=1e9).explain(oracle)
    assert result.trace[0]["embeddings"] == "fallback"
