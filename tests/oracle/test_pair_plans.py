"""Negative pairs in one batched call (``EventReplay.pair_logits``, the ``tempme`` protocol's):
for every model kind, the pair plan's logits equal a fresh replay with the other destination
and the per-set path (1e-5), for removals near the query and far back, the empty set, and a
destination in or outside the history; the explained event's plan, TGN's cone counters, the
engine's counters and the memory budget's accounting are as they were."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.models import TGAT, TGN, DyGFormer, GraphMixer, TemporalModel
from cftgnn.models.base import eval_mode
from cftgnn.oracle.engine import EventReplay, ReplayEngine, naive_logit
from cftgnn.oracle.snapshots import snapshot_nbytes
from cftgnn.replay.generic import GenericReplay
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.plans import PairReplay
from cftgnn.replay.tgn import TGNPlan, TGNReplay
from cftgnn.replay.tgn.cone import ConeStats

ATOL = 1e-5
KINDS = ["tgn1", "tgn2", "tgat", "graphmixer", "dygformer"]


def tiny(name: str, stream: EventStream) -> TemporalModel:
    torch.manual_seed(0)
    small = dict(time_dim=8, embedding_dim=16, num_heads=2, num_neighbors=5, batch_size=20)
    n, f = stream.num_nodes, stream.feat_dim
    if name in ("tgn1", "tgn2"):
        return TGN(n, f, memory_dim=16, num_layers=int(name[-1]), **small)
    if name == "tgat":
        return TGAT(n, f, node_dim=8, num_layers=2, **small)
    if name == "graphmixer":
        return GraphMixer(n, f, time_dim=8, channels=12, embedding_dim=12, num_neighbors=4,
                          batch_size=20)
    return DyGFormer(n, f, time_dim=8, channel_dim=4, embedding_dim=12,
                     max_input_sequence_length=5, patch_size=1, batch_size=20)


@pytest.fixture(scope="module")
def stream() -> EventStream:
    """A synthetic stream with one more node than it uses: a destination never seen."""
    base = make_synthetic_stream(25, 400, seed=7, feat_dim=2, p_tie=0.3)
    return replace(base, num_nodes=base.num_nodes + 1)


def removal_sets(cand: np.ndarray, rng: np.random.Generator) -> list[frozenset[int]]:
    """Nothing, the newest (near the query), the oldest (far back), both ends, all, random."""
    c = cand.tolist()
    return [frozenset(), frozenset(c[-2:]), frozenset(c[:1]), frozenset(c[:2] + c[-1:]),
            frozenset(c), *(frozenset(cand[rng.random(len(cand)) < q].tolist())
                            for q in (0.2, 0.5))]


def destinations(stream: EventStream, i: int) -> dict[str, int]:
    """A destination the explained source met before ``i``, one in the history, one never
    seen; none is the event's own."""
    seen = set(stream.src[:i].tolist()) | set(stream.dst[:i].tolist())
    own = int(stream.dst[i])
    met = [int(d) for d in stream.dst[:i][stream.src[:i] == stream.src[i]] if d != own]
    other = next(n for n in sorted(seen) if n not in (own, *met[-1:]))
    unseen = stream.num_nodes - 1
    assert unseen not in seen
    return {"met": met[-1], "seen": other, "unseen": unseen}


@pytest.mark.parametrize(("name", "history"), [*((k, "event") for k in KINDS),
                                                ("tgn1", "batch_start"), ("tgn2", "batch_start")])
def test_pair_logits_equal_fresh_replays_and_the_per_set_path(stream, name, history):
    model = tiny(name, stream)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    assert isinstance(engine.replay, PairReplay)
    rng = np.random.default_rng(0)
    moved = 0.0
    i = 260  # candidates on both sides of the pair: the removals move every pair
    replay = EventReplay(engine, i, m_max=60, history=history)
    cand = replay.candidates.ids
    assert len(cand) >= 4 and cand[-1] - cand[0] > 2 * model.batch_size  # 3+ batches back
    sets = removal_sets(cand, rng)
    for dst in destinations(stream, i).values():
        got = replay.pair_logits(sets, dst)
        # the per-set path (one masked replay per set), which negative pairs took before
        generic = GenericReplay(model).pair_plan(replay.base, replay.start, i, dst,
                                                 replay._own)
        with eval_mode(model), torch.no_grad():
            one_by_one = generic.logits(RemovalSets.from_sets(sets)).double().numpy()
        np.testing.assert_allclose(got, one_by_one, atol=ATOL)
        # fresh replays of the whole stream: nothing, near the query, far back, everything
        checked = [0, 1, 2, 4]
        ref = [naive_logit(model, stream, i, sorted(sets[j]), history, dst=dst)
               for j in checked]
        np.testing.assert_allclose(got[checked], ref, atol=ATOL)
        # single calls use the same plan (TGN: the local replay where it has one)
        single = [replay.pair_logits([s], dst)[0] for s in sets[:3]]
        np.testing.assert_allclose(single, got[:3], atol=ATOL)
        moved = max(moved, float(np.abs(got - got[0]).max()))
    # the true destination gives the explained event's own exact logits
    own = replay.pair_logits(sets, int(stream.dst[i]))
    np.testing.assert_allclose(own, replay.exact(sets), atol=ATOL)
    assert moved > 1e-4  # the removals change the negative pairs' logits


@pytest.mark.parametrize("name", ["tgn1", "tgn2"])
def test_a_pair_plan_leaves_the_event_s_plan_and_the_counters_alone(stream, name):
    model = tiny(name, stream)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    assert isinstance(engine.replay, TGNReplay)
    stats = engine.replay.options.stats = ConeStats()
    replay = EventReplay(engine, 399, m_max=12)
    cand = replay.candidates.ids
    sets = removal_sets(cand, np.random.default_rng(1))
    before = replay.exact(sets)
    plan = replay._plan
    assert isinstance(plan, TGNPlan)
    deps = plan.trajectory.deps
    assert deps is not None
    need, universe = deps.need.copy(), deps.universe.copy()
    counted = (stats.calls, stats.sets, stats.row_updates, stats.rows_made)
    work = (engine.counters.evaluations, engine.counters.events_replayed,
            engine.counters.eval_s)
    dst = destinations(stream, 399)["seen"]
    replay.pair_logits(sets, dst)
    replay.pair_logits(sets[:1], dst)
    # the cone counters and the engine's count the explained event's work only
    assert (stats.calls, stats.sets, stats.row_updates, stats.rows_made) == counted
    assert (engine.counters.evaluations, engine.counters.events_replayed,
            engine.counters.eval_s) == work
    # one plan per destination, of its own trajectory: the event's is untouched
    assert list(replay._pair_plans) == [dst]
    pair = replay._pair_plans[dst]
    assert isinstance(pair, TGNPlan) and pair.dst == dst
    assert pair.trajectory is not plan.trajectory and plan.trajectory.deps is deps
    np.testing.assert_array_equal(deps.need, need)
    np.testing.assert_array_equal(deps.universe, universe)
    assert not np.array_equal(pair.trajectory.deps.need, need)  # another query reads others
    np.testing.assert_array_equal(replay.exact(sets), before)
    assert stats.calls > counted[0]  # ... and the event's calls are still counted


def test_a_pair_plan_widened_past_its_candidates_keeps_its_query(stream):
    """A set naming a non-candidate records the pair's history again for the wider universe,
    for the same negative pair (``Trajectory.dst`` goes with it)."""
    model = tiny("tgn2", stream)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    replay = EventReplay(engine, 399, m_max=6)
    cand = replay.candidates.ids.tolist()
    outside = next(e for e in range(replay.start, 399) if e not in cand)
    dst = destinations(stream, 399)["met"]
    sets = [frozenset(cand[:2]), frozenset([outside]), frozenset([outside, cand[-1]])]
    got = replay.pair_logits(sets, dst)
    pair = replay._pair_plans[dst]
    assert isinstance(pair, TGNPlan) and pair.trajectory.dst == dst
    assert pair.trajectory.deps is not None and outside in pair.trajectory.deps.universe
    ref = [naive_logit(model, stream, 399, sorted(s), dst=dst) for s in sets]
    np.testing.assert_allclose(got, ref, atol=ATOL)


def test_pair_plans_are_accounted_for_in_the_memory_budget(stream):
    model = tiny("tgn2", stream)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    replay = EventReplay(engine, 399, m_max=12)
    alone = engine.snapshots._plans
    assert alone == snapshot_nbytes(replay._plan)
    dsts = list(destinations(stream, 399).values())[:2]
    for dst in dsts:
        replay.pair_logits([frozenset()], dst)
    plans = (replay._plan, None, *(replay._pair_plans[d] for d in dsts))
    assert engine.snapshots._plans == snapshot_nbytes(plans) > alone
    replay.approximate([frozenset()])  # the approximate plan keeps them counted
    plans = (replay._plan, replay._approx_plan, *(replay._pair_plans[d] for d in dsts))
    assert engine.snapshots._plans == snapshot_nbytes(plans)


class PlainReplay:
    """A replay with plans but no pair plans (as a model's own batched replay)."""

    def __init__(self, model: TemporalModel) -> None:
        self.inner = GenericReplay(model)

    def plan(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        return self.inner.plan(*args, **kwargs)


def test_a_replay_without_pair_plans_goes_set_by_set(stream):
    model = tiny("tgn1", stream)
    engine = ReplayEngine(model, stream, replay=PlainReplay(model))
    assert not isinstance(engine.replay, PairReplay)
    replay = EventReplay(engine, 399, m_max=12)
    sets = removal_sets(replay.candidates.ids, np.random.default_rng(2))
    dst = destinations(stream, 399)["seen"]
    got = replay.pair_logits(sets, dst)
    assert type(replay._pair_plans[dst]).__name__ == "GenericPlan"
    ref = [naive_logit(model, stream, 399, sorted(s), dst=dst) for s in sets]
    np.testing.assert_allclose(got, ref, atol=ATOL)
