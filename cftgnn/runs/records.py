"""Resumable per-event records of an explanation run.

A run directory holds::

    run.json                 the run's fingerprint (the configuration that decides its results)
    records/<event>.parquet  one file per explained event, written atomically
    corrupt/                 records that did not read back, moved aside on resume (if any)
    summary.csv, summary.md  written at the end (derived; safe to delete)

Each record is written as soon as its event is explained (to a temporary name, flushed to
the disk, then renamed: ``cftgnn.files.atomic_output``), so a run killed at any moment, a
machine that loses power or a full disk leaves only complete records behind (the temporary
files of killed writers are removed when the run resumes). Rerunning with the same directory
reads every record back ([``RecordStore.done``][cftgnn.runs.RecordStore.done]), skips
their events and explains the rest; a record that does not read back (cut short by a copy, a
zero-byte file, a file of another schema) is moved aside as ``corrupt/<name>.corrupt-<n>`` with
one warning line, and its event is explained again: out of ``records/``, so that a repaired run
reads as one dataset with plain ``pandas.read_parquet("<run>/records")`` or ``pyarrow.dataset``
(runs resumed before 2026-12-01 kept it in ``records/``: resuming such a run moves it over to
``corrupt/``). Readers of finished runs
([``read_records``][cftgnn.runs.read_records]) name such a file in one warning line and leave
it out. A directory holding records under another fingerprint is refused, so records of two
configurations never mix (one without records is simply taken over).
"""

from __future__ import annotations

import json
import math
import os
import typing
from collections.abc import Mapping, Sequence
from dataclasses import Field, asdict, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from cftgnn.errors import CftgnnError, warn
from cftgnn.explain.result import RESULT_COLUMNS, ExplanationResult, column_types
from cftgnn.files import (
    atomic_output,
    atomic_write,
    corrupt_path,
    remove_stale_temporaries,
    set_aside,
)
from cftgnn.scoring.checks import Checks


class RunDirectoryError(CftgnnError):
    """The output directory holds records of another configuration (or unreadable ones)."""


class UnreadableRecordError(RunDirectoryError):
    """A record file does not read back as one event's record (the message says why)."""


def record_problem(path: Path, check_name: bool = False) -> str | None:
    """Why ``path`` is not a complete record, or None when it is one.

    Reads the file's footer and its ``event_id`` column (a few hundred records take a few
    hundred milliseconds): a file cut short or empty has no footer, a file of another
    schema has no integer ``event_id``.

    Args:
        path: The record file.
        check_name: Also require the ids it holds to be the event its name says (what resuming
            counts as done); a file copied from another event's then counts as unreadable.
    """
    try:
        if path.stat().st_size == 0:
            return "empty file"
        pf = pq.ParquetFile(path)
        field = pf.schema_arrow.field("event_id") if "event_id" in pf.schema_arrow.names \
            else None
        if field is None or not pa.types.is_integer(field.type):
            return "not a record (no integer event_id column)"
        ids = set(pf.read(columns=["event_id"]).column("event_id").to_pylist())
    except (OSError, pa.ArrowException, ValueError) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if check_name and path.stem.isdigit() and ids != {int(path.stem)}:
        return f"holds event ids {sorted(ids)[:3]}, not {int(path.stem)}"
    return None


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


def _older_schema(stored: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a stored fingerprint's ``schema_version`` is an older integer than the new
    one's (records of a newer version are never resumed by older code)."""
    old_version, new_version = stored.get("schema_version"), new.get("schema_version")
    return (isinstance(old_version, int) and isinstance(new_version, int)
            and old_version < new_version)


class RecordStore:
    """The records of one run directory.

    Args:
        root: The run's output directory (created when absent).
        fingerprint: JSON-serialisable description of everything that decides the records
            (dataset, model weights, explainer, sampling, ...), but nothing that does not
            (logging, progress bars, thread counts).
        schema: The columns every record file holds, with their types (explanation runs:
            ``RECORD_SCHEMA``); columns outside it get ``column_type``. None: every
            column gets ``column_type``.

    Raises:
        RunDirectoryError: If ``root`` already holds records under another fingerprint.
    """

    FINGERPRINT = "run.json"
    RECORDS = "records"
    #: Where records that do not read back are moved (``done``), beside ``records``.
    CORRUPT = "corrupt"

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
            if diff == ["schema_version"] and _older_schema(stored, self.fingerprint):
                # records of an older schema read back upgraded (``upgrade_records``), each
                # row keeping its own ``schema_version``: a run resumes across an upgrade
                diff = []
                atomic_write(path, json.dumps(self.fingerprint, indent=2,
                                              sort_keys=True).encode())
            if diff and not self._has_records():  # nothing to protect: take the directory
                atomic_write(path, json.dumps(self.fingerprint, indent=2,
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
            atomic_write(path, json.dumps(self.fingerprint, indent=2, sort_keys=True).encode())
        self.records_dir.mkdir(exist_ok=True)
        self.corrupt_dir = self.root / self.CORRUPT
        for folder in (self.root, self.records_dir):  # what killed writers left half-written
            remove_stale_temporaries(folder)
        for old in sorted(self.records_dir.glob("*.corrupt-*")):  # set aside by older versions
            os.replace(old, corrupt_path(self.corrupt_dir, old.name.rsplit(".corrupt-", 1)[0]))

    def _has_records(self) -> bool:
        return self.records_dir.is_dir() and any(self.records_dir.glob("*.parquet"))

    def _file(self, event_id: int) -> Path:
        return self.records_dir / f"{int(event_id):010d}.parquet"

    def done(self) -> set[int]:
        """Event ids with a complete record.

        Every record file is read back (``record_problem``); one that does not read is
        moved aside (``set_aside``) with one warning line naming it, so its event counts
        as not done and is explained again.
        """
        ids = set()
        for path in sorted(self.records_dir.glob("*.parquet")):
            problem = record_problem(path, check_name=True)
            if problem is None and path.stem.isdigit():
                ids.add(int(path.stem))
                continue
            if problem is None:
                continue  # not named after an event: not one of this store's records
            moved = set_aside(path, self.corrupt_dir)
            warn(f"record {path} is unreadable ({problem}); moved to "
                 f"{moved.relative_to(self.root)}, its event is explained again")
        return ids

    def write(self, record: Mapping[str, Any]) -> Path:
        """Write one event's record (keyed by its ``event_id``) atomically."""
        return self.write_rows(int(record["event_id"]), [record])

    def write_rows(self, event_id: int, rows: Sequence[Mapping[str, Any]]) -> Path:
        """Write several rows under one event's file atomically (e.g. one per explainer).

        Columns get explicit types (the store's schema, ``arrow_table``), so the files of
        a run directory share one schema and read as one dataset with plain
        ``pandas.read_parquet`` or ``pyarrow.dataset``.

        Raises:
            DiskFullError: No space left on the disk (the file is absent, no temporary left).
        """
        path = self._file(int(event_id))
        table = arrow_table(rows, self.schema)
        with atomic_output(path) as f:  # a temporary file per writer; none left on failure
            pq.write_table(table, f)
        return path

    def load(self) -> pd.DataFrame:
        """All records, ordered by event id (an empty frame when there are none)."""
        return read_records(self.records_dir)


@dataclass(frozen=True)
class EventContext:
    """What ``explain.py`` records next to an
    [``ExplanationResult``][cftgnn.explain.ExplanationResult] for one event.

    Attributes:
        setup_time_s: Seconds building the event's oracle (replaces the result's own).
        time_s: Oracle setup plus search, seconds.
        group: Prediction group of the sample (``correct`` / ``incorrect``).
        screen_logit: The logit the sampling pass saw.
        dataset: Stream name.
        model: Model name.
        strategy_name: The selection strategy's name.
        constraints: The user constraints, as JSON.
        auto_mode_ratio: ``mode=auto``'s cost ratio (NaN for a fixed mode).
        shard: Shard that explained the event.
            history: The explained prediction's history, ``event`` or ``batch_start``
            (``cftgnn.oracle.history``; schema 5, ``event`` in older records).
        group_logit: The logit whose sign ``group`` is: ``screen`` (the sampling pass's
            ``screen_logit``, which for a model with memory under ``history=event`` is not
            the explained ``original_logit``) or ``explained`` (the sampling pass scored the
            explained prediction: ``history=batch_start``). Schema 5; ``screen`` in older
            records.
        target: What was explained (``cftgnn.oracle.target``): ``logit`` (the logit's sign;
            older records) or ``rank`` (the true destination's TGB rank; schema 10).
        target_k: The rank target's k (None for the logit target).
        num_negatives: The event's number of negatives (None for the logit target).
        rank_before: TGB's rank of the true destination with nothing removed (None for the
            logit target).
        rank_after: Its rank with the answer removed (NaN when nothing was answered; None
            for the logit target).
        device: Where the event's model and oracle ran, the torch device (``cpu``,
            ``cuda:0``; ``device=auto`` chooses it, ``cftgnn.runs.build.explain_device``).
            Schema 11; null in older records (not recorded).
        checks: The exact checks after the search (``cftgnn.scoring.checks.Checks``): the
            logit with only the explanation kept (``keep_logit``, fidelity−), each protocol's
            curve logits and their seconds; each of its fields is a record column, in
            its order after the fields above (``record_fields``).
    """

    setup_time_s: float
    time_s: float
    group: str
    screen_logit: float
    dataset: str
    model: str
    strategy_name: str
    constraints: str = field(metadata={"since": 2, "old": "{}"})  # "{}": no constraint
    auto_mode_ratio: float
    shard: int
    history: str = field(default="event", metadata={"since": 5, "old": "event"})
    group_logit: str = field(default="screen", metadata={"since": 5, "old": "screen"})
    target: str = field(default="logit", metadata={"since": 10, "old": "logit"})
    target_k: int | None = field(default=None, metadata={"since": 10, "old": None})
    num_negatives: int | None = field(default=None, metadata={"since": 10, "old": None})
    rank_before: float | None = field(default=None, metadata={"since": 10, "old": None})
    rank_after: float | None = field(default=None, metadata={"since": 10, "old": None})
    device: str | None = field(default=None, metadata={"since": 11, "old": None})
    checks: Checks = Checks()


def record_fields() -> tuple[Field[Any], ...]:
    """The record columns ``EventContext`` adds, as dataclass fields: its own, then those of
    its ``checks`` (each field's metadata: ``since``, the schema that added it; ``old``, what
    older records read back as)."""
    return tuple(f for f in fields(EventContext) if f.name != "checks") + fields(Checks)


#: The Python type of each of ``record_fields``' columns (``arrow_type`` maps it).
_RECORD_TYPES: dict[str, Any] = {**typing.get_type_hints(EventContext),
                                 **typing.get_type_hints(Checks)}


def arrow_type(kind: Any) -> pa.DataType:
    """The arrow type of a record column's Python type: ``int`` -> ``int64``, ``float`` ->
    ``float64``, ``bool``, ``str`` and enums -> ``string``, ``tuple[X, ...]`` -> ``list<X>``;
    ``X | None`` is ``X`` (every column is nullable)."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if type(None) in typing.get_args(kind) or typing.get_origin(kind) is tuple:
        inner = arrow_type(args[0])
        return inner if type(None) in typing.get_args(kind) else pa.list_(inner)
    simple = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}
    if kind in simple:
        return simple[kind]
    if isinstance(kind, type) and issubclass(kind, Enum):
        return pa.string()
    raise TypeError(f"no arrow type for record column type {kind!r}")


#: Columns of ``robustness=true`` (``cftgnn.scoring.robustness``; null otherwise).
ROBUSTNESS_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("robust_impl", pa.float64()), ("robust_impl_n", pa.int64()),
    ("robust_model", pa.bool_()), ("robust_model_logit0", pa.float64()),
    ("robust_model_logit", pa.float64()), ("rule_group", pa.list_(pa.int64())),
    ("rule_r", pa.int64()), ("rule_prob", pa.float64()), ("rule_samples", pa.int64()),
    ("robustness_time_s", pa.float64()),
)

#: Ground-truth columns of a run on a stream with causes (``dataset=planted``;
#: ``cftgnn.scoring.ground_truth.cause_columns``; null on other streams).
GROUND_TRUTH_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("cause_total", pa.int64()), ("cause_size", pa.int64()), ("cause_auc", pa.float64()),
    ("cause_precision", pa.float64()), ("cause_contains", pa.bool_()),
    ("cause_contained", pa.bool_()), ("cause_equal", pa.bool_()),
    ("cause_logit", pa.float64()), ("cause_flip", pa.bool_()),
)

#: The columns of an explanation record, with their types, derived from the declarations:
#: the result's (``RESULT_COLUMNS``, typed by
#: [``ExplanationResult``][cftgnn.explain.ExplanationResult]'s annotations), then ``EventContext``'s
#: fields that are not result columns (``setup_time_s`` replaces the result's), then
#: ``ROBUSTNESS_COLUMNS``, then ``GROUND_TRUTH_COLUMNS``. Every record file of an explanation
#: run holds all of them (null where a value is absent, e.g. ``agreement`` when no set was
#: evaluated both ways), so a run directory reads as one dataset whatever mix of statuses it
#: holds.
RECORD_SCHEMA = pa.schema(
    [(c.name, arrow_type(column_types()[c.name])) for c in RESULT_COLUMNS]
    + [(f.name, arrow_type(_RECORD_TYPES[f.name])) for f in record_fields()
       if f.name not in column_types()]
    + list(ROBUSTNESS_COLUMNS) + list(GROUND_TRUTH_COLUMNS))


def event_record(result: ExplanationResult, context: EventContext) -> dict[str, Any]:
    """One record: the result's columns, then the context's, in ``RECORD_SCHEMA``'s
    order (a test keeps the two in step)."""
    own = {f.name: getattr(context, f.name) for f in fields(EventContext) if f.name != "checks"}
    return {**result.to_record(), **own, **asdict(context.checks)}


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
            row lacks it. Other columns follow with ``column_type``.
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


def read_records(path: str | os.PathLike[str], unreadable: str = "warn") -> pd.DataFrame:
    """Records of a run directory (or of its ``records`` folder), ordered by event id.

    Records written before schema version 2 get its columns with their old meaning
    (``upgrade_records``).

    Args:
        path: The run directory or its ``records`` folder.
        unreadable: What a record that does not read back does (``record_problem``):
            ``"warn"`` prints one ``warning:`` line naming it and leaves it out (its event
            then counts as not explained: rerunning the run's command explains it again);
            ``"raise"`` raises ``UnreadableRecordError``.
    """
    path = Path(path)
    if (path / RecordStore.RECORDS).is_dir():
        path = path / RecordStore.RECORDS
    frames = []
    for f in sorted(path.glob("*.parquet")):
        problem = record_problem(f)
        if problem is None:
            try:
                frames.append(pd.read_parquet(f))
                continue
            except (OSError, pa.ArrowException, ValueError) as exc:
                problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        message = f"record {f} is unreadable ({problem})"
        if unreadable == "raise":
            raise UnreadableRecordError(f"{message}; move it away or rerun the run's command, "
                                        "which explains its event again")
        warn(f"{message}; left out (rerun the run's command to explain its event again)")
    if not frames:
        return pd.DataFrame()
    return upgrade_records(pd.concat(frames, ignore_index=True))


def upgrade_records(df: pd.DataFrame) -> pd.DataFrame:
    """Fill the columns added by schema versions 2 to 11 into rows written without them.

    No certificate is claimed for old rows (``min_size_lower_bound = 0``), nothing was pruned
    or certified, every candidate was removable and ``size_before_prune`` is ``size``; their
    counterfactuals are their one answer when it flips (consequences not measured); no
    ranking was kept (``ranking`` and ``importance`` empty), so no curve either
    (``fid_curve_logits`` and ``acc_curve_logits`` empty); their history was ``event`` and
    their groups followed the screening logit (``group_logit`` ``screen``); the seconds of
    their checks after the search were not measured (``keep_time_s``, ``curve_time_s`` NaN);
    their curves, when they have some, are the ``common`` protocol's (``curve_protocols``),
    and no other protocol's curve was computed (empty, ``tempme_neg_logit`` NaN); how far an
    enumeration cut short got was not recorded (``next_size_share`` NaN: unknown), nor where
    an event ran (``device`` null).
    """
    if df.empty:
        return df
    df = df.copy()
    fills: dict[str, Any] = {c.name: df.get(c.old_from) if c.old_from else c.old
                             for c in RESULT_COLUMNS if c.since == 2}
    fills.update({f.name: f.metadata["old"] for f in record_fields()
                  if f.metadata.get("since") in (2, 5, 6, 7)
                  and not isinstance(f.metadata["old"], tuple)})
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
            for name in (c.name for c in RESULT_COLUMNS if c.since == 3):
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
    lists = [(c.name, c.old) for c in RESULT_COLUMNS if c.since == 4] + [
        (f.name, f.metadata["old"]) for f in record_fields()
        if f.metadata.get("since") in (4, 7) and isinstance(f.metadata["old"], tuple)]
    for name, old_value in lists:  # list columns: one value per row
        if name not in df.columns:
            df[name] = pd.Series([list(old_value)] * len(df), index=df.index, dtype=object)
        elif df[name].isna().any():
            rows = df.index[df[name].isna()]
            df.loc[rows, name] = pd.Series([list(old_value)] * len(rows), index=rows,
                                           dtype=object)
    # schema 7: which protocols' curves a row holds; older rows, the common one's if any
    if "curve_protocols" not in df.columns:
        df["curve_protocols"] = pd.Series(None, index=df.index, dtype=object)
    if df["curve_protocols"].isna().any():
        rows = df.index[df["curve_protocols"].isna()]
        df.loc[rows, "curve_protocols"] = pd.Series(
            [["common"] if len(fid) else [] for fid in df.loc[rows, "fid_curve_logits"]],
            index=rows, dtype=object)
    # schema 8: how far a cut-short enumeration got; unknown in older rows (NaN)
    for name in (c.name for c in RESULT_COLUMNS if c.since == 8):
        if name not in df.columns:
            df[name] = np.nan
    # schema 11: where an event ran; not recorded in older rows (null)
    if "device" not in df.columns:
        df["device"] = pd.Series(None, index=df.index, dtype=object)
    return df


__all__ = [
    "RECORD_SCHEMA",
    "GROUND_TRUTH_COLUMNS",
    "ROBUSTNESS_COLUMNS",
    "EventContext",
    "RecordStore",
    "RunDirectoryError",
    "event_record",
    "fingerprint_diff",
    "flatten",
    "UnreadableRecordError",
    "record_problem",
    "arrow_table",
    "arrow_type",
    "column_type",
    "read_records",
    "upgrade_records",
]
