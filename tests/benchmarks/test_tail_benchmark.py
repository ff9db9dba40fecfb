"""The tail benchmark: exhaustive search per event, ranked by cost, pruning off vs on, and
the exact replay vs tolerance pruning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cftgnn.benchmarks.tail import benchmark_tail, bookkeeping_share, format_tail
from cftgnn.data import make_synthetic_stream
from cftgnn.models import TGN
from cftgnn.oracle.workers import fork_available


def test_tail_benchmark_ranks_events_and_compares_pruning_side_by_side():
    stream = make_synthetic_stream(20, 1200, seed=4, feat_dim=1, p_tie=0.3)
    torch.manual_seed(0)
    model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8, embedding_dim=16,
                num_layers=1, num_heads=2, num_neighbors=5, batch_size=20)
    res = benchmark_tail(model, stream, [700, 900, 1100, 1199], max_size=2, m_max=12,
                         compare_top=2, progress=False)
    s = res["summary"]
    ok = [r for r in res["events"] if r["status"] == "ok"]
    assert s["events"] == 4 and s["searched"] == len(ok) > 0
    seconds = [r["seconds"] for r in ok]
    assert seconds == sorted(seconds, reverse=True)  # costliest first
    assert s["max_s"] == seconds[0] and s["median_s"] <= s["p90_s"] <= s["max_s"]
    assert 0.0 <= s["settled_share"] <= 1.0
    assert all(r["cone_sets"] >= 1 for r in ok)
    for r in ok:  # the event's time split into memory updates and bookkeeping
        assert 0.0 < r["update_s"] < r["replay_s"] <= r["seconds"]
        assert r["bookkeeping_s"] == r["replay_s"] - r["update_s"]
        # the share is of CPU seconds, on both sides
        assert 0.0 < r["update_cpu_s"] < r["replay_cpu_s"] <= r["cpu_s"]
        assert r["bookkeeping_cpu_s"] == r["replay_cpu_s"] - r["update_cpu_s"]
        assert r["bookkeeping_share"] == r["bookkeeping_cpu_s"] / r["cpu_s"]
    assert 0.0 < s["bookkeeping_share"] <= s["max_bookkeeping_share"] < 1.0
    # numba's start is paid before the events, reported once
    assert s["jit_start_s"] >= 0.0 and s["jit_start_cpu_s"] >= 0.0
    assert len(res["pruning"]) == min(2, len(ok))
    for row in res["pruning"]:
        assert row["event_id"] in {r["event_id"] for r in ok[:2]}
        assert row["same_answer_and_certificate"]
        assert row["row_updates_on"] <= row["row_updates_off"]
        assert row["max_abs_logit_diff"] <= 1e-5
    text = format_tail(res)
    assert "p90" in text and str(ok[0]["event_id"]) in text
    assert f"{ok[0]['bookkeeping_share']:.1%}" in text
    assert "numba's start, once per process before the events" in text


def test_the_bookkeeping_share_is_of_cpu_seconds_and_the_same_measure_for_any_workers():
    # one process: 4.6 CPU s in the cone replay, 2.1 of them memory updates, 5.2 in all
    assert bookkeeping_share(4.6, 2.1, 5.2) == (4.6 - 2.1) / 5.2
    # the same work split over two workers (their seconds summed on both sides, the parent
    # idle while it waits): the same share, where the workers' sum over the wall seconds
    # (about half of 5.2) would have read twice as much
    workers = bookkeeping_share(2.3 + 2.3, 1.05 + 1.05, 0.6 + 2.3 + 2.3)
    assert workers == pytest.approx((4.6 - 2.1) / 5.2, rel=1e-12)
    assert bookkeeping_share(1.0, 0.5, 0.0) == 0.0  # an event that took no CPU time


def test_tolerance_pruning_is_compared_with_the_exact_replay_side_by_side():
    stream = make_synthetic_stream(20, 1200, seed=4, feat_dim=1, p_tie=0.3)
    torch.manual_seed(0)
    model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8, embedding_dim=16,
                num_layers=1, num_heads=2, num_neighbors=5, batch_size=20)
    events = [900, 1199]
    exact = benchmark_tail(model, stream, events, max_size=2, m_max=12, compare_top=0,
                           progress=False)
    res = benchmark_tail(model, stream, events, max_size=2, m_max=12, compare_top=1,
                         progress=False, prune_tolerance=1e-4)
    assert res["summary"]["prune_tolerance"] == 1e-4 and res["pruning"] == []
    # the per-event table is the exact replay's, whatever the tolerance; its rows are ranked
    # by each run's own seconds (costliest first), so two runs may list them in either order
    def answers(run):
        return sorted((r["event_id"], r["explanation"], r["final_logit"]) for r in run["events"])

    assert answers(res) == answers(exact) and len(answers(res)) == len(events)
    (row,) = res["tolerance"]
    # the costliest event by this run's seconds (which of the two it is depends on the load)
    assert row["event_id"] == max(res["events"], key=lambda r: r["seconds"])["event_id"]
    assert row["prune_tolerance"] == 1e-4
    assert row["same_answer"] and row["same_min_size_lower_bound"]
    assert row["row_updates_tolerance"] <= row["row_updates_exact"]
    assert row["max_abs_logit_diff"] <= 1e-4
    text = format_tail(res)
    assert "NOT EXACT" in text and "τ = 0.0001" in text
    with pytest.raises(ValueError, match="prune_tolerance"):
        benchmark_tail(model, stream, events, max_size=2, progress=False, prune_tolerance=-1.0)


@pytest.mark.skipif(not fork_available(), reason="num_workers > 1 needs fork")
def test_one_and_two_processes_are_compared_side_by_side():
    stream = make_synthetic_stream(20, 1200, seed=4, feat_dim=1, p_tie=0.3)
    torch.manual_seed(0)
    model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8, embedding_dim=16,
                num_layers=1, num_heads=2, num_neighbors=5, batch_size=20)
    # 32 candidates: 4,960 sets of three, two chunks, so the workers split them
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as num_workers > 1 needs
    try:
        res = benchmark_tail(model, stream, [1199], max_size=3, m_max=32, compare_top=1,
                             progress=False, num_workers=2)
    finally:
        torch.set_num_threads(threads)
    assert res["summary"]["num_workers"] == 2 and res["pruning"] == []
    (event,) = res["events"]
    assert event["candidates"] == 32 and event["cone_sets"] >= 4960  # the workers' share too
    # the event's CPU seconds count the workers' (they did the replay): the share is < 1
    assert 0.0 < event["update_cpu_s"] < event["replay_cpu_s"] <= event["cpu_s"]
    assert 0.0 < event["bookkeeping_share"] < 1.0
    (row,) = res["workers"]
    assert row["event_id"] == 1199 and row["num_workers"] == 2
    assert row["same_answer_and_certificate"] and row["same_logits_bitwise"]
    assert row["row_updates_one"] == row["row_updates_workers"] > 0
    assert "N processes" in format_tail(res)


def test_the_cone_pass_budget_is_the_engines_memory_budget_gb(tmp_path):
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(root / "scripts" / "benchmark_tail.py"),
                           "memory_budget_mib=1024"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: unknown option 'memory_budget_mib' (did you mean 'memory_budget_gb'?)"]
