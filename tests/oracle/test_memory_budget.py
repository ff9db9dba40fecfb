"""The replay engine's memory budget: snapshots of a size independent of the stream's length,
kept within the budget, and the same explanations whatever the budget and the order."""

from __future__ import annotations

import dataclasses
import gc
import platform
import sys
import weakref
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.errors import ConfigError
from cftgnn.explain import GreedyExplainer
from cftgnn.explain.base import explain_event
from cftgnn.models import TGAT, TGN, TemporalModel
from cftgnn.models.base import eval_mode
from cftgnn.oracle.engine import EventReplay, ReplayEngine, naive_logit
from cftgnn.oracle.snapshots import (
    SnapshotStore,
    budget_bytes,
    snapshot_nbytes,
)

ATOL = 1e-5
SMALL = dict(time_dim=8, embedding_dim=16, num_heads=2, num_neighbors=5, batch_size=20)


def make_model(name: str, stream: EventStream) -> TemporalModel:
    torch.manual_seed(0)
    if name == "tgat":
        return TGAT(stream.num_nodes, stream.feat_dim, node_dim=8, num_layers=2, **SMALL)
    return TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, num_layers=1, **SMALL)


@pytest.fixture(scope="module")
def stream() -> EventStream:
    return make_synthetic_stream(25, 600, seed=3, feat_dim=2, p_tie=0.2)


def one_snapshot_gb(model: TemporalModel) -> float:
    return snapshot_nbytes(model.snapshot()) / 2**30


@pytest.mark.parametrize("name", ["tgn", "tgat"])
def test_snapshot_size_does_not_grow_with_the_stream(name):
    sizes = []
    for num_events in (400, 4000):
        s = make_synthetic_stream(30, num_events, seed=1, feat_dim=2)
        model = make_model(name, s)
        model.attach(s)
        with eval_mode(model):
            model.advance(0, 200)
        sizes.append(snapshot_nbytes(model.snapshot()))
    assert sizes[0] == sizes[1]
    assert sizes[1] < 4000  # the bool [E] mask of the longer stream alone would be 4000 bytes


def test_compact_snapshot_restores_a_writable_state(stream):
    model = make_model("tgn", stream)
    model.attach(stream)
    with eval_mode(model):
        model.advance(0, 100)
        snap = model.snapshot()
        model.restore(snap)
        mask = np.zeros(stream.num_events, dtype=bool)
        mask[[101, 150]] = True
        model.advance(100, 200, mask)  # writes the live mask, never the snapshot's
        assert model.state.removed[[101, 150]].all()
        assert not snap.removed.any()
        removed_snap = model.snapshot()  # something removed: the mask is kept in full
        assert removed_snap.removed[[101, 150]].all() and removed_snap.removed.is_contiguous()


@pytest.mark.parametrize("name", ["tgn", "tgat"])
def test_same_explanations_with_a_tiny_and_an_unbounded_budget(stream, name):
    model = make_model(name, stream)
    size = one_snapshot_gb(_attached(model, stream))
    order = [590, 120, 455, 300, 599, 40, 301, 480]  # back and forth in the stream
    results, replayed = {}, {}
    for budget in (None, 0.0, 2.5 * size):
        engine = ReplayEngine(model, stream, checkpoint_every=1, memory_budget_gb=budget)
        out = []
        for i in order:
            r = explain_event(engine, GreedyExplainer(), i, m_max=12, mode="exact")
            out.append(dataclasses.replace(r, wall_time_s=0.0, oracle_time_s=0.0,
                                           setup_time_s=0.0))
            if budget == 0.0:  # only the cursor
                assert len(engine.snapshots) == 0
            elif budget is not None:  # the cursor plus what is kept stays within the budget
                assert engine.snapshots.nbytes + size * 2**30 <= budget * 2**30
        results[budget] = out
        replayed[budget] = engine.counters.setup_events
    assert replayed[0.0] > replayed[None]  # going back replayed from the start instead
    assert results[0.0] == results[None]
    assert results[2.5 * size] == results[None]
    for r in results[0.0][:3]:  # and they are right: the original logit is a fresh replay's
        assert r.original_logit == pytest.approx(naive_logit(model, stream, r.event_id),
                                                 abs=ATOL)


def _attached(model: TemporalModel, stream: EventStream) -> TemporalModel:
    model.attach(stream)
    return model


def test_budget_is_respected_going_back_and_forth(stream):
    model = _attached(make_model("tgn", stream), stream)
    size = snapshot_nbytes(model.snapshot())
    budget_gb = 4.5 * size / 2**30  # room for the cursor and 3 snapshots of the 30 batches
    engine = ReplayEngine(model, stream, checkpoint_every=1, memory_budget_gb=budget_gb)
    assert engine.snapshots.spacing > model.batch_size  # the spacing adapted to the budget
    rng = np.random.default_rng(0)
    unbounded = ReplayEngine(make_model("tgn", stream), stream, checkpoint_every=1,
                             memory_budget_gb=None)
    for b in rng.integers(0, stream.num_events // 20 + 1, size=25) * 20:
        state = engine.base_state(int(b))
        assert engine.snapshots.nbytes + size <= budget_gb * 2**30
        assert state.position == b
        assert state.equals(unbounded.base_state(int(b)), atol=0.0)
    assert len(unbounded.snapshots) > len(engine.snapshots) > 0


def test_least_useful_snapshot_is_dropped_first():
    store = SnapshotStore(budget=4 * 100, snapshot_size=100, num_events=1000, batch_size=10,
                          min_batches=1)
    assert store.capacity == 3 and store.spacing == 340  # ⌈100 batches / 3⌉ batches apart
    blob = torch.zeros(100, dtype=torch.uint8)
    for p in (100, 200, 600, 900):  # offered out of the even spacing: one must go
        store.offer(p, blob.clone)
    assert store.positions() == [200, 600, 900]  # 100 merged the shortest gap (0..200)
    assert store.nbytes + 100 <= 400


_DROPPED_BLOCKS = """
import torch
from cftgnn.oracle.snapshots import RELEASE_BLOCK_BYTES, release_freed_memory

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))

assert release_freed_memory()
size = 3 * RELEASE_BLOCK_BYTES
for _ in range(3):
    block = torch.ones(size // 4)  # float32, every page touched
    held = rss()
    del block
    assert held - rss() >= 0.9 * size, (held, rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="the setting is glibc's (mallopt); other C libraries are left as "
                           "they are")
def test_a_dropped_snapshot_leaves_the_process():
    # glibc's default: once a block of this size was freed, the next ones come from the heap
    # and stay resident when freed (below 32 MiB); with the engine's setting each is
    # given back as it is freed, the second and third as the first. In a fresh process: in
    # a long one (the test suite's) the heap may already hold a free chunk that large, which
    # glibc serves such a block from whatever the threshold
    import subprocess

    out = subprocess.run([sys.executable, "-c", _DROPPED_BLOCKS], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def test_budget_must_be_a_number():
    assert budget_bytes(None) is None and budget_bytes(1) == 2**30
    for bad in (-1, True, "1", float("inf"), float("nan")):
        with pytest.raises(ConfigError):
            budget_bytes(bad)  # type: ignore[arg-type]


def test_pipeline_records_do_not_depend_on_the_budget(tmp_path):
    from hydra import compose, initialize_config_dir

    import cftgnn.config  # noqa: F401  (registers the resolvers)
    from cftgnn.runs import pipeline
    from cftgnn.runs.records import read_records

    conf = Path(__file__).resolve().parents[2] / "conf"
    tiny = ["debug=default", "checkpoint=null", "explainer=greedy", "progress=false",
            "sample.prediction=any", "n_events=5", "mode=exact"]
    runs = {}
    for budget in ("null", "0"):
        out = tmp_path / budget
        with initialize_config_dir(str(conf), version_base="1.3"):
            cfg = compose("explain", overrides=[*tiny, f"out_dir={out}",
                                                f"memory_budget_gb={budget}"])
        pipeline.run(cfg)
        records = read_records(out)
        runs[budget] = records[[c for c in records.columns if "time" not in c]]
    assert len(runs["0"]) == 5
    pd.testing.assert_frame_equal(runs["0"], runs["null"])


def test_pipeline_refuses_a_negative_budget(tmp_path):
    from hydra import compose, initialize_config_dir

    import cftgnn.config  # noqa: F401
    from cftgnn.runs import pipeline

    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(str(conf), version_base="1.3"):
        cfg = compose("explain", overrides=["debug=default", "checkpoint=null",
                                            f"out_dir={tmp_path}", "memory_budget_gb=-1"])
    with pytest.raises(ConfigError, match="memory_budget_gb"):
        pipeline.run(cfg)
    assert not any(tmp_path.iterdir())


def _copied_rows(model: TGN, base, end: int) -> tuple[list[tuple], torch.Tensor]:  # noqa: ANN001
    """The recording the cone replay's recorder must equal, as plain copies: per history
    batch, its nodes (pending before it or with an event in it), their memory before and
    after it and their last-update times; and the final node input."""
    src, dst = model.stream.src, model.stream.dst
    model.restore(base)
    st = model.state
    out = []
    for events in model.history_steps(base.position, end, None, model.is_idle(st)):
        pending = (st.pending >= 0).nonzero(as_tuple=True)[0].numpy()
        nodes = np.unique(np.concatenate([pending, src[events], dst[events]]))
        nt = torch.as_tensor(nodes)
        pre = st.memory[nt].clone()
        model.apply_batch(st, torch.as_tensor(events))
        out.append((nodes, pre, st.memory[nt].clone(), st.last_update[nt].numpy()))
    st.position = end
    return out, model.node_input(model.snapshot())


def test_the_recording_holds_the_rows_of_a_plain_replay_in_less_memory(stream):
    from cftgnn.replay.tgn.record import record_trajectory

    model = _attached(make_model("tgn", stream), stream)
    with eval_mode(model):
        model.advance(0, 100)
        base = model.snapshot()
        copies, final_input = _copied_rows(model, base, 587)
        shared = record_trajectory(model, base, 587)
    assert len(copies) == len(shared.batches) > 10
    for (nodes, pre, post, lu), b in zip(copies, shared.batches, strict=True):
        rows = torch.arange(len(nodes))
        assert np.array_equal(nodes, b.nodes) and np.array_equal(lu, b.lu_post)
        assert torch.equal(pre, b.mem_pre[rows]) and torch.equal(post, b.mem_post[rows])
        assert torch.equal(post[rows, 0], b.mem_post[rows, 0])
    assert torch.equal(final_input, shared.final_input)
    copied = snapshot_nbytes([(pre, post) for _, pre, post, _ in copies])
    assert snapshot_nbytes([(r.mem_pre, r.mem_post) for r in shared.batches]) < 0.75 * copied


def test_plans_take_their_room_from_the_snapshots():
    store = SnapshotStore(budget=6 * 100, snapshot_size=100, num_events=1000, batch_size=10,
                          min_batches=1)
    blob = torch.zeros(100, dtype=torch.uint8)
    for p in range(store.spacing, 1001, store.spacing):
        store.offer(p, blob.clone)
    assert len(store) == 5
    store.make_room(250)  # the plans need 2.5 snapshots: 3 go
    assert len(store) == 2 and store.nbytes + 100 + 250 <= 600
    store.offer(300, blob.clone)  # one more is kept only in place of another
    assert len(store) == 2 and store.nbytes + 100 + 250 <= 600


def test_screening_streams_the_same_logits(stream):
    from cftgnn.runs.sampling import screen_logits
    from cftgnn.training.loop import score_range

    model = make_model("tgn", stream)
    full = screen_logits(model, stream, 130, 470)
    model.attach(stream)
    with eval_mode(model):
        model.advance(0, 120)
        ref, _, _ = score_range(model, 120, 470, seed=0, negatives=False)
    assert np.array_equal(full, ref[10:])
    keep = np.array([130, 131, 200, 469])
    assert np.array_equal(screen_logits(model, stream, 130, 470, keep=keep), full[keep - 130])


def test_room_for_plans_is_made_before_they_are_recorded():
    store = SnapshotStore(budget=10 * 100, snapshot_size=100, num_events=2000, batch_size=10,
                          min_batches=1)
    blob = torch.zeros(100, dtype=torch.uint8)
    store.expect_plans(1000)  # nothing known yet: nothing dropped
    for p in range(store.spacing, 2001, store.spacing):
        store.offer(p, blob.clone)
    assert len(store) == 8  # one every 23 batches
    # plans hold about four snapshots whatever their history (two plans, each with the
    # state at the explained event and its input), then bytes per history event
    store.plans_built(10, 4 * 100 + 5)  # 0.5 bytes per history event beyond the 400
    assert len(store) == 4 and store.nbytes + 100 + 405 <= 1000
    store.expect_plans(400)  # 400 + 200 bytes expected: room is made before recording
    assert len(store) == 3 and store.nbytes + 100 + 600 <= 1000


def test_recording_keeps_only_the_rows_the_cone_replay_reads():
    from cftgnn.replay.batched import batched_logits
    from cftgnn.replay.masks import RemovalSets
    from cftgnn.replay.tgn.cone import cone_replay
    from cftgnn.replay.tgn.record import PrunedTrajectory, record_trajectory

    sparse = make_synthetic_stream(300, 2000, seed=3, feat_dim=2, p_tie=0.2)
    model = _attached(make_model("tgn", sparse), sparse)
    end = 1990
    rng = np.random.default_rng(0)
    removable = np.sort(rng.choice(np.arange(100, end - 20), 12, replace=False))
    with eval_mode(model):
        model.advance(0, 100)
        base = model.snapshot()
        full = record_trajectory(model, base, end)  # every row
        kept = record_trajectory(model, base, end, removable=removable)
    assert isinstance(kept, PrunedTrajectory) and not isinstance(full, PrunedTrajectory)
    table = kept.batches[0].mem_pre.table
    assert len(table) < 0.6 * len(full.batches[0].mem_pre.table)
    # every row it kept is the recorded one; a row it did not keep cannot be read
    skipped = 0
    for a, b in zip(full.batches, kept.batches, strict=True):
        assert np.array_equal(a.nodes, b.nodes) and np.array_equal(a.lu_post, b.lu_post)
        for rows_a, rows_b in ((a.mem_pre, b.mem_pre), (a.mem_post, b.mem_post)):
            held = torch.nonzero(rows_b.ptr < len(table)).flatten()
            assert torch.equal(rows_a[held], rows_b[held])
            if len(held) < len(rows_b):
                skipped += 1
                with pytest.raises((IndexError, RuntimeError)):
                    rows_b[torch.arange(len(rows_b))]
    assert skipped > 0
    # so the cone replay reads the same values: bitwise the same logits, for sets of the
    # removable events and, recording again for the wider universe, for one outside them
    outside = int(np.setdiff1d(np.arange(100, end), removable)[-3])
    chosen = [frozenset(rng.choice(removable, size, replace=False).tolist())
              for size in (1, 1, 2, 3, 5, 12)] + [frozenset({outside, int(removable[0])})]
    sets = RemovalSets.from_sets(chosen)
    with eval_mode(model):
        logits = [batched_logits(model, sets, traj.removed_mask, end,
                                 cone_replay(model, traj, sets)) for traj in (full, kept)]
    assert torch.equal(logits[0], logits[1])
    assert kept.deps is not None and outside in kept.deps.universe
    for p, removed in enumerate(chosen):
        assert float(logits[1][p]) == pytest.approx(
            naive_logit(model, sparse, end, sorted(removed)), abs=ATOL)


def test_one_budget_bounds_the_snapshots_and_each_cone_pass(stream):
    model = make_model("tgn", stream)
    # a pass gets the budget, never less than MIN_PASS_BUDGET_GB (1 GiB): a smaller pass
    # could round a logit differently, and the budget never changes a record
    for budget, pass_gb in ((0.25, 1.0), (3.0, 3.0), (None, None)):
        engine = ReplayEngine(model, stream, memory_budget_gb=budget)
        assert engine.replay.options.memory_budget_gb == pass_gb  # type: ignore[attr-defined]
        assert engine.snapshots.budget == budget_bytes(budget)


@pytest.mark.parametrize("spill", [True, False])
def test_recording_within_a_byte_limit_reads_dropped_rows_again(monkeypatch, spill):
    # the segments not held are read back from the plan's temporary file, or, where none
    # can be made, computed again from the base state: the same rows either way
    from cftgnn.replay.batched import batched_logits
    from cftgnn.replay.masks import RemovalSets
    from cftgnn.replay.tgn import record
    from cftgnn.replay.tgn.cone import cone_replay
    from cftgnn.replay.tgn.record import SegmentRows, record_trajectory

    monkeypatch.setattr(record, "_MIN_SEGMENT_BYTES", 2048)  # segments of a toy size
    if spill:
        def no_replay(self, j):  # type: ignore[no-untyped-def]
            raise AssertionError("a spilled segment was computed again")

        monkeypatch.setattr(record._Replayed, "__call__", no_replay)
    else:
        monkeypatch.setattr(record, "_spill_file", lambda *args: None)

    sparse = make_synthetic_stream(300, 2000, seed=3, feat_dim=2, p_tie=0.2)
    model = _attached(make_model("tgn", sparse), sparse)
    end = 1990
    rng = np.random.default_rng(1)
    removable = np.sort(rng.choice(np.arange(100, end - 20), 12, replace=False))
    sets = RemovalSets.from_sets([frozenset(rng.choice(removable, size, replace=False).tolist())
                                  for size in (1, 1, 2, 3, 5, 12)])
    logits = {}
    with eval_mode(model):
        model.advance(0, 100)
        base = model.snapshot()
        for limit in (None, 20_000, 0):
            traj = record_trajectory(model, base, end, removable=removable,
                                            max_bytes=limit)
            segments = {id(r.mem_post.segment): r.mem_post.segment for r in traj.batches
                        if isinstance(r.mem_post, SegmentRows)}.values()
            held = sum(s.held.nbytes for s in segments if s.held is not None)
            if limit is None:
                assert not segments  # one table, held
            else:
                assert len(segments) > 2 and held <= limit
                assert any(s.held is None for s in segments)
            for _ in range(2):  # twice: the second call computes the dropped rows again
                logits.setdefault(limit, []).append(batched_logits(
                    model, sets, traj.removed_mask, end, cone_replay(model, traj, sets)))
    for limit in (20_000, 0):
        for got in logits[limit]:
            assert torch.equal(got, logits[None][0])  # the same values, bit for bit
    # no reference cycle: a plan's rows go when its trajectory goes, without the collector
    gc.collect()
    gc.disable()
    try:
        with eval_mode(model):
            traj = record_trajectory(model, base, end, removable=removable, max_bytes=0)
            cone_replay(model, traj, sets)
        segment = weakref.ref(traj.batches[-1].mem_post.segment)
        del traj
        assert segment() is None
    finally:
        gc.enable()


def test_a_recording_of_one_segment_that_does_not_fit_is_not_also_held(monkeypatch):
    # a toy recording is one segment (8 MiB at least); under a smaller byte limit it is
    # written to the plan's file, and the records read it from there: none of them keeps the
    # rows in memory too, and the logits are those of the recording held whole
    from cftgnn.replay.batched import batched_logits
    from cftgnn.replay.masks import RemovalSets
    from cftgnn.replay.tgn import record
    from cftgnn.replay.tgn.cone import cone_replay
    from cftgnn.replay.tgn.record import SegmentRows, record_trajectory

    def no_replay(self, j):  # type: ignore[no-untyped-def]
        raise AssertionError("a spilled segment was computed again")

    monkeypatch.setattr(record._Replayed, "__call__", no_replay)
    sparse = make_synthetic_stream(300, 2000, seed=3, feat_dim=2, p_tie=0.2)
    model = _attached(make_model("tgn", sparse), sparse)
    end = 1990
    rng = np.random.default_rng(2)
    removable = np.sort(rng.choice(np.arange(100, end - 20), 12, replace=False))
    sets = RemovalSets.from_sets([frozenset(rng.choice(removable, size, replace=False).tolist())
                                  for size in (1, 2, 3, 12)])
    logits = {}
    with eval_mode(model):
        model.advance(0, 100)
        base = model.snapshot()
        for limit in (None, 1024):
            traj = record_trajectory(model, base, end, removable=removable, max_bytes=limit)
            tables = {}
            for r in traj.batches:
                for rows in (r.mem_pre, r.mem_post):
                    if isinstance(rows, SegmentRows):
                        if rows.segment.held is not None:
                            tables[id(rows.segment.held)] = rows.segment.held
                    else:
                        tables[id(rows.table)] = rows.table
            held = sum(t.nbytes for t in tables.values())
            if limit is None:
                assert len(tables) == 1 and held > 1024  # one table, held: 1 KiB is too small
            else:
                assert held == 0  # the one segment is in the file only
                segments = {id(r.mem_post.segment) for r in traj.batches}
                assert len(segments) == 1
            logits[limit] = batched_logits(model, sets, traj.removed_mask, end,
                                           cone_replay(model, traj, sets))
    assert torch.equal(logits[1024], logits[None])  # the same values, bit for bit


def test_announced_positions_are_dropped_last_the_one_needed_latest_first():
    store = SnapshotStore(budget=4 * 100, snapshot_size=100, num_events=1000, batch_size=10,
                          min_batches=1)
    blob = torch.zeros(100, dtype=torch.uint8)
    store.want([600, 130, 770])  # in the order they will be asked for
    assert store.wanted(130) and not store.wanted(140)
    assert store.next_wanted(0) == 130 and store.next_wanted(130) == 600
    assert store.next_wanted(770) is None
    for p in (130, 340, 600, 770):  # one must go: the unannounced one, whatever its gaps
        store.offer(p, blob.clone)
    assert store.positions() == [130, 600, 770]
    store.make_room(100)  # room for the plans: only announced ones left, 770 is needed last
    assert store.positions() == [130, 600]
    store.used(130)  # 600's turn came first and never came: it is forgotten
    assert not store.wanted(600) and not store.wanted(130) and store.wanted(770)
    assert store.next_wanted(0) == 770  # the used and the forgotten ones are skipped
    store.used(770)
    store.want([500, 500])
    store.used(500)
    assert store.wanted(500)  # announced twice: still wanted once
    store.used(500)
    assert not store.wanted(500)
    store.used(123)  # unannounced: nothing to do
    assert store.nbytes + 100 + 100 <= 400


def test_announced_events_replay_less_and_answer_the_same(stream):
    # TGN: a model with memory, whose base states cost replay (TGAT's cost nothing)
    model = make_model("tgn", stream)
    size = one_snapshot_gb(_attached(model, stream))
    order = [300, 320, 330, 590, 599]  # in stream order, their bases back and forth
    out, replayed = {}, {}
    for announce in (False, True):
        engine = ReplayEngine(model, stream, memory_budget_gb=40 * size)
        if announce:
            engine.expect(order, m_max=40)
            assert engine.snapshots.next_wanted(-1) is not None
        rows = []
        for i in order:
            r = explain_event(engine, GreedyExplainer(), i, m_max=40, mode="exact")
            rows.append(dataclasses.replace(r, wall_time_s=0.0, oracle_time_s=0.0,
                                            setup_time_s=0.0))
            assert engine.snapshots.nbytes + size * 2**30 <= 40 * size * 2**30
        out[announce], replayed[announce] = rows, engine.counters.setup_events
        assert engine.snapshots.next_wanted(-1) is None  # every announced use was made
    assert out[True] == out[False]
    assert replayed[True] < replayed[False]


@pytest.mark.parametrize("budget", [None, 1e-4])
def test_tgn_plan_estimate_bounds_the_recorded_plan(budget):
    # dense and sparse streams, events whose candidates lie near and far back: the room the
    # engine makes before recording (plan_nbytes) holds the plan recorded after it
    for num_nodes, num_events in ((25, 600), (200, 3000)):
        s = make_synthetic_stream(num_nodes, num_events, seed=5, feat_dim=2)
        model = make_model("tgn", s)
        engine = ReplayEngine(model, s, memory_budget_gb=budget)
        for event_id in (num_events // 3, num_events - 1, num_events // 2 + 7):
            replay = EventReplay(engine, event_id, m_max=30)
            plan = replay._plan
            estimate = engine.replay.plan_nbytes(replay.base, replay.start, event_id)
            assert estimate >= snapshot_nbytes(plan) > 0


def test_the_sampling_pass_hands_its_snapshots_to_the_engine(stream):
    from cftgnn.runs.sampling import plan_events, screen_logits

    plain = screen_logits(make_model("tgn", stream), stream, 450, 600)
    model = make_model("tgn", stream)
    engine = ReplayEngine(model, stream, checkpoint_every=2, memory_budget_gb=None)
    handed = screen_logits(model, stream, 450, 600, engine=engine)
    np.testing.assert_array_equal(handed, plain)  # the same pass, the same logits
    kept = engine.snapshots.positions()
    assert kept and all(p % engine.snapshots.spacing == 0 and p <= 440 for p in kept)
    fresh = ReplayEngine(make_model("tgn", stream), stream, checkpoint_every=2,
                         memory_budget_gb=None)
    for p in kept:  # each is the unperturbed state there, bit for bit
        assert engine.snapshots.get(p).equals(fresh.base_state(p), atol=0.0)
    # explained after the pass, the events start from those snapshots: less replay, the same
    # answers as an engine that never saw the pass
    results, replayed = {}, {}
    for name, eng in (("handed", engine), ("fresh", ReplayEngine(
            make_model("tgn", stream), stream, checkpoint_every=2, memory_budget_gb=None))):
        events = plan_events(eng.model, stream, 4, (0.75, 1.0), seed=1,
                             engine=eng if name == "handed" else None)["event_id"].tolist()
        eng.counters.setup_events = 0
        results[name] = [dataclasses.replace(
            explain_event(eng, GreedyExplainer(), i, m_max=12, mode="exact"),
            wall_time_s=0.0, oracle_time_s=0.0, setup_time_s=0.0) for i in events]
        replayed[name] = eng.counters.setup_events
    assert results["handed"] == results["fresh"]
    assert replayed["handed"] < replayed["fresh"]


def test_room_is_made_for_the_approximate_plan_before_it_is_recorded():
    # a budget that the snapshots fill on the way to the event: the approximate plan, made
    # on the first approximate call, is estimated and room made for it before it is
    # recorded (as for the exact plan and the pair plans), so that snapshots, cursor and
    # the event's plans never meet past the budget while it is being recorded
    s = make_synthetic_stream(200, 3000, seed=5, feat_dim=2)
    model = make_model("tgn", s)
    size = snapshot_nbytes(_attached(model, s).snapshot())
    engine = ReplayEngine(model, s, checkpoint_every=1, memory_budget_gb=60 * size / 2**30)
    store, budget = engine.snapshots, engine.snapshots.budget
    assert budget is not None
    engine.base_state(engine.boundary(2900))  # the walk forward fills the budget
    replay = EventReplay(engine, 2990, m_max=30)
    exact = snapshot_nbytes(replay._plan)
    estimate = engine.replay.plan_nbytes(replay.base, replay.start, 2990)
    assert len(store) and store.nbytes + size + exact + estimate > budget  # room to make
    record = engine.replay.plan
    seen = []

    def plan(*args, **kwargs):
        seen.append((store.nbytes, store.plans_nbytes))
        return record(*args, **kwargs)

    engine.replay.plan = plan  # type: ignore[method-assign]
    replay.approximate([frozenset()])
    assert len(seen) == 1  # the approximate plan was recorded, once
    snaps, plans = seen[0]
    assert plans >= exact + estimate  # accounted before recording
    assert snaps + store.cursor_nbytes + plans <= budget
    assert snapshot_nbytes(replay._approx_plan) <= estimate
