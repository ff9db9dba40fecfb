"""Compare explanation runs: a markdown table and plots from the records of many runs.

``python scripts/report.py outputs/sweeps/<time> [more runs or sweeps] [--out DIR]`` finds every
run directory below the paths, loads their records and writes into ``DIR`` (default
``<first path>/report``):

* ``report.md``: one row per dataset × model × explainer × strategy (× ``it_max`` when runs
  differ in it), and the same split by prediction group (correct / incorrect); every number comes
  from :func:`cftgnn.evaluation.summaries.summarize`;
* ``fidelity_sparsity.png``: the fidelity+–sparsity curves ``F+(x)``, one panel per dataset ×
  model;
* ``size_hist.png``: sizes of the counterfactuals found, one panel per explainer / strategy;
* ``it_max.png``: CF-TGNN's runtime and success rate against its iteration budget ``it_max``.

The functions below are pure (records in, table or :class:`~matplotlib.figure.Figure` out;
no pyplot, so no global figure state and no display) apart from :func:`load_runs`,
:func:`save_figures` and :func:`write_report`, so a notebook can reuse them piece by piece.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from cftgnn.errors import ConfigError
from cftgnn.evaluation.merge import find_runs
from cftgnn.evaluation.metrics import (
    aufsc_plus,
    fidelity_sparsity_curve,
    flip_mask,
    sparsity,
)
from cftgnn.evaluation.records import RecordStore, flatten, read_fingerprint, read_records
from cftgnn.evaluation.summaries import summarize
from cftgnn.explain.cftgnn import CFTGNNExplainer
from cftgnn.explain.result import explained
from cftgnn.oracle.contract import is_flip

#: Columns naming one configuration, in table order (``it_max`` and ``settings`` only when
#: they vary).
KEYS: tuple[str, ...] = ("dataset", "model", "explainer", "strategy_name", "it_max", "settings")
#: Fingerprint fields that name the configuration a run belongs to (see :func:`run_settings`).
_CONFIG_FIELDS = ("dataset.name", "model.config._target_", "explainer._target_",
                  "strategy._target_")
#: Fingerprint fields in which runs of one configuration may differ and still be pooled.
_SHARED_FIELDS = {"shard", "num_shards", "merged_shards", "model.weights", "explainer.it_max"}

#: Summary column → table heading, in table order.
TABLE_COLUMNS: dict[str, str] = {
    "events": "events",
    "fidelity_plus": "fidelity+ ↑",
    "fidelity_minus": "fidelity− ↓",
    "aufsc_plus": "AUFSC+ ↑",
    "aufsc_minus": "AUFSC− ↓",
    "characterization": "charact. ↑",
    "mean_size": "mean size",
    "time_p50": "median time (s)",
    "oracle_calls": "oracle calls",
}

_KEY_HEADINGS = {"strategy_name": "strategy"}
#: Record columns the report groups by (besides the metric inputs ``summarize`` reads).
_NEEDED = ("dataset", "model", "explainer", "strategy_name", "status", "group")
DPI = 120
#: Line styles and markers cycled through, so that curves lying on top of each other still show.
_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v", "P")
_GRID = np.linspace(0.0, 1.0, 501)


# --------------------------------------------------------------------------- loading


def _it_max(fingerprint: Mapping[str, Any]) -> float:
    """``explainer.it_max`` of a run's fingerprint, NaN when the explainer has none."""
    value = (fingerprint.get("explainer") or {}).get("it_max")
    return float(value) if value is not None else math.nan


def _merged_away(prints: Mapping[Path, Mapping[str, Any]]) -> set[Path]:
    """Shard runs whose records a merged run (``shard: "merged"``) of the same sweep holds."""

    def base(fp: Mapping[str, Any]) -> str:
        rest = {k: v for k, v in fp.items() if k not in ("shard", "merged_shards")}
        return json.dumps(rest, sort_keys=True)

    merged = {base(fp) for fp in prints.values() if fp.get("shard") == "merged"}
    return {r for r, fp in prints.items() if fp.get("shard") != "merged" and base(fp) in merged}


def run_settings(prints: Mapping[Path, Mapping[str, Any]]) -> dict[Path, str]:
    """Per run, the settings in which it differs from the other runs of its configuration.

    Runs of one dataset × model × explainer × strategy that differ in anything else their
    ``run.json`` records (``mode``, ``n_events``, ``sample.*``, ``seed``, an explainer
    parameter, …) must not be pooled into one row. Sharding (``shard``, ``num_shards``) and
    the checkpoint's path do not count; ``explainer.it_max`` has a column of its own.

    Args:
        prints: The ``run.json`` fingerprint of each run.

    Returns:
        ``"mode=exact, n_events=50"``-style text per run, empty where runs agree.
    """
    flat = {run: {k: json.dumps(v) for k, v in flatten(fp).items()}  # lists hashable as text
            for run, fp in prints.items()}
    by_config: dict[tuple[str, ...], list[Path]] = {}
    for run, f in flat.items():
        key = tuple(f.get(k, "") for k in _CONFIG_FIELDS)
        by_config.setdefault(key, []).append(run)
    out = {}
    for runs in by_config.values():
        names = sorted({k for r in runs for k in flat[r]} - _SHARED_FIELDS)
        varying = [k for k in names if len({flat[r].get(k) for r in runs}) > 1]
        for run in runs:
            out[run] = ", ".join(f"{k}={json.loads(flat[run][k]) if k in flat[run] else '–'}"
                                 for k in varying)
    return out


def load_runs(paths: Sequence[str | os.PathLike[str]]) -> pd.DataFrame:
    """The records of every run directory at or below ``paths``, in one table.

    Each record gets ``it_max`` (the run's ``explainer.it_max``, NaN for explainers without
    one), ``settings`` (what sets its run apart from other runs of the same configuration, see
    :func:`run_settings`) and ``run`` (its run directory). Shard runs are left out when a
    merged run of the same configuration (``scripts/merge_records.py``) is found too, and an
    event that two runs of one configuration both explained is kept once (with a warning), so
    no event counts twice.

    Args:
        paths: Run directories or folders holding them (e.g. a sweep directory).

    Returns:
        One row per explained event, run after run.

    Raises:
        ConfigError: A path does not exist, the paths hold no run or no record, or records
            lack a column the report needs.
    """
    names = ", ".join(str(p) for p in paths)
    runs = find_runs(paths)
    if not runs:
        raise ConfigError(f"no run directories (folders with {RecordStore.FINGERPRINT}) in "
                          f"{names}")
    prints = {r: read_fingerprint(r) for r in runs}
    skip = _merged_away(prints)
    kept = [r for r in runs if r not in skip]
    settings = run_settings({r: prints[r] for r in kept})
    frames = []
    for run in kept:
        records = read_records(run)
        if records.empty:
            continue
        missing = [c for c in _NEEDED if c not in records.columns]
        if missing:
            raise ConfigError(f"the records of {run} lack the columns {missing} (written by "
                              "an older version?); rerun it with scripts/explain.py")
        frames.append(records.assign(it_max=_it_max(prints[run]), settings=settings[run],
                                      run=str(run)))
    if not frames:
        raise ConfigError(f"the {len(runs)} run directories in {names} hold no records yet")
    records = pd.concat(frames, ignore_index=True)
    twice = records.duplicated([*KEYS, "event_id"], keep="first")
    if twice.any():
        again = sorted(records.loc[twice, "run"].unique())
        warnings.warn(f"{int(twice.sum())} events were explained by more than one run of the "
                      f"same configuration; each is counted once (the copies in {again} are "
                      "left out)", stacklevel=2)
        records = records[~twice].reset_index(drop=True)
    return records


# --------------------------------------------------------------------------- tables


def config_keys(records: pd.DataFrame) -> list[str]:
    """The :data:`KEYS` that name a configuration here (``it_max``, ``settings`` only when
    they vary)."""
    keys = [k for k in KEYS if k not in ("it_max", "settings")]
    if records["it_max"].dropna().nunique() > 1:
        keys.append("it_max")
    if "settings" in records.columns and records["settings"].nunique() > 1:
        keys.append("settings")
    return keys


def comparison_table(records: pd.DataFrame, by_group: bool = False) -> pd.DataFrame:
    """One row of metrics per configuration (and prediction group with ``by_group``).

    Args:
        records: Records as :func:`load_runs` returns them.
        by_group: Split each configuration by its ``group`` column (correct / incorrect).

    Returns:
        The key columns followed by the :data:`TABLE_COLUMNS`, as :func:`summarize` computes
        them, sorted by the keys.
    """
    keys = config_keys(records) + (["group"] if by_group else [])
    table = summarize(records, by=keys)[[*keys, *TABLE_COLUMNS]]
    table = table.sort_values(keys, ignore_index=True)
    if "it_max" in keys:
        table["it_max"] = table["it_max"].astype("Int64")  # 300, not 300.000; NaN stays missing
    return table


def _cell(value: Any) -> str:
    """One table cell: floats to 3 decimals, missing values as ``–``."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool | np.bool_):
        return str(value)
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return f"{value:.3f}"
    return str(value).replace("|", "\\|")


def markdown_table(table: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table; floats to 3 decimals, NaN as ``–``.

    Text columns are left-aligned, numeric ones right-aligned. Column names are translated
    with :data:`TABLE_COLUMNS` (``strategy_name`` becomes ``strategy``).

    Args:
        table: Any table, e.g. from :func:`comparison_table`.

    Returns:
        The table, one line per row, without a trailing newline.
    """
    names = {**TABLE_COLUMNS, **_KEY_HEADINGS}
    heads = [names.get(str(c), str(c)) for c in table.columns]
    numeric = [pd.api.types.is_numeric_dtype(table[c]) for c in table.columns]
    rule = ["---:" if num else ":---" for num in numeric]
    lines = ["| " + " | ".join(heads) + " |", "| " + " | ".join(rule) + " |"]
    for row in table.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- plots


def _label(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    """``cftgnn/closest`` (plus ``it_max=…`` when ``it_max`` is a key)."""
    text = f"{row['explainer']}/{row['strategy_name']}"
    if "it_max" in keys and not pd.isna(row["it_max"]):
        text += f" it_max={int(row['it_max'])}"
    if "settings" in keys and row["settings"]:
        text += f" ({row['settings']})"
    return text


def _panels(n: int, width: float = 5.2, height: float = 3.8) -> tuple[Figure, list[Axes]]:
    """A figure with ``n`` panels (at most 3 per row); spare grid cells are removed."""
    cols = min(max(n, 1), 3)
    rows = max(math.ceil(n / cols), 1)
    fig = Figure(figsize=(width * cols, height * rows + 0.6), layout="constrained")
    grid = fig.subplots(rows, cols, squeeze=False)
    axes = list(grid.ravel())
    for ax in axes[max(n, 1):]:
        ax.remove()
    return fig, axes[: max(n, 1)]


def _groups(records: pd.DataFrame, keys: Sequence[str]) -> list[tuple[tuple[Any, ...],
                                                                     pd.DataFrame]]:
    """``(key values, rows)`` per group, sorted by key (NaN keys kept)."""
    out = [(k if isinstance(k, tuple) else (k,), g)
           for k, g in records.groupby(list(keys), sort=True, dropna=False)]
    return out


def _ok_flips_sparsity(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Flip flags and sparsities of the explained (``status == "ok"``) rows."""
    ok = rows[explained(rows["status"])]
    flips = flip_mask(ok["original_logit"].to_numpy(float), ok["final_logit"].to_numpy(float))
    sp = sparsity(ok["size"].to_numpy(float), ok["num_candidates"].to_numpy(float))
    return flips, sp


def plot_fidelity_sparsity(records: pd.DataFrame) -> Figure:
    """``F+(x)`` (share of events with a counterfactual of sparsity ≤ x) per configuration.

    One panel per dataset × model, one curve per explainer / strategy (/ ``it_max``); the area
    under each curve is the AUFSC+ of :func:`cftgnn.evaluation.metrics.aufsc_plus`, shown in
    the legend.

    Args:
        records: Records as :func:`load_runs` returns them.

    Returns:
        The figure.
    """
    keys = config_keys(records)
    panels = _groups(records, ["dataset", "model"])
    fig, axes = _panels(len(panels))
    for ax, ((dataset, model), rows) in zip(axes, panels, strict=True):
        for n, (values, g) in enumerate(_groups(rows, keys[2:])):
            flips, sp = _ok_flips_sparsity(g)
            if len(flips) == 0:
                continue
            curve = fidelity_sparsity_curve(flips, sp, _GRID)
            area = aufsc_plus(flips, sp)
            label = _label(dict(zip(keys[2:], values, strict=True)), keys)
            ax.step(_GRID, curve, where="post", linestyle=_STYLES[n % len(_STYLES)],
                    linewidth=1.8, label=f"{label} (AUFSC+ {area:.2f})")
        ax.set(xlim=(0.0, 1.0), ylim=(-0.02, 1.02), title=f"{dataset} · {model}",
               xlabel="sparsity x = |s| / |C| (share of candidates removed)",
               ylabel="F+(x): share flipped with sparsity ≤ x")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="upper left")
    fig.suptitle("Fidelity+ against sparsity (higher and further left is better)")
    return fig


def plot_size_hist(records: pd.DataFrame, cap: int = 16) -> Figure:
    """Histograms of the sizes ``|s|`` of the counterfactuals found.

    One panel per explainer / strategy (/ ``it_max``); one bar per size, side by side for
    several dataset × model pairs (one colour each, in a legend below the panels). Sizes of
    ``cap`` and more share the last bar (labelled ``≥cap``), so that a few large
    counterfactuals do not squeeze the rest. Events without a counterfactual are left out (each
    panel title says how many were found).

    Args:
        records: Records as :func:`load_runs` returns them.
        cap: First size counted in the overflow bar (at least 2).

    Returns:
        The figure.
    """
    keys = config_keys(records)
    panels = _groups(records, keys[2:])
    series = sorted({(str(d), str(m)) for d, m in zip(records["dataset"], records["model"],
                                                       strict=True)})
    fig, axes = _panels(len(panels), width=4.6, height=3.4)
    found = records[explained(records["status"]) & is_flip(records["original_logit"].to_numpy(),
                                                          records["final_logit"].to_numpy())]
    largest = int(found["size"].max()) if len(found) else 1
    top = min(largest, max(cap, 2))
    sizes_axis = np.arange(1, top + 1)
    width = 0.8 / len(series)
    colors = {s: f"C{n % 10}" for n, s in enumerate(series)}
    ticks = [t for t in sizes_axis if t == 1 or t == top or t % max(1, top // 8) == 0]
    for ax, (values, rows) in zip(axes, panels, strict=True):
        n_found = 0
        for n, (dataset, model) in enumerate(series):
            g = rows[(rows["dataset"] == dataset) & (rows["model"] == model)]
            flips, _ = _ok_flips_sparsity(g)
            sizes = g[explained(g["status"])]["size"].to_numpy(int)[flips]
            n_found += len(sizes)
            # a counterfactual has |s| ≥ 1; sizes ≥ top land in the last bar
            counts = np.bincount(np.minimum(sizes, top), minlength=top + 1)[1:]
            ax.bar(sizes_axis + (n - (len(series) - 1) / 2) * width, counts, width=width,
                   color=colors[(dataset, model)], alpha=0.85, label=f"{dataset} · {model}")
        if n_found == 0:
            ax.text(0.5, 0.5, "no counterfactual found", ha="center", va="center",
                    transform=ax.transAxes, color="0.4")
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"≥{t}" if t == top and largest > top else str(t)
                            for t in ticks])
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(xlim=(0.4, top + 0.6),
               title=f"{_label(dict(zip(keys[2:], values, strict=True)), keys)}"
                     f" ({n_found} of {len(rows)} events)",
               xlabel="explanation size |s| (events removed)", ylabel="counterfactuals")
    if len(series) > 1:
        handles, _ = axes[0].get_legend_handles_labels()
        fig.legend(handles=handles, loc="outside lower center", ncol=min(len(series), 6),
                   fontsize="small", frameon=False)
    fig.suptitle("Sizes of the counterfactuals found")
    return fig


def it_max_table(records: pd.DataFrame) -> pd.DataFrame:
    """CF-TGNN's metrics per dataset × model × strategy × ``it_max`` (via ``summarize``)."""
    cf = records[(records["explainer"] == CFTGNNExplainer.name) & records["it_max"].notna()]
    keys = ["dataset", "model", "strategy_name", "it_max"]
    if "settings" in config_keys(records):
        keys.append("settings")
    return summarize(cf, by=keys).sort_values(keys, ignore_index=True)


def plot_it_max(records: pd.DataFrame) -> Figure:
    """CF-TGNN's median time per event and success rate (fidelity+) against ``it_max``.

    One line per dataset × model × strategy. With a single ``it_max`` value the points are
    still drawn and the title says so.

    Args:
        records: Records as :func:`load_runs` returns them.

    Returns:
        The figure (two panels).
    """
    table = it_max_table(records)
    fig = Figure(figsize=(11.0, 4.2), layout="constrained")
    ax_t, ax_f = fig.subplots(1, 2)
    line_keys = ["dataset", "model", "strategy_name"]
    if "settings" in table.columns:
        line_keys.append("settings")
    for n, (values, g) in enumerate(_groups(table, line_keys)):
        label = " · ".join(str(v) for v in values if str(v))
        style = {"marker": _MARKERS[n % len(_MARKERS)], "linestyle": _STYLES[n % len(_STYLES)],
                 "markersize": 8, "markerfacecolor": "none", "markeredgewidth": 1.8,
                 "label": label}  # hollow markers: overlapping points stay visible
        ax_t.plot(g["it_max"], g["time_p50"], **style)
        ax_f.plot(g["it_max"], g["fidelity_plus"], **style)
    ax_t.set(title="Runtime", xlabel="it_max (MCTS iterations)",
             ylabel="median time per event (s)")
    ax_t.set_ylim(bottom=0.0)
    ax_f.set(title="Success rate", xlabel="it_max (MCTS iterations)",
             ylabel="fidelity+ (share flipped)", ylim=(-0.02, 1.02))
    budgets = sorted(table["it_max"].unique())
    for ax in (ax_t, ax_f):
        ax.grid(alpha=0.3)
        if budgets:
            ax.set_xticks(budgets)
            ax.set_xticklabels([f"{v:g}" for v in budgets])
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no CF-TGNN runs", ha="center", va="center",
                    transform=ax.transAxes, color="0.4")
    note = {0: " (no CF-TGNN runs)",
            1: f" (only one it_max value in these runs: {budgets[0]:g})" if budgets else ""}
    fig.suptitle("CF-TGNN against its iteration budget" + note.get(len(budgets), ""))
    return fig


def report_figures(records: pd.DataFrame) -> dict[str, Figure]:
    """The report's figures by file stem (``fidelity_sparsity``, ``size_hist``, ``it_max``)."""
    return {
        "fidelity_sparsity": plot_fidelity_sparsity(records),
        "size_hist": plot_size_hist(records),
        "it_max": plot_it_max(records),
    }


def save_figures(figures: Mapping[str, Figure], out: str | os.PathLike[str],
                 dpi: int = DPI) -> list[Path]:
    """Write each figure as ``<out>/<name>.png``.

    Args:
        figures: Figures by file stem.
        out: Output folder (created when absent).
        dpi: Resolution.

    Returns:
        The files written.
    """
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for name, fig in figures.items():
        path = folder / f"{name}.png"
        fig.savefig(path, dpi=dpi)
        files.append(path)
    return files


# --------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class Report:
    """What :func:`write_report` produced.

    Attributes:
        table: One row per configuration (:func:`comparison_table`).
        groups: The same per prediction group.
        files: Files written (``report.md`` first, then the PNGs).
    """

    table: pd.DataFrame
    groups: pd.DataFrame
    files: list[Path]


def report_markdown(records: pd.DataFrame, table: pd.DataFrame, groups: pd.DataFrame,
                    images: Sequence[str] = ()) -> str:
    """The text of ``report.md``: sources, both tables, the images.

    Args:
        records: The records the tables were computed from.
        table: :func:`comparison_table` of ``records``.
        groups: :func:`comparison_table` of ``records`` with ``by_group=True``.
        images: PNG file names next to ``report.md``, embedded at the end.

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
        "better direction (definitions: `cftgnn.evaluation.metrics`).",
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
        ConfigError: A path does not exist, or the paths hold no run or no record.
    """
    records = load_runs(paths)
    folder = Path(out) if out is not None else Path(paths[0]) / "report"
    table = comparison_table(records)
    groups = comparison_table(records, by_group=True)
    pngs = save_figures(report_figures(records), folder)
    md = folder / "report.md"
    md.write_text(report_markdown(records, table, groups, [p.name for p in pngs]))
    return Report(table=table, groups=groups, files=[md, *pngs])


def main(argv: Sequence[str] | None = None) -> Report:
    """Command line: ``report.py PATH [PATH ...] [--out DIR]``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
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
    "plot_fidelity_sparsity",
    "plot_it_max",
    "plot_size_hist",
    "report_figures",
    "report_markdown",
    "save_figures",
    "write_report",
]
