"""The one home of run directories, for every reader of finished or interrupted runs
(``report.py``, ``rules.py``, ``merge_records.py``, ``compare_runs.py``, the figures):
finding runs below some paths, reading ``run.json``, the records (a record that does not read
back is named in one ``warning:`` line and left out), the run's stream, and its checkpoint.

A run directory (written by [``RecordStore``][cftgnn.runs.RecordStore])::

    run.json                 the run's fingerprint
    records/<event>.parquet  one record per explained event
    corrupt/                 records a resume found unreadable, set aside (read by none)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from hydra.utils import instantiate

from cftgnn.data.index import M_MAX
from cftgnn.data.paths import project_root
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.explain.result import explained
from cftgnn.files import file_sha256
from cftgnn.models.base import TemporalModel
from cftgnn.oracle.constraints import Constraints
from cftgnn.runs.records import RecordStore, read_records
from cftgnn.training.resolve import FRESH, model_name, resolve_model

FINGERPRINT = RecordStore.FINGERPRINT
RECORDS = RecordStore.RECORDS

#: The record columns ``load_run`` requires by default (those the rules read).
RECORD_COLUMNS = frozenset({"event_id", "status", "candidate_ids", "explanation",
                            "is_counterfactual", "original_logit"})


def find_runs(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Run directories (folders with a ``run.json``) at or below ``paths``, sorted.

    Raises:
        ConfigError: A path does not exist.
    """
    runs: set[Path] = set()
    for p in map(Path, paths):
        if not p.exists():
            raise ConfigError(f"{p} does not exist")
        runs.update(f.parent for f in p.rglob(FINGERPRINT))
    return sorted(runs)


def read_fingerprint(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """A run directory's ``run.json``.

    Raises:
        ConfigError: The directory does not exist, holds no ``run.json``, or its ``run.json``
            is not a JSON object.
    """
    path = Path(run_dir) / FINGERPRINT
    if not Path(run_dir).is_dir():
        raise ConfigError(f"{run_dir} does not exist")
    if not path.is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no {FINGERPRINT})")
    try:
        fingerprint = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
        raise ConfigError(f"{path} is not readable JSON ({exc})") from None
    if not isinstance(fingerprint, dict):
        raise ConfigError(f"{path} is not a run's fingerprint (not a JSON object)")
    return fingerprint


def load_run_stream(fingerprint: Mapping[str, Any]) -> EventStream:
    """The event stream of a run, from the dataset config in its ``run.json``.

    The data and cache folders are not part of the fingerprint; the loaders take them from
    ``$CFTGNN_DATA_DIR`` / ``$CFTGNN_CACHE_DIR`` or their defaults.

    Raises:
        ConfigError: The stream loaded has another number of events than the run's.
        CftgnnError: The data files cannot be found or read.
    """
    dataset = fingerprint["dataset"]
    stream: EventStream = instantiate(dict(dataset["config"]))
    if "num_events" in dataset and stream.num_events != int(dataset["num_events"]):
        raise ConfigError(f"the {stream.name} stream loaded has {stream.num_events} events, the "
                          f"run's had {dataset['num_events']}")
    return stream


def run_names(fingerprint: Mapping[str, Any]) -> tuple[str, str]:
    """``(dataset, model kind)`` of a run's fingerprint (``?`` where it names none)."""
    dataset = str((fingerprint.get("dataset") or {}).get("name", "?"))
    config = (fingerprint.get("model") or {}).get("config") or {}
    return dataset, model_name(config) if "_target_" in config else "?"


def run_batch_size(fingerprint: Mapping[str, Any]) -> int | None:
    """The model batch size a run's ``run.json`` records (None when it does not)."""
    size = ((fingerprint.get("model") or {}).get("config") or {}).get("batch_size")
    return None if size is None else int(size)


@dataclass(frozen=True)
class Run:
    """One explanation run: its directory, ``run.json`` and records."""

    path: Path
    fingerprint: dict[str, Any]
    records: pd.DataFrame

    @property
    def k(self) -> int:
        """The run's ``k``; when null, the model's number of layers (as the pipeline)."""
        k = self.fingerprint.get("k")
        if k is None:
            k = (self.fingerprint.get("model", {}).get("config") or {}).get("num_layers", 1)
        return int(k)

    @property
    def m_max(self) -> int:
        """The run's cap on the number of candidates."""
        return int(self.fingerprint.get("m_max", M_MAX))

    @property
    def constraints(self) -> Constraints:
        """The run's constraints."""
        return Constraints.from_config(self.fingerprint.get("constraints"))

    @property
    def history(self) -> str:
        """The run's ``history`` (``event`` for runs older than the option)."""
        return str(self.fingerprint.get("history", "event"))

    @property
    def batch_size(self) -> int | None:
        """The run's model batch size (None when run.json does not say)."""
        return run_batch_size(self.fingerprint)

    @property
    def names(self) -> tuple[str, str]:
        """``(dataset, model)`` names."""
        return run_names(self.fingerprint)

    @property
    def key(self) -> str:
        """What makes two runs' oracles the same: stream, model, weights, k, m_max,
        constraints, history (JSON)."""
        fp = self.fingerprint
        return json.dumps([fp.get("dataset"), fp.get("model"), self.k, self.m_max,
                           self.constraints.to_dict(), self.history], sort_keys=True,
                          default=str)


def load_run(path: str | os.PathLike[str],
             columns: frozenset[str] = RECORD_COLUMNS) -> Run:
    """A run directory's fingerprint and explained records (status ``ok``); a record that
    does not read is named in one warning line and left out
    ([``read_records``][cftgnn.runs.read_records]).

    Args:
        path: The run directory.
        columns: Record columns the caller needs.

    Raises:
        ConfigError: Not a run directory (no ``run.json`` or no ``records/``).
    """
    p = Path(path)
    fingerprint = read_fingerprint(p)
    if not (p / RecordStore.RECORDS).is_dir():
        raise ConfigError(f"{p} is not a run directory (no {RecordStore.RECORDS}/ folder)")
    if "dataset" not in fingerprint or "model" not in fingerprint:
        raise ConfigError(f"{p}/run.json is not an explanation run's (no dataset or model)")
    records = read_records(p)
    if not records.empty:
        missing = sorted(columns - set(records.columns))
        if missing:
            raise ConfigError(f"{p} is not an explanation run (its records have no "
                              f"{', '.join(missing)})")
        records = records[explained(records["status"])].reset_index(drop=True)
    return Run(p, fingerprint, records)


def run_checkpoint(run: Run, checkpoint_dir: str | os.PathLike[str] | None = None
                   ) -> Path | None:
    """The checkpoint file of a run's model; None for fresh weights (rebuilt from its seed).

    A recorded path that no longer exists is looked up by file name in ``checkpoint_dir``
    (default ``<project>/checkpoints``). With a recorded ``weights_sha256`` the file found
    must have that hash, at the recorded path too: a checkpoint retrained in place since the
    run is refused, not silently used for the run's events.

    Raises:
        ConfigError: The run names no model, its checkpoint cannot be found, or the file at
            its recorded path is not the one it was explained with.
    """
    model_fp = run.fingerprint.get("model") or {}
    weights = str(model_fp.get("weights", ""))
    if not model_fp.get("config") or not weights:
        raise ConfigError(f"{run.path}/run.json names no model or weights")
    if weights.startswith(FRESH):
        return None
    path = Path(weights)
    sha = model_fp.get("weights_sha256")
    if path.is_file():
        if sha and file_sha256(path) != sha:
            raise ConfigError(
                f"the checkpoint {path} is not the one {run.path} was explained with: its "
                "SHA-256 differs from run.json's model.weights_sha256 (restore the run's "
                "checkpoint, or pass --checkpoint-dir to where it is)")
        return path
    folder = Path(checkpoint_dir) if checkpoint_dir else project_root() / "checkpoints"
    other = folder / path.name
    if other.is_file() and (not sha or file_sha256(other) == sha):
        return other
    found = "holds another file of that name" if other.is_file() else "has none"
    raise ConfigError(f"the checkpoint of {run.path} cannot be found: {weights} does not exist "
                      f"and {folder} {found} (pass --checkpoint-dir)")


def load_run_model(run: Run, stream: EventStream,
                   checkpoint_dir: str | os.PathLike[str] | None = None,
                   device: str = "cpu") -> TemporalModel:
    """The model of a run: its checkpoint (``run_checkpoint``), or its fresh weights
    rebuilt from the run's seed as the pipeline built them.

    Raises:
        ConfigError: The checkpoint cannot be found.
        CheckpointMismatchError: It holds another kind of model or belongs to another dataset.
    """
    path = run_checkpoint(run, checkpoint_dir)
    config = run.fingerprint["model"]["config"]
    seed = int(run.fingerprint.get("seed", 0))
    folder = Path(checkpoint_dir) if checkpoint_dir else project_root() / "checkpoints"
    model, _ = resolve_model(config, stream, None if path is None else str(path), folder,
                             device, seed)
    return model



def add_oracle_arguments(parser: Any) -> None:
    """The options of a script that rebuilds a finished run's oracles (``rescore.py``,
    ``rules.py``): ``--checkpoint-dir``, ``--device``, ``--num-threads``, ``--no-progress``.

    Args:
        parser: The script's ``argparse.ArgumentParser`` (``cftgnn.cli.ArgumentParser``).
    """
    parser.add_argument("--checkpoint-dir", help="where to look for a run's checkpoint when "
                        "its recorded path is gone (default: <project>/checkpoints)")
    parser.add_argument("--device", default="cpu", help="torch device of the oracle (cpu)")
    parser.add_argument("--num-threads", type=int, default=1,
                        help="torch CPU threads (default 1, as explain.py)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")

__all__ = ["FINGERPRINT", "FRESH", "RECORDS", "RECORD_COLUMNS", "Run", "add_oracle_arguments",
           "find_runs", "load_run", "load_run_model", "load_run_stream", "read_fingerprint",
           "read_records", "run_batch_size", "run_checkpoint", "run_names"]
