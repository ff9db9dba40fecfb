"""The table of perturbed rows of the cone replay keeps its invariants (``RowTable.check``)
after every batch, on random dense streams and batches of random removal sets, with and
without pruning; and ``check`` catches each broken invariant."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testsupport.streams import dense_stream

from cftgnn import jit
from cftgnn.models import TGN
from cftgnn.models.base import eval_mode
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.replay.batched import batched_logits
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.tgn import TGNReplayOptions
from cftgnn.replay.tgn import rows as rows_module
from cftgnn.replay.tgn.compare import probe_columns
from cftgnn.replay.tgn.cone import cone_replay
from cftgnn.replay.tgn.rows import RowTable


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), nodes=st.integers(4, 16), batch_size=st.integers(2, 6),
       layers=st.integers(1, 2), data=st.data())
def test_row_table_invariants_hold_after_every_batch(seed, nodes, batch_size, layers, data):
    stream = dense_stream(seed, nodes, 120)
    torch.manual_seed(seed)
    model = TGN(nodes, 0, memory_dim=4, time_dim=2, embedding_dim=4, num_layers=layers,
                num_heads=1, num_neighbors=3, batch_size=batch_size)
    engine = ReplayEngine(model, stream)
    engine.replay.options = TGNReplayOptions(local_max_events=0)
    replay = EventReplay(engine, 119, m_max=64)
    traj = replay._plan.trajectory  # type: ignore[attr-defined]
    removable = np.arange(replay.start, 119)
    if not len(removable):
        return
    sizes = st.integers(1, min(4, len(removable)))
    chosen = data.draw(st.lists(
        st.builds(lambda k, r: frozenset(np.random.default_rng(r).choice(
            removable, size=k, replace=False).tolist()), sizes, st.integers(0, 2**31)),
        min_size=1, max_size=40))
    sets = RemovalSets.from_sets(chosen)
    with eval_mode(model):
        for prune in (True, False):
            checked = cone_replay(model, traj, sets, prune, check=True)  # asserts each batch
            plain = cone_replay(model, traj, sets, prune)
            got, want = (batched_logits(model, sets, traj.removed_mask, traj.end, inputs)
                         for inputs in (checked, plain))
            assert torch.equal(got, want)


def table() -> RowTable:
    """Two sets, three nodes (columns 0, 1, 2): set 0 holds row 0 of node 1, set 1 row 1."""
    rows = RowTable(2, np.array([0, 1, 2]), 3, 4, torch.device("cpu"))
    made = rows.add(np.array([0, 1]), np.array([1, 1]), torch.ones(2, 4), np.zeros(2))
    rows.write(np.array([0, 1]), np.array([1, 1]), made)
    return rows


def test_check_catches_each_broken_invariant():
    words = np.array([[1], [2]], dtype=np.uint64)  # set 0 removes event 0, set 1 event 1
    dep = np.array([[0], [3], [0]], dtype=np.uint64)  # node 1 depends on both
    rows = table()
    rows.check(words, dep, pruned=False)  # consistent
    broken = table()
    broken.alive[1] = False
    with pytest.raises(AssertionError, match="retired row"):
        broken.check()
    broken = table()
    broken.n[1] = 2
    with pytest.raises(AssertionError, match="another node's column"):
        broken.check()
    broken = table()
    broken.rep[1] = 0
    with pytest.raises(AssertionError, match="representative"):
        broken.check()
    broken = table()
    broken.write(np.array([1]), np.array([1]), np.array([0]))  # both sets on row 0, whose
    # keys differ; row 1 unused
    with pytest.raises(AssertionError, match="several keys"):
        broken.check(words, dep)
    broken.mixed[0] = True  # a mixed row may hold several keys
    broken.check(words, dep)
    broken = table()
    broken.write(np.array([1]), np.array([1]), np.array([-1]))  # set 1's key is not empty:
    # without pruning it holds a row
    broken.check(words, dep, pruned=True)
    with pytest.raises(AssertionError, match="without pruning"):
        broken.check(words, dep, pruned=False)
    broken = table()
    broken.drop(np.array([1]))
    broken.pend[1] = 5
    with pytest.raises(AssertionError, match="pending event"):
        broken.check()
    broken = table()
    broken.rowmap[1, 1] = -1  # written around ``write``: its bit still says it holds a row
    with pytest.raises(AssertionError, match="occupancy bitmap"):
        broken.check()
    broken = table()
    broken.rowmap = np.ascontiguousarray(broken.rowmap)  # row-major: the scans would misread
    with pytest.raises(AssertionError, match="column-major"):
        broken.check()


def test_merge_proves_rows_equal_on_every_coordinate_not_only_the_probed_ones():
    dim = 40  # probed coordinates: 0, 1, then every second one (2, 4, ...)
    cols = probe_columns(dim).tolist()
    assert cols[:2] == [0, 1] and 3 not in cols and 4 in cols
    rows = RowTable(4, np.array([0, 1, 2]), 3, dim, torch.device("cpu"))
    mem = torch.randn(1, dim).repeat(4, 1)  # rows 0 and 1 equal,
    mem[2, 3] = mem[2, 3] + 1.0  # row 2 differs only where nothing is probed,
    mem[3, 4] = mem[3, 4] + 1.0  # row 3 on a probed coordinate
    made = rows.add(np.arange(4), np.ones(4, dtype=np.int64), mem, np.zeros(4))
    rows.write(np.arange(4), np.ones(4, dtype=np.int64), made)
    none = np.zeros(rows.size, dtype=bool)
    merged = rows.merge(made, np.zeros(3, dtype=np.int64), 0, none, none,
                        np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64))
    assert merged == 1
    assert rows.rowmap[:, 1].tolist() == [0, 0, 2, 3]
    assert rows.alive[:4].tolist() == [True, False, True, True]


@pytest.mark.parametrize("force", [True, False], ids=["new buffers", "in place"])
@pytest.mark.parametrize("seed", range(6))
def test_compact_renumbers_the_rows_in_use_as_a_scan_of_the_whole_map_would(seed, force,
                                                                            monkeypatch):
    monkeypatch.setattr(rows_module, "_COMPACT_MIN_ROWS", 0)  # a compaction of a few rows
    rng = np.random.default_rng(seed)
    num_p, dim = 9, 3
    columns = np.array([0, -1, 1, 2, -1, 3, 4, 5])  # two nodes without a column
    rows = RowTable(num_p, columns, 6, dim, torch.device("cpu"))
    for _ in range(4):  # rows of random nodes, each given to some sets (its representative too)
        n = rng.choice(np.flatnonzero(columns >= 0), 5)
        rep = rng.integers(0, num_p, 5)
        made = rows.add(rep, n, torch.randn(5, dim), rng.random(5))
        for r, node, p in zip(made, n, rep, strict=True):
            sets = np.union1d(p, rng.choice(num_p, 3))
            rows.write(sets, np.full(len(sets), columns[node]), np.full(len(sets), r))
    for r in range(rows.size):  # a later row may have taken its sets: a set still using it
        users = np.flatnonzero(rows.rowmap[:, columns[rows.n[r]]] == r)
        if len(users):
            rows.rep[r] = users[0]
    rows.drop(rng.choice(rows.size, 12, replace=False))  # retired: their sets read -1 again
    rows.check()
    mem, lu, n_, rep_ = (rows.mem.clone(), rows.lu.copy(), rows.n.copy(), rows.rep.copy())
    before = rows.rowmap.copy()
    size = rows.size
    # the whole-map scan compact did before: every row in use and alive kept, in order
    referenced = np.zeros(size, dtype=bool)
    referenced[before[before >= 0]] = True
    keep = np.flatnonzero(rows.alive[:size] & referenced)
    new_id = np.full(size, -1, dtype=np.int32)
    new_id[keep] = np.arange(len(keep), dtype=np.int32)
    want = np.where(before >= 0, new_id[np.maximum(before, 0)], -1)
    buffers, storage = len(rows.pend), rows.mem.data_ptr()
    rows.compact(force=force)
    rows.check()
    assert rows.size == len(keep) and np.array_equal(rows.rowmap, want)
    # the capacity counted is twice the rows kept either way (what the budget reads); new
    # buffers of it with force, else the same buffers, the rows moved down in them
    assert rows.capacity == 256 and rows.nbytes() == (rows.rowmap.nbytes + rows.occupied.nbytes
                                                      + 256 * (4 * dim + 34))
    assert rows.occupied.nbytes == 6 * 8  # a word per column (9 sets)
    assert (len(rows.pend), rows.mem.shape[0]) == ((256, 256) if force else (buffers, buffers))
    assert (rows.mem.data_ptr() == storage) is not force
    assert rows.rowmap.flags.f_contiguous
    assert torch.equal(rows.mem[:len(keep)], mem[keep])
    assert np.array_equal(rows.lu[:len(keep)], lu[keep])
    assert np.array_equal(rows.n[:len(keep)], n_[keep])
    assert np.array_equal(rows.rep[:len(keep)], rep_[keep])


@pytest.mark.parametrize("seed", range(6))
def test_merge_compiled_and_numpy_give_the_same_table(seed, monkeypatch):
    if not jit.ENABLED:
        pytest.skip("numba is not installed: only the NumPy path runs here")
    rng = np.random.default_rng(seed)
    num_p, nodes, dim = 12, 6, 5
    columns = np.array([0, 1, -1, 2, 3, 4])
    rows = RowTable(num_p, columns, 5, dim, torch.device("cpu"))
    # rows of three nodes, memories drawn from a few (equal bit for bit or differing), some
    # equal to the recording; last-update times and pending events from a few values
    base = torch.randn(3, dim)
    n = rng.choice([0, 1, 3], 24)
    mem = base[rng.integers(0, 3, 24)].clone()
    mem[rng.random(24) < 0.2, rng.integers(0, dim)] += 1.0  # differ on one coordinate
    made = rows.add(rng.integers(0, num_p, 24), n, mem, rng.choice([0.0, 1.0], 24))
    src, dst = rng.integers(0, nodes, 30), rng.integers(0, nodes, 30)
    rows.pend[made] = rng.choice([-1, 3, 7, 11], 24)
    for r in made:  # each row's sets: its representative and a few more
        sets = np.union1d(rows.rep[r], rng.choice(num_p, 2))
        rows.write(sets, np.full(len(sets), columns[rows.n[r]]), np.full(len(sets), r))
    for r in made:  # a later row may have taken a set: a set still using it
        users = np.flatnonzero(rows.rowmap[:, columns[rows.n[r]]] == r)
        if len(users):
            rows.rep[r] = users[0]
    mem_eq = rng.random(rows.size) < 0.3
    checked = mem_eq | (rng.random(rows.size) < 0.5)
    need = rng.integers(0, 3, nodes)
    results = []
    for compiled in (True, False):
        monkeypatch.setattr(jit, "ENABLED", compiled)
        table = copy.deepcopy(rows)
        merged = table.merge(made, need, 1, mem_eq, checked, src, dst)
        results.append((merged, table.rowmap.copy(), table.alive.copy(), table.mixed.copy(),
                        table.pend.copy()))
    (m1, *a1), (m2, *a2) = results
    assert m1 == m2 and m1 > 0
    assert all(np.array_equal(x, y) for x, y in zip(a1, a2, strict=True))
