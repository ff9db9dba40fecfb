"""Compare explanation runs: a markdown table and plots from the records of many runs.

``python scripts/report.py outputs/sweeps/<time> [more runs or sweeps] [--out DIR]`` finds every
run directory below the paths, loads their records and writes into ``DIR`` (default
``<first path>/report``):

* ``report.md``: one row per dataset × model × explainer × strategy (× ``it_max`` when runs
  differ in it), and the same split by prediction group (correct / incorrect); every number comes
  from ``cftgnn.scoring.summaries.summarize``;
* ``fidelity_sparsity.png``: the fidelity+–sparsity curves ``F+(x)``, one panel per dataset ×
  model;
* ``fidelity_kept.png`` (runs that recorded curve logits): T-GNNExplainer's mean fidelity
  against the share of top-ranked events kept, one panel per dataset × model;
* ``size_hist.png``: sizes of the counterfactuals found, one panel per explainer / strategy;
* ``it_max.png``: CF-TGNN's runtime and success rate against its iteration budget ``it_max``;
* ``robustness.png`` (runs with ``robustness=true``): robustness against size per explainer;
* the top regional rules of every ``rules.md`` (``scripts/rules.py``) found below the paths.

The pieces live in ``runs`` (finding and loading runs), ``tables`` and
``plots`` (pure: records in, table or figure out); this module assembles them into the
report and is the command line. Their public names are re-exported here, so a notebook can
reuse them piece by piece as ``report.<name>``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from cftgnn.cli import ArgumentParser
from cftgnn.files import atomic_write, check_can_write
from cftgnn.reporting.plots import (
    plot_fidelity_kept,
    plot_fidelity_sparsity,
    plot_it_max,
    plot_size_hist,
    report_figures,
    save_figures,
)
from cftgnn.reporting.runs import KEYS, config_keys, load_runs, run_settings
from cftgnn.reporting.tables import (
    TABLE_COLUMNS,
    benchmark_table,
    comparison_table,
    has_protocols,
    it_max_table,
    markdown_table,
    protocol_table,
)

#: Said under the header of a report whose runs have planted causes (its cause columns).
GROUND_TRUTH_NOTE = (
    "The cause columns compare each explanation with the planted cause of its event (runs on",
    "`dataset=planted`; definitions: `cftgnn.scoring.ground_truth`): the share of events",
    "whose whole cause was a candidate, the AUC and precision at |cause| of the ranking, the",
    "shares of answers that contain, lie inside or equal the cause, and the share of events",
    "the model flips when exactly their cause is removed (near 0: the model ignores it).",
)

# --------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class Report:
    """What ``write_report`` produced.

    Attributes:
        table: One row per configuration (``comparison_table``).
        groups: The same per prediction group.
        files: Files written (``report.md`` first, then the PNGs).
    """

    table: pd.DataFrame
    groups: pd.DataFrame
    files: list[Path]


def report_markdown(records: pd.DataFrame, table: pd.DataFrame, groups: pd.DataFrame,
                    images: Sequence[str] = (), rules: Sequence[Path] = ()) -> str:
    """The text of ``report.md``: sources, both tables, the images.

    Args:
        records: The records the tables were computed from.
        table: ``comparison_table`` of ``records``.
        groups: ``comparison_table`` of ``records`` with ``by_group=True``.
        images: PNG file names next to ``report.md``, embedded at the end.
        rules: ``rules.md`` files of ``scripts/rules.py`` whose tables are included (the top
            regional rules per dataset × model), under "Regional rules".

    Returns:
        Markdown text ending in a newline.
    """
    runs = sorted(records["run"].unique()) if "run" in records.columns else []
    lines = [
        "# Explanation runs compared",
        "",
        f"{len(records)} explained events from {len(runs)} run directories.",
        "Fidelity+ and AUFSC+: higher is better; fidelity− and AUFSC−: lower is better;",
        "sizes are over the counterfactuals found; times are seconds per event; ↑/↓ mark the",
        "better direction (definitions: `cftgnn.scoring.metrics`). Best-FID and AUFSC kept",
        "(T-GNNExplainer) and ACC-AUC (TempME) keep top shares of each explainer's ranking",
        "under the common protocol (definitions: `cftgnn.scoring.curves`).",
        *(GROUND_TRUTH_NOTE if "cause_auc" in table.columns else ()),
        "",
        "## By configuration",
        "",
        markdown_table(table),
        "",
        "## By prediction group",
        "",
        markdown_table(groups),
        "",
    ]
    if has_protocols(records):
        lines += [
            "## Curve metrics by protocol",
            "",
            "Each curve metric under the common protocol and under its paper's own, side by",
            "side (`protocol=`; docs/metrics.md, Protocols): T-GNNExplainer's evaluator (20",
            "most recent candidates, ⌊s·m⌋ + 1 kept, a search by its best coalition per level)",
            "and TempME's (ratios 0.01–0.30 of the sampled slots, negative pairs counted, mean",
            "over the ratios), and TemGX's (the top round(s·m) removed, the probability's move;",
            "its answer kept alone, a drop above 0.01 counterfactual). – where a run did not",
            "compute that protocol.",
            "",
            markdown_table(protocol_table(records)),
            "",
        ]
    lines += [
        "## The benchmark's metrics",
        "",
        "CHARR, monotonicity (runs with `protocol=temgx`) and the flip summary of the common",
        "kept-share curve, as the benchmark repository juliawenkmann/time_to_explain computes",
        "them (docs/metrics.md). – where a run lacks what a metric reads.",
        "",
        markdown_table(benchmark_table(records)),
        "",
    ]
    for path in rules:
        body = path.read_text().split("\n", 1)[1].strip()  # without its own title
        lines += [f"## Regional rules (`{path}`)", "", body, ""]
    if images:
        lines += ["## Plots", ""] + [f"![{Path(i).stem}]({i})" for i in images] + [""]
    if runs:
        lines += ["## Runs", ""] + [f"- `{r}`" for r in runs] + [""]
    return "\n".join(lines)


def write_report(paths: Sequence[str | os.PathLike[str]],
                 out: str | os.PathLike[str] | None = None) -> Report:
    """Load the runs below ``paths`` and write ``report.md`` and the PNGs into ``out``.

    Args:
        paths: Run or sweep directories.
        out: Output folder; default ``<first path>/report``.

    Returns:
        The tables and the files written.

    Raises:
        ConfigError: A path does not exist, the paths hold no run or no record, or the
            output folder cannot be written (checked first).
    """
    folder = Path(out) if out is not None else Path(paths[0]) / "report"
    check_can_write(folder, "--out" if out is not None else "report folder (--out)")
    records = load_runs(paths)
    table = comparison_table(records)
    groups = comparison_table(records, by_group=True)
    pngs = save_figures(report_figures(records), folder)
    md = folder / "report.md"
    rules = sorted({f for p in paths for f in Path(p).rglob("rules.md")})
    atomic_write(md, report_markdown(records, table, groups, [p.name for p in pngs],
                                     rules).encode())
    return Report(table=table, groups=groups, files=[md, *pngs])


def main(argv: Sequence[str] | None = None) -> Report:
    """Command line: ``report.py PATH [PATH ...] [--out DIR]``."""
    parser = ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("paths", nargs="+", help="run directories or sweep directories")
    parser.add_argument("--out", help="output folder (default: <first path>/report)")
    args = parser.parse_args(argv)
    report = write_report(args.paths, args.out)
    print(markdown_table(report.table))
    print("wrote:")
    for path in report.files:
        print(f"  {path}")
    return report


__all__ = [
    "KEYS",
    "TABLE_COLUMNS",
    "Report",
    "comparison_table",
    "config_keys",
    "it_max_table",
    "load_runs",
    "main",
    "run_settings",
    "markdown_table",
    "plot_fidelity_kept",
    "plot_fidelity_sparsity",
    "plot_it_max",
    "plot_size_hist",
    "report_figures",
    "report_markdown",
    "save_figures",
    "write_report",
]
