"""Scale-out as the documentation shows it: ``-m sweep=shards`` through joblib, submitit on
this machine, and SLURM (a stand-in ``sbatch`` on PATH), each merged into one run.

The commands are read from the README and docs/scale.md (Running at scale); the tests add only
a tiny debug configuration
(300 synthetic events, fresh weights, 8 events) and two shards instead of four.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from testsupport import fake_slurm
from testsupport.commands import Command, compose_command, hydra_app, script_commands

import cftgnn.config  # noqa: F401  (registers ${cftgnn_root:})
from cftgnn.runs import pipeline
from cftgnn.runs.merge import find_runs
from cftgnn.runs.merge import main as merge_main
from cftgnn.runs.records import read_records

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
EXPLAIN = ROOT / "scripts" / "explain.py"
PLACEHOLDERS = {"p": "debug", "partition": "debug"}
TINY = ["debug=default", "checkpoint=null", "explainer.it_max=40", "progress=false",
        "sample.prediction=any", "n_events=8"]
LAUNCHERS = {"joblib": "JoblibLauncher", "submitit_local": "LocalLauncher",
             "submitit_slurm": "SlurmLauncher"}


DOCUMENTS = (ROOT / "README.md", ROOT / "docs" / "scale.md")


def _commands() -> list[Command]:
    return [c for doc in DOCUMENTS for c in script_commands(
        doc.read_text(), lambda name: PLACEHOLDERS.get(name, name.replace(" ", "_")))]


def _launcher_of(command: Command) -> str:
    app = hydra_app(EXPLAIN)
    assert app is not None
    (job, *_) = compose_command(app, replace(command, args=("-m", *command.overrides)))
    return str(job.hydra.runtime.choices["hydra/launcher"])


def documented_shard_command(launcher: str) -> Command:
    """The documented ``explain.py -m sweep=shards`` command that runs on ``launcher``."""
    for command in _commands():
        if (command.script == "scripts/explain.py" and command.multirun
                and "sweep=shards" in command.args and _launcher_of(command) == launcher):
            return command
    raise AssertionError(f"the docs show no `-m sweep=shards` command for {launcher}")


def with_overrides(command: Command, *extra: str) -> Command:
    """The command with ``extra`` replacing the overrides of the same keys."""
    keys = {e.split("=", 1)[0] for e in extra}
    kept = [a for a in command.args if a.split("=", 1)[0] not in keys]
    return replace(command, args=(*kept, *extra))


def _strip(df: pd.DataFrame) -> pd.DataFrame:
    """Records without what differs between runs of one configuration (timings, shard)."""
    drop = [c for c in df.columns if c.endswith("time_s") or c == "shard"]
    return df.drop(columns=drop).sort_values("event_id", ignore_index=True)


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory) -> pd.DataFrame:
    """The records of one unsharded run of the tiny configuration."""
    out = tmp_path_factory.mktemp("unsharded")
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=[*TINY, f"out_dir={out}"])
    pipeline.run(cfg)
    return read_records(out)


def _run(command: Command, cwd: Path, env: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, str(ROOT / command.script), *command.args],
                          cwd=cwd, env={**os.environ, **command.env, **(env or {})},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _merge_as_documented(sweep: Path, capsys) -> pd.DataFrame:
    """Run the documented merge_records.py command on ``sweep``; returns the merged records."""
    (merge,) = [c for c in _commands() if c.script == "scripts/merge_records.py"][:1]
    args = [str(sweep) if "outputs/sweeps" in a else a for a in merge.args]
    merge_main(args)
    assert "merged 8 records from 2 runs" in capsys.readouterr().out
    return read_records(sweep / "merged")


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_shard_sweep_composes_with_every_documented_launcher(launcher):
    command = documented_shard_command(launcher)
    app = hydra_app(EXPLAIN)
    assert app is not None
    jobs = compose_command(app, command)
    assert [int(j.shard) for j in jobs] == [0, 1, 2, 3]
    assert {int(j.num_shards) for j in jobs} == {4}
    assert jobs[0].hydra.launcher._target_.endswith(LAUNCHERS[launcher])
    jobs = compose_command(app, with_overrides(command, "num_shards=2"))
    assert [int(j.shard) for j in jobs] == [0, 1]  # the sweep follows num_shards


@pytest.mark.parametrize("launcher", [
    # joblib's documented command also runs (with 4 shards) in the default suite:
    # tests/runs/test_pipeline.py::test_sharded_sweep_through_joblib_then_merge_command
    pytest.param("joblib", marks=pytest.mark.slow),
    "submitit_local",
])
def test_documented_shard_command_gives_the_records_of_one_unsharded_run(
        launcher, unsharded, tmp_path, capsys):
    sweep = tmp_path / "sweep"
    command = with_overrides(documented_shard_command(launcher), *TINY, "num_shards=2",
                             f"hydra.sweep.dir={sweep}")
    _run(command, cwd=tmp_path)
    runs = find_runs([sweep])
    assert [int(r.name.split("shard")[-1]) for r in runs] == [0, 1]
    for run in runs:
        assert 1 <= len(read_records(run)) < 8  # each job wrote its own share
    if launcher == "submitit_local":  # separate processes, started by submitit
        assert len(list((sweep / ".submitit").glob("*/*_result.pkl"))) == 2
    merged = _merge_as_documented(sweep, capsys)
    pd.testing.assert_frame_equal(_strip(merged), _strip(unsharded))


def test_documented_slurm_command_submits_one_array_task_per_shard(tmp_path, capsys):
    state = tmp_path / "slurm"
    env = fake_slurm.install(tmp_path / "bin", state)
    sweep = tmp_path / "sweep"
    documented = documented_shard_command("submitit_slurm")
    command = with_overrides(documented, *TINY, "num_shards=2", f"hydra.sweep.dir={sweep}")
    try:
        _run(command, cwd=tmp_path, env=env)
    finally:
        fake_slurm.stop(state)
    (sub,) = fake_slurm.submissions(state)
    settings = dict(a.removeprefix("hydra.launcher.").split("=", 1) for a in documented.args
                    if a.startswith("hydra.launcher."))
    assert "partition" in settings, "the documented SLURM command must name the partition"
    expect = {"partition": settings["partition"], "time": settings.get("timeout_min", "60")}
    if "cpus_per_task" in settings:
        expect["cpus-per-task"] = settings["cpus_per_task"]
    if "mem_gb" in settings:
        expect["mem"] = f"{settings['mem_gb']}GB"
    assert {k: sub.directives.get(k) for k in expect} == expect
    assert sub.array_tasks == [0, 1]  # one task per shard
    assert sub.directives["output"].startswith(f"{sweep}/.submitit/%A_%a/")
    assert sub.command.startswith("srun ")
    assert f"{sys.executable} -u -m submitit.core._submit {sweep}/.submitit/%j" in sub.command
    assert ["sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", sub.job_id] in (
        fake_slurm.calls(state))
    # the stand-in ran the tasks: each wrote its records, and they merge into the whole
    merged = _merge_as_documented(sweep, capsys)
    assert len(merged) == 8 and merged.event_id.is_unique


@pytest.mark.parametrize("run_jobs", [False, True])
def test_stand_in_slurm_speaks_what_submitit_reads(tmp_path, run_jobs):
    state = tmp_path / "slurm"
    env = {**os.environ, **fake_slurm.install(tmp_path / "bin", state, run_jobs=run_jobs)}
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --array=0-2%2\n#SBATCH --partition=debug\n"
                      f"#SBATCH --output={tmp_path}/%A_%a.out\n"
                      f"srun --unbuffered --output {tmp_path}/%A_%a_%t.log "
                      "sh -c 'echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID'\n")
    out = subprocess.run(["sbatch", str(script)], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "Submitted batch job 4200"
    (sub,) = fake_slurm.submissions(state)
    assert sub.directives["partition"] == "debug" and sub.array_tasks == [0, 1, 2]

    def states() -> list[str]:
        table = subprocess.run(["sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j",
                                "4200"], env=env, capture_output=True, text=True).stdout
        assert table.splitlines()[0] == "JobID|State|NodeList"
        return [line.split("|")[1] for line in table.splitlines()[1:]]

    if not run_jobs:
        assert states() == ["PENDING"] * 3
        subprocess.run(["scancel", "4200"], env=env, check=True)
        assert states() == ["CANCELLED"] * 3
        return
    try:
        deadline = time.time() + 60
        while time.time() < deadline and states() != ["COMPLETED"] * 3:
            time.sleep(0.1)
    finally:
        fake_slurm.stop(state)
    assert states() == ["COMPLETED"] * 3
    assert (tmp_path / "4200_1_0.log").read_text() == "task 1 of 4200\n"
