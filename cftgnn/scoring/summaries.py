"""Summaries of explanation records: one row of metrics per group, and their text form.

``summarize`` applies the pure metrics of ``cftgnn.scoring.metrics`` to a table of
records (one per explained event), per group; events whose status is not ``ok`` are counted as
skipped and left out of the metrics. ``format_summary`` prints such a table.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cftgnn.explain.result import explained
from cftgnn.oracle.oracle import margin
from cftgnn.scoring.benchmark_metrics import charr, first_flip, monotonicity
from cftgnn.scoring.curves import acc_auc, aufsc_keep, best_fid
from cftgnn.scoring.groups import PredictionGroup
from cftgnn.scoring.metrics import (
    FloatArray,
    approximation_agreement,
    as_floats,
    aufsc_minus,
    aufsc_plus,
    cache_hit_rate,
    characterization_score,
    fidelity_minus,
    fidelity_plus,
    flip_mask,
    jaccard_diversity,
    mean_or_nan,
    pareto_hypervolume,
    runtime_percentiles,
    size_stats,
    sparsity,
)
from cftgnn.scoring.protocols import (
    TEMGX_THRESHOLD,
    temgx_answer_fidelity,
    temgx_aufsc,
    tempme_acc_auc,
)

_NAN = float("nan")


MEANINGS: dict[str, str] = {
    "events": "events sampled",
    "explained": "events whose search ran",
    "skipped": "events without candidates or with logit 0",
    "fidelity_plus": "share flipped by removing the explanation ↑",
    "fidelity_minus": "share flipped keeping only the explanation ↓",
    "characterization": "harmonic mean of fid+ and 1 − fid− ↑",
    "aufsc_plus": "area under fid+ against sparsity ↑",
    "aufsc_minus": "area under fid− against sparsity ↓",
    "charr": "harmonic mean of AUFSC+ and 1 − AUFSC− (CHARR) ↑",
    "best_fid": "best logit move keeping a top share of the ranking ↑",
    "aufsc_keep": "area under that move against the kept share ↑",
    "acc_auc": "share keeping the sign with the top 0-30 % kept ↑",
    "tgnnexplainer_best_fid": "best_fid, T-GNNExplainer's protocol (20 recent) ↑",
    "tgnnexplainer_aufsc": "aufsc_keep, T-GNNExplainer's protocol ↑",
    "tempme_acc_auc": "TempME's ACC-AUC: ± pairs, 1-30 % of slots ↑",
    "temgx_fidelity_minus": "TemGX's fid−: probability drop, only the answer kept ↑",
    "temgx_cf_rate": "share TemGX calls counterfactual (that drop > 0.01) ↑",
    "temgx_sparsity": "TemGX's sparsity: answer size / candidates ↓",
    "temgx_aufsc": "TemGX's AUFSC: probability move, top share removed ↑",
    "monotonicity": "Spearman of importance and single-removal impact ↑",
    "flip_success": "share whose kept-share curve flips somewhere ↑",
    "first_flip_sparsity": "mean first kept share that flips (1: none flips) ↓",
    "mean_size": "mean size of the counterfactuals found ↓",
    "median_size": "median size of the counterfactuals found ↓",
    "mean_sparsity": "their mean size / candidates ↓",
    "certified": "share certified cardinality-minimal ↑",
    "next_size_share_p50": "cut-short certifications: median share of last size",
    "n_counterfactuals": "counterfactuals per event (events with one)",
    "cf_ge3": "share of those events with ≥ 3 counterfactuals",
    "diversity": "mean Jaccard distance of an event's counterfactuals ↑",
    "hypervolume": "size-margin area an event's counterfactuals dominate ↑",
    "robust_impl": "share of noisy variants that still flip ↑",
    "robust_model": "share that flip a second checkpoint too ↑",
    "rule_found": "share with a local counterfactual rule ↑",
    "oracle_calls": "model evaluations per event",
    "cache_hit_rate": "share of evaluations the cache answered",
    "agreement": "approximate oracle agrees with the exact ↑",
    "time_p50": "median seconds per event ↓",
    "time_p90": "90th percentile of seconds per event ↓",
    "time_mean": "mean seconds per event ↓",
    "curve_time_p50": "median seconds of the curve logits, apart from time ↓",
    "gpu_share": "share of events whose oracle ran on a GPU",
}
"""Each metric column of ``summarize``, in order, with its meaning in one line (↑ / ↓: higher
/ lower is better; the definitions: docs/metrics.md), printed next to the values by
``format_summary``."""

SUMMARY_COLUMNS: tuple[str, ...] = tuple(MEANINGS)
"""Metric columns of ``summarize``, in order (after the ``by`` columns): ``MEANINGS``'s keys."""

GROUND_TRUTH_MEANINGS: dict[str, str] = {
    "cause_found": "share of events with their whole cause a candidate",
    "cause_auc": "AUC of the ranking at finding the planted cause ↑",
    "cause_precision": "share of causes among the top |cause| ranked ↑",
    "cause_contains": "share of answers that contain the cause ↑",
    "cause_contained": "share of answers inside the cause ↑",
    "cause_equal": "share of answers equal to the cause ↑",
    "cause_flip": "share the model flips with the cause removed ↑",
}
"""The ground-truth columns ``summarize`` adds after ``SUMMARY_COLUMNS`` when the records
carry planted causes (``has_causes``; ``cftgnn.scoring.ground_truth``), with their meanings;
records of other streams get none of them."""

#: Printed under a table with its meanings.
METRICS_PAGE = "docs/metrics.md"

#: The order of the prediction groups in every table of a run's metrics by group: the table
#: ``explain.py`` and ``merge_records.py`` print and write (``summary.csv``), and
#: ``report.py``'s "By prediction group" (``cftgnn.reporting.tables.comparison_table``); other
#: values of a ``group`` column follow these, in their order of first appearance.
GROUP_ORDER: tuple[str, ...] = (PredictionGroup.CORRECT.value, PredictionGroup.INCORRECT.value,
                                "all")


def sort_groups(table: pd.DataFrame, keys: Sequence[str] = ("group",)) -> pd.DataFrame:
    """``table`` sorted by ``keys`` (stable), its ``group`` column in ``GROUP_ORDER``.

    Args:
        table: A table with the ``keys`` columns (e.g. ``summarize``'s with ``by=keys``).
        keys: The columns to sort by, in order; a ``group`` among them sorts by
            ``GROUP_ORDER``, the others by value.

    Returns:
        The sorted table, with a fresh index.
    """
    if table.empty or not keys:
        return table.reset_index(drop=True)
    seen = list(dict.fromkeys(table["group"].astype(str))) if "group" in keys else []
    rank = {g: i for i, g in enumerate([*GROUP_ORDER, *(g for g in seen
                                                        if g not in GROUP_ORDER)])}

    def order(column: pd.Series) -> pd.Series:
        return column.astype(str).map(rank) if column.name == "group" else column

    return table.sort_values(list(keys), key=order, kind="stable", ignore_index=True)


# --------------------------------------------------------------------------- tables


def _column(df: pd.DataFrame, name: str) -> FloatArray:
    """A column as floats, all NaN when absent."""
    if name in df.columns:
        return as_floats(df[name].to_numpy(dtype=np.float64, na_value=np.nan), name)
    return np.full(len(df), _NAN)


def _time_column(df: pd.DataFrame) -> FloatArray:
    """``time_s``, else ``setup_time_s + wall_time_s``, else NaN."""
    if "time_s" in df.columns:
        return _column(df, "time_s")
    if "setup_time_s" in df.columns and "wall_time_s" in df.columns:
        return _column(df, "setup_time_s") + _column(df, "wall_time_s")
    return np.full(len(df), _NAN)


def _several(ok: pd.DataFrame) -> dict[str, float]:
    """``n_counterfactuals``, ``cf_ge3``, ``diversity`` and ``hypervolume`` of explained
    records (over the events with at least one counterfactual; NaN without the columns)."""
    names = ("n_counterfactuals", "cf_ge3", "diversity", "hypervolume")
    if "counterfactuals" not in ok.columns or "counterfactual_logits" not in ok.columns:
        return dict.fromkeys(names, _NAN)
    count, div, hv = [], [], []
    for sets, logits, p0, r in zip(ok["counterfactuals"], ok["counterfactual_logits"],
                                   ok["original_logit"], ok["num_removable"], strict=True):
        sets = [] if sets is None else [list(c) for c in sets]
        if not sets:
            continue
        count.append(len(sets))
        div.append(jaccard_diversity(sets))
        hv.append(pareto_hypervolume([len(c) for c in sets],
                                     [margin(float(p0), float(p)) for p in logits],
                                     int(r), float(p0)))
    n = np.asarray(count, dtype=np.float64)
    d = np.asarray(div, dtype=np.float64)
    return {
        "n_counterfactuals": mean_or_nan(n),
        "cf_ge3": mean_or_nan((n >= 3).astype(np.float64)),
        "diversity": mean_or_nan(d[~np.isnan(d)]),
        "hypervolume": mean_or_nan(np.asarray(hv, dtype=np.float64)),
    }


def _robustness(ok: pd.DataFrame) -> dict[str, float]:
    """``robust_impl`` (mean share of noisy variants that still flip), ``robust_model``
    (share of counterfactuals that also flip the second checkpoint) and ``rule_found`` (share
    with a local rule), over the counterfactuals measured (NaN without the columns)."""
    out = {"robust_impl": _NAN, "robust_model": _NAN, "rule_found": _NAN}
    if "robust_impl" not in ok.columns:
        return out
    measured = ok[ok["robust_impl"].notna()]
    out["robust_impl"] = mean_or_nan(_column(measured, "robust_impl"))
    if "robust_model" in measured.columns:
        model = measured["robust_model"].dropna()
        out["robust_model"] = float(model.astype(bool).mean()) if len(model) else _NAN
    if "rule_group" in measured.columns and len(measured):
        out["rule_found"] = float(np.mean([g is not None and len(g) > 0
                                           for g in measured["rule_group"]]))
    return out


def _curves(ok: pd.DataFrame) -> dict[str, float]:
    """The curve metrics of explained records, each protocol's under its own name
    (``cftgnn.scoring.curves``): ``best_fid``, ``aufsc_keep`` and ``acc_auc`` (common),
    ``tgnnexplainer_best_fid`` and ``tgnnexplainer_aufsc`` (tgnnexplainer),
    ``tempme_acc_auc`` (tempme); each over the events with that curve (NaN without the columns
    or without any curve)."""
    p0 = _column(ok, "original_logit")

    def rows(name: str) -> list[Any]:
        return list(ok[name]) if name in ok.columns else [None] * len(ok)

    fid, acc = rows("fid_curve_logits"), rows("acc_curve_logits")
    tgx = rows("tgnnexplainer_curve_logits")
    neg0 = _column(ok, "tempme_neg_logit")
    return {"best_fid": best_fid(p0, fid), "aufsc_keep": aufsc_keep(p0, fid),
            "acc_auc": acc_auc(p0, acc),
            "tgnnexplainer_best_fid": best_fid(p0, tgx),
            "tgnnexplainer_aufsc": aufsc_keep(p0, tgx),
            "tempme_acc_auc": tempme_acc_auc(p0, rows("tempme_curve_logits"), neg0,
                                             rows("tempme_neg_curve_logits")),
            **_temgx(ok), **_benchmark(ok, p0, fid)}


def _temgx(ok: pd.DataFrame) -> dict[str, float]:
    """The ``temgx`` protocol's columns over the explained events that computed it (a
    non-empty ``temgx_curve_logits``): TemGX's fid− and counterfactual share of the answer kept
    alone (``keep_logit``), its sparsity and its AUFSC (``cftgnn.scoring.curves``)."""
    out = {"temgx_fidelity_minus": _NAN, "temgx_cf_rate": _NAN, "temgx_sparsity": _NAN,
           "temgx_aufsc": _NAN}
    if "temgx_curve_logits" not in ok.columns or "keep_logit" not in ok.columns:
        return out
    has = np.asarray([c is not None and len(c) > 0 for c in ok["temgx_curve_logits"]],
                     dtype=bool)
    done = ok[has]
    if not len(done):
        return out
    p0, keep = _column(done, "original_logit"), _column(done, "keep_logit")
    drop = temgx_answer_fidelity(p0, keep)
    out["temgx_fidelity_minus"] = mean_or_nan(drop)
    out["temgx_cf_rate"] = mean_or_nan((drop > TEMGX_THRESHOLD).astype(np.float64))
    out["temgx_sparsity"] = mean_or_nan(sparsity(_column(done, "size"),
                                                 _column(done, "num_candidates")))
    out["temgx_aufsc"] = temgx_aufsc(p0, list(done["temgx_curve_logits"]))
    return out


def _benchmark(ok: pd.DataFrame, p0: FloatArray, fid: list[Any]) -> dict[str, float]:
    """The benchmark's monotonicity (``single_removal_logits`` against ``importance``, the
    ``temgx`` protocol's) and flip summary on the common kept-share curve
    (``cftgnn.scoring.benchmark_metrics``)."""
    mono = _NAN
    if "single_removal_logits" in ok.columns and "importance" in ok.columns:
        mono = monotonicity(p0, list(ok["importance"]), list(ok["single_removal_logits"]))
    rate, first = first_flip(p0, fid)
    return {"monotonicity": mono, "flip_success": rate, "first_flip_sparsity": first}


def has_causes(records: pd.DataFrame) -> bool:
    """Whether records come from a stream with planted causes (a non-null ``cause_total``)."""
    return "cause_total" in records.columns and bool(records["cause_total"].notna().any())


def _median_defined(values: FloatArray) -> float:
    """Median of the values that are not NaN; NaN when there are none (no warning)."""
    defined = values[~np.isnan(values)]
    return float(np.median(defined)) if len(defined) else _NAN


def _share(ok: pd.DataFrame, name: str) -> float:
    """Mean of a column over the rows where it is defined (a boolean column as 0/1 shares;
    NaN when it is defined nowhere)."""
    if name not in ok.columns:
        return _NAN
    values = ok[name].dropna()
    return mean_or_nan(values.astype(np.float64).to_numpy()) if len(values) else _NAN


def _ground_truth(ok: pd.DataFrame) -> dict[str, float]:
    """``GROUND_TRUTH_MEANINGS``'s columns of explained records: ``cause_found`` over the
    events with a cause, each other the mean of its record column
    (``cftgnn.scoring.ground_truth.cause_columns``) where defined."""
    total, size = _column(ok, "cause_total"), _column(ok, "cause_size")
    caused = total > 0
    found = mean_or_nan((size[caused] == total[caused]).astype(np.float64))
    return {"cause_found": found,
            **{name: _share(ok, name) for name in GROUND_TRUTH_MEANINGS if name != "cause_found"}}


def gpu_share(records: pd.DataFrame) -> float:
    """Share of the records whose event ran on a device other than the CPU (a GPU: their
    ``device`` is not ``cpu``), over those that say where (NaN for none: records older than
    schema 11)."""
    if "device" not in records.columns:
        return _NAN
    where = records["device"].dropna().astype(str)
    return float((where.str.split(":").str[0] != "cpu").mean()) if len(where) else _NAN


def _summarize_group(g: pd.DataFrame, causes: bool = False) -> dict[str, float]:
    """The metric columns for one group of records."""
    ok = g[explained(g["status"])] if len(g) else g
    p0 = _column(ok, "original_logit")
    flips = flip_mask(p0, _column(ok, "final_logit"))
    sp = sparsity(_column(ok, "size"), _column(ok, "num_candidates"))
    fid_plus = fidelity_plus(p0, _column(ok, "final_logit"))

    fid_minus = auf_minus = _NAN
    if "keep_logit" in ok.columns:
        keep = _column(ok, "keep_logit")
        has = ~np.isnan(keep)
        if has.any():
            fid_minus = fidelity_minus(p0[has], keep[has])
            auf_minus = aufsc_minus(~flip_mask(p0[has], keep[has]), sp[has])
    sizes = size_stats(_column(ok, "size"), flips)
    times = runtime_percentiles(_time_column(g), q=(50, 90))
    return {
        "events": len(g),
        "explained": len(ok),
        "skipped": len(g) - len(ok),
        "fidelity_plus": fid_plus,
        "fidelity_minus": fid_minus,
        "characterization": characterization_score(fid_plus, fid_minus),
        "aufsc_plus": aufsc_plus(flips, sp),
        "aufsc_minus": auf_minus,
        "charr": charr(aufsc_plus(flips, sp), auf_minus),
        **_curves(ok),
        "mean_size": sizes["mean"],
        "median_size": sizes["median"],
        "mean_sparsity": mean_or_nan(sp[flips]),
        "certified": mean_or_nan(_column(ok, "certified_minimal")),
        "next_size_share_p50": _median_defined(_column(ok, "next_size_share")),
        **_several(ok),
        **_robustness(ok),
        "oracle_calls": mean_or_nan(_column(ok, "oracle_calls")),
        "cache_hit_rate": (
            cache_hit_rate(_column(g, "cache_hits"), _column(g, "oracle_calls"))
            if "cache_hits" in g.columns
            else _NAN
        ),
        "agreement": approximation_agreement(_column(g, "agreement"), _column(g, "agreement_n")),
        "time_p50": times["p50"],
        "time_p90": times["p90"],
        "time_mean": times["mean"],
        "curve_time_p50": runtime_percentiles(_column(ok, "curve_time_s"), q=(50,))["p50"],
        "gpu_share": gpu_share(g),
        **(_ground_truth(ok) if causes else {}),
    }


def summarize(
    records: pd.DataFrame | Sequence[Mapping[Any, Any]], by: Sequence[str] = ()
) -> pd.DataFrame:
    """One row of metrics per group of records.

    Rows with ``status == "ok"`` are *explained*; the others (``"no_candidates"``,
    ``"zero_logit"``) are *skipped*: counted, but left out of fidelity, AUFSC, size, sparsity
    and ``oracle_calls``. A flip is recomputed from the logits (``p0 · p < 0``). Columns:

    * ``events``, ``explained``, ``skipped``: row counts.
    * ``fidelity_plus`` (``fidelity_plus``), ``fidelity_minus`` (``fidelity_minus``,
      over explained rows whose ``keep_logit`` is not NaN), ``characterization``
      (``characterization_score``, weights ½/½), ``aufsc_plus``, ``aufsc_minus``. The three
      fid− based columns are NaN without a ``keep_logit`` column.
    * ``best_fid``, ``aufsc_keep`` (T-GNNExplainer's Best-FID and AUFSC over kept shares of
      the ranking) and ``acc_auc`` (TempME's ACC-AUC) under the **common** protocol:
      ``cftgnn.scoring.curves``, over the explained events with a curve
      (``fid_curve_logits``, ``acc_curve_logits``; NaN for records without them, e.g. older
      than schema 4).
    * ``tgnnexplainer_best_fid``, ``tgnnexplainer_aufsc``: Best-FID and AUFSC under the
      **tgnnexplainer** protocol (``tgnnexplainer_curve_logits``); ``tempme_acc_auc``:
      TempME's ACC-AUC under the **tempme** protocol, over positive and negative pairs
      (``tempme_acc_auc``). NaN where the run did not compute that protocol.
    * ``mean_size``, ``median_size``, ``mean_sparsity``: over the counterfactuals found.
    * ``certified``: share of explained events whose answer is a counterfactual certified
      cardinality-minimal (docs/design.md §7; NaN for records without the column).
    * ``next_size_share_p50``: median ``next_size_share`` over the explained events whose
      exact enumeration (exhaustive search or ``certify``) was cut short: how far into the
      first size it did not complete it got (docs/certified.md; NaN when none was cut short,
      or for records older than schema 8).
    * ``n_counterfactuals`` (mean number handed back), ``cf_ge3`` (share with at least 3),
      ``diversity`` (mean ``jaccard_diversity``, over events with at least 2) and
      ``hypervolume`` (mean ``pareto_hypervolume``): over the explained events with at
      least one counterfactual.
    * ``robust_impl``, ``robust_model``, ``rule_found``: robustness of the counterfactuals
      measured with ``robustness=true`` (``cftgnn.scoring.robustness``): mean share of
      noisy implementations that still flip, share that also flip a second checkpoint, share
      with a local counterfactual rule.
    * ``oracle_calls``: mean per explained event.
    * ``cache_hit_rate`` (``cache_hit_rate``) and ``agreement``
      (``approximation_agreement``): over all rows.
    * ``time_p50``, ``time_p90``, ``time_mean``: seconds per event over all rows, from
      ``time_s`` (or ``setup_time_s + wall_time_s`` when ``time_s`` is absent).
    * ``curve_time_p50``: median seconds of the curve logits' exact call (``curve_time_s``,
      not part of ``time_s``) over the explained events that made it (NaN for none: records
      of ``curves=none`` or older than schema 6).
    * ``gpu_share``: share of the rows that ran on a GPU (``device`` not ``cpu``), over all
      rows that say where (``gpu_share``; NaN for records older than schema 11).
    * Only for records of a stream with planted causes (``has_causes``), after those:
      ``GROUND_TRUTH_MEANINGS``'s columns over the explained events (``cause_found``: share
      of the events with a cause whose whole cause was a candidate; ``cause_auc``,
      ``cause_precision``: of the rankings; ``cause_contains``, ``cause_contained``,
      ``cause_equal``: of the counterfactual answers; ``cause_flip``: share of events whose
      prediction flips with exactly their cause removed, the model-side check).

    Missing optional columns (``cache_hits``, ``agreement``, ...) give NaN.

    Args:
        records: One row per explained event (a DataFrame, or a sequence of record dicts).
        by: Columns to group by; empty for a single row over all records.

    Returns:
        The ``by`` columns followed by ``SUMMARY_COLUMNS`` (and ``GROUND_TRUTH_MEANINGS``'s
        columns for records with causes), groups in order of first appearance (NaN keys form
        their own group).

    Raises:
        ValueError: A ``by`` column or ``status`` is missing while there are records.
    """
    df = records if isinstance(records, pd.DataFrame) else pd.DataFrame(list(records))
    keys = list(by)
    causes = has_causes(df)
    columns = [*keys, *SUMMARY_COLUMNS, *(GROUND_TRUTH_MEANINGS if causes else ())]
    missing = [k for k in keys if k not in df.columns]
    if missing:
        raise ValueError(f"group-by columns not in the records: {missing}")
    if len(df) and "status" not in df.columns:
        raise ValueError("records need a 'status' column")
    if not keys:
        return pd.DataFrame([_summarize_group(df, causes)], columns=columns)
    rows = []
    for key, g in df.groupby(keys, sort=False, dropna=False):
        values = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(keys, values, strict=True)), **_summarize_group(g, causes)})
    return pd.DataFrame(rows, columns=columns)


def summary_metrics(records: pd.DataFrame | Sequence[Mapping[Any, Any]]) -> dict[str, float]:
    """The single-row ``summarize`` as a flat ``{column: float}`` dict (for logging).

    Args:
        records: One row per explained event.

    Returns:
        Every column of ``SUMMARY_COLUMNS`` (and the ground-truth ones for records with
        causes) as a float.
    """
    row = summarize(records).iloc[0]
    return {str(name): float(row[name]) for name in row.index}


def format_summary(df: pd.DataFrame, index: str | None = None, hide_nan: bool = False,
                   meanings: bool = False) -> str:
    """A fixed-width text table of a summary, floats to 3 decimals.

    Args:
        df: A table such as ``summarize`` returns.
        index: A column naming the rows (e.g. ``"group"``); the table is then printed
            transposed, one metric per line and one column per row of ``df``, which reads
            better in a terminal than 18 columns side by side.
        hide_nan: Leave out the metrics that are NaN in every row (e.g. the robustness
            columns of a run without ``robustness=true``); a last line names them.
        meanings: With ``index``, each metric's line ends with its meaning
            (``MEANINGS``), and a last line says where the definitions are.

    Returns:
        The table as a string (an empty table gives its header).
    """
    if df.empty:
        return "  ".join(str(c) for c in df.columns)
    hidden: list[str] = []
    if hide_nan:
        hidden = [c for c in df.columns if c != index and c in SUMMARY_COLUMNS
                  and df[c].isna().all()]
        # a planted stream's columns are there because it has causes: shown even when NaN
        # (a ranking-only explainer has no answer to compare), never listed as hidden
        df = df.drop(columns=hidden)

    def cell(value: Any) -> str:
        if isinstance(value, float | np.floating):
            return "nan" if np.isnan(value) else f"{value:.3f}"
        return str(value)

    text = df.map(cell)
    if index is None:
        table = text.to_string(index=False)
    else:
        wide = text.set_index(index).T.rename_axis(None, axis=1)
        table = wide.to_string()
        if meanings:  # left-aligned after the values (the header line comes first)
            lines = table.splitlines()
            said = {**MEANINGS, **GROUND_TRUTH_MEANINGS}
            table = "\n".join([lines[0], *(f"{line}   {said.get(str(m), '')}".rstrip()
                                           for line, m in zip(lines[1:], wide.index,
                                                              strict=True))])
    foot = []
    if hidden:
        foot.append(textwrap.fill(f"not shown, no value in this run: {', '.join(hidden)}",
                                  width=100, subsequent_indent="  ", break_on_hyphens=False))
    if meanings and index is not None:
        foot.append(f"↑ / ↓: higher / lower is better; definitions: {METRICS_PAGE}")
    return "\n".join([table, *foot])


def group_note(records: pd.DataFrame) -> str | None:
    """What a summary by prediction ``group`` must say about the logit the groups follow, or
    None when the groups are those of the explained logit.

    The sampling pass's groups are signs of ``screen_logit`` (``group_logit`` ``screen``);
    for a model with memory under ``history=event`` that is not the explained
    ``original_logit``, so some events may sit in the group the explained logit would not
    put them in. Records of both kinds mixed are named too.

    Args:
        records: Explanation records (``group``, ``group_logit``, ``original_logit``).
    """
    if records.empty or not {"group", "group_logit", "original_logit"} <= set(records.columns):
        return None
    kinds = sorted(set(records["group_logit"].astype(str)))
    if len(kinds) > 1:
        return ("these records mix groups of the screening logit and of the explained logit "
                "(group_logit: " + ", ".join(kinds) + "); summarise them apart")
    if kinds != ["screen"]:
        return None
    p = records["original_logit"].to_numpy(dtype=float)
    by_p = np.where(p > 0, "correct", "incorrect")
    other = int(((by_p != records["group"].astype(str).to_numpy()) & (p != 0)).sum())
    if other == 0:
        return None
    return (f"groups follow the sampling pass's screen_logit (group_logit=screen), not the "
            f"explained original_logit: {other} of {len(records)} events would be in the "
            "other group by original_logit (history=batch_start explains the screened, "
            "batch-start prediction itself)")


def summary_table(records: pd.DataFrame) -> pd.DataFrame:
    """Summary per prediction group plus an ``all`` row, in ``GROUP_ORDER``
    (``correct incorrect all``)."""
    if records.empty:
        return summarize(records).assign(group="all")[["group", *SUMMARY_COLUMNS]]
    table = summarize(records, by=["group"])
    if len(table) > 1:
        table = pd.concat([table, summarize(records).assign(group="all")], ignore_index=True)
    return sort_groups(table)


def summary_metrics_flat(table: pd.DataFrame) -> dict[str, float]:
    """``summary/<group>/<metric>`` → value, for the tracker."""
    out: dict[str, float] = {}
    for row in table.to_dict("records"):
        group = row.pop("group", "all")
        for key, value in row.items():
            if isinstance(value, int | float):
                out[f"summary/{group}/{key}"] = float(value)
    return out

__all__ = ["GROUND_TRUTH_MEANINGS", "MEANINGS", "METRICS_PAGE", "SUMMARY_COLUMNS",
           "format_summary", "gpu_share", "group_note", "has_causes", "sort_groups", "summarize",
           "summary_metrics"]
