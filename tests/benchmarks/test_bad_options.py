"""Bad values of the benchmarks' own options end in one ``error:`` line, exit 2, before work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from testsupport.errors import script_refused

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
    ("benchmark_tail.py", "num_workers=0", "error: num_workers must be an integer >= 1, got 0"),
    ("benchmark_explainers.py", "n_events=1.5",
     "error: n_events must be an integer >= 1, got 1.5"),
    ("benchmark_oracle.py", "naive_per_event=-1",
     "error: naive_per_event must be an integer >= 0, got -1"),
    ("benchmark_gpu.py", "devices=[cpu]",
     "error: devices must name two devices, left and right, e.g. [cpu,cuda]; got ['cpu']"),
    ("benchmark_gpu.py", "pairs=[uci-nope]",
     "error: pairs entry 'uci-nope': unknown model 'nope' (choose from: dygformer, graphmixer, "
     "pyg_tgn, tgat, tgn, tgn2l)"),
    ("benchmark_gpu.py", "tail.pair=uci",
     "error: tail.pair must be <dataset>-<model> names, e.g. uci-tgn; got 'uci'"),
    ("benchmark_gpu.py", "sample_range=[0.9,0.5]",
     "error: sample_range must be [lo, hi] shares of the stream with 0 <= lo < hi <= 1, got "
     "[0.9, 0.5]"),
    ("benchmark_gpu.py", "explainers.cftgnn=5",
     "error: explainers must map a name to a list of explain.py overrides, e.g. "
     "{search_plus: [experiment=search_plus]}"),
    ("benchmark_gpu.py", "devices=[cpu,gpu]",
     "error: unknown device 'gpu' (use cpu, cuda, cuda:N or auto)"),
])
def test_bad_benchmark_options_end_in_one_line(script: str, arg: str, message: str,
                                               tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / script), arg],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [message]
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize(("devices", "message"), [
    ("[cpu,tpu]", "error: unknown device 'tpu' (use cpu, cuda, cuda:N or auto)"),
    ("[cuda:x,cpu]", "error: unknown device 'cuda:x' (use cpu, cuda, cuda:N or auto)"),
    ("[cpu,3]", "error: devices must name two devices, left and right, e.g. [cpu,cuda]; got "
     "['cpu', 3]"),
])
def test_a_bad_device_of_the_gpu_benchmark_is_refused_at_the_start(devices: str, message: str,
                                                                   tmp_path: Path) -> None:
    """Each entry of ``devices`` by the ``device`` option's rule, before the benchmark's
    modules (PyG, the models) load and before anything is written."""
    line, imported = script_refused("benchmark_gpu.py", f"devices={devices}", cwd=tmp_path)
    assert line == message
    assert "hydra" in imported  # the import log was read
    assert "torch_geometric" not in imported and "cftgnn.benchmarks.gpu" not in imported
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("args", "message"), [
    (["--out", "{file}/result.json"],
     "error: --out '{file}/result.json' cannot be written ({file} is not a folder); choose a "
     "writable file"),
    (["--out", "{tmp}"], "error: --out '{tmp}' cannot be written (it is a folder; name a file); "
                         "choose a writable file"),
    (["--profile", "{file}/prof"],
     "error: --profile '{file}/prof' cannot be written ({file} is not a folder); choose a "
     "writable folder"),
])
def test_the_versions_benchmark_checks_its_outputs_before_it_runs(
        args: list[str], message: str, tmp_path: Path) -> None:
    """``benchmark_oracle_versions.py`` (not a Hydra script) refuses an output it could not
    write before it starts a worker (it used to find out after the whole run)."""
    file = tmp_path / "a_file"
    file.write_text("")
    fill = {"file": str(file), "tmp": str(tmp_path)}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark_oracle_versions.py"),
                           str(ROOT), str(ROOT), *[a.format(**fill) for a in args]],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [message.format(**fill)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # nothing written
