"""A stand-in for SLURM on one machine: ``sbatch``, ``srun``, ``sacct``, ``squeue``, ``scancel``.

Tests of the SLURM launcher (``hydra/launcher=submitit_slurm``) put these on ``PATH`` with
``install``. ``sbatch`` keeps every script it is given (see ``submissions``), answers
``Submitted batch job <id>`` as SLURM does, and, unless installed with ``run_jobs=False``, runs
the job's array tasks on this machine in a detached process, with the environment variables
SLURM gives a task (``SLURM_JOB_ID``, ``SLURM_ARRAY_JOB_ID``, ``SLURM_ARRAY_TASK_ID``, ...).
The script's ``srun`` line runs its command with ``--output``/``--error`` expanded; ``sacct``
reports each task as ``PENDING``, ``RUNNING``, ``COMPLETED`` or ``FAILED``, which is what
submitit polls while it waits for results. Each command's arguments are logged to
``calls.jsonl`` in the state folder.

The installed wrappers run this file by path, ``python fake_slurm.py <command> [args...]``,
so a stand-in imports only the standard library.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

COMMANDS = ("sbatch", "srun", "sacct", "squeue", "scancel")
_STATE_ENV = "CFTGNN_FAKE_SLURM_STATE"
_RUN_ENV = "CFTGNN_FAKE_SLURM_RUN"
_FIRST_JOB_ID = 4200
#: This file, run by path so that the stand-ins import only the standard library (fast).
_SELF = str(Path(__file__).resolve())
_DIRECTIVE = re.compile(r"^#SBATCH\s+--([\w-]+)(?:=(.*))?$")


@dataclass(frozen=True)
class Submission:
    """One ``sbatch`` call.

    Attributes:
        job_id: The id ``sbatch`` answered.
        args: ``sbatch``'s arguments (the script's path last).
        script: The submitted script's text.
    """

    job_id: str
    args: tuple[str, ...]
    script: str

    @property
    def directives(self) -> dict[str, str]:
        """The script's ``#SBATCH --key=value`` lines (flags without a value map to "")."""
        out = {}
        for line in self.script.splitlines():
            m = _DIRECTIVE.match(line.strip())
            if m:
                out[m.group(1)] = shlex.split(m.group(2))[0] if m.group(2) else ""
        return out

    @property
    def command(self) -> str:
        """The script's last command line (submitit's ``srun ... python -m ...``)."""
        lines = [ln for ln in self.script.splitlines() if ln.strip() and not ln.startswith("#")]
        return lines[-1]

    @property
    def array_tasks(self) -> list[int]:
        """The array task ids of ``--array=0-3%4`` (``[0]`` without an array)."""
        return _array_tasks(self.directives.get("array"))


def install(bin_dir: str | os.PathLike[str], state_dir: str | os.PathLike[str],
            run_jobs: bool = True) -> dict[str, str]:
    """Write the stand-in commands into ``bin_dir``.

    Args:
        bin_dir: Folder for the executables (created).
        state_dir: Folder for submitted scripts, task states and the call log (created).
        run_jobs: Whether ``sbatch`` runs the submitted tasks (else they stay ``PENDING``).

    Returns:
        The environment to run under: ``PATH`` with ``bin_dir`` first.
    """
    bins, state = Path(bin_dir), Path(state_dir).resolve()
    bins.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    for name in COMMANDS:
        exe = bins / name
        exe.write_text(
            "#!/bin/sh\n"
            f"export {_STATE_ENV}={shlex.quote(str(state))} {_RUN_ENV}={int(run_jobs)}\n"
            f"exec {shlex.quote(sys.executable)} {shlex.quote(_SELF)} {name} \"$@\"\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return {"PATH": f"{bins.resolve()}{os.pathsep}{os.environ.get('PATH', '')}"}


def submissions(state_dir: str | os.PathLike[str]) -> list[Submission]:
    """Every ``sbatch`` call recorded in ``state_dir``, in order."""
    out = []
    for meta in sorted(Path(state_dir).glob("job-*.json")):
        info = json.loads(meta.read_text())
        out.append(Submission(info["job_id"], tuple(info["args"]),
                              meta.with_suffix(".sh").read_text()))
    return out


def calls(state_dir: str | os.PathLike[str]) -> list[list[str]]:
    """Every recorded call, as ``[command, *args]``."""
    log = Path(state_dir) / "calls.jsonl"
    return [json.loads(ln) for ln in log.read_text().splitlines()] if log.is_file() else []


def stop(state_dir: str | os.PathLike[str]) -> None:
    """Kill the task runners ``sbatch`` started (their process groups) that still run."""
    for pid_file in Path(state_dir).glob("runner-*.pid"):
        _kill(pid_file)


def _kill(pid_file: Path) -> None:
    """Kill the process group whose leader's pid the file holds (gone already: nothing)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(int(pid_file.read_text()), signal.SIGKILL)


def _array_tasks(spec: str | None) -> list[int]:
    if not spec:
        return [0]
    tasks: list[int] = []
    for part in spec.split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        tasks.extend(range(int(lo), int(hi or lo) + 1))
    return tasks


def _state() -> Path:
    return Path(os.environ[_STATE_ENV])


def _set_task_state(job_id: str, task: int, state: str) -> None:
    path = _state() / f"task-{job_id}_{task}.state"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(state)
    tmp.replace(path)


def _sbatch(args: Sequence[str]) -> int:
    state = _state()
    script = Path(args[-1])
    counter = state / "next-id"
    job_id = str(int(counter.read_text()) if counter.is_file() else _FIRST_JOB_ID)
    counter.write_text(str(int(job_id) + 1))
    (state / f"job-{job_id}.sh").write_text(script.read_text())
    (state / f"job-{job_id}.json").write_text(json.dumps({"job_id": job_id, "args": list(args)}))
    sub = submissions(state)[-1]
    for task in sub.array_tasks:
        _set_task_state(job_id, task, "PENDING")
    if os.environ.get(_RUN_ENV) == "1":
        runner = subprocess.Popen(
            [sys.executable, _SELF, "_run", job_id],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        (state / f"runner-{job_id}.pid").write_text(str(runner.pid))
    print(f"Submitted batch job {job_id}")
    return 0


def _expand(pattern: str, env: dict[str, str]) -> str:
    return (pattern.replace("%A", env.get("SLURM_ARRAY_JOB_ID", env["SLURM_JOB_ID"]))
            .replace("%a", env.get("SLURM_ARRAY_TASK_ID", "0"))
            .replace("%j", env["SLURM_JOB_ID"]).replace("%t", "0"))


def _run(job_id: str) -> int:
    """Run a submitted job's array tasks (at most ``%N`` and the CPU count at a time)."""
    sub = next(s for s in submissions(_state()) if s.job_id == job_id)
    directives = sub.directives
    spec = directives.get("array", "")
    limit = int(spec.split("%")[1]) if "%" in spec else len(sub.array_tasks)
    limit = max(1, min(limit, os.cpu_count() or 1))
    script = _state() / f"job-{job_id}.sh"
    pending = list(sub.array_tasks)
    running: dict[int, subprocess.Popen[bytes]] = {}
    while pending or running:
        while pending and len(running) < limit:
            task = pending.pop(0)
            env = {**os.environ, "SLURM_JOB_ID": str(int(job_id) * 1000 + task),
                   "SLURM_NTASKS": "1", "SLURM_JOB_NUM_NODES": "1", "SLURM_NODEID": "0",
                   "SLURM_JOB_NODELIST": "localhost", "SLURM_PROCID": "0",
                   "SLURM_LOCALID": "0", "SLURM_CPUS_PER_TASK":
                       directives.get("cpus-per-task", "1")}
            if "array" in directives:
                env |= {"SLURM_ARRAY_JOB_ID": job_id, "SLURM_ARRAY_TASK_ID": str(task)}
            out = Path(_expand(directives.get("output", "slurm-%j.out"), env))
            out.parent.mkdir(parents=True, exist_ok=True)
            with out.open("a") as log:
                running[task] = subprocess.Popen(["bash", str(script)], env=env, stdout=log,
                                                 stderr=subprocess.STDOUT)
            _set_task_state(job_id, task, "RUNNING")
        for task, proc in list(running.items()):
            if proc.poll() is not None:
                _set_task_state(job_id, task, "COMPLETED" if proc.returncode == 0 else "FAILED")
                del running[task]
        time.sleep(0.05)
    return 0


def _srun(args: Sequence[str]) -> int:
    """Run the command after srun's options, its output and error appended to the files."""
    rest = list(args)
    files: dict[str, str | None] = {"output": None, "error": None}
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        key = opt.lstrip("-").split("=")[0]
        if key in files:
            files[key] = opt.split("=", 1)[1] if "=" in opt else rest.pop(0)
    env = dict(os.environ)
    streams: dict[str, IO[str]] = {}
    for key, pattern in files.items():
        if pattern is not None:
            path = Path(_expand(pattern, env))
            path.parent.mkdir(parents=True, exist_ok=True)
            streams[key] = path.open("a")
    try:
        return subprocess.call(rest, stdout=streams.get("output"), stderr=streams.get("error"))
    finally:
        for f in streams.values():
            f.close()


def _sacct(args: Sequence[str]) -> int:
    ids = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-j"]
    print("JobID|State|NodeList")
    for job_id in ids:
        for path in sorted(_state().glob(f"task-{job_id}_*.state")):
            task = path.stem.split("_")[-1]
            print(f"{job_id}_{task}|{path.read_text()}|localhost")
    return 0


def _scancel(args: Sequence[str]) -> int:
    for arg in args:
        if arg.startswith("-"):
            continue
        job_id = arg.split("_")[0]
        pid_file = _state() / f"runner-{job_id}.pid"
        if pid_file.is_file():
            _kill(pid_file)
        for path in _state().glob(f"task-{job_id}_*.state"):
            if path.read_text() in ("PENDING", "RUNNING"):
                path.write_text("CANCELLED")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``<command> [args...]`` to the stand-in; returns the exit status."""
    name, *args = sys.argv[1:] if argv is None else argv
    if name != "_run":
        with (_state() / "calls.jsonl").open("a") as log:
            log.write(json.dumps([name, *args]) + "\n")
    if name == "squeue":
        print("JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)")
        return 0
    handlers = {"sbatch": _sbatch, "srun": _srun, "sacct": _sacct, "scancel": _scancel}
    if name == "_run":
        return _run(args[0])
    return handlers[name](args)


if __name__ == "__main__":
    raise SystemExit(main())
