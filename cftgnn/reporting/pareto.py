"""One explained event's counterfactuals in the size–margin plane, from the command line.

``python scripts/show_pareto.py RUN_DIR EVENT_ID [--out PNG]`` reads the event's record from a run
directory and draws ``cftgnn.reporting.plots.pareto_figure``: every counterfactual the
explainer handed back (``nsga2`` and ``pso`` hand back several; other explainers their one
answer) at its size and the margin of its flip, coloured by how many later events its removal
changes, the answer ringed and the non-dominated front as a staircase. Unlike
``show_explanation.py`` it needs only the records, not the run's data.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from cftgnn.cli import ArgumentParser
from cftgnn.errors import ConfigError
from cftgnn.files import check_can_write
from cftgnn.reporting.picture import find_record
from cftgnn.reporting.plots import DPI, pareto_figure, save_png
from cftgnn.runs.rundir import read_fingerprint, read_records


def _count(record: pd.Series) -> int:
    """How many counterfactuals a record holds (0 when the column is null)."""
    sets = record.get("counterfactuals")
    return 0 if sets is None else len(sets)


def load_pareto_record(run_dir: str | os.PathLike[str], event_id: int) -> pd.Series:
    """The record of ``event_id`` in a run directory, when it holds a counterfactual.

    Raises:
        ConfigError: Not a run directory, the event has no record, or no counterfactual (the
            message lists a few events that have one).
    """
    read_fingerprint(run_dir)  # a clear message for a missing or wrong directory
    records = read_records(run_dir)
    record = find_record(records, event_id, str(run_dir))
    if "counterfactuals" not in records.columns:
        raise ConfigError(f"the records of {run_dir} hold no list of counterfactuals (written "
                          "by an older version?); rerun it with scripts/explain.py")
    if _count(record) == 0:
        have = [int(r.event_id) for _, r in records.iterrows() if _count(r) > 0]
        shown = ", ".join(str(i) for i in have[:8]) + (", ..." if len(have) > 8 else "")
        raise ConfigError(f"event {event_id} has no counterfactual in {run_dir} (its answer "
                          f"does not flip the prediction; status {record.get('status', '?')}); "
                          f"events with one: {shown or 'none'}")
    return record


def main(argv: Sequence[str] | None = None) -> Path:
    """Command line: ``show_pareto.py RUN_DIR EVENT_ID [--out PNG]``."""
    parser = ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("run_dir", help="a run directory (holding run.json and records/)")
    parser.add_argument("event_id", type=int, help="an explained event of that run")
    parser.add_argument("--out", help="PNG file (default: <run dir>/pareto_<event>.png)")
    args = parser.parse_args(argv)
    out = Path(args.out or Path(args.run_dir) / f"pareto_{args.event_id}.png")
    check_can_write(out, "--out", file=True)
    record = load_pareto_record(args.run_dir, args.event_id)
    fig = pareto_figure(record)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_png(fig, out, DPI)
    print(fig.get_suptitle().replace("\n", " | "))
    print(f"wrote {out}")
    return out


__all__ = ["load_pareto_record", "main"]
