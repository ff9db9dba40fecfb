"""Causal-cone replay on large batches: every set of up to two candidates, pruning, inputs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from cftgnn.arrays import distinct_rows
from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.data.index import TemporalIndex
from cftgnn.models import TGN
from cftgnn.models.base import eval_mode
from cftgnn.models.neighbors import reachable_nodes, recent_kept_neighbors
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.replay.batched import NodeInputs, _distinct_small
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.tgn import TGNReplay, TGNReplayOptions
from cftgnn.replay.tgn.cone import cone_replay

ATOL = 1e-5


@pytest.fixture(scope="module")
def stream() -> EventStream:
    return make_synthetic_stream(40, 900, seed=11, feat_dim=1, p_tie=0.2)


def tgn(stream: EventStream, num_layers: int) -> TGN:
    torch.manual_seed(0)
    model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8, embedding_dim=16,
                num_layers=num_layers, num_heads=2, num_neighbors=5, batch_size=20)
    return model


def engine(model: TGN, stream: EventStream) -> ReplayEngine:
    """An engine whose plans are all recorded trajectories (and so is the approximate
    plan's, for batches)."""
    eng = ReplayEngine(model, stream)
    assert isinstance(eng.replay, TGNReplay)
    eng.replay.options = TGNReplayOptions(local_max_events=0, local_max_sets=1)
    return eng


def all_small_sets(cand: list[int], k: int) -> list[frozenset[int]]:
    return [frozenset(c) for s in range(1, k + 1) for c in itertools.combinations(cand, s)]


@pytest.mark.parametrize("num_layers", [1, 2])
def test_every_pair_in_one_batch_equals_one_replay_per_set(stream, num_layers):
    replay = EventReplay(engine(tgn(stream, num_layers), stream), 899, m_max=16)
    sets = all_small_sets(replay.candidates.ids.tolist(), 2)
    assert len(sets) == 16 + 120
    np.testing.assert_allclose(replay.exact(sets), replay.exact_replay(sets), atol=ATOL)
    np.testing.assert_allclose(replay.approximate(sets), replay.approximate_replay(sets),
                               atol=ATOL)


def test_large_calls_are_evaluated_in_passes(stream):
    model = tgn(stream, 2)
    eng = engine(model, stream)
    replay = EventReplay(eng, 899, m_max=16)
    sets = all_small_sets(replay.candidates.ids.tolist(), 2)
    one_pass = replay.exact(sets)
    assert isinstance(eng.replay, TGNReplay)
    eng.replay.options.max_sets_per_pass = 7
    np.testing.assert_allclose(replay.exact(sets), one_pass, atol=ATOL)


def test_states_the_prediction_cannot_read_are_not_computed(stream):
    model = tgn(stream, 1)
    replay = EventReplay(engine(model, stream), 899, m_max=16)
    sets = all_small_sets(replay.candidates.ids.tolist(), 2)
    traj = replay._plan.trajectory  # type: ignore[attr-defined]
    with eval_mode(model):
        inputs = cone_replay(model, traj, RemovalSets.from_sets(sets))
    deps = traj.deps
    assert deps is not None and inputs.columns is not None
    final = len(traj.batches)
    pruned = np.flatnonzero(inputs.columns == -2)  # perturbed, but never read at the end
    assert len(pruned) and (deps.need[pruned] < final).all()
    assert (deps.need[[stream.src[899], stream.dst[899]]] == final).all()
    with pytest.raises(RuntimeError, match="not computed"):
        inputs.rows(np.zeros(1, dtype=np.int64), pruned[:1])


@pytest.mark.parametrize("num_layers", [1, 2])
def test_reachable_nodes_cover_every_sampled_neighbourhood(stream, num_layers):
    index = TemporalIndex(stream)
    n, position = 4, 850
    link = np.array([stream.src[position], stream.dst[position]])
    universe = np.unique(index.candidates(position, 2, 30).ids)
    shared = np.zeros(stream.num_events, dtype=bool)
    shared[np.arange(0, position, 7)] = True  # removed for every set
    shared[universe] = False
    reach = set(reachable_nodes(index, link, np.full(2, position), n, num_layers, universe,
                                shared).tolist())
    rng = np.random.default_rng(0)
    for q in (0.0, 0.3, 0.7, 1.0):
        mask = shared.copy()
        mask[universe[rng.random(len(universe)) < q]] = True
        nodes, before, read = link, np.full(2, position), set(link.tolist())
        for _ in range(num_layers):
            nbr, eid, valid = recent_kept_neighbors(index, nodes, before, n, mask,
                                                    int(mask.sum()))
            nodes, before = nbr[valid], eid[valid]
            read |= set(nodes.tolist())
        assert read <= reach


def test_node_inputs_read_rows_through_columns():
    base = torch.arange(4.0).view(4, 1)
    extra = torch.tensor([[10.0], [11.0]])
    rowmap = np.array([[0, -1], [1, 1]], dtype=np.int32)  # [P=2, C=2]
    inputs = NodeInputs(base, extra, rowmap, np.array([-1, 0, 1, -2]))
    p, nodes = np.array([0, 0, 0, 1, 1, 1]), np.array([0, 1, 2, 0, 1, 2])
    assert inputs(p, nodes).view(-1).tolist() == [0.0, 10.0, 2.0, 0.0, 11.0, 11.0]
    with pytest.raises(RuntimeError, match=r"nodes \[3\]"):
        inputs(np.array([0]), np.array([3]))


def test_memory_update_equals_the_gru_cell_on_every_row(stream):
    model = tgn(stream, 1)
    model.attach(stream)
    rng = np.random.default_rng(0)
    m = 300
    ev = rng.integers(100, 110, m)  # few events and last updates: shared message parts
    lu = stream.t[ev] - rng.integers(0, 3, m)
    mem_self = torch.randn(m, model.memory_dim)
    mem_other, of = torch.randn(40, model.memory_dim), rng.integers(0, 40, m)
    with torch.no_grad():
        got = model.message_update_shared(ev, mem_self, lu, mem_other, of)
        ref, _ = model.message_update(ev, mem_self, torch.as_tensor(lu), mem_other[of])
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


def test_distinct_small_numbers_values_like_distinct_rows():
    key = np.random.default_rng(0).integers(0, 9, 50)
    first, ident = _distinct_small(key, 9)
    assert (key[first][ident] == key).all() and len(first) == len(np.unique(key))
    assert (first == np.sort(first)).all()  # numbered in order of first occurrence
    f2, i2 = distinct_rows(key[:, None])
    assert (key[f2][i2] == key).all()
