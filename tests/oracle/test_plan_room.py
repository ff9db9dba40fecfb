"""The span cap: an event's plans bounded from above before any work, and a run whose events'
plans cannot fit the memory budget refused in one line before its first event."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import cftgnn.oracle.plan_room as plan_room
from cftgnn.arrays import mask_words
from cftgnn.data import make_synthetic_stream
from cftgnn.errors import ConfigError
from cftgnn.explain import GreedyExplainer
from cftgnn.explain.base import explain_event, explain_events
from cftgnn.models import TGN
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.oracle.snapshots import snapshot_nbytes
from cftgnn.replay.tgn import (
    PLAN_BYTES_PER_BATCH,
    PLAN_BYTES_PER_EVENT,
    PLAN_BYTES_PER_SLOT,
    PLAN_BYTES_PER_WORD,
    PLAN_SLOTS_PER_EVENT,
)

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(time_dim=8, embedding_dim=16, num_heads=2, num_neighbors=5, batch_size=20)


def make_tgn(stream) -> TGN:  # noqa: ANN001
    torch.manual_seed(0)
    return TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, num_layers=1, **SMALL)


def _objects_nbytes(rec) -> int:  # noqa: ANN001
    """Bytes of a batch record's Python objects beyond its arrays' data (``sys.getsizeof``
    of the record, its dict, and each array's or tensor's object)."""
    total = sys.getsizeof(rec) + sys.getsizeof(vars(rec))
    for value in vars(rec).values():
        if isinstance(value, np.ndarray):
            total += sys.getsizeof(value) - (value.nbytes if value.base is None else 0)
        else:
            total += sys.getsizeof(value) + sum(sys.getsizeof(v) for v in vars(value).values()
                                                if hasattr(value, "__dict__"))
    return total


@pytest.mark.parametrize("budget", [None, 1e-4])
@pytest.mark.parametrize(("num_nodes", "num_events"), [(25, 600), (200, 3000), (2000, 12000)])
def test_the_plan_bound_holds_the_plans_measured_after_a_search(num_nodes, num_events, budget):
    # the exact and the approximate plan, measured after exact and approximate calls (the
    # receivers' cache fills during a search), on dense and sparse streams, near and far
    s = make_synthetic_stream(num_nodes, num_events, seed=5, feat_dim=2)
    engine = ReplayEngine(make_tgn(s), s, memory_budget_gb=budget)
    for event_id in (num_events // 3, num_events - 1, num_events // 2 + 7):
        replay = EventReplay(engine, event_id, m_max=30)
        sets = [frozenset([int(c)]) for c in replay.candidates.ids[:8]]
        replay.exact(sets)
        replay.approximate(sets)
        cand = len(replay.candidates.ids)
        kept = replay.eps_min - replay.start + cand
        bound = engine.replay.plan_nbytes(replay.base, replay.start, event_id, removable=cand)
        approx = engine.replay.plan_nbytes(replay.base, replay.start, event_id, kept=kept,
                                           removable=cand)
        assert bound >= snapshot_nbytes(replay._plan) > 0
        assert approx >= snapshot_nbytes(replay._approx_plan) > 0
        assert plan_room.event_plans_nbytes(engine.replay, replay.base, replay.start,
                                            event_id, kept, cand) == bound + approx
        for rec in replay._plan.trajectory.batches:  # objects: within the per-batch bytes
            assert _objects_nbytes(rec) < PLAN_BYTES_PER_BATCH


def _nb(a) -> int:  # noqa: ANN001
    return int(a.untyped_storage().nbytes() if isinstance(a, torch.Tensor) else a.nbytes)


@pytest.mark.parametrize("budget", [None, 1e-3])
def test_each_part_of_a_long_sparse_plan_is_within_its_constant(budget):
    # a sparse stream (about four node slots per history event, as on tgbl-coin's size),
    # the event whose candidates reach furthest back, the receivers' cache filled for every
    # batch (its worst case): each part of the exact plan within the constant that bounds it,
    # so that the bound fails here if a part outgrows it
    s = make_synthetic_stream(4000, 12000, seed=3, feat_dim=2)
    engine = ReplayEngine(make_tgn(s), s, memory_budget_gb=budget)
    event_id = min(range(11800, 12000), key=lambda i: (
        engine.index.candidates(i, 2, 30).oldest or i))
    replay = EventReplay(engine, event_id, m_max=30)
    sets = [frozenset([int(c)]) for c in replay.candidates.ids[:6]]
    replay.exact([*sets, frozenset(replay.candidates.ids[:3].tolist())])
    traj = replay._plan.trajectory
    deps = traj.deps
    for x, rec in enumerate(traj.batches):
        deps.receivers(rec, x, s.src, s.dst)
    span, batch = event_id - replay.start, engine.model.batch_size
    assert span > 0.9 * event_id  # far back
    slots = sum(len(rec.nodes) for rec in traj.batches)
    assert 3.0 * span < slots <= PLAN_SLOTS_PER_EVENT * span + 2 * batch
    for rec in traj.batches:
        assert rec.nodes.dtype == rec.inc_k.dtype == rec.inc_off.dtype == np.int32
        assert rec.mem_pre.ptr.dtype == rec.mem_post.ptr.dtype == torch.int32
    per_slot = sum(_nb(rec.nodes) + _nb(rec.lu_post) + _nb(rec.inc_off) - rec.inc_off.itemsize
                   + _nb(rec.mem_pre.ptr) + _nb(rec.mem_post.ptr) for rec in traj.batches)
    assert per_slot <= PLAN_BYTES_PER_SLOT * slots
    per_event = (sum(_nb(rec.events) + _nb(rec.inc_k) for rec in traj.batches)
                 + sum(_nb(n) for n in deps.nodes)
                 + sum(_nb(r[1]) + _nb(r[2]) for r in deps._receivers.values()))
    assert per_event <= PLAN_BYTES_PER_EVENT * span
    words = mask_words(len(replay.candidates.ids))
    assert sum(_nb(m) for m in deps.masks) <= PLAN_BYTES_PER_WORD * words * span
    bound = engine.replay.plan_nbytes(replay.base, replay.start, event_id,
                                      removable=len(replay.candidates.ids))
    assert bound >= snapshot_nbytes(replay._plan)


def test_the_room_is_the_budget_less_the_cursor_at_least_the_floor():
    assert plan_room.plans_room(None, 10) is None
    floor = int(plan_room.MIN_PLANS_BUDGET_GB * 2**30)
    assert plan_room.plans_room(2**20, 10) == floor
    assert plan_room.plans_room(4 * 2**30, 2**30) == 3 * 2**30


@pytest.fixture
def no_floor(monkeypatch):  # noqa: ANN201
    """The plans' floor lifted (as only a test may), so that a small stream can fail."""
    monkeypatch.setattr(plan_room, "MIN_PLANS_BUDGET_GB", 0.0)


class _Counting(GreedyExplainer):
    calls = 0

    def explain(self, oracle):  # noqa: ANN001, ANN201
        type(self).calls += 1
        return super().explain(oracle)


def test_a_run_whose_plans_cannot_fit_is_refused_before_its_first_event(no_floor):
    s = make_synthetic_stream(200, 3000, seed=5, feat_dim=2)
    engine = ReplayEngine(make_tgn(s), s, memory_budget_gb=1.5e-3)  # 1.6 MB
    events = [1000, 2500, 2999]  # the first two fit; the last one's history does not
    with pytest.raises(ConfigError) as err:
        list(explain_events(engine, _Counting(), events, m_max=30))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("event 2999's replay plans need up to ")
    assert "memory_budget_gb=0.0015 leaves them" in message
    assert "set memory_budget_gb to at least" in message and "m_max" in message
    assert "to the event)" in message  # the span the bound covers; no earlier history end
    assert _Counting.calls == 0  # nothing searched, nothing replayed
    assert engine.counters.setup_events == 0 and engine.counters.evaluations == 0
    # the bytes it names are the bound's; the budget it asks for fits them
    need = float(message.split("need up to ")[1].split(" GiB")[0])
    ask = float(message.split("at least ")[1].split(",")[0])
    assert ask * 2**30 >= need * 2**30 + engine.snapshots.cursor_nbytes
    # the event alone, through the oracle, is refused too, before its base state is made
    with pytest.raises(ConfigError, match="event 2999's replay plans"):
        engine.oracle(2999, m_max=30)
    assert engine.counters.setup_events == 0


def test_a_refusal_names_a_history_that_ends_before_the_event(no_floor):
    """Under ``history=batch_start`` the history ends at the event's batch; the bound covers
    the span to the event, and the message says both."""
    s = make_synthetic_stream(200, 3000, seed=5, feat_dim=2)
    engine = ReplayEngine(make_tgn(s), s, memory_budget_gb=1.5e-3)
    start = engine.boundary(0)
    with pytest.raises(ConfigError) as err:
        plan_room.check_plans_fit(engine, engine._cursor, 2999, start, 0, 30,
                                  end=2990)
    message = str(err.value)
    assert f"a history of {2999 - start:,} events, from {start:,}," in message
    assert "to the event; its history ends at 2,990)" in message


def test_a_run_whose_plans_fit_is_explained_as_without_a_budget(no_floor):
    s = make_synthetic_stream(200, 3000, seed=5, feat_dim=2)
    events = [1000, 2999]
    out = {}
    for budget in (None, 0.05):
        engine = ReplayEngine(make_tgn(s), s, memory_budget_gb=budget)
        engine.expect(events, m_max=30)  # no refusal
        out[budget] = [dataclasses.replace(explain_event(engine, GreedyExplainer(), i, m_max=30),
                                           wall_time_s=0.0, oracle_time_s=0.0, setup_time_s=0.0)
                       for i in events]
    assert out[None] == out[0.05]


def test_explain_py_refuses_in_one_line_with_exit_status_2(tmp_path):
    code = ("import runpy, sys; import cftgnn.oracle.plan_room as p; p.MIN_PLANS_BUDGET_GB = 0.0;"
            " sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "scripts" / "explain.py"), "debug=default",
         "checkpoint=null", "progress=false", "explainer=greedy", "memory_budget_gb=1e-6",
         f"out_dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: event "), done.stderr
    assert "replay plans need up to" in lines[0] and "memory_budget_gb" in lines[0]
    records = tmp_path / "records"
    assert not records.exists() or not any(records.iterdir())
