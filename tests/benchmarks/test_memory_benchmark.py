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
    ("streams=[[1.5,3]]", "error: streams must hold [num_events, num_nodes] integers, got "
                          "[1.5, 3]"),
    ("n_events=abc", "error: n_events must be an integer >= 0, got 'abc'"),
    ("timeout_s=-3", "error: timeout_s must be null or a number > 0, got -3"),
])
def test_bad_options_end_in_one_line(arg: str, message: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark_memory.py"), arg],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [message]
    assert "events" not in done.stdout  # no table started: nothing ran
