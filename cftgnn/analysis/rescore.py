"""Add a curve protocol to finished runs without explaining again: ``python scripts/rescore.py
RUN_OR_SWEEP_DIR [...] --protocol P [P ...]``.

``explain.py`` computes, after each explanation, the exact curve logits of the protocols of its
``protocol=`` option (docs/metrics.md, "Protocols"). Each of them needs only the event's oracle
and the explainer's ranking, which every record keeps; so a protocol a run did not compute can
be added afterwards. For every explained record (status ``ok``) whose ``curve_protocols`` lack
a protocol asked for, this rebuilds the event's oracle as the run did (the run's checkpoint,
checked against run.json's ``weights_sha256``, its stream, history, constraints, ``k``,
``m_max`` and model batch size: ``RunOracles``, which also checks the rebuilt model gives the
recorded original logit), computes the protocol's columns with the pipeline's own
``protocol_columns`` and writes the record back atomically with ``curve_protocols`` extended
and the seconds added to ``curve_time_s``. Every other column is left as it was. Records that
hold the protocol already are left alone, so a rescore that is stopped continues where it
stopped when run again. When a run is done its run.json says the protocols its records now hold
(``protocol_keys``: resuming the run then takes the command with the new protocol list) and its
summary, when it has one, is written again.

The ``tgnnexplainer`` protocol scores a search that keeps its scored coalitions
(T-GNNExplainer, ``Explainer.scored_by_coalitions``) by those coalitions, which records do not
keep: it is refused for such a run, before any work.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import torch
from hydra.utils import get_class
from tqdm.auto import tqdm

from cftgnn.analysis.rules.checking import RunOracles
from cftgnn.cli import ArgumentParser
from cftgnn.errors import CftgnnError, ConfigError
from cftgnn.explain.result import ExplanationResult, ExplanationStatus
from cftgnn.files import atomic_write, check_writable_dir
from cftgnn.oracle.oracle import Oracle
from cftgnn.runs.build import make_explainer, protocol_keys, recorded_protocols
from cftgnn.runs.options import protocols_choice
from cftgnn.runs.pipeline import write_summary
from cftgnn.runs.records import RECORD_SCHEMA, RecordStore, upgrade_records
from cftgnn.runs.rundir import (
    FINGERPRINT,
    Run,
    add_oracle_arguments,
    find_runs,
    load_run,
    load_run_model,
    load_run_stream,
    run_checkpoint,
)
from cftgnn.scoring.checks import keep_logit, protocol_columns
from cftgnn.scoring.protocols import Protocol, negative_destination, sampled_slots
from cftgnn.scoring.summaries import summary_table

DESCRIPTION = ("Add curve protocols (docs/metrics.md, Protocols) to finished explanation runs "
               "from their records' rankings, without explaining again.")

#: The record columns ``rescore`` reads to decide which records need a protocol.
_COLUMNS = frozenset({"event_id", "status", "ranking", "curve_protocols", "original_logit"})


@dataclass(frozen=True)
class Rescore:
    """One run's share of a rescore (``plan``).

    Attributes:
        run: The run (its explained records).
        add: The protocols asked for that its run.json does not list yet, or that some of
            its records lack.
        todo: The explained events lacking one of ``add`` (stream order).
        coalitions: Its explainer is scored by its coalitions under ``tgnnexplainer``
            (``Explainer.scored_by_coalitions``).
    """

    run: Run
    add: tuple[Protocol, ...]
    todo: tuple[int, ...]
    coalitions: bool = False


def _lacking(curve_protocols: Any, protocols: Sequence[Protocol]) -> tuple[Protocol, ...]:
    have = set(curve_protocols)
    return tuple(p for p in protocols if p.value not in have)


def plan(path: Path, protocols: Sequence[Protocol],
         checkpoint_dir: str | None = None) -> Rescore:
    """What adding ``protocols`` to the run at ``path`` takes, with every check that can fail
    made first: a run directory of explanations, an explainer that serves the protocols
    (built as the run built it, asked once by ``Explainer.supports``) and, for
    ``tgnnexplainer``, one not scored by its coalitions, a writable directory, and the run's
    checkpoint with run.json's checksum.

    Raises:
        ConfigError: Naming the run and the problem (one line).
    """
    run = load_run(path, columns=_COLUMNS)
    fp = run.fingerprint
    target = str((fp.get("explainer") or {}).get("_target_", ""))
    try:
        get_class(target)
    except Exception:  # hydra wraps the import's error in its own
        raise ConfigError(f"{path}/{FINGERPRINT} names an explainer that does not load "
                          f"({target or 'none'})") from None
    try:
        explainer = make_explainer(fp["explainer"], fp.get("strategy"))
    except CftgnnError as exc:
        raise ConfigError(f"{path}/{FINGERPRINT}: its explainer does not build ({exc})") from None
    try:
        explainer.supports(None, protocols)  # the model is the run's: it explained with it
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    held = list(run.records.get("curve_protocols", []))
    todo = tuple(sorted(int(e) for e, have in zip(run.records.get("event_id", []), held,
                                                   strict=True) if _lacking(have, protocols)))
    lacked = {p for have in held for p in _lacking(have, protocols)}
    add = tuple(p for p in protocols if p not in recorded_protocols(fp) or p in lacked)
    coalitions = explainer.scored_by_coalitions
    if Protocol.TGNNEXPLAINER in lacked and coalitions:
        raise ConfigError(
            f"{path}: the tgnnexplainer protocol of explainer {explainer.name} cannot be added "
            "afterwards: it scores the search's coalitions, which records do not keep; rerun "
            "explain.py with protocol=[...,tgnnexplainer] (every other protocol can be added)")
    if not add:
        return Rescore(run, (), (), coalitions)
    check_writable_dir(path, str(path))
    if todo:
        run_checkpoint(run, checkpoint_dir)  # found, and the run's (its SHA-256), up front
    return Rescore(run, add, todo, coalitions)


def rescore_run(job: Rescore, checkpoint_dir: str | None = None, device: str = "cpu",
                progress: bool = True) -> int:
    """Add ``job.add`` to the records of ``job.todo``, then to run.json; the summary, when
    the run has one, is written again.

    Returns:
        The number of records rewritten.

    Raises:
        ConfigError: The rebuilt model does not give an event its recorded original logit.
    """
    run = job.run
    fp = run.fingerprint
    store = RecordStore(run.path, fp, schema=RECORD_SCHEMA)  # also clears killed writers' files
    written = 0
    if job.todo:
        stream = load_run_stream(fp)
        model = load_run_model(run, stream, checkpoint_dir, device)
        logits = {int(e): float(p) for e, p in zip(run.records["event_id"],
                                                   run.records["original_logit"], strict=True)}
        oracles = RunOracles(run, stream, model, logits)
        oracles.engine.expect(list(job.todo), run.k, run.m_max, run.history)
        slots = sampled_slots(int(model.num_neighbors), int(model.num_layers))
        pool = np.unique(stream.dst)
        seed = int(fp.get("seed", 0))
        bar = tqdm(job.todo, desc=f"rescoring {run.path.name}", unit="event",
                   disable=not progress, dynamic_ncols=True)
        for event_id in bar:
            path = store.records_dir / f"{event_id:010d}.parquet"
            table = pq.read_table(path)  # read once: the rows as stored, and upgraded
            rows = table.to_pylist()
            upgraded: list[dict[str, Any]] = upgrade_records(
                table.to_pandas()).to_dict("records")  # type: ignore[assignment]
            oracle = oracles(event_id)
            for row, full in zip(rows, upgraded, strict=True):
                if full["status"] == ExplanationStatus.OK.value:
                    row.update(_rescored(oracle, full, job, slots, pool, seed))
            store.write_rows(event_id, rows)
            written += 1
            del oracle
        bar.close()
    new = {k: v for k, v in fp.items() if k not in ("curves", "protocols")}
    new.update(protocol_keys(tuple({*recorded_protocols(fp), *job.add})))
    if new != fp:
        atomic_write(run.path / FINGERPRINT, json.dumps(new, indent=2, sort_keys=True).encode())
    if (written or new != fp) and (run.path / "summary.csv").is_file():
        write_summary(summary_table(store.load()), run.path)
    return written


def _rescored(oracle: Oracle, row: dict[str, Any], job: Rescore, slots: int,
              pool: np.ndarray, seed: int) -> dict[str, Any]:
    """The columns ``job`` adds to one explained record (nothing when it holds them).

    The calls ``after_search`` makes are made in its order up to the last protocol added
    (``keep_logit``, then each protocol's columns in ``Protocol``'s order), so the oracle's
    cache holds what it held in the run when the added protocol's sets are evaluated; the
    columns of the protocols the record holds are checked against its own (``_check``). Only
    the added protocols' seconds are timed.
    """
    have = {str(p) for p in row["curve_protocols"]}
    lacking = _lacking(have, job.add)
    if not lacking:
        return {}
    result = ExplanationResult.from_record(row)
    event_id = int(row["event_id"])
    negative = negative_destination(pool, event_id, seed)
    keep_logit(oracle, result)
    out: dict[str, Any] = {}
    seconds = 0.0
    for protocol in [p for p in Protocol if p.value in have or p in lacking]:
        if protocol in lacking:
            start = time.perf_counter()
            out.update(protocol_columns(oracle, result, [protocol], slots, negative))
            seconds += time.perf_counter() - start
        elif not (protocol is Protocol.TGNNEXPLAINER and job.coalitions):  # not without them
            _check(protocol_columns(oracle, result, [protocol], slots, negative), row,
                   job.run.path)
        if protocol is lacking[-1]:
            break
    before = row.get("curve_time_s")
    done = have | {p.value for p in lacking}
    return {**out, "curve_protocols": [p.value for p in Protocol if p.value in done],
            "curve_time_s": seconds + (0.0 if before is None or np.isnan(before)
                                       else float(before))}


def _check(again: dict[str, Any], row: dict[str, Any], where: Path) -> None:
    """Refuse a rebuilt oracle whose curve logits of a protocol the record holds are not the
    record's (beyond float rounding: the same model and stream give the same logits).

    Raises:
        ConfigError: Naming the run, the event and the column.
    """
    for name, value in again.items():
        want = np.asarray(row[name], dtype=np.float64)
        got = np.asarray(value, dtype=np.float64)
        if want.shape != got.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-4,
                                                       equal_nan=True):
            raise ConfigError(f"the oracle rebuilt from {where}/{FINGERPRINT} gives event "
                              f"{int(row['event_id'])} other {name} than its record: the "
                              "weights or the stream are not the run's")


def main(argv: Sequence[str] | None = None) -> int:
    """``rescore.py RUN_OR_SWEEP [...] --protocol P [P ...]``: add the protocols to every run
    at or below the paths; returns the number of records rewritten.

    Raises:
        ConfigError: A path holds no run, a protocol is unknown, a run cannot get it, its
            checkpoint is missing or not the run's (before any record is rewritten).
    """
    parser = ArgumentParser(description=DESCRIPTION)
    parser.add_argument("paths", nargs="*", metavar="RUN",
                        help="explanation run directories, or folders holding them (a sweep)")
    parser.add_argument("--protocol", nargs="+", required=True, metavar="P",
                        help="protocols to add, as explain.py's protocol=: common, "
                             "tgnnexplainer, tempme, temgx or all (several: --protocol common "
                             "tempme)")
    add_oracle_arguments(parser)
    args = parser.parse_args(argv)
    if not args.paths:
        raise ConfigError("name at least one run directory (python scripts/rescore.py RUN "
                          "--protocol tempme)")
    names = [n for value in args.protocol for n in value.strip("[]").split(",") if n]
    protocols = protocols_choice(names)
    if args.num_threads < 1:
        raise ConfigError(f"--num-threads must be >= 1, got {args.num_threads}")
    paths = []
    for p in map(Path, args.paths):
        found = find_runs([p])
        if not found:
            raise ConfigError(f"{p} is not a run directory and holds none (no {FINGERPRINT})")
        paths.extend(found)
    jobs = [plan(p, protocols, args.checkpoint_dir) for p in dict.fromkeys(paths)]
    torch.set_num_threads(args.num_threads)
    total = 0
    for job in jobs:
        n = rescore_run(job, args.checkpoint_dir, args.device, not args.no_progress)
        total += n
        listed = ", ".join(p.value for p in recorded_protocols(
            json.loads((job.run.path / FINGERPRINT).read_text())))
        print(f"{job.run.path}: {n} of {len(job.run.records)} explained records rescored; "
              f"its records hold the protocols {listed or 'none'}", file=sys.stdout)
    return total


__all__ = ["Rescore", "main", "plan", "rescore_run"]
