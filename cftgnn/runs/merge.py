"""Merge the records of a sharded run (``shard=i num_shards=n``) into one result set.

``python scripts/merge_records.py outputs/sweeps/<time>`` finds every run directory below the
given paths, checks that they are shards of one configuration (fingerprints equal apart from
``shard`` and the record schema each was written with), that no event is recorded twice and
which shards are missing, and writes the union as an ordinary run directory (records,
``run.json``, summary) that every reader of runs accepts.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from cftgnn.cli import ArgumentParser
from cftgnn.errors import ConfigError
from cftgnn.files import check_can_write
from cftgnn.runs.pipeline import write_summary
from cftgnn.runs.records import RECORD_SCHEMA, RecordStore, fingerprint_diff
from cftgnn.runs.rundir import find_runs, read_fingerprint, read_records
from cftgnn.scoring.summaries import format_summary, summary_table


def merge_runs(runs: Sequence[Path], out: str | os.PathLike[str]) -> pd.DataFrame:
    """Merge shard run directories into ``out``; returns the merged records.

    Raises:
        ConfigError: If the runs are not shards of one configuration, or an event is
            recorded by two of them.
    """
    records, merged = combine_runs(runs)
    store = RecordStore(out, merged, schema=RECORD_SCHEMA)
    for rec in records.to_dict("records"):
        store.write({str(k): v for k, v in rec.items()})
    return records


def combine_runs(runs: Sequence[Path]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The union of shard run directories' records, ordered by event id, and the merged
    run's fingerprint (what ``merge_runs`` writes; a warning line names missing shards).

    Raises:
        ConfigError: If the runs are not shards of one configuration, or an event is
            recorded by two of them.
    """
    if not runs:
        raise ConfigError("no run directories (folders with run.json) to merge")
    prints = [read_fingerprint(r) for r in runs]
    # the shard, and the record schema a shard was written with (a run split across an
    # upgrade: its records read back upgraded, each row keeping its own schema_version)
    own = ("shard", "schema_version")
    base = {k: v for k, v in prints[0].items() if k not in own}
    for run, fp in zip(runs[1:], prints[1:], strict=True):
        diff = fingerprint_diff(base, {k: v for k, v in fp.items() if k not in own})
        if diff:
            raise ConfigError(f"{run} is not a shard of the same configuration as {runs[0]} "
                              f"(differs in: {', '.join(diff[:8])})")
    frames = [read_records(r) for r in runs]
    records = pd.concat([f for f in frames if not f.empty], ignore_index=True) if any(
        not f.empty for f in frames) else pd.DataFrame()
    if not records.empty:
        dup = records["event_id"][records["event_id"].duplicated()]
        if len(dup):
            raise ConfigError(f"event {int(dup.iloc[0])} is recorded by more than one run")
        records = records.sort_values("event_id", ignore_index=True)
    shards = sorted({int(fp["shard"]) for fp in prints})
    missing = sorted(set(range(int(base.get("num_shards", 1)))) - set(shards))
    if missing:
        print(f"warning: shards {missing} of {base.get('num_shards')} are missing")
    merged: dict[str, Any] = {**base, "shard": "merged", "merged_shards": shards}
    versions = [fp["schema_version"] for fp in prints if isinstance(fp.get("schema_version"), int)]
    if versions:
        merged["schema_version"] = max(versions)  # the newest: older rows keep their own
    return records, merged


def merge_command(sweep: str | os.PathLike[str]) -> str:
    """The command that merges the shards below ``sweep`` into ``<sweep>/merged``."""
    return f"python scripts/merge_records.py {shlex.quote(str(sweep))}"


def sweep_summary(sweep: str | os.PathLike[str]) -> str:
    """The summary table of every shard below ``sweep`` together (the table that
    ``merge_records.py`` prints, without writing anything), with the command that writes
    them as one run directory: what a ``-m sweep=shards`` sweep prints when its last shard
    is done (``ShardsSummary``).

    Raises:
        ConfigError: The folder holds no shard, or its shards are not of one configuration.
    """
    merged = Path(sweep) / "merged"
    runs = [r for r in find_runs([sweep]) if r.resolve() != merged.resolve()]
    records, _ = combine_runs(runs)
    table = summary_table(records)
    return "\n".join([
        f"all {len(runs)} shards of {sweep} together: {len(records)} records",
        format_summary(table, index="group", hide_nan=True, meanings=True),
        f"to write them as one run directory ({merged}): {merge_command(sweep)}"])


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    """Command line: ``merge_records.py PATH [PATH ...] [--out DIR]``."""
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="run or sweep directories holding the shards")
    parser.add_argument("--out", help="output run directory (default: <first path>/merged)")
    args = parser.parse_args(argv)
    out = Path(args.out or Path(args.paths[0]) / "merged")
    check_can_write(out, "--out")
    runs = [r for r in find_runs(args.paths) if r.resolve() != out.resolve()]
    records = merge_runs(runs, out)
    table = summary_table(records)
    write_summary(table, out)
    print(f"merged {len(records)} records from {len(runs)} runs into {out}")
    print(format_summary(table, index="group", hide_nan=True, meanings=True))
    return table


__all__ = ["combine_runs", "find_runs", "main", "merge_command", "merge_runs",
           "sweep_summary"]
