"""Resumable per-event records of an explanation run.

A run directory holds::

    run.json                 the run's fingerprint (the configuration that decides its results)
    records/<event>.parquet  one file per explained event, written atomically
    summary.csv, summary.md  written at the end (derived; safe to delete)

Each record is written as soon as its event is explained (to a temporary name, then renamed),
so a run killed at any moment leaves only complete records behind. Rerunning with the same
directory reads them, skips their events and explains the rest; a directory holding records
under another fingerprint is refused, so records of two configurations never mix (one without
records is simply taken over).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hydra.utils import instantiate

from cftgnn.data.stream import EventStream
from cftgnn.errors import CftgnnError, ConfigError
from cftgnn.explain.result import RECORD_DEFAULTS_V1, ExplanationResult


class RunDirectoryError(CftgnnError):
    """The output directory holds records of another configuration (or unreadable ones)."""


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested mapping (a fingerprint) as ``{"a.b": value}``."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def fingerprint_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Dotted keys whose values differ between two (nested) fingerprints, sorted."""
    a, b = flatten(old), flatten(new)
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


class RecordStore:
    """The records of one run directory.

    Args:
        root: The run's output directory (created when absent).
        fingerprint: JSON-serialisable description of everything that decides the records
            (dataset, model weights, explainer, sampling, ...), but nothing that does not
            (logging, progress bars, thread counts).
        schema: The columns every record file holds, with their types (explanation runs:
            :data:`RECORD_SCHEMA`); columns outside it get :func:`column_type`. None: every
            column gets :func:`column_type`.

    Raises:
        RunDirectoryError: If ``root`` already holds records under another fingerprint.
    """

    FINGERPRINT = "run.json"
    RECORDS = "records"

    def __init__(self, root: str | os.PathLike[str], fingerprint: Mapping[str, Any],
                 schema: pa.Schema | None = None) -> None:
        self.root = Path(root)
        self.schema = schema
        self.fingerprint = json.loads(json.dumps(dict(fingerprint)))  # plain JSON values
        self.records_dir = self.root / self.RECORDS
        path = self.root / self.FINGERPRINT
        if path.is_file():
            try:
                stored = json.loads(path.read_text())
            except json.JSONDecodeError as exc:
                raise RunDirectoryError(f"{path} is not valid JSON ({exc}); use another "
                                        "output directory") from exc
            diff = fingerprint_diff(stored, self.fingerprint)
            if diff and not self._has_records():  # nothing to protect: take the directory
                _atomic_write(path, json.dumps(self.fingerprint, indent=2,
                                               sort_keys=True).encode())
            elif diff:
                raise RunDirectoryError(
                    f"output directory {self.root} holds records of a different configuration "
                    f"(differs in: {', '.join(diff[:8])}{', ...' if len(diff) > 8 else ''}); "
                    "choose another out_dir or rerun with the same settings")
        elif self._has_records():
            raise RunDirectoryError(f"{self.records_dir} holds records but no {self.FINGERPRINT}; "
                                    "choose another out_dir")
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            _atomic_write(path, json.dumps(self.fingerprint, indent=2, sort_keys=True).encode())
        self.records_dir.mkdir(exist_ok=True)

    def _has_records(self) -> bool:
        return self.records_dir.is_dir() and any(self.records_dir.glob("*.parquet"))

    def _file(self, event_id: int) -> Path:
        return self.records_dir / f"{int(event_id):010d}.parquet"

    def done(self) -> set[int]:
        """Event ids with a complete record."""
        return {int(p.stem) for p in self.records_dir.glob("*.parquet")}

    def write(self, record: Mapping[str, Any]) -> Path:
        """Write one event's record (keyed by its ``event_id``) atomically."""
        return self.write_rows(int(record["event_id"]), [record])

    def write_rows(self, event_id: int, rows: Sequence[Mapping[str, Any]]) -> Path:
        """Write several rows under one event's file atomically (e.g. one per explainer).

        Columns get explicit types (the store's schema, :func:`arrow_table`), so the files of
        a run directory share one schema and read as one dataset with plain
        ``pandas.read_parquet`` or ``pyarrow.dataset``.
        """
        path = self._file(int(event_id))
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(arrow_table(rows, self.schema), tmp)
        os.replace(tmp, path)
        return path

    def load(self) -> pd.DataFrame:
        """All records, ordered by event id (an empty frame when there are none)."""
        return read_records(self.records_dir)


#: The columns of an explanation record, with their types: the fields of
#: :meth:`~cftgnn.explain.result.ExplanationResult.to_record`, then what ``explain.py`` adds.
#: Every record file of an explanation run holds all of them (null where a value is absent,
#: e.g. ``agreement`` when no set was evaluated both ways), so a run directory reads as one
#: dataset whatever mix of statuses it holds.
RECORD_SCHEMA = pa.schema([
    ("schema_version", pa.int64()),
    ("explainer", pa.string()),
    ("event_id", pa.int64()),
    ("status", pa.string()),
    ("oracle_mode", pa.string()),
    ("strategy", pa.string()),
    ("original_logit", pa.float64()),
    ("final_logit", pa.float64()),
    ("is_counterfactual", pa.bool_()),
    ("explanation", pa.list_(pa.int64())),
    ("candidate_ids", pa.list_(pa.int64())),
    ("size", pa.int64()),
    ("num_candidates", pa.int64()),
    ("sparsity", pa.float64()),
    ("iterations", pa.int64()),
    ("oracle_calls", pa.int64()),
    ("search_calls", pa.int64()),
    ("exact_calls", pa.int64()),
    ("cache_hits", pa.int64()),
    ("agreement", pa.float64()),
    ("agreement_n", pa.int64()),
    ("wall_time_s", pa.float64()),
    ("oracle_time_s", pa.float64()),
    ("setup_time_s", pa.float64()),
    ("min_size_lower_bound", pa.int64()),
    ("certified_minimal", pa.bool_()),
    ("cut_short", pa.bool_()),
    ("num_removable", pa.int64()),
    ("size_before_prune", pa.int64()),
    ("prune", pa.bool_()),
    ("certify", pa.int64()),
    ("certify_replaced", pa.bool_()),
    ("n_counterfactuals", pa.int64()),
    ("counterfactuals", pa.list_(pa.list_(pa.int64()))),
    ("counterfactual_logits", pa.list_(pa.float64())),
    ("counterfactual_consequences", pa.list_(pa.int64())),
    # explain.py's per-event context (EventContext), after the result's own columns
    ("time_s", pa.float64()),
    ("keep_logit", pa.float64()),
    ("group", pa.string()),
    ("screen_logit", pa.float64()),
    ("dataset", pa.string()),
    ("model", pa.string()),
    ("strategy_name", pa.string()),
    ("constraints", pa.string()),
    ("auto_mode_ratio", pa.float64()),
    ("shard", pa.int64()),
    # robustness=true (cftgnn.evaluation.robustness; null otherwise)
    ("robust_impl", pa.float64()),
    ("robust_impl_n", pa.int64()),
    ("robust_model", pa.bool_()),
    ("robust_model_logit0", pa.float64()),
    ("robust_model_logit", pa.float64()),
    ("rule_group", pa.list_(pa.int64())),
    ("rule_r", pa.int64()),
    ("rule_prob", pa.float64()),
    ("rule_samples", pa.int64()),
    ("robustness_time_s", pa.float64()),
])


@dataclass(frozen=True)
class EventContext:
    """What ``explain.py`` records next to an :class:`ExplanationResult` for one event.

    Attributes:
        setup_time_s: Seconds building the event's oracle (replaces the result's own).
        time_s: Oracle setup plus search, seconds.
        keep_logit: Exact logit with only the explanation kept among the removable
            candidates (NaN when the event was not explained).
        group: Prediction group of the sample (``correct`` / ``incorrect``).
        screen_logit: The logit the sampling pass saw.
        dataset: Stream name.
        model: Model name.
        strategy_name: The selection strategy's name.
        constraints: The user constraints, as JSON.
        auto_mode_ratio: ``mode=auto``'s cost ratio (NaN for a fixed mode).
        shard: Shard that explained the event.
    """

    setup_time_s: float
    time_s: float
    keep_logit: float
    group: str
    screen_logit: float
    dataset: str
    model: str
    strategy_name: str
    constraints: str
    auto_mode_ratio: float
    shard: int


def event_record(result: ExplanationResult, context: EventContext) -> dict[str, Any]:
    """One record: the result's columns, then the context's, in :data:`RECORD_SCHEMA`'s
    order (a test keeps the two in step)."""
    return {**result.to_record(), **asdict(context)}


def _is_nan(value: Any) -> bool:
    return isinstance(value, float | np.floating) and math.isnan(value)


def column_type(values: Sequence[Any]) -> pa.DataType:
    """The arrow type of a record column, independent of which values one file happens to hold.

    Lists are lists of event ids (``list<int64>``, also when empty); strings are
    ``string``; a column of integers is ``int64`` unless it holds a float (NaN included),
    then ``float64``; booleans are ``bool``; a column of nulls only is ``float64`` (the
    optional measurements: ``agreement``, ``keep_logit``, ...).
    """
    present = [v for v in values if v is not None]
    if any(isinstance(v, list | tuple | np.ndarray) for v in present):
        return pa.list_(pa.int64())
    if any(isinstance(v, str) for v in present):
        return pa.string()
    if present and all(isinstance(v, bool | np.bool_) for v in present):
        return pa.bool_()
    if present and all(isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)
                       for v in present):
        return pa.int64()
    return pa.float64()


def _plain(value: Any, kind: pa.DataType) -> Any:
    """``value`` as the plain Python value of an arrow ``kind`` (None and NaN of a non-float
    column are null)."""
    if value is None or (_is_nan(value) and not pa.types.is_floating(kind)):
        return None
    if pa.types.is_list(kind):
        return [_plain(e, kind.value_type) for e in value]
    if pa.types.is_floating(kind):
        return float(value)
    if pa.types.is_integer(kind):
        return int(value)
    if pa.types.is_boolean(kind):
        return bool(value)
    if pa.types.is_string(kind):
        return str(value)
    return value


def arrow_table(rows: Sequence[Mapping[str, Any]], schema: pa.Schema | None = None) -> pa.Table:
    """Rows (dicts of plain values) as an arrow table.

    Args:
        rows: The rows.
        schema: Declared columns: each is written with its type and in its order, null where a
            row lacks it. Other columns follow with :func:`column_type`.
    """
    declared = {} if schema is None else {f.name: f.type for f in schema}
    names = list(declared)
    for row in rows:
        names.extend(k for k in row if k not in names)
    columns = {}
    for name in names:
        values = [row.get(name) for row in rows]
        kind = declared.get(name) or column_type(values)
        columns[name] = pa.array([_plain(v, kind) for v in values], type=kind)
    return pa.table(columns)


def read_records(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Records of a run directory (or of its ``records`` folder), ordered by event id.

    Records written before schema version 2 get its columns with their old meaning
    (:func:`upgrade_records`).
    """
    path = Path(path)
    if (path / RecordStore.RECORDS).is_dir():
        path = path / RecordStore.RECORDS
    files = sorted(path.glob("*.parquet"))
    if not files:
        return pd.DataFrame()
    return upgrade_records(pd.concat([pd.read_parquet(f) for f in files], ignore_index=True))


def upgrade_records(df: pd.DataFrame) -> pd.DataFrame:
    """Fill the columns added by schema versions 2 and 3 into rows written without them.

    No certificate is claimed for old rows (``min_size_lower_bound = 0``), nothing was pruned
    or certified, every candidate was removable and ``size_before_prune`` is ``size``; their
    counterfactuals are their one answer when it flips (consequences not measured).
    """
    if df.empty:
        return df
    df = df.copy()
    fills: dict[str, Any] = {**RECORD_DEFAULTS_V1,
                             "num_removable": df.get("num_candidates"),
                             "size_before_prune": df.get("size"),
                             "constraints": "{}"}
    for name, value in fills.items():
        if value is None:
            continue
        if name not in df.columns:
            df[name] = value
        elif df[name].isna().any():
            fill = value[df[name].isna()] if isinstance(value, pd.Series) else value
            df.loc[df[name].isna(), name] = fill
    if "is_counterfactual" in df.columns:
        # rows of version 2 and older (also next to newer rows): their one answer, when it flips
        old = (df["n_counterfactuals"].isna() if "n_counterfactuals" in df.columns
               else pd.Series(True, index=df.index))
        if old.any():
            rows = df.index[old]
            cf = df.loc[rows, "is_counterfactual"].astype(bool).tolist()
            for name in ("n_counterfactuals", "counterfactuals", "counterfactual_logits",
                         "counterfactual_consequences"):
                if name not in df.columns:
                    df[name] = pd.Series(None, index=df.index, dtype=object)
            df["n_counterfactuals"] = df["n_counterfactuals"].astype(object)
            df.loc[rows, "n_counterfactuals"] = [int(c) for c in cf]
            df.loc[rows, "counterfactuals"] = pd.Series(
                [[list(e)] if c else [] for c, e in zip(cf, df.loc[rows, "explanation"],
                                                        strict=True)],
                index=rows, dtype=object)
            df.loc[rows, "counterfactual_logits"] = pd.Series(
                [[float(p)] if c else [] for c, p in zip(cf, df.loc[rows, "final_logit"],
                                                         strict=True)],
                index=rows, dtype=object)
            df["n_counterfactuals"] = df["n_counterfactuals"].astype("int64")
    return df


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def read_fingerprint(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """A run directory's ``run.json``.

    Raises:
        ConfigError: The directory does not exist or holds no ``run.json``.
    """
    path = Path(run_dir) / RecordStore.FINGERPRINT
    if not Path(run_dir).is_dir():
        raise ConfigError(f"{run_dir} does not exist")
    if not path.is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no {RecordStore.FINGERPRINT})")
    fingerprint: dict[str, Any] = json.loads(path.read_text())
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


__all__ = [
    "RECORD_SCHEMA",
    "EventContext",
    "RecordStore",
    "RunDirectoryError",
    "event_record",
    "fingerprint_diff",
    "flatten",
    "load_run_stream",
    "read_fingerprint",
    "arrow_table",
    "column_type",
    "read_records",
    "upgrade_records",
]
