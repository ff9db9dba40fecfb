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
