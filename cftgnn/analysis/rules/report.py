"""Rules per group of runs: pooling, tables, ``rules.md`` / ``rules.csv`` and the command line.

Step 4 of the regional rules (see ``cftgnn.analysis.rules``), and ``main``, the body
of ``scripts/rules.py``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from cftgnn.analysis.rules.checking import (
    CHECK_COLUMNS,
    OracleFactory,
    RunOracles,
    check_rules,
    order_rules,
)
from cftgnn.analysis.rules.features import feature_table, split_events
from cftgnn.analysis.rules.learning import learn_rules
from cftgnn.cli import ArgumentParser
from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.files import atomic_write, check_can_write
from cftgnn.runs.rundir import (
    Run,
    add_oracle_arguments,
    load_run,
    load_run_model,
    load_run_stream,
    run_checkpoint,
)

#: The first line of ``--help``.
DESCRIPTION = "Regional counterfactual rules: short, checked statements of *what* to remove."


def group_runs(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """Runs pooled by ``Run.key``, labelled ``dataset · model`` (with what differs when
    two groups share those names), in the order first met."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.key, []).append(run)
    labels: dict[str, list[Run]] = {}
    for members in groups.values():
        first = members[0]
        base = " · ".join(first.names)
        twins = [g[0] for g in groups.values() if " · ".join(g[0].names) == base]
        label = base
        if len(twins) > 1:
            label = f"{base} ({_difference(first, twins)})"
        labels[label] = members
    return labels


def _difference(run: Run, others: Sequence[Run]) -> str:
    """What sets ``run`` apart from ``others``: weights, k, m_max, constraints."""
    parts = []
    if len({json.dumps(o.fingerprint.get("model"), sort_keys=True) for o in others}) > 1:
        parts.append(f"weights {Path(str(run.fingerprint['model'].get('weights'))).name}")
    if len({o.k for o in others}) > 1:
        parts.append(f"k={run.k}")
    if len({o.m_max for o in others}) > 1:
        parts.append(f"m_max={run.m_max}")
    if len({o.constraints for o in others}) > 1:
        active = {k: v for k, v in run.constraints.to_dict().items()
                  if v not in (None, [], False)}
        parts.append(f"constraints {json.dumps(active) if active else 'none'}")
    if len({json.dumps(o.fingerprint.get("dataset"), sort_keys=True) for o in others}) > 1:
        parts.append(f"stream {run.path.name}")
    return ", ".join(parts) or run.path.name



TABLE_COLUMNS = {"rule": "rule", "train_support": "support (train)",
                 "coverage": "coverage", "precision": "precision",
                 "heldout_events": "held-out events", "mean_removed": "mean removed"}


def rules_table(name: str, checked: pd.DataFrame, train_events: int) -> pd.DataFrame:
    """``checked`` (``order_rules``) with the group's name and training size."""
    out = checked.copy()
    out.insert(0, "group", name)
    out.insert(1, "rank", np.arange(1, len(out) + 1))
    out["train_events"] = int(train_events)
    return out


def markdown(table: pd.DataFrame) -> str:
    """The table's display columns as markdown (shares to 2 decimals)."""
    shown = table[list(TABLE_COLUMNS)].rename(columns=TABLE_COLUMNS)
    lines = ["| # | " + " | ".join(shown.columns) + " |",
             "|---|" + "|".join("---" for _ in shown.columns) + "|"]
    for n, row in enumerate(shown.itertuples(index=False), start=1):
        cells = [f"`{row[0]}`"]
        for value in row[1:]:
            if isinstance(value, float | np.floating):
                cells.append("—" if math.isnan(value) else f"{value:.2f}")
            else:
                cells.append(str(value))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class GroupResult:
    """The rules of one group of runs."""

    name: str
    runs: tuple[Path, ...]
    train_events: int
    heldout_events: int
    table: pd.DataFrame
    note: str = ""


def group_rules(name: str, runs: Sequence[Run], max_depth: int, min_coverage: float, top: int,
                seed: int, oracles: Callable[[], OracleFactory], progress: bool = True,
                stream: EventStream | None = None, index: TemporalIndex | None = None,
                ) -> GroupResult:
    """Learn, check and order the rules of one group of runs.

    Args:
        name: The group's label.
        runs: Its runs (same stream, model, ``k``, ``m_max``, constraints).
        max_depth: Tree depth.
        min_coverage: Smallest training support of a rule.
        top: Rules kept in the table.
        seed: Seed of the split and the tree.
        oracles: Builds the oracle factory (called only when there is a rule to check).
        progress: Show a progress bar.
        stream: The group's stream (loaded from the first run when omitted).
        index: Its index.
    """
    first = runs[0]
    stream = stream if stream is not None else load_run_stream(first.fingerprint)
    index = index if index is not None else TemporalIndex(stream)
    table = pd.concat([feature_table(stream, r.records, first.k, first.m_max,
                                     first.constraints, index, first.batch_size) for r in runs],
                      ignore_index=True)
    train_ids, held_ids = split_events(table["event_id"], seed)
    train = table[table["event_id"].isin(train_ids)]
    held = table[table["event_id"].isin(held_ids)]
    paths = tuple(r.path for r in runs)

    def result(checked: pd.DataFrame, note: str = "") -> GroupResult:
        return GroupResult(name, paths, len(train_ids), len(held_ids),
                           rules_table(name, checked, len(train_ids)), note)

    empty = order_rules(pd.DataFrame(columns=CHECK_COLUMNS))
    if len(held_ids) == 0:
        return result(empty, f"{len(train_ids)} explained event(s): too few to split")
    rules = learn_rules(train, max_depth, min_coverage, seed)
    if not rules:
        why = ("no counterfactual in the training half" if not train["label"].any()
               else f"no rule reaches a training support of {min_coverage:g}")
        return result(empty, why)
    checked = check_rules(rules, held, oracles(), progress=progress, desc=f"rules {name}")
    return result(order_rules(checked, top))


def format_result(result: GroupResult) -> str:
    """One group's heading, table and the rules in words."""
    head = (f"### {result.name}\n\n{len(result.runs)} run(s); {result.train_events} training "
            f"events, {result.heldout_events} held-out events")
    if result.table.empty:
        return f"{head}\n\nno rules: {result.note or 'none found'}"
    words = "\n".join(f"{n}. {a}" for n, a in enumerate(result.table["action"], start=1))
    return f"{head}\n\n{markdown(result.table)}\n\n{words}"


def write_results(results: Sequence[GroupResult], out: Path, header: str) -> list[Path]:
    """``rules.md`` and ``rules.csv`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    md, csv = out / "rules.md", out / "rules.csv"
    atomic_write(md, (header + "\n\n" + "\n\n".join(format_result(r) for r in results)
                      + "\n").encode())
    tables = [r.table for r in results if not r.table.empty]
    atomic_write(csv, (pd.concat(tables, ignore_index=True) if tables
                       else pd.DataFrame(columns=["group", "rank", *CHECK_COLUMNS, "score",
                                                  "train_events"])
                       ).to_csv(index=False).encode())
    return [md, csv]


HEADER = ("# Regional counterfactual rules\n\nRules learned on a seeded half of the explained "
          "events (decision tree, max depth {depth}, training support >= {cov:g}, seed "
          "{seed}); coverage and precision measured on the other half with the exact oracle "
          "(removing every removable candidate the rule matches). Ordered by precision × "
          "coverage.")


def main(argv: Sequence[str] | None = None) -> list[GroupResult]:
    """``rules.py RUN [RUN ...] [--out DIR] [--max-depth 3] [--min-coverage 0.05] [--top 5]
    [--seed 0]``: print and write the rules per dataset × model."""
    parser = ArgumentParser(description=DESCRIPTION)
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="explanation run directories (holding run.json and records/)")
    parser.add_argument("--out", help="output folder (default: <first run>/rules)")
    parser.add_argument("--max-depth", type=int, default=3,
                        help="depth of the decision tree = conditions per rule (default 3)")
    parser.add_argument("--min-coverage", type=float, default=0.05,
                        help="smallest share of training events a rule must match (default "
                             "0.05)")
    parser.add_argument("--top", type=int, default=5, help="rules per table (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split and the tree")
    add_oracle_arguments(parser)
    args = parser.parse_args(argv)
    if not args.runs:
        raise ConfigError("name at least one run directory (python scripts/rules.py RUN ...)")
    if args.max_depth < 1:
        raise ConfigError(f"--max-depth must be >= 1, got {args.max_depth}")
    if not 0 <= args.min_coverage <= 1:
        raise ConfigError(f"--min-coverage must be in [0, 1], got {args.min_coverage}")
    if args.top < 1:
        raise ConfigError(f"--top must be >= 1, got {args.top}")
    if args.num_threads < 1:
        raise ConfigError(f"--num-threads must be >= 1, got {args.num_threads}")
    out = Path(args.out) if args.out else Path(args.runs[0]) / "rules"
    check_can_write(out, "--out")
    runs = [load_run(p) for p in args.runs]
    torch.set_num_threads(args.num_threads)
    if all(r.records.empty for r in runs):
        raise ConfigError("no explained event (status ok) in "
                          + ", ".join(str(r.path) for r in runs))
    for r in runs:
        if r.records.empty:
            print(f"note: {r.path} holds no explained event; left out", file=sys.stderr)
    results = []
    groups = group_runs([r for r in runs if not r.records.empty])
    for members in groups.values():
        run_checkpoint(members[0], args.checkpoint_dir)  # a missing file fails up front
    for name, members in groups.items():
        first = members[0]
        stream = load_run_stream(first.fingerprint)
        index = TemporalIndex(stream)
        logits = {int(e): float(p) for r in members for e, p in
                  zip(r.records["event_id"], r.records["original_logit"], strict=True)}

        def oracles(first: Run = first, stream: EventStream = stream,
                    index: TemporalIndex = index, logits: dict[int, float] = logits,
                    ) -> OracleFactory:
            model = load_run_model(first, stream, args.checkpoint_dir, args.device)
            return RunOracles(first, stream, model, logits, index)

        result = group_rules(name, members, args.max_depth, args.min_coverage, args.top,
                             args.seed, oracles, progress=not args.no_progress,
                             stream=stream, index=index)
        print(format_result(result) + "\n")
        results.append(result)
    header = HEADER.format(depth=args.max_depth, cov=args.min_coverage, seed=args.seed)
    files = write_results(results, out, header)
    print("wrote " + ", ".join(str(f) for f in files), file=sys.stdout)
    return results
