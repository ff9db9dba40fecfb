"""The run directory Hydra makes: checked before the run that it can be made
(``unwritable_run_dir`` for the command line's, ``default_run_dir_problem`` for the
config's, ``folder_problem`` for any folder), an option that becomes it
(``run_dir_follows``), and removed again when a refused run left only Hydra's own files
there (``discard_empty_run_dir``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Free bytes below which a run directory counts as full (Hydra writes ``.hydra/*.yaml``, a
#: few kilobytes, before the script's code runs).
RUN_DIR_MIN_FREE = 64 * 1024


def folder_problem(option: str, value: str) -> str | None:
    """A one-line message when the folder ``value`` of ``option`` cannot be made: its nearest
    existing ancestor is a file, is not writable, or takes no new folder (``/proc``, which
    ``os.access`` calls writable for root: a folder is made there and removed at once), or
    sits on a disk with less than ``RUN_DIR_MIN_FREE`` free. None when it can be made
    (nothing is left behind)."""
    from cftgnn.files import disk_full_message, nearest_existing

    folder = Path(value)
    existing = nearest_existing(folder)
    if existing is None:
        return None
    where = existing.absolute()
    if not existing.is_dir():
        return f"{option} {value!r} cannot be written ({where} is not a folder)"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{option} {value!r} cannot be written (no write permission in {where})"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".cftgnn-probe-", dir=existing))
    except OSError as exc:
        return (f"{option} {value!r} cannot be created (no folder can be made in {where}: "
                f"{exc.strerror or exc})")
    if shutil.disk_usage(existing).free < RUN_DIR_MIN_FREE:
        return f"{option}: {disk_full_message(folder, folder=True)}"
    return None


def unwritable_run_dir(argv: Sequence[str]) -> str | None:
    """A one-line message when ``hydra.run.dir`` / ``hydra.sweep.dir`` (as given on the
    command line, without interpolations) cannot be created or its disk is full
    (``folder_problem``): Hydra makes these folders and writes its files there before the
    script's code runs. None when they can be, or were not given."""
    for arg in argv:
        key, _, value = arg.lstrip("+").partition("=")
        value = value.strip("'\"")
        if key not in ("hydra.run.dir", "hydra.sweep.dir") or not value or "${" in value:
            continue
        if (problem := folder_problem(key, value)) is not None:
            return problem
    return None


def default_run_dir_problem(argv: Sequence[str], cfg: Any) -> str | None:
    """``folder_problem`` for the run (or sweep) directory the config names when the
    command line names none: its fixed part (``outputs/explain`` of
    ``outputs/explain/${...}/${now:...}``) must take a new folder, e.g. not when the current
    directory is read-only. None when it can, or when nothing would be written there."""
    from omegaconf import OmegaConf

    key = "hydra.sweep.dir" if any(a in ("-m", "--multirun") for a in argv) else "hydra.run.dir"
    if "hydra" not in cfg or any(a.lstrip("+").startswith(f"{key}=") for a in argv):
        return None
    node = OmegaConf.to_container(cfg.hydra.sweep if key == "hydra.sweep.dir" else cfg.hydra.run,
                                  resolve=False)
    raw = node.get("dir") if isinstance(node, dict) else None
    if not isinstance(raw, str) or not raw:
        return None
    if "${" not in raw:
        if Path(raw).is_dir() and cfg.hydra.get("output_subdir") is None:
            return None  # an existing folder where Hydra writes nothing (the benchmarks' ".")
        return folder_problem(key, raw)
    fixed = raw.split("${")[0]
    if "/" not in fixed:
        return None
    return folder_problem(key, fixed.rsplit("/", 1)[0] or "/")


def quoted_value(value: str) -> str:
    """``value`` as a quoted Hydra override value (a path with spaces or commas)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def run_dir_follows(args: Sequence[str], cfg: Any, option: str | None) -> str | None:
    """``cfg[option]`` when a single run names ``option`` (``out_dir``) and no run directory
    of its own: it becomes the run directory, so Hydra's ``.hydra/`` goes there too."""
    if option is None or cfg is None or any(a in ("-m", "--multirun") for a in args):
        return None
    if any(a.lstrip("+").startswith(("hydra.run.dir=", "hydra.run=")) for a in args):
        return None
    value = cfg.get(option)
    if not isinstance(value, str) or not value or "${" in value:
        return None
    return value


#: What Hydra writes into a run directory before the script's code runs: ``.hydra/`` (its
#: ``output_subdir``) with these files, and the job's log file.
HYDRA_FILES = frozenset({"config.yaml", "hydra.yaml", "overrides.yaml"})


def discard_empty_run_dir() -> Path | None:
    """Remove the run directory Hydra made for this run when it holds nothing but Hydra's
    own files (``.hydra/`` of ``HYDRA_FILES``, the job's ``<name>.log``): a run refused
    after Hydra made it leaves nothing behind. Then its parents that are left empty, up to
    the folder the command ran in (``outputs/explain/<choices>/``), and a sweep directory
    left with only Hydra's ``multirun.yaml``. Nothing is removed outside a Hydra run, where
    Hydra wrote no ``.hydra/`` (the benchmarks' ``.``), or where anything else is found.

    Returns:
        The run directory removed, or None.
    """
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if not HydraConfig.initialized():
            return None
        hydra = HydraConfig.get()
        subdir, job = hydra.output_subdir, str(hydra.job.name)
        run_dir = Path(str(hydra.runtime.output_dir)).absolute()
        top = Path(str(hydra.runtime.cwd)).absolute()
        multirun = hydra.mode == RunMode.MULTIRUN
    except Exception:  # noqa: BLE001  (no Hydra run here, or another version's config)
        return None
    if subdir is None or not (run_dir / str(subdir)).is_dir() or run_dir in (top, Path("/")):
        return None
    own = {str(subdir), f"{job}.log"}
    if any(entry.name not in own or (entry.is_dir() and entry.name != str(subdir))
           for entry in run_dir.iterdir()):
        return None
    if any(entry.name not in HYDRA_FILES or not entry.is_file()
           for entry in (run_dir / str(subdir)).iterdir()):
        return None
    try:
        shutil.rmtree(run_dir)
        parent = run_dir.parent
        if multirun and [e.name for e in parent.iterdir()] == ["multirun.yaml"]:
            (parent / "multirun.yaml").unlink()
        while parent != top and parent.is_relative_to(top) and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    except OSError:  # another process writes there, or the folder is read-only: leave it
        pass
    return run_dir
