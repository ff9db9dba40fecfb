"""The consequence of a removal set: kept history events whose input it changes.

Hand-computed answers on a tiny chain, set-by-set reference simulations on random streams,
the model itself (TGN memory read by each batch), and the oracle's interface to the measure.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from testsupport.models import BATCH, ModelFactory, tgn1

from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import EventStream
from cftgnn.errors import OracleError
from cftgnn.explain.nsga2 import NSGA2Explainer
from cftgnn.models import TemporalModel
from cftgnn.models.neighbors import recent_kept_neighbors
from cftgnn.oracle.constraints import Constraints
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.oracle.oracle import Oracle
from cftgnn.replay.consequence import memory_reach, neighbourhood_reach
from cftgnn.testing import AdditiveBackend, make_candidates

F = frozenset


def make_stream(pairs: list[tuple[int, int]], num_nodes: int) -> EventStream:
    n = len(pairs)
    src, dst = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True))
    return EventStream(src=src, dst=dst, t=np.arange(n, dtype=np.float64),
                       edge_feat=np.zeros((n, 0), dtype=np.float32),
                       labels=np.zeros(n, dtype=np.int64), num_nodes=num_nodes)


#: e0..e7 then the explained e8. With batches of 2 ([e0 e1] [e2 e3] [e4 e5] [e6 e7]) and TGN's
#: last-message aggregation: removing e0 changes node 0 (e0 is its only event of batch 0) but
#: not node 1, whose last message of batch 0 is the kept e1 (which read unchanged memories);
#: so only e7 = (6, 0) reads a changed memory. Removing e3 changes nodes 3 and 4 (e3 is the
#: last of each in batch 1): e4 = (4, 5) and e5 = (3, 6) read them, and e7 reads node 6.
CHAIN = make_stream([(0, 1), (1, 2), (1, 3), (3, 4), (4, 5), (3, 6), (2, 7), (6, 0), (0, 7)], 8)
END = 8


@pytest.mark.parametrize("candidates, sets, expected", [
    ([0], [(), (0,)], [0, 1]),  # e7
    ([0, 3], [(), (0,), (3,), (0, 3)], [0, 1, 3, 3]),  # e7; e4, e5, e7; both
    # removing e2 changes node 1 (no later event reads it) but not node 3, whose last message
    # of batch 1 is the kept e3: nothing is reached
    ([0, 2], [(0,), (2,), (0, 2)], [1, 0, 1]),
    ([3], [(3,)], [3]),  # the oldest candidate in the middle of a batch
])
def test_memory_reach_on_a_hand_made_chain(candidates, sets, expected):
    reach = memory_reach(CHAIN, END, np.array(candidates), batch_size=2)
    assert reach.consequence([F(s) for s in sets]).tolist() == expected


def test_an_earlier_message_counts_when_the_later_ones_are_candidates():
    # node 3's events of batch 1 are e2 and e3; with e3 a candidate (removable), e2 may
    # become node 3's last message, so e2 reaches node 3 (not node 4, which only e3 touches):
    # its readers e5 = (3, 6), then e7 = (6, 0); e4 = (4, 5) is not reached
    reach = memory_reach(CHAIN, END, np.array([2, 3]), batch_size=2)
    assert reach.consequence([F({2}), F({3})]).tolist() == [2, 3]


@pytest.mark.parametrize("batch_size, expected", [
    (1, 7),  # every later event reads the changed chain: all of e1..e7
    (3, 1),  # [e0 e1 e2] [e3 e4 e5] [e6 e7]: only e7 = (6, 0) reads node 0 or 1 later
    (8, 0),  # one batch: nobody reads e0's update before the explained event
])
def test_memory_reach_depends_on_the_batching(batch_size, expected):
    reach = memory_reach(CHAIN, END, np.array([0]), batch_size)
    assert reach.consequence([F({0})]).tolist() == [expected]


@pytest.mark.parametrize("n, expected", [(1, 2), (2, 3), (10, 3)])
def test_neighbourhood_reach_on_the_chain(n, expected):
    # node 0's next events after e0: e7 (e8 is the explained event); node 1's: e1, e2
    reach = neighbourhood_reach(TemporalIndex(CHAIN), END, np.array([0]), n)
    assert reach.consequence([F(), F({0})]).tolist() == [0, expected]


def test_a_set_outside_the_candidates_is_refused():
    reach = memory_reach(CHAIN, END, np.array([0, 3]), batch_size=2)
    with pytest.raises(ValueError, match="not a candidate"):
        reach.consequence([F({1})])


def test_no_candidates():
    for reach in (memory_reach(CHAIN, END, np.array([], dtype=np.int64), 2),
                  neighbourhood_reach(TemporalIndex(CHAIN), END, np.array([], dtype=np.int64),
                                      3)):
        assert reach.consequence([F()]).tolist() == [0]
        assert reach.consequence([]).shape == (0,)


# ---------------------------------------------------------------------------- references
def memory_reference(stream: EventStream, first: int, end: int, batch_size: int,
                     removed: frozenset[int]) -> set[int]:
    """One removal set at a time, with TGN's last-message aggregation: the kept events that
    read a changed node memory, batch by batch. A node's memory changes after a batch when it
    had changed before, when its last kept message of the batch is another event than its
    last message without removals, or when that message reads a changed memory."""
    changed: set[int] = set()
    reached = set()
    for lo in range((first // batch_size) * batch_size, end, batch_size):
        evs = range(lo, min(lo + batch_size, end))
        reads = {e: bool({int(stream.src[e]), int(stream.dst[e])} & changed) for e in evs}
        reached |= {e for e in evs if e >= first and e not in removed and reads[e]}
        last: dict[int, int] = {}
        kept_last: dict[int, int] = {}
        for e in evs:
            for w in {int(stream.src[e]), int(stream.dst[e])}:
                last[w] = e
                if e not in removed:
                    kept_last[w] = e
        for w, e in last.items():
            k = kept_last.get(w)
            if k != e or reads[e]:
                changed.add(w)
    return reached


def neighbourhood_reference(index: TemporalIndex, end: int, first: int, n: int,
                            removed: frozenset[int]) -> int:
    """Kept events with a removed event among the ``n`` most recent events of an endpoint."""
    stream = index.stream
    count = 0
    mask = np.zeros(stream.num_events, dtype=bool)
    mask[list(removed)] = True
    for e in range(first, end):
        if e in removed:
            continue
        nodes = np.array([stream.src[e], stream.dst[e]])
        _, eid, valid = index.recent_neighbors(nodes, e, n)
        hit = bool(np.isin(eid[valid], list(removed)).any())
        # the model's own sampler agrees: the kept sample differs exactly then
        _, kept, kept_valid = recent_kept_neighbors(index, nodes, np.array([e, e]), n, mask,
                                                    len(removed))
        assert hit == (not (np.array_equal(kept, eid) and np.array_equal(kept_valid, valid)))
        count += hit
    return count


def random_stream(seed: int, num_events: int = 260, num_nodes: int = 18) -> EventStream:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_events)
    dst = np.where(rng.random(num_events) < 0.05, src, rng.integers(0, num_nodes, num_events))
    return make_stream(list(zip(src.tolist(), dst.tolist(), strict=True)), num_nodes)


def random_sets(candidates: np.ndarray, rng: np.random.Generator) -> list[frozenset[int]]:
    sets = [F(), F(candidates.tolist()), F([int(candidates[0])]), F([int(candidates[-1])])]
    for p in (0.02, 0.05, 0.2, 0.5):
        for _ in range(2):
            sets.append(F(candidates[rng.random(len(candidates)) < p].tolist()))
    return sets


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("batch_size", [1, 5, 16])
def test_memory_reach_bounds_a_set_by_set_simulation(seed, batch_size):
    stream = random_stream(seed)
    rng = np.random.default_rng(seed)
    end = 250
    cand = np.sort(rng.choice(np.arange(37, end), 90, replace=False))  # two bit words
    reach = memory_reach(stream, end, cand, batch_size)
    sets = random_sets(cand, rng)
    exact = [len(memory_reference(stream, int(cand[0]), end, batch_size, s)) for s in sets]
    got = reach.consequence(sets).tolist()
    # conservative: an earlier message of a node counts whenever every later one is a
    # candidate, removed or not; never below the set's own answer
    assert all(g >= x for g, x in zip(got, exact, strict=True))
    singles = [F({int(e)}) for e in cand]  # a candidate alone: nothing else to keep
    assert max(exact) > 0 and sum(reach.consequence(singles)) > 0


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n", [1, 3, 8])
def test_neighbourhood_reach_equals_a_brute_force_over_samples(seed, n):
    stream = random_stream(seed + 10)
    index = TemporalIndex(stream)
    rng = np.random.default_rng(seed)
    end = 240
    cand = np.sort(rng.choice(np.arange(20, end), 70, replace=False))
    reach = neighbourhood_reach(index, end, cand, n)
    sets = random_sets(cand, rng)
    expected = [neighbourhood_reference(index, end, int(cand[0]), n, s) for s in sets]
    assert reach.consequence(sets).tolist() == expected
    assert max(expected) > 0


# ---------------------------------------------------------------------------- the model
def memory_read_by_each_event(model: TemporalModel, end: int,
                              removed: frozenset[int]) -> torch.Tensor:
    """The endpoint memory and last update each event in ``[0, end)`` reads, ``[end, …]``:
    after consuming batch ``b``, the state holds batches ``< b`` applied, which is what the
    events of batch ``b`` read."""
    stream = model.stream
    mask = np.zeros(stream.num_events, dtype=bool)
    mask[list(removed)] = True
    model.reset()
    rows = []
    pos = 0
    while pos < end:
        nxt = min(end, pos + model.batch_size)
        model.advance(pos, nxt, mask)
        st = model.state
        ends = torch.as_tensor(np.stack([stream.src[pos:nxt], stream.dst[pos:nxt]], axis=1))
        rows.append(torch.cat([st.memory[ends].flatten(1),
                               st.last_update[ends].to(st.memory.dtype)], dim=1))
        pos = nxt
    return torch.cat(rows)


def attached_tgn1(stream: EventStream) -> TemporalModel:
    torch.manual_seed(0)
    model = tgn1(stream)
    model.eval()
    model.attach(stream)
    return model


def test_memory_reach_covers_every_event_whose_memory_changes(stream):
    model = attached_tgn1(stream)
    end = 120
    cand = np.array([40, 51, 66, 90, 97, 104])
    reach = memory_reach(stream, end, cand, BATCH)
    full = memory_read_by_each_event(model, end, F())
    changed = 0
    for s in (F({40}), F({66}), F({104}), F({51, 97}), F(cand.tolist())):
        masked = memory_read_by_each_event(model, end, s)
        differs = ~(masked == full).all(dim=1).numpy()
        differs[list(s)] = False  # removed events read nothing
        reached = memory_reference(stream, 40, end, BATCH, s)
        assert reach.consequence([s]).tolist()[0] >= len(reached)
        # the reference is faithful to the model: every event whose input memory differs
        assert set(np.flatnonzero(differs).tolist()) <= reached
        changed += int(differs.sum())
    assert changed > 0  # the comparison sees real changes


@pytest.fixture
def engine(factory: ModelFactory, stream: EventStream) -> ReplayEngine:
    return ReplayEngine(factory(stream), stream)


def test_engine_oracles_measure_consequences(engine):
    oracle = engine.oracle(140, m_max=40, mode="exact")  # candidates over several batches
    cand = oracle.candidates.ids
    assert oracle.has_consequence and int(cand[0]) < 140 - 2 * BATCH
    assert oracle.consequence([F()]).tolist() == [0]
    model = engine.model
    if model.memory_dim == 0:
        reach = neighbourhood_reach(engine.index, 140, cand, model.num_neighbors)
    else:
        reach = memory_reach(engine.stream, 140, cand,
                             engine.batch_size)
    sets = [F([int(e)]) for e in cand] + [F(cand.tolist()), F(cand[::3].tolist())]
    assert oracle.consequence(sets).tolist() == reach.consequence(sets).tolist()
    assert oracle.consequence(sets).max() > 0
    stats = oracle.stats
    assert stats.calls == 0  # not a model evaluation
    outside = next(e for e in range(140) if e not in set(cand.tolist()))
    with pytest.raises(OracleError, match="not candidates"):
        oracle.consequence([F({outside})])


def test_engine_consequences_respect_constraints(stream):
    engine = ReplayEngine(attached_tgn1(stream), stream)
    replay = EventReplay(engine, 140, m_max=10)
    protected = int(replay.candidates.ids[-1])
    oracle = replay.oracle("exact", Constraints(events=(protected,), max_size=3))
    with pytest.raises(OracleError, match="protected"):
        oracle.consequence([F({protected})])
    result = NSGA2Explainer(pop_size=8, max_iterations=2, seed=0).explain(oracle)
    assert all(protected not in c for c in result.counterfactuals)
    if result.is_counterfactual:
        assert result.counterfactual_consequences == tuple(
            oracle.consequence([F(c) for c in result.counterfactuals]).tolist())
    else:
        assert result.counterfactual_consequences is None


# ---------------------------------------------------------------------------- the oracle
def toy_oracle(consequence=None, removable=None) -> Oracle:
    return Oracle(make_candidates([2, 4, 6]), 1.0, exact=AdditiveBackend(1.0, {2: 2.0}),
                  removable=removable, consequence=consequence)


def test_an_oracle_without_a_measure_refuses():
    oracle = toy_oracle()
    assert not oracle.has_consequence
    with pytest.raises(OracleError, match="no consequence measure"):
        oracle.consequence([F({2})])


def test_the_oracle_validates_sets_and_the_measure_output():
    seen: list[list[frozenset[int]]] = []

    def measure(sets):
        seen.append(list(sets))
        return [10 * len(s) for s in sets]

    oracle = toy_oracle(measure, removable=[2, 4])
    assert oracle.has_consequence
    out = oracle.consequence([F(), {2, 4}, [np.int64(4)]])
    assert out.dtype == np.int64 and out.tolist() == [0, 20, 10]
    assert seen[-1] == [F(), F({2, 4}), F({4})]  # plain frozensets of ints
    with pytest.raises(OracleError, match="protected"):
        oracle.consequence([F({6})])
    with pytest.raises(OracleError, match="not candidates"):
        oracle.consequence([F({3})])
    assert oracle.stats.calls == 0 and oracle.stats.cache_hits == 0
    bad = toy_oracle(lambda sets: [1] * (len(sets) + 1))
    with pytest.raises(OracleError, match="consequence returned"):
        bad.consequence([F({2})])
