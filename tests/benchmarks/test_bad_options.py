"""Bad values of the benchmarks' own options end in one ``error:`` line, exit 2, before work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("script", "arg", "message"), [
    ("benchmark_tail.py", "prune_perturbations=maybe",
     "error: prune_perturbations must be true or false, got 'maybe'"),
    ("benchmark_tail.py", "n_events=abc", "error: n_events must be an integer >= 1, got 'abc'"),
    ("benchmark_tail.py", "prune_tolerance=-1e-4",
     "error: prune_tolerance must be a finite number >= 0.0, got -0.0001"),
    ("benchmark_tail.py", "prune_tolerance=abc",
     "error: prune_tolerance must be a finite number >= 0.0, got 'abc'"),
    ("benchmark_tail.py", "prune_tolerance=inf",
     "error: prune_tolerance must be a finite number >= 0.0, got inf"),
    ("benchmark_explainers.py", "n_events=1.5",
     "error: n_events must be an integer >= 1, got 1.5"),
    ("benchmark_oracle.py", "naive_per_event=-1",
     "error: naive_per_event must be an integer >= 0, got -1"),
])
def test_bad_benchmark_options_end_in_one_line(script: str, arg: str, message: str,
                                               tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / script), arg],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [message]
    assert not any(tmp_path.iterdir())  # nothing written
