"""The row table's step clocks (``ConeStats.steps``, ``RowStepTimes``): asked for, every step
of the cone replay's row table adds its CPU seconds; not asked for, none is read; either way
the same logits, bit for bit."""

from __future__ import annotations

import itertools

import numpy as np
import torch
from testsupport.planted import huge_cone_stream

from cftgnn.models import TGN
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.replay.tgn import TGNReplay, TGNReplayOptions, row_times
from cftgnn.replay.tgn.cone import ConeStats
from cftgnn.replay.tgn.row_times import RowStepTimes
from cftgnn.replay.tgn.rows import RowTable


def test_step_times_add_each_steps_seconds_and_change_no_logit():
    stream = huge_cone_stream(12, 300, name="far_back")
    torch.manual_seed(0)
    model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8,
                embedding_dim=16, num_layers=1, num_heads=2, num_neighbors=5, batch_size=20)
    engine = ReplayEngine(model, stream)
    assert isinstance(engine.replay, TGNReplay)
    options = engine.replay.options = TGNReplayOptions(local_max_events=0)
    replay = EventReplay(engine, 299, m_max=8)
    cand = replay.candidates.ids.tolist()
    sets = [frozenset(c) for k in (1, 2) for c in itertools.combinations(cand, k)]
    plain, timed = ConeStats(), ConeStats(steps=RowStepTimes())
    logits = {}
    for name, stats in (("plain", plain), ("timed", timed)):
        options.stats = stats  # the plan reads its options at each call
        logits[name] = replay.exact(sets)
    np.testing.assert_array_equal(logits["plain"], logits["timed"])  # bitwise
    assert plain.steps is None and timed.steps is not None
    assert timed.row_updates == plain.row_updates > 0
    seconds = timed.steps.as_dict()
    assert list(seconds) == ["split", "new_pending", "split_mixed", "prune", "merge", "revive",
                             "drop", "compact", "other_memory"]
    assert seconds["split"] > 0.0 and seconds["prune"] > 0.0 and seconds["other_memory"] > 0.0
    assert seconds["prune"] >= seconds["merge"] + seconds["revive"]  # prune calls them
    before = dict(seconds)
    replay.exact(sets)  # summed over calls
    assert all(timed.steps.as_dict()[k] >= v for k, v in before.items())
    assert timed.steps.as_dict()["split"] > before["split"]


def test_a_table_without_step_times_reads_no_clock(monkeypatch):
    # the steps' clock (``process_time`` of ``row_times``) is never read when no one asked
    # for the steps' seconds
    calls = []
    monkeypatch.setattr(row_times, "process_time", lambda: calls.append(1) or 0.0)
    table = RowTable(2, np.full(3, -1, dtype=np.int64), 0, 4, torch.device("cpu"))
    assert table.step_times is None
    table.compact(force=True)
    assert calls == []
    table.step_times = RowStepTimes()
    table.compact(force=True)
    assert len(calls) == 2
