"""Model-backed oracle: exact and approximate modes equal fresh replays (1e-5 on the logit)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from testsupport.devices import device_or_skip

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.errors import OracleError
from cftgnn.explain import CFTGNNExplainer, GreedyExplainer
from cftgnn.models import TGAT, TGN, TemporalModel
from cftgnn.models.base import eval_mode
from cftgnn.oracle import OracleMode
from cftgnn.oracle.engine import EventReplay, ReplayEngine, naive_logit
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.tgn import TGNReplay
from cftgnn.replay.tgn.cone import cone_replay

ATOL = 1e-5


def tiny_models(num_nodes: int, edge_dim: int) -> dict[str, TemporalModel]:
    torch.manual_seed(0)
    small = dict(time_dim=8, embedding_dim=16, num_heads=2, num_neighbors=5, batch_size=20)
    return {
        "tgn1": TGN(num_nodes, edge_dim, memory_dim=16, num_layers=1, **small),
        "tgn2": TGN(num_nodes, edge_dim, memory_dim=16, num_layers=2, **small),
        "tgat": TGAT(num_nodes, edge_dim, node_dim=8, num_layers=2, **small),
    }



def tune(engine: ReplayEngine, **options: int) -> ReplayEngine:
    """Set TGN replay options (which replay a call uses) on the engine's replay."""
    if isinstance(engine.replay, TGNReplay):
        for key, value in options.items():
            setattr(engine.replay.options, key, value)
    return engine


@pytest.fixture(scope="module")
def stream() -> EventStream:
    return make_synthetic_stream(25, 400, seed=7, feat_dim=2, p_tie=0.3)


@pytest.mark.parametrize("local_max_events", [0, 10**9])
@pytest.mark.parametrize("name", ["tgn1", "tgn2", "tgat"])
def test_exact_and_approximate_equal_fresh_replay(stream, name, local_max_events):
    model = tiny_models(stream.num_nodes, stream.feat_dim)[name]
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    tune(engine, local_max_events=local_max_events)
    rng = np.random.default_rng(0)
    for i in (5, 123, 260, 399):  # increasing, so the cursor moves forward
        oracle = engine.oracle(i, m_max=12)
        cand = oracle.candidates.ids
        assert oracle.original_logit == pytest.approx(naive_logit(model, stream, i), abs=ATOL)
        sets = [frozenset(), frozenset(cand.tolist())]
        if len(cand):
            sets.append(frozenset([int(cand[0])]))  # the oldest candidate
            same_t = [int(e) for e in cand if (stream.t[cand] == stream.t[e]).sum() > 1]
            if same_t:
                sets.append(frozenset(same_t))  # events sharing a timestamp
            for _ in range(3):
                pick = rng.random(len(cand)) < 0.4
                sets.append(frozenset(cand[pick].tolist()))
        for s in sets:
            ref = naive_logit(model, stream, i, sorted(s))
            assert oracle.exact(s) == pytest.approx(ref, abs=ATOL)
            # approximate = history before ε_min plus C \ s: a fresh replay without the rest
            eps_min = int(cand[0]) if len(cand) else i
            drop = sorted(set(range(eps_min, i)) - (set(cand.tolist()) - s))
            approx_ref = naive_logit(model, stream, i, drop)
            engine_approx = engine.oracle(i, m_max=12, mode=OracleMode.APPROXIMATE)
            assert engine_approx(s) == pytest.approx(approx_ref, abs=ATOL)


def test_out_of_order_events_use_checkpoints(stream):
    model = tiny_models(stream.num_nodes, stream.feat_dim)["tgn1"]
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    late = engine.oracle(390, mode="exact")
    early = engine.oracle(150, mode="exact")  # goes back: restarts from a checkpoint
    for oracle, i in ((late, 390), (early, 150)):
        s = frozenset(oracle.candidates.ids[::2].tolist())
        assert oracle.exact(s) == pytest.approx(naive_logit(model, stream, i, sorted(s)), abs=ATOL)


def test_batch_equals_one_at_a_time(stream):
    model = tiny_models(stream.num_nodes, stream.feat_dim)["tgn2"]
    engine = ReplayEngine(model, stream)
    oracle = engine.oracle(300, m_max=10, mode="exact")
    cand = oracle.candidates.ids.tolist()
    sets = [frozenset(cand[j : j + 2]) for j in range(0, len(cand), 2)]
    batched = oracle.batch(sets)
    fresh = engine.oracle(300, m_max=10, mode="exact")
    single = [fresh(s) for s in sets]
    np.testing.assert_allclose(batched, single, atol=ATOL)


def test_cache_hits_do_not_replay(stream):
    model = tiny_models(stream.num_nodes, stream.feat_dim)["tgn1"]
    engine = ReplayEngine(model, stream)
    oracle = engine.oracle(200, mode="exact")
    s = frozenset(oracle.candidates.ids[:2].tolist())
    replayed = engine.counters.events_replayed
    first = oracle(s)
    base = engine.boundary(int(oracle.candidates.ids[0]))
    assert engine.counters.events_replayed - replayed == 200 - base - 2  # kept history events
    before = engine.counters.evaluations
    assert oracle(s) == first and engine.counters.evaluations == before
    assert oracle.stats.cache_hits >= 1


def test_bad_removals_and_no_history(stream):
    model = tiny_models(stream.num_nodes, stream.feat_dim)["tgat"]
    engine = ReplayEngine(model, stream)
    oracle = engine.oracle(100)
    not_candidate = next(e for e in range(100) if e not in set(oracle.candidates.ids.tolist()))
    with pytest.raises(OracleError, match="not candidates"):
        oracle.exact({not_candidate})
    with pytest.raises(OracleError, match="not candidates"):
        oracle.exact({150})  # after the explained event
    first = engine.oracle(0)
    assert len(first.candidates) == 0 and np.isfinite(first.original_logit)


@pytest.mark.parametrize("explainer", [CFTGNNExplainer(it_max=30), GreedyExplainer()])
def test_explainers_report_only_exact_flips(stream, explainer):
    model = tiny_models(stream.num_nodes, stream.feat_dim)["tgn1"]
    engine = ReplayEngine(model, stream)
    for i in (250, 320, 380):
        oracle = engine.oracle(i, m_max=8, mode="approximate")
        result = explainer.explain(oracle)
        if result.is_counterfactual:
            ref = naive_logit(model, stream, i, sorted(result.explanation))
            assert ref * result.original_logit < 0


# TGN: cone replay only / local replay of single sets and cone replay of batches / local
# replay of everything
@pytest.mark.parametrize("local_max_events, local_max_sets", [(0, 1), (10**9, 1), (10**9, 10**9)])
@pytest.mark.parametrize("name", ["tgn1", "tgn2", "tgat"])
def test_batched_replay_equals_one_replay_per_set(name, local_max_events, local_max_sets):
    stream = make_synthetic_stream(40, 900, seed=11, feat_dim=1, p_tie=0.2)
    model = tiny_models(stream.num_nodes, stream.feat_dim)[name]
    engine = tune(ReplayEngine(model, stream), local_max_events=local_max_events,
                  local_max_sets=local_max_sets)
    rng = np.random.default_rng(1)
    for i in (310, 655, 899):
        replay = EventReplay(engine, i, m_max=24)
        cand = replay.candidates.ids
        sets = [frozenset(cand[rng.random(len(cand)) < q].tolist())
                for q in (0.0, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0) for _ in range(3)]
        np.testing.assert_allclose(replay.exact(sets), replay.exact_replay(sets), atol=ATOL)
        np.testing.assert_allclose(replay.approximate(sets), replay.approximate_replay(sets),
                                   atol=ATOL)
        one = [replay.exact([s])[0] for s in sets[:5]]
        np.testing.assert_allclose(one, replay.exact(sets[:5]), atol=ATOL)
        one = [replay.approximate([s])[0] for s in sets[-5:]]
        np.testing.assert_allclose(one, replay.approximate(sets[-5:]), atol=ATOL)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["tgn2", "tgat"])
def test_batched_exact_oracle_on_cuda(name):
    device_or_skip("cuda")
    stream = make_synthetic_stream(40, 900, seed=11, feat_dim=1, p_tie=0.2)
    model = tiny_models(stream.num_nodes, stream.feat_dim)[name].to("cuda")
    engine = ReplayEngine(model, stream)
    replay = EventReplay(engine, 899, m_max=24)
    cand = replay.candidates.ids
    rng = np.random.default_rng(2)
    sets = [frozenset(cand[rng.random(len(cand)) < q].tolist()) for q in (0.0, 0.2, 0.6)]
    got = replay.exact(sets)
    ref = [naive_logit(model.cpu(), stream, 899, sorted(s)) for s in sets]
    np.testing.assert_allclose(got, ref, atol=ATOL)


def _cone_stream_and_model(name: str) -> tuple[EventStream, TemporalModel]:
    stream = make_synthetic_stream(40, 900, seed=11, feat_dim=1, p_tie=0.2)
    model = tiny_models(stream.num_nodes, stream.feat_dim)[name]
    return stream, model


def _cone_engine(model: TemporalModel, stream: EventStream) -> ReplayEngine:
    return tune(ReplayEngine(model, stream), local_max_events=0)  # every plan is a trajectory


@pytest.mark.parametrize("name", ["tgn1", "tgn2"])
def test_cone_rows_are_shared_between_sets(name):
    stream, model = _cone_stream_and_model(name)
    replay = EventReplay(_cone_engine(model, stream), 899, m_max=24)
    cand = replay.candidates.ids.tolist()
    # MCTS children: one parent set plus one more candidate each
    siblings = [frozenset(cand[:3] + [c]) for c in cand[3:]]
    np.testing.assert_allclose(replay.exact(siblings), replay.exact_replay(siblings), atol=ATOL)
    traj = replay._plan.trajectory
    with eval_mode(model):
        one = cone_replay(model, traj, RemovalSets.from_sets(siblings[:1])).extra
        same = cone_replay(model, traj, RemovalSets.from_sets(siblings[:1] * 8)).extra
        inputs = cone_replay(model, traj, RemovalSets.from_sets(siblings))
    assert len(same) == len(one) > 0  # identical sets share every row
    assert inputs.rowmap is not None
    assert len(inputs.extra) < (inputs.rowmap >= 0).sum()  # siblings share the parent's rows


@pytest.mark.parametrize("name", ["tgn1", "tgn2"])
def test_cone_replay_with_more_than_64_candidates(name):
    stream, model = _cone_stream_and_model(name)
    replay = EventReplay(_cone_engine(model, stream), 899, m_max=150)
    cand = replay.candidates.ids
    assert len(cand) > 128  # dependency masks of three 64-bit words
    rng = np.random.default_rng(3)
    sets = [frozenset(cand[rng.random(len(cand)) < q].tolist()) for q in (0.02, 0.1, 0.5)]
    sets += [frozenset([int(cand[-1])]), frozenset([int(cand[70])]), frozenset(cand[::40])]
    np.testing.assert_allclose(replay.exact(sets), replay.exact_replay(sets), atol=ATOL)


def test_removals_outside_the_planned_candidates_widen_the_dependencies():
    stream, model = _cone_stream_and_model("tgn2")
    engine = _cone_engine(model, stream)
    replay = EventReplay(engine, 899, m_max=24)
    cand = replay.candidates.ids
    with eval_mode(model):
        plan = engine.replay.plan(replay.base, replay.start, 899, removable=cand[-2:])
        traj = plan.trajectory  # type: ignore[attr-defined]
        assert traj.deps is not None and len(traj.deps.universe) == 2
        sets = [frozenset(cand[:4].tolist()), frozenset(cand[::3].tolist())]
        got = plan.logits(RemovalSets.from_sets(sets)).double().numpy()
    assert set(cand[:4].tolist()) <= set(traj.deps.universe.tolist())
    np.testing.assert_allclose(got, replay.exact_replay(sets), atol=ATOL)


@pytest.mark.parametrize("name", ["tgn2", "tgat"])
def test_embedding_rows_are_shared_between_sets(name, monkeypatch):
    stream = make_synthetic_stream(40, 900, seed=11, feat_dim=1, p_tie=0.2)
    model = tiny_models(stream.num_nodes, stream.feat_dim)[name]
    replay = EventReplay(_cone_engine(model, stream), 899, m_max=24)
    cand = replay.candidates.ids.tolist()
    computed: list[int] = []
    attend = model.embedding.attend

    def counting(layer, h_self, *args):
        computed.append(len(h_self))
        return attend(layer, h_self, *args)

    monkeypatch.setattr(model.embedding, "attend", counting)

    def rows(sets: list[frozenset[int]]) -> int:
        """Attention rows computed for one batched call of ``sets``."""
        computed.clear()
        with eval_mode(model):
            got = replay._plan.logits(RemovalSets.from_sets(sets))
        count = sum(computed)
        np.testing.assert_allclose(got.double().numpy(), replay.exact_replay(sets), atol=ATOL)
        return count

    one = rows([frozenset(cand[:1])])
    assert rows([frozenset(cand[:1])] * 16) == one  # identical sets: one embedding pass
    # sets removing one old candidate each leave most neighbourhoods as they are
    singles = [frozenset([c]) for c in cand[:8]]
    assert rows(singles) < len(singles) * one
