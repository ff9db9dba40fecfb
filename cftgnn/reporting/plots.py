"""Plots of a report: fidelity+ against sparsity, fidelity against kept share, sizes found,
CF-TGNN against its budget, and one event's counterfactuals in the size–margin plane
(``pareto_figure``).

Pure functions (records in, ``Figure`` out; no pyplot, so no global
figure state and no display) apart from ``save_figures``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from cftgnn.errors import ConfigError
from cftgnn.explain.population import pareto_mask
from cftgnn.explain.result import explained
from cftgnn.files import atomic_output
from cftgnn.oracle.oracle import is_flip, margin
from cftgnn.reporting.runs import config_keys
from cftgnn.reporting.tables import it_max_table
from cftgnn.scoring.curves import FID_SHARES, aufsc_keep, mean_fidelity_curve
from cftgnn.scoring.metrics import (
    FloatArray,
    aufsc_plus,
    fidelity_sparsity_curve,
    flip_mask,
    jaccard_diversity,
    pareto_hypervolume,
    sparsity,
)

DPI = 120
#: Line styles and markers cycled through, so that curves lying on top of each other still show.
_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v", "P")
_GRID = np.linspace(0.0, 1.0, 501)


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


def _configuration_panels(records: pd.DataFrame,
                          draw: Callable[[Axes, int, str, pd.DataFrame], None], title: str,
                          legend: Literal["upper left", "lower right"], zero_line: bool = False,
                          **axes: Any) -> Figure:
    """One panel per dataset × model, titled by them: ``draw(ax, n, label, rows)`` for the
    ``n``-th configuration (explainer / strategy / ``it_max``) of the panel; then a grey line
    at 0 (``zero_line``), the axes' ``axes`` settings (limits, labels), a grid and the legend
    at ``legend``; the figure titled ``title``."""
    keys = config_keys(records)
    panels = _groups(records, ["dataset", "model"])
    fig, grid = _panels(len(panels))
    for ax, ((dataset, model), rows) in zip(grid, panels, strict=True):
        for n, (values, g) in enumerate(_groups(rows, keys[2:])):
            draw(ax, n, _label(dict(zip(keys[2:], values, strict=True)), keys), g)
        if zero_line:
            ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set(title=f"{dataset} · {model}", **axes)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc=legend)
    fig.suptitle(title)
    return fig


def plot_fidelity_sparsity(records: pd.DataFrame) -> Figure:
    """``F+(x)`` (share of events with a counterfactual of sparsity ≤ x) per configuration.

    One panel per dataset × model, one curve per explainer / strategy (/ ``it_max``); the area
    under each curve is the AUFSC+ of ``cftgnn.scoring.metrics.aufsc_plus``, shown in
    the legend.

    Args:
        records: Records as ``load_runs`` returns them.

    Returns:
        The figure.
    """
    def draw(ax: Axes, n: int, label: str, g: pd.DataFrame) -> None:
        flips, sp = _ok_flips_sparsity(g)
        if len(flips) == 0:
            return
        curve = fidelity_sparsity_curve(flips, sp, _GRID)
        area = aufsc_plus(flips, sp)
        ax.step(_GRID, curve, where="post", linestyle=_STYLES[n % len(_STYLES)],
                linewidth=1.8, label=f"{label} (AUFSC+ {area:.2f})")

    return _configuration_panels(
        records, draw, "Fidelity+ against sparsity (higher and further left is better)",
        "upper left", xlim=(0.0, 1.0), ylim=(-0.02, 1.02),
        xlabel="sparsity x = |s| / |C| (share of candidates removed)",
        ylabel="F+(x): share flipped with sparsity ≤ x")


def has_curves(records: pd.DataFrame) -> bool:
    """Whether some record holds the curve metrics' logits (schema 4 runs)."""
    return "fid_curve_logits" in records.columns and any(
        v is not None and len(v) > 0 for v in records["fid_curve_logits"])


def plot_fidelity_kept(records: pd.DataFrame) -> Figure:
    """T-GNNExplainer's mean fidelity against the share of top-ranked events kept, per
    configuration (``cftgnn.scoring.curves.mean_fidelity_curve``).

    One panel per dataset × model, one curve per explainer / strategy (/ ``it_max``) over
    the explained events with a curve; the legend shows the configuration's AUFSC (kept)
    (``aufsc_keep``, the area under the best-so-far curves).

    Args:
        records: Records as ``load_runs`` returns them.

    Returns:
        The figure.
    """
    def draw(ax: Axes, n: int, label: str, g: pd.DataFrame) -> None:
        ok = g[explained(g["status"])]
        if "fid_curve_logits" not in ok.columns:
            return
        p0, kept = ok["original_logit"].to_numpy(float), list(ok["fid_curve_logits"])
        curve = mean_fidelity_curve(p0, kept)
        if np.isnan(curve).all():
            return
        ax.plot(FID_SHARES, curve, linestyle=_STYLES[n % len(_STYLES)],
                marker=_MARKERS[n % len(_MARKERS)], markersize=3, linewidth=1.8,
                label=f"{label} (AUFSC kept {aufsc_keep(p0, kept):.2f})")

    return _configuration_panels(
        records, draw, "Fidelity against kept share (higher is better)", "lower right",
        zero_line=True, xlim=(0.0, 1.0), xlabel="share of top-ranked events kept",
        ylabel="mean fidelity (logit towards the original side)")


def plot_size_hist(records: pd.DataFrame, cap: int = 16) -> Figure:
    """Histograms of the sizes ``|s|`` of the counterfactuals found.

    One panel per explainer / strategy (/ ``it_max``); one bar per size, side by side for
    several dataset × model pairs (one colour each, in a legend below the panels). Sizes of
    ``cap`` and more share the last bar (labelled ``≥cap``), so that a few large
    counterfactuals do not squeeze the rest. Events without a counterfactual are left out (each
    panel title says how many were found).

    Args:
        records: Records as ``load_runs`` returns them.
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


def plot_it_max(records: pd.DataFrame) -> Figure:
    """CF-TGNN's median time per event and success rate (fidelity+) against ``it_max``.

    One line per dataset × model × strategy. With a single ``it_max`` value the points are
    still drawn and the title says so.

    Args:
        records: Records as ``load_runs`` returns them.

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


def _consequences(value: Any, n: int) -> npt.NDArray[np.int64] | None:
    """A record's ``counterfactual_consequences`` as ``int64 [n]``, None when not measured."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    out = np.asarray(value, dtype=np.int64).reshape(-1)
    if len(out) != n:
        raise ConfigError(f"the record holds {n} counterfactuals but {len(out)} consequences")
    return out


def _staircase(sizes: FloatArray, margins: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The non-dominated points (size minimised, margin maximised), by size: ``[F]``, ``[F]``.

    Points sharing a size and margin count once."""
    points = np.unique(np.column_stack([sizes, margins]), axis=0)
    front = points[pareto_mask(np.column_stack([points[:, 0], -points[:, 1]]))]
    front = front[np.argsort(front[:, 0], kind="stable")]
    return front[:, 0], front[:, 1]


def _stack_labels(ax: Axes, points: FloatArray, counts: npt.NDArray[np.int64],
                  top: float) -> None:
    """``×k`` beside each point where ``k`` counterfactuals coincide: right of the point, or
    left of it when the label of a point just below would touch it."""
    last_right: dict[float, float] = {}
    for (x, y), k in sorted(zip(map(tuple, points), counts.tolist(), strict=True)):
        right = abs(y - last_right.get(x, -math.inf)) > 0.04 * top
        if right:
            last_right[x] = y
        ax.annotate(f"×{k}", (x, y), xytext=(6 if right else -6, 0), textcoords="offset points",
                    ha="left" if right else "right", va="center", fontsize=7, color="0.3",
                    zorder=5)


def _pareto_title(record: pd.Series | Mapping[str, Any], n: int, diversity: float,
                  hypervolume: float, measured: bool) -> str:
    """``event … · dataset · model · explainer`` over the count, diversity and hypervolume."""
    head = " · ".join(str(record[c]) for c in ("dataset", "model", "explainer")
                      if c in record and record[c] is not None and str(record[c]))
    div = "n/a (one counterfactual)" if math.isnan(diversity) else f"{diversity:.3f}"
    note = "" if measured else " · consequences not measured"
    return (f"event {int(record['event_id'])} · {head}\n{n} counterfactual"
            f"{'' if n == 1 else 's'} · diversity (Jaccard) {div} · HV {hypervolume:.3f}{note}")


def pareto_figure(record: pd.Series | Mapping[str, Any]) -> Figure:
    """One event's counterfactuals in the size–margin plane.

    Each counterfactual is a point at its size ``|s|`` (x) and the margin of its flip
    ([``margin``][cftgnn.oracle.margin] of its exact logit, y), coloured by how many later
    history events its removal changes (``counterfactual_consequences``; one colour when it
    was not measured). The answer (the first counterfactual) is ringed; the non-dominated
    points (smaller size, larger margin) are joined by a staircase. The title gives the
    ``jaccard_diversity`` and the
    ``pareto_hypervolume`` of the set.

    Args:
        record: One record (``event_id``, ``explainer``, ``original_logit``,
            ``num_removable``, ``counterfactuals``, ``counterfactual_logits``,
            ``counterfactual_consequences``; ``dataset`` and ``model`` when present).

    Returns:
        The figure (no pyplot; save it with ``fig.savefig``).

    Raises:
        ConfigError: The record holds no counterfactual, or its lists differ in length.
    """
    raw = record.get("counterfactuals")
    sets = [] if raw is None else [[int(e) for e in c] for c in raw]
    if not sets:
        raise ConfigError(f"event {int(record['event_id'])} has no counterfactual to plot")
    logits = np.asarray(record["counterfactual_logits"], dtype=np.float64).reshape(-1)
    if len(logits) != len(sets):
        raise ConfigError(f"the record holds {len(sets)} counterfactuals but {len(logits)} "
                          "logits")
    p0 = float(record["original_logit"])
    removable = int(record["num_removable"])
    sizes = np.array([len(c) for c in sets], dtype=np.float64)
    margins = np.array([margin(p0, float(p)) for p in logits])
    cons = _consequences(record.get("counterfactual_consequences"), len(sets))
    diversity = jaccard_diversity(sets)
    hypervolume = pareto_hypervolume(sizes, margins, removable, p0)

    fig = Figure(figsize=(8.0, 5.4), layout="constrained")
    ax = fig.subplots()
    points, stacked = np.unique(np.column_stack([sizes, margins.round(9)]), axis=0,
                                return_counts=True)
    label = f"counterfactual ({len(sets)}" + (
        f" at {len(points)} points; ×k: k stacked)" if len(points) < len(sets) else ")")
    style: dict[str, Any] = {"s": 46, "edgecolors": "0.25", "linewidths": 0.5, "alpha": 0.85,
                             "zorder": 3, "gid": "counterfactuals", "label": label}
    if cons is None:
        ax.scatter(sizes, margins, color="C0", **style)
    else:
        low = int(cons.min())
        dots = ax.scatter(sizes, margins, c=cons, cmap="viridis", vmin=low,
                          vmax=max(int(cons.max()), low + 1), **style)
        bar = fig.colorbar(dots, ax=ax, label="later events changed")
        bar.locator = MaxNLocator(integer=True)
        bar.update_ticks()
    top = max(float(margins.max()), 1e-3)  # margins are positive; guard a degenerate record
    _stack_labels(ax, points[stacked > 1], stacked[stacked > 1], top)
    fx, fy = _staircase(sizes, margins)
    right = float(sizes.max()) + 1.0
    ax.step(np.append(fx, right), np.append(fy, fy[-1]), where="post", color="C3",
            linewidth=1.6, zorder=2, gid="front", label=f"non-dominated front ({len(fx)})")
    ax.scatter(sizes[:1], margins[:1], s=260, facecolors="none", edgecolors="black",
               linewidths=2.0, zorder=4, gid="answer",
               label=f"answer: |s| = {int(sizes[0])}, margin {margins[0]:.3f}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(max(float(sizes.min()) - 1.0, 0.0), right)
    ax.set_ylim(bottom=0.0, top=top * 1.12)
    ax.grid(alpha=0.3)
    ax.set(xlabel=f"counterfactual size |s| (events removed, of |R| = {removable})",
           ylabel=f"margin of the flip (logit past 0; p_orig = {p0:.3f})")
    ax.legend(fontsize="small", loc="best")
    fig.suptitle(_pareto_title(record, len(sets), diversity, hypervolume, cons is not None))
    return fig


def plot_robustness(records: pd.DataFrame) -> Figure:
    """Robustness against size: the mean share of noisy implementations that still flip
    (``robust_impl``) per counterfactual size, one line per explainer / strategy, one panel
    per dataset × model (records measured with ``robustness=true``; the legend gives how many
    counterfactuals each line rests on).

    Args:
        records: Records as ``load_runs`` returns them.

    Returns:
        The figure.
    """
    keys = config_keys(records)
    measured = (records[records["robust_impl"].notna()] if "robust_impl" in records.columns
                else records.iloc[:0])
    panels = _groups(measured, keys[:2]) if len(measured) else []
    fig, axes = _panels(max(1, len(panels)), width=5.0, height=3.6)
    if not panels:
        axes[0].text(0.5, 0.5, "no robustness measured (robustness=true)", ha="center",
                     va="center", transform=axes[0].transAxes, color="0.4")
    for ax, (values, rows) in zip(axes, panels, strict=False):
        for label_values, g in _groups(rows, keys[2:]):
            by_size = g.groupby("size")["robust_impl"].mean()
            label = _label(dict(zip(keys[2:], label_values, strict=True)), keys)
            ax.plot(by_size.index.to_numpy(), by_size.to_numpy(), marker="o",
                    label=f"{label} (n = {len(g)})")
        ax.set(title=" · ".join(str(v) for v in values), xlabel="explanation size |s|",
               ylabel="noisy variants that still flip", ylim=(-0.03, 1.03))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize="small")
    fig.suptitle("Robustness to implementation noise against size")
    return fig


def report_figures(records: pd.DataFrame) -> dict[str, Figure]:
    """The report's figures by file stem (``fidelity_sparsity``, ``fidelity_kept`` when some
    record holds curve logits, ``size_hist``, ``it_max``, and ``robustness`` when some
    record was measured)."""
    figures = {"fidelity_sparsity": plot_fidelity_sparsity(records)}
    if has_curves(records):
        figures["fidelity_kept"] = plot_fidelity_kept(records)
    figures |= {
        "size_hist": plot_size_hist(records),
        "it_max": plot_it_max(records),
    }
    if "robust_impl" in records.columns and records["robust_impl"].notna().any():
        figures["robustness"] = plot_robustness(records)
    return figures


def save_png(fig: Figure, path: str | os.PathLike[str], dpi: int = DPI) -> Path:
    """Write ``fig`` as a PNG at ``path``, complete or not at all (``atomic_output``: a
    full disk leaves no empty or cut-short image and raises
    ``DiskFullError``)."""
    with atomic_output(path) as f:
        fig.savefig(f, format="png", dpi=dpi)
    return Path(path)


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
        files.append(save_png(fig, folder / f"{name}.png", dpi))
    return files



__all__ = ["DPI", "has_curves", "pareto_figure", "plot_fidelity_kept", "plot_fidelity_sparsity",
           "plot_it_max", "plot_robustness", "plot_size_hist", "report_figures",
           "save_figures", "save_png"]
