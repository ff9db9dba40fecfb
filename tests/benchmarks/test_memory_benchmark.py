"""``scripts/benchmark_memory.py`` refuses bad options in one line before any child starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("arg", "message"), [
    ("budgets=[abc]", "error: budgets: each entry is a memory_budget_gb: memory_budget_gb must "
                      "be a number >= 0 or null, got 'abc'"),
    ("budgets=[-1]", "error: budgets: each entry is a memory_budget_gb: memory_budget_gb must "
                     "be a number >= 0 or null, got -1"),
    ("streams=[[1.5,3]]", "error: streams must hold [num_events, num_nodes] integers (and "
                          "feat_dim >= 0), got [1.5, 3]"),
    ("streams=[[100,3,-1]]", "error: streams must hold [num_events, num_nodes] integers (and "
                             "feat_dim >= 0), got [100, 3, -1]"),
    ("streams=[[100,3,1,2]]", "error: streams must be a list of [num_events, num_nodes] or "
                              "[num_events, num_nodes, feat_dim]"),
    ("n_events=abc", "error: n_events must be an integer >= 0, got 'abc'"),
    ("timeout_s=-3", "error: timeout_s must be null or a number > 0, got -3"),
    ("curves=every", "error: curves must be one of auto, none, common, all, got 'every'"),
    ("stop_after=index", "error: stop_after must be one of engine, sampling, events, got "
                         "'index'"),
])
def test_bad_options_end_in_one_line(arg: str, message: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark_memory.py"), arg],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [message]
    assert "events" not in done.stdout  # no table started: nothing ran


@pytest.mark.parametrize("curves", ["common", "none", "auto", "all"])
def test_the_child_times_each_event_whole_and_its_curve_call(curves: str) -> None:
    """``measure`` (the child) reports per event ``time_s`` (setup + search), the curve
    call's seconds (NaN with ``curves=none``) and the wall time of the whole event;
    ``auto`` computes the curves on this short stream; ``all`` every protocol's."""
    import math

    from omegaconf import OmegaConf

    from cftgnn.benchmarks.memory import measure

    conf = OmegaConf.load(ROOT / "conf" / "benchmark_memory.yaml")
    node = {name: OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / name / f"{file}.yaml"))
            for name, file in (("model", "tgn"), ("explainer", "greedy"),
                               ("strategy", "closest"))}
    job = {**node, "n_events": 2, "sample_range": [0.85, 1.0], "prediction": "any",
           "mode": str(conf.mode), "m_max": 16, "k": None, "seed": 0, "num_threads": 1,
           "curves": curves, "num_events": 1500, "num_nodes": 60, "budget": 0.5}
    out = measure(job)
    assert out["curves"] == {"none": "none", "all": "all"}.get(curves, "common")
    assert len(out["event_s"]) == len(out["event_wall_s"]) == len(out["curve_s"]) >= 1
    for time_s, wall, curve in zip(out["event_s"], out["event_wall_s"], out["curve_s"],
                                   strict=True):
        assert 0 < time_s <= wall
        if curves == "none":
            assert math.isnan(curve)
        else:
            assert 0 < curve <= wall - time_s


def _job(**over: object) -> dict:
    from omegaconf import OmegaConf

    conf = OmegaConf.load(ROOT / "conf" / "benchmark_memory.yaml")
    node = {name: OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / name / f"{file}.yaml"))
            for name, file in (("model", "tgn"), ("explainer", "greedy"),
                               ("strategy", "closest"))}
    return {**node, "n_events": 2, "sample_range": [0.85, 1.0], "prediction": "any",
            "mode": str(conf.mode), "m_max": 16, "k": None, "seed": 0, "num_threads": 1,
            "curves": "none", "num_events": 3000, "num_nodes": 60, "budget": 0.5, **over}


def test_the_child_reports_where_the_memory_goes() -> None:
    """Each phase's resident memory and peak, and the bytes of each structure: the stream's
    arrays (with ``feat_dim`` features), the index's, the model's state and event ids (on
    the CPU it reads the stream's own arrays), the snapshots and one event's plans."""
    from cftgnn.benchmarks.memory import breakdown, measure

    out = measure(_job(feat_dim=3))
    names = [p["phase"] for p in out["phases"]]
    assert names[:5] == ["start", "stream", "index", "engine", "sampling"]
    assert len(names) == 5 + len(out["event_s"]) >= 6
    assert all(p["rss_gib"] > 0 and p["peak_gib"] >= p["rss_gib"] - 1e-3 for p in out["phases"])
    held = out["phases"][3]["held"]
    assert held["stream"] == 3000 * (8 + 8 + 8 + 8 + 3 * 4)  # src, dst, t, labels, features
    assert held["index"] > 3000 * 3 * 8  # _key, adj_eid, adj_nbr: one entry per event at least
    # event ids and the O(N·d) state: the stream's arrays it reads on the CPU are not copies
    assert 3000 * 8 <= held["model"] < 3000 * 8 + 60 * 1024
    assert held["cursor"] > 0 and held["snapshots"] == 0 and held["plans"] == 0
    events = out["phases"][5:]
    assert max(p["held"]["plans"] for p in events) > 0  # each event's plans, while held
    lines = breakdown(out, 3000)
    assert lines[0].startswith("    RSS GiB after each phase: start ")
    assert "stream 0.00 (44 B/event)" in lines[2]


def test_stop_after_engine_measures_the_loaded_stream_alone() -> None:
    from cftgnn.benchmarks.memory import measure

    out = measure(_job(stop_after="engine"))
    assert out["stopped"] == "engine"
    assert [p["phase"] for p in out["phases"]] == ["start", "stream", "index", "engine"]
    assert "event_s" not in out and "sampling_s" not in out
