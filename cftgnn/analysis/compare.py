"""Compare the records of two runs event by event: ``python scripts/compare_runs.py A B``.

Two uses: an option's effect on the answers (how many explanations change when greedy's
improvement test gets a tolerance, for instance), and a check that a change of the code
leaves the records alone (the same run before and after, every result column compared).

Only runs of one dataset and one model kind are compared (others are refused: their event
ids name different events), and only the events both runs explained; runs that share no event
end in one ``error:`` line (exit status 2), since nothing was compared. Explanations are
compared as *sets* of removed events (the order found is reported apart); numbers within
``atol``; the columns that describe the run or its timing (``IGNORED``) are not compared.
A column that a record's schema did not have yet and that reads back empty there (the
explainer's ``ranking`` and ``importance`` and the curve logits of schema 4, in records made
before it: ``NOT_RECORDED_BEFORE``) is *not recorded* for that event, not a difference;
such events are counted apart.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from argparse import SUPPRESS
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cftgnn.cli import ArgumentParser
from cftgnn.errors import ConfigError
from cftgnn.explain.result import RESULT_COLUMNS
from cftgnn.runs.records import record_fields
from cftgnn.runs.rundir import (
    FINGERPRINT,
    RECORDS,
    read_fingerprint,
    read_records,
    run_names,
)
from cftgnn.scoring.benchmark_metrics import seed_stability

#: Columns that name the run, time it or say where it ran (``device``), never compared.
#: Besides these, every timing column (``time_s`` or a name ending in ``_time_s``, e.g.
#: ``robustness_time_s``) is ignored: ``compared_columns``.
IGNORED = frozenset({
    "schema_version", "wall_time_s", "oracle_time_s", "setup_time_s", "time_s", "shard",
    "auto_mode_ratio", "explainer", "strategy", "strategy_name", "dataset", "model",
    "prune", "certify", "constraints", "oracle_mode", "device",
})



#: Columns whose records made before a schema version read back empty (nothing was kept
#: then: ``upgrade_records`` fills them with an empty list, or NaN for a number), with that
#: version: an empty or NaN cell in a record of an older ``schema_version`` is not recorded,
#: not compared.
NOT_RECORDED_BEFORE: dict[str, int] = {
    **{c.name: c.since for c in RESULT_COLUMNS if c.unrecorded},
    **{f.name: int(f.metadata["since"]) for f in record_fields()
       if f.metadata.get("old") == ()},
}


def is_timing(column: str) -> bool:
    """Whether ``column`` holds seconds measured by the run (``time_s``, ``*_time_s``)."""
    return column == "time_s" or column.endswith("_time_s")


def compared_columns(columns: Iterable[str]) -> list[str]:
    """The columns two runs are compared on, sorted: all but ``IGNORED`` and timings."""
    return sorted(c for c in set(columns) - IGNORED if not is_timing(c))


@dataclass(frozen=True)
class RunComparison:
    """The difference between two runs on the events both explained.

    Attributes:
        common: Events in both runs.
        only_a: Events only run A explained.
        only_b: Events only run B explained.
        explanation_differs: Events whose explanations differ as sets of removed events.
        order_differs: Events with the same set found in another order.
        flip_differs: Events counterfactual in one run and not in the other.
        fidelity: Share of ``common`` events flipped, ``(A, B)``.
        mean_size: Mean size of the counterfactuals found among ``common``, ``(A, B)``.
        columns_differ: Column name -> number of ``common`` events on which it differs
            (only columns that differ somewhere; columns missing in one run count all).
        not_recorded: Column name -> number of ``common`` events on which one run's record
            predates the column (``NOT_RECORDED_BEFORE``), so it was not compared.
        overlap: Mean Jaccard overlap of the two answers over ``common`` (NaN without one):
            the benchmark's seed stability of two runs under different seeds
            (``cftgnn.scoring.benchmark_metrics.seed_stability``).
    """

    common: int
    only_a: int
    only_b: int
    explanation_differs: list[int]
    order_differs: list[int]
    flip_differs: list[int]
    fidelity: tuple[float, float]
    mean_size: tuple[float, float]
    columns_differ: dict[str, int] = field(default_factory=dict)
    not_recorded: dict[str, int] = field(default_factory=dict)
    overlap: float = float("nan")

    @property
    def identical(self) -> bool:
        """Same events and no compared column differs."""
        return not (self.only_a or self.only_b or self.columns_differ)


def _same(a: Any, b: Any, atol: float) -> bool:
    """Equality of two record cells: lists element-wise, floats within ``atol`` (NaN = NaN)."""
    if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
        xa, xb = np.asarray(a).ravel(), np.asarray(b).ravel()
        return xa.shape == xb.shape and all(_same(x, y, atol) for x, y in zip(xa, xb,
                                                                            strict=True))
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating)):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return abs(fa - fb) <= atol
    return bool(a == b)


def _unrecorded(frame: pd.DataFrame, column: str) -> list[bool]:
    """Per row of ``frame``: whether ``column`` was not recorded yet (an empty or NaN cell in
    a record of a schema before ``NOT_RECORDED_BEFORE``'s version; no ``schema_version``: 1)."""
    since = NOT_RECORDED_BEFORE.get(column)
    if since is None or column not in frame.columns:
        return [False] * len(frame)
    versions = (frame["schema_version"].fillna(1).astype(int).tolist()
                if "schema_version" in frame.columns else [1] * len(frame))
    return [v < since and _empty(x) for v, x in zip(versions, frame[column], strict=True)]


def _empty(cell: Any) -> bool:
    """An unrecorded cell: None, NaN or an empty list."""
    if cell is None:
        return True
    if isinstance(cell, (float, np.floating)):
        return math.isnan(float(cell))
    return np.asarray(cell).size == 0


def _mean_size(df: pd.DataFrame) -> float:
    flipped = df[df["is_counterfactual"].astype(bool)]
    return float(flipped["size"].mean()) if len(flipped) else float("nan")


def compare_records(a: pd.DataFrame, b: pd.DataFrame, atol: float = 1e-6) -> RunComparison:
    """Compare two runs' records (as [``read_records``][cftgnn.runs.read_records] returns
    them).

    Args:
        a: Records of run A, one row per event (``event_id``, ``explanation``,
            ``is_counterfactual``, ``size`` and any other columns).
        b: Records of run B.
        atol: Absolute tolerance for float columns.

    Returns:
        The comparison over the events both runs explained.
    """
    for name, df in (("A", a), ("B", b)):
        missing = {"event_id", "explanation", "is_counterfactual", "size"} - set(df.columns)
        if missing:
            raise ConfigError(f"run {name} has no column(s) {', '.join(sorted(missing))}")
    ea, eb = set(a["event_id"].tolist()), set(b["event_id"].tolist())
    common = sorted(ea & eb)
    ra = a.set_index("event_id").loc[common]
    rb = b.set_index("event_id").loc[common]
    expl_diff, order_diff, flip_diff = [], [], []
    for ev, xa, xb, fa, fb in zip(common, ra["explanation"], rb["explanation"],
                                  ra["is_counterfactual"], rb["is_counterfactual"],
                                  strict=True):
        la, lb = [int(x) for x in xa], [int(x) for x in xb]
        if set(la) != set(lb):
            expl_diff.append(int(ev))
        elif la != lb:
            order_diff.append(int(ev))
        if bool(fa) != bool(fb):
            flip_diff.append(int(ev))
    columns: dict[str, int] = {}
    unrecorded: dict[str, int] = {}
    for col in compared_columns(set(ra.columns) | set(rb.columns)):
        if col not in ra.columns or col not in rb.columns:
            columns[col] = len(common)
            continue
        skip = [x or y for x, y in zip(_unrecorded(ra, col), _unrecorded(rb, col),
                                       strict=True)]
        n = sum(not s and not _same(x, y, atol)
                for x, y, s in zip(ra[col], rb[col], skip, strict=True))
        if n:
            columns[col] = n
        if any(skip):
            unrecorded[col] = sum(skip)
    fid = (float(ra["is_counterfactual"].astype(bool).mean()) if common else float("nan"),
           float(rb["is_counterfactual"].astype(bool).mean()) if common else float("nan"))
    overlap = seed_stability([[list(x), list(y)] for x, y in
                              zip(ra["explanation"], rb["explanation"], strict=True)])
    return RunComparison(common=len(common), only_a=len(ea - eb), only_b=len(eb - ea),
                         explanation_differs=expl_diff, order_differs=order_diff,
                         flip_differs=flip_diff, fidelity=fid,
                         mean_size=(_mean_size(ra), _mean_size(rb)), columns_differ=columns,
                         not_recorded=unrecorded, overlap=overlap)


def format_comparison(c: RunComparison, name_a: str = "A", name_b: str = "B") -> str:
    """A short text report of ``compare_records``'s result."""
    def ids(xs: list[int]) -> str:
        return ", ".join(map(str, xs[:10])) + (" …" if len(xs) > 10 else "")

    lines = [
        f"events: {c.common} in both, {c.only_a} only in {name_a}, {c.only_b} only in {name_b}",
        f"fidelity+: {c.fidelity[0]:.3f} ({name_a}) / {c.fidelity[1]:.3f} ({name_b}); "
        f"mean size: {c.mean_size[0]:.2f} / {c.mean_size[1]:.2f}",
        f"explanation differs (as a set): {len(c.explanation_differs)} of {c.common}"
        + (f" [{ids(c.explanation_differs)}]" if c.explanation_differs else ""),
        f"same set, other order: {len(c.order_differs)}",
        f"answer overlap (mean Jaccard; seed stability when the runs differ in seed only): "
        f"{c.overlap:.3f}",
        f"flip differs: {len(c.flip_differs)}"
        + (f" [{ids(c.flip_differs)}]" if c.flip_differs else ""),
    ]
    if c.columns_differ:
        lines.append("columns that differ (events): " + ", ".join(
            f"{k} ({v})" for k, v in c.columns_differ.items()))
    else:
        lines.append("every compared column is equal")
    if c.not_recorded:
        lines.append("not recorded in one run (records older than the column; not compared, "
                     "events): " + ", ".join(f"{k} ({v})" for k, v in c.not_recorded.items()))
    return "\n".join(lines)


def _run(path: str | os.PathLike[str]) -> pd.DataFrame:
    p = Path(path)
    if not (p / RECORDS).is_dir() and not any(p.glob("*.parquet")):
        raise ConfigError(f"{p} is not a run directory (no records/ folder)")
    return read_records(p)


def check_comparable(run_a: str | os.PathLike[str], run_b: str | os.PathLike[str]) -> None:
    """Refuse two runs of different datasets or model kinds (by their ``run.json``; a
    folder of records without one is checked by the records' ``dataset`` column in
    ``check_same_events``).

    Raises:
        ConfigError: Naming both datasets or both models.
    """
    if not all((Path(p) / FINGERPRINT).is_file() for p in (run_a, run_b)):
        return
    (da, ma), (db, mb) = (run_names(read_fingerprint(p)) for p in (run_a, run_b))
    if da != db:
        raise ConfigError(f"the runs explain different datasets ({da} in {run_a}, {db} in "
                          f"{run_b}): their event ids name different events")
    if ma != mb:
        raise ConfigError(f"the runs explain different models ({ma} in {run_a}, {mb} in "
                          f"{run_b}); compare runs of one model")


def check_same_events(a: pd.DataFrame, b: pd.DataFrame, name_a: str, name_b: str) -> None:
    """Refuse records of different datasets, and runs that share no event.

    Raises:
        ConfigError: Naming what differs, or that no event is shared.
    """
    if "dataset" in a.columns and "dataset" in b.columns:
        va, vb = set(a["dataset"].dropna().astype(str)), set(b["dataset"].dropna().astype(str))
        if va and vb and va != vb:
            raise ConfigError(f"the runs explain different datasets ({', '.join(sorted(va))} "
                              f"in {name_a}, {', '.join(sorted(vb))} in {name_b})")
    if a.empty or b.empty:
        empty = name_a if a.empty else name_b
        raise ConfigError(f"{empty} holds no readable record: nothing to compare")
    shared = set(a["event_id"].tolist()) & set(b["event_id"].tolist()) \
        if "event_id" in a.columns and "event_id" in b.columns else set()
    if not shared:
        raise ConfigError(f"the runs share no event ({len(a)} in {name_a}, {len(b)} in "
                          f"{name_b}): nothing to compare")


def records_digest(records: pd.DataFrame) -> str:
    """A SHA-256 of a run's records on the columns runs are compared on
    (``compared_columns``: every column but timings and ``IGNORED``), rows by event id: two
    runs with the same digest hold the same values (floats bit for bit), whatever their
    seconds. Committed digests say a change left a run's records as they were.

    Args:
        records: A run's records (``read_records``).
    """
    columns = compared_columns(records.columns)
    rows = records.sort_values("event_id")[columns].to_dict("records")
    text = json.dumps([[repr(_plain(row[c])) for c in columns] for row in rows])
    return hashlib.sha256(f"{columns!r}{text}".encode()).hexdigest()


def _plain(value: Any) -> Any:
    """A record cell as a plain Python value (arrays and tuples as lists; NaN as "nan")."""
    if isinstance(value, np.ndarray | list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def main(argv: Sequence[str] | None = None) -> None:
    """``compare_runs.py A B [--atol X] [--strict]``: print the comparison; with
    ``--strict`` exit with status 1 when the runs differ. ``compare_runs.py --digest RUN
    [RUN ...]`` prints each run's ``records_digest`` instead."""
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a")
    parser.add_argument("run_b", nargs="?")
    parser.add_argument("more", nargs="*", help=SUPPRESS)
    parser.add_argument("--digest", action="store_true",
                        help="print each run's digest of its compared columns and exit")
    parser.add_argument("--atol", type=float, default=1e-6,
                        help="absolute tolerance for float columns (default 1e-6)")
    parser.add_argument("--strict", action="store_true",
                        help="exit status 1 when any compared column or event differs")
    args = parser.parse_args(argv)
    if args.digest:
        for run in [args.run_a, *([args.run_b] if args.run_b else []), *args.more]:
            print(f"{records_digest(_run(run))}  {run}")
        return
    if args.run_b is None or args.more:
        raise ConfigError("compare_runs.py compares two runs: RUN_A RUN_B (or --digest RUN ...)")
    if not args.atol >= 0:  # also refuses nan
        raise ConfigError(f"--atol must be a number >= 0, got {args.atol}")
    check_comparable(args.run_a, args.run_b)
    a, b = _run(args.run_a), _run(args.run_b)
    check_same_events(a, b, args.run_a, args.run_b)
    c = compare_records(a, b, atol=args.atol)
    print(format_comparison(c, "A", "B"))
    if args.strict and not c.identical:
        raise SystemExit(1)


__all__ = ["IGNORED", "NOT_RECORDED_BEFORE", "RunComparison", "check_comparable",
           "check_same_events", "compare_records", "compared_columns", "format_comparison",
           "is_timing", "main", "records_digest"]
