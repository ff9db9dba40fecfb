"""The dense cone replay (``cftgnn.replay.tgn.dense``, ``TGNReplayOptions(cone="dense")``):
the same logits as the naive replay (1e-5) and as the row table (1e-6) on the streams the
cone tests use, random dense streams, the approximate history and negative pairs; its
passes, its memory budget, and the option's values."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from testsupport.cone_cases import sparse_case
from testsupport.streams import dense_stream

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.models import TGN
from cftgnn.models.base import eval_mode
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.replay.batched import batched_logits
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.tgn import Cone, TGNReplay, TGNReplayOptions
from cftgnn.replay.tgn.cone import ConeBudgetExceeded, ConeStats, cone_replay
from cftgnn.replay.tgn.dense import DensePlan, dense_replay

NAIVE = 1e-5  # against a fresh replay per set
ROWS = 1e-6  # against the row table on the same device


def tgn(stream: EventStream, num_layers: int, **kw: int) -> TGN:
    torch.manual_seed(0)
    return TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8, embedding_dim=16,
               num_layers=num_layers, num_heads=2, num_neighbors=5,
               batch_size=kw.get("batch_size", 20))


def engine(model: TGN, stream: EventStream, cone: str) -> ReplayEngine:
    """An engine whose plans are recorded trajectories (no local replay), with ``cone``."""
    eng = ReplayEngine(model, stream)
    assert isinstance(eng.replay, TGNReplay)
    eng.replay.options = TGNReplayOptions(local_max_events=0, local_max_sets=1, cone=cone)
    return eng


def small_sets(cand: list[int], k: int) -> list[frozenset[int]]:
    return [frozenset(c) for s in range(1, k + 1) for c in itertools.combinations(cand, s)]


def both(model: TGN, stream: EventStream, event: int, sets: list[frozenset[int]],
         m_max: int, approximate: bool = False, fresh: int = 24
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logits of ``sets`` by the dense replay and the row table (all in one call each), and
    of every ``len(sets) // fresh``-th set by fresh replays (one full replay each)."""
    out = []
    for cone in ("dense", "rows"):
        replay = EventReplay(engine(model, stream, cone), event, m_max=m_max)
        out.append(replay.approximate(sets) if approximate else replay.exact(sets))
    some = sets[::max(1, len(sets) // fresh)]
    naive = (replay.approximate_replay(some) if approximate else replay.exact_replay(some))
    return out[0], out[1], naive


@pytest.fixture(scope="module")
def stream() -> EventStream:
    return make_synthetic_stream(40, 900, seed=11, feat_dim=1, p_tie=0.2)


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("approximate", [False, True])
def test_every_pair_equals_the_naive_replay_and_the_row_table(stream, num_layers, approximate):
    model = tgn(stream, num_layers)
    cand = EventReplay(engine(model, stream, "rows"), 899, m_max=16).candidates.ids.tolist()
    sets = small_sets(cand, 2)
    dense, rows, naive = both(model, stream, 899, sets, 16, approximate)
    np.testing.assert_allclose(dense[::len(sets) // 24], naive, atol=NAIVE)
    np.testing.assert_allclose(dense, rows, atol=ROWS)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_dense_streams_and_random_sets(seed):
    # few nodes, events between random pairs: most nodes perturbed, messages that change
    # with the removals, nodes with several events in a batch
    stream = dense_stream(seed, 8, 400)
    model = tgn(stream, 1 + seed % 2, batch_size=10)
    replay = EventReplay(engine(model, stream, "rows"), 399, m_max=24)
    cand = replay.candidates.ids
    rng = np.random.default_rng(seed)
    sets = [frozenset(rng.choice(cand, size=int(rng.integers(1, 7)), replace=False).tolist())
            for _ in range(40)]
    dense, rows, naive = both(model, stream, 399, sets, 24, fresh=10)
    np.testing.assert_allclose(dense[::4], naive, atol=NAIVE)
    np.testing.assert_allclose(dense, rows, atol=ROWS)


def test_a_long_sparse_history_whose_far_back_effects_die_out():
    stream, model, sets, batch = sparse_case(2)
    out = {}
    for cone in ("dense", "rows"):
        replay = EventReplay(engine(model, stream, cone), stream.num_events - 1, m_max=24)
        cand = replay.candidates.ids
        many = [frozenset(cand[list(s)].tolist()) for s in batch]
        out[cone] = replay.exact(many)
    np.testing.assert_allclose(out["dense"][::8], replay.exact_replay(many[::8]), atol=NAIVE)
    np.testing.assert_allclose(out["dense"], out["rows"], atol=ROWS)


def test_negative_pairs(stream):
    model = tgn(stream, 2)
    sets = None
    out = {}
    for cone in ("dense", "rows"):
        replay = EventReplay(engine(model, stream, cone), 899, m_max=16)
        sets = small_sets(replay.candidates.ids.tolist()[:8], 2)
        out[cone] = replay.pair_logits(sets, 3)
    assert sets is not None
    np.testing.assert_allclose(out["dense"], out["rows"], atol=ROWS)


def test_sets_that_cannot_reach_a_node_read_its_recorded_input(stream):
    model = tgn(stream, 1)
    replay = EventReplay(engine(model, stream, "rows"), 899, m_max=16)
    traj = replay._plan.trajectory  # type: ignore[attr-defined]
    sets = RemovalSets.from_sets(small_sets(replay.candidates.ids.tolist(), 1))
    with eval_mode(model):
        dense = dense_replay(model, traj, sets)
        rows = cone_replay(model, traj, sets, prune=False)
    assert dense.rowmap is not None and dense.columns is not None
    # without pruning the row table gives a pair a row exactly where its key is not empty:
    # the dense replay reads a row at the same pairs (and the recording elsewhere)
    assert rows.rowmap is not None and rows.columns is not None
    np.testing.assert_array_equal(dense.columns, rows.columns)
    read = np.flatnonzero(dense.columns >= 0)
    p = np.repeat(np.arange(sets.num_sets), len(read))
    n = np.tile(read, sets.num_sets)
    np.testing.assert_array_equal(dense.rows(p, n) >= 0, rows.rows(p, n) >= 0)
    torch.testing.assert_close(dense(p, n), rows(p, n), atol=ROWS, rtol=0)
    with pytest.raises(RuntimeError, match="not computed"):
        unread = np.flatnonzero(dense.columns == -2)[:1]
        dense(np.zeros(len(unread), dtype=np.int64), unread)


def test_large_calls_go_in_passes_and_a_tight_budget_splits_them(stream):
    model = tgn(stream, 2)
    eng = engine(model, stream, "dense")
    replay = EventReplay(eng, 899, m_max=16)
    sets = small_sets(replay.candidates.ids.tolist(), 2)
    one = replay.exact(sets)
    assert isinstance(eng.replay, TGNReplay)
    eng.replay.options.max_sets_per_pass = 7
    np.testing.assert_allclose(replay.exact(sets), one, atol=ROWS)
    traj = replay._plan.trajectory  # type: ignore[attr-defined]
    with pytest.raises(ConeBudgetExceeded, match="dense rows"):
        dense_replay(model, traj, RemovalSets.from_sets(sets), max_bytes=1000)
    # one set is never refused
    dense_replay(model, traj, RemovalSets.from_sets(sets[:1]), max_bytes=1)


def test_the_counters_say_what_the_dense_replay_computed(stream):
    model = tgn(stream, 1)
    replay = EventReplay(engine(model, stream, "rows"), 899, m_max=16)
    traj = replay._plan.trajectory  # type: ignore[attr-defined]
    sets = RemovalSets.from_sets(small_sets(replay.candidates.ids.tolist(), 2))
    stats = ConeStats()
    with eval_mode(model):
        logits = batched_logits(model, sets, traj.removed_mask, traj.end,
                                dense_replay(model, traj, sets, stats), None)
    deps = traj.deps
    assert deps is not None
    plan = DensePlan(model, traj, deps, sets)
    assert stats.calls == 1 and stats.sets == sets.num_sets == len(logits)
    assert stats.row_updates == sets.num_sets * plan.row_updates > 0
    assert stats.replay_s > 0 and stats.peak_bytes > 0


def test_the_option_and_its_default():
    assert TGNReplayOptions().cone is Cone.AUTO
    opts = TGNReplayOptions(cone="dense")
    assert opts.cone is Cone.DENSE and opts.dense_on(torch.device("cpu"))
    auto = TGNReplayOptions()
    assert not auto.dense_on(torch.device("cpu")) and auto.dense_on(torch.device("cuda"))
    assert not TGNReplayOptions(cone="rows").dense_on(torch.device("cuda"))
    with pytest.raises(ValueError, match="cone must be one of auto, rows, dense, got 'gpu'"):
        TGNReplayOptions(cone="gpu")


def test_windows_of_the_plan_give_the_same_logits_bit_for_bit(monkeypatch):
    """``DensePlan`` builds its batches' arrays a window of ``WINDOW_EVENTS`` history events
    at a time (memory follows a window, not the history): windows of one batch, of a few
    and of the whole history give the same logits bit for bit and count the same rows."""
    import cftgnn.replay.tgn.dense as dense

    stream = make_synthetic_stream(400, 2000, seed=3, feat_dim=1, p_tie=0.3)
    model = tgn(stream, 2)
    replay = EventReplay(engine(model, stream, "dense"), 1991, m_max=24)  # 65 batches back
    traj = replay._plan.trajectory  # type: ignore[attr-defined]
    sets = small_sets(sorted(replay.candidates.ids.tolist())[:8], 2)
    removal = RemovalSets.from_sets(sets)
    deps = traj.dependencies_for(model, removal.events)
    out, counts, windows = [], [], []
    for size in (10**9, 40, 1):  # the toy's batches are 20 events
        monkeypatch.setattr(dense, "WINDOW_EVENTS", size)
        out.append(replay.exact(sets))
        plan = DensePlan(model, traj, deps, removal)
        windows.append(len(plan._bounds) - 1)
        counts.append(plan.row_updates)
        assert plan.batch(0) is plan.batch(0) and plan.batch(len(traj.batches) - 1) is not None
        assert plan.batch(0) is not None  # a window left behind is built again
    assert windows[0] == 1 < windows[1] < windows[2] == len(traj.batches)
    assert all(np.array_equal(out[0], o) for o in out[1:]) and len(set(counts)) == 1


def test_auto_on_the_cpu_runs_one_set_through_a_long_history_densely(monkeypatch):
    """``Cone.AUTO``'s CPU rule (``DENSE_MAX_SETS``, ``DENSE_MIN_BATCHES``, lowered here to
    the toy's far-back history): one set replayed through at least that many batches runs
    the dense replay, with its logit bit for bit, the row table's within 1e-6 and a fresh
    replay's within 1e-5; two sets, a shorter replay, a budget the dense rows do not fit
    and ``cone=rows`` keep the row table, bit for bit."""
    import cftgnn.replay.tgn as tgn_replay

    stream = make_synthetic_stream(400, 2000, seed=3, feat_dim=1, p_tie=0.3)
    model = tgn(stream, 2)
    ran: list[int] = []

    def spy(model: TGN, traj: object, sets: RemovalSets, *args: object) -> object:
        ran.append(sets.num_sets)
        return dense_replay(model, traj, sets, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(tgn_replay, "dense_replay", spy)
    event = 1991  # a rare source: its oldest candidate is 65 batches back

    def exact(cone: str, sets: list[frozenset[int]]) -> np.ndarray:
        return EventReplay(engine(model, stream, cone), event, m_max=24).exact(sets)

    replay = EventReplay(engine(model, stream, "auto"), event, m_max=24)
    oldest = int(replay.candidates.ids.min())
    one, two = [frozenset([oldest])], [frozenset([oldest]), frozenset([oldest + 1])]
    traj = replay._plan.trajectory  # type: ignore[attr-defined]
    _, last = traj.event_bounds()
    replayed = len(traj.batches) - int(np.searchsorted(last, oldest))
    assert replayed > 50  # a far-back removal
    rows_one, rows_two, dense_one = exact("rows", one), exact("rows", two), exact("dense", one)
    assert ran == [1]  # cone=dense alone
    ran.clear()
    monkeypatch.setattr(tgn_replay, "DENSE_MIN_BATCHES", replayed + 1)
    assert np.array_equal(exact("auto", one), rows_one) and not ran
    monkeypatch.setattr(tgn_replay, "DENSE_MIN_BATCHES", replayed)
    got = exact("auto", one)
    assert ran == [1] and np.array_equal(got, dense_one)
    np.testing.assert_allclose(got, rows_one, atol=ROWS)
    np.testing.assert_allclose(got, replay.exact_replay(one), atol=NAIVE)
    ran.clear()
    assert np.array_equal(exact("auto", two), rows_two) and not ran  # two sets share rows
    recent = [frozenset([int(replay.candidates.ids.max())])]  # fewer batches from it on
    assert np.array_equal(exact("auto", recent), exact("rows", recent)) and not ran
    assert np.array_equal(exact("rows", one), rows_one) and not ran
    sets = RemovalSets.from_sets(one)
    opts = TGNReplayOptions()
    assert opts.dense_alone(model, traj, sets, None)
    assert not opts.dense_alone(model, traj, sets, 1)  # does not fit
    assert not TGNReplayOptions(cone="rows").dense_alone(model, traj, sets, None)


@pytest.mark.dataset
def test_the_uci_tail_events_equal_the_row_tables_logits(real_data_dir, tmp_path):
    # the row table's logits of 300 sets of each tail event, stored bitwise
    # (tests/replay/data/cone_reference_uci.npz): the dense replay's of every fifth within 1e-6
    from testsupport import cone_reference

    from cftgnn.data import load_uci

    stored = np.load(cone_reference.UCI_REFERENCE)
    stream = load_uci(data_dir=real_data_dir, cache_dir=tmp_path, download=False)
    ckpt = Path(__file__).resolve().parents[2] / "checkpoints" / "tgn_uci.pt"
    eng = ReplayEngine.from_checkpoint(ckpt, stream)
    assert isinstance(eng.replay, TGNReplay)
    eng.replay.options.cone = Cone.DENSE
    for event in cone_reference.UCI_EVENTS:
        replay = EventReplay(eng, event)
        sets = cone_reference._tail_sets(replay, cone_reference.UCI_SETS)[::5]  # 60 of them
        np.testing.assert_allclose(replay.exact(sets), stored[f"event_{event}"][::5],
                                   atol=ROWS, rtol=0, err_msg=str(event))


def test_the_work_counts_of_the_three_forms(stream):
    from cftgnn.benchmarks.dense_work import replay_work

    model = tgn(stream, 1)
    replay = EventReplay(engine(model, stream, "rows"), 899, m_max=16)
    traj = replay._plan.trajectory  # type: ignore[attr-defined]
    sets = RemovalSets.from_sets(small_sets(replay.candidates.ids.tolist(), 2))
    work = replay_work(model, traj, sets)
    dense, rows = ConeStats(), ConeStats()
    with eval_mode(model):
        dense_replay(model, traj, sets, dense)
        cone_replay(model, traj, sets, prune=False, stats=rows)
    assert work["sets"] == sets.num_sets and work["batches"] == len(traj.batches)
    assert work["dense"] == dense.row_updates  # every set, every column a batch applies
    # the unshared cone and the row table (one row per key; a key whose pending message
    # the set removes is not updated, so the row table makes at most that many)
    assert 0 < rows.row_updates <= work["keyed"] < work["cone"] < work["dense"]


@pytest.mark.dataset
def test_the_work_script_counts_a_uci_event_and_refuses_a_bad_one(real_data_dir):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "CFTGNN_DATA_DIR": str(real_data_dir)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(root / "scripts" / "gpu" / "dense_work.py"),
                               "--dataset", "uci", *args], capture_output=True, text=True,
                              env=env, timeout=600)

    ok = run("--event", "56484", "--max-size", "1")
    assert ok.returncode == 0, ok.stderr
    assert "uci · TGN event 56484, sets of at most 1 of 64 candidates: 64 sets" in ok.stdout
    bad = run("--event", "56484", "--max-size", "4")  # refused before anything loads
    assert bad.returncode == 2 and "error:" in bad.stderr and "--max-size" in bad.stderr
    assert "Traceback" not in bad.stderr
