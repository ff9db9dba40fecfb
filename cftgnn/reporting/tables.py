"""Tables of a report: one row of metrics per configuration, as markdown."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from cftgnn.reporting.runs import config_keys
from cftgnn.scoring.summaries import has_causes, sort_groups, summarize

#: Summary column → table heading, in table order. The diversity columns
#: (``n_counterfactuals`` … ``hypervolume``, see ``summarize``) are over the events with at
#: least one counterfactual; explainers of one answer show 1 CF per event and no diversity (–).
#: ``best_fid``, ``aufsc_keep`` (T-GNNExplainer) and ``acc_auc`` (TempME) come from the
#: explainer's ranking (``cftgnn.scoring.curves``; – for runs older than schema 4).
TABLE_COLUMNS: dict[str, str] = {
    "events": "events",
    "fidelity_plus": "fidelity+ ↑",
    "fidelity_minus": "fidelity− ↓",
    "aufsc_plus": "AUFSC+ ↑",
    "aufsc_minus": "AUFSC− ↓",
    "characterization": "charact. ↑",
    "best_fid": "Best-FID ↑",
    "aufsc_keep": "AUFSC kept ↑",
    "acc_auc": "ACC-AUC ↑",
    "mean_size": "mean size",
    "n_counterfactuals": "CFs / event",
    "cf_ge3": "≥ 3 CFs",
    "diversity": "diversity ↑",
    "hypervolume": "HV ↑",
    "time_p50": "median time (s)",
    "gpu_share": "on GPU",
    "oracle_calls": "oracle calls",
}

#: Robustness columns (``robustness=true``), added after the others when any record has them.
ROBUSTNESS_TABLE_COLUMNS: dict[str, str] = {
    "robust_impl": "impl. noise ↑",
    "robust_model": "model noise ↑",
    "rule_found": "local rule",
}

#: The curve metrics of each protocol (``protocol=``, docs/metrics.md), side by side, each
#: heading labelled with its protocol: the table of ``protocol_table``.
PROTOCOL_TABLE_COLUMNS: dict[str, str] = {
    "best_fid": "Best-FID · common ↑",
    "tgnnexplainer_best_fid": "Best-FID · T-GNNExplainer ↑",
    "aufsc_keep": "AUFSC · common ↑",
    "tgnnexplainer_aufsc": "AUFSC · T-GNNExplainer ↑",
    "acc_auc": "ACC-AUC · common ↑",
    "tempme_acc_auc": "ACC-AUC · TempME (± pairs) ↑",
    "temgx_aufsc": "AUFSC · TemGX (removed) ↑",
    "temgx_fidelity_minus": "fid− · TemGX ↑",
    "temgx_cf_rate": "CF · TemGX (0.01) ↑",
}

#: The benchmark repository's metrics (``cftgnn.scoring.benchmark_metrics``), a table of
#: their own in the report (``benchmark_table``).
BENCHMARK_TABLE_COLUMNS: dict[str, str] = {
    "charr": "CHARR ↑",
    "monotonicity": "monotonicity ↑",
    "flip_success": "flip success ↑",
    "first_flip_sparsity": "first-flip sparsity ↓",
}

#: Ground-truth columns (runs on a stream with planted causes, ``summaries.has_causes``),
#: added last when any record has them: ``summaries.GROUND_TRUTH_MEANINGS``.
GROUND_TRUTH_TABLE_COLUMNS: dict[str, str] = {
    "cause_found": "cause a candidate",
    "cause_auc": "cause AUC ↑",
    "cause_precision": "cause P@|C| ↑",
    "cause_contains": "⊇ cause ↑",
    "cause_contained": "⊆ cause ↑",
    "cause_equal": "= cause ↑",
    "cause_flip": "flip w/o cause ↑",
}

_KEY_HEADINGS = {"strategy_name": "strategy"}


def comparison_table(records: pd.DataFrame, by_group: bool = False) -> pd.DataFrame:
    """One row of metrics per configuration (and prediction group with ``by_group``).

    Args:
        records: Records as ``load_runs`` returns them.
        by_group: Split each configuration by its ``group`` column (correct / incorrect).

    Returns:
        The key columns followed by the ``TABLE_COLUMNS`` (and the
        ``ROBUSTNESS_TABLE_COLUMNS`` when some record was measured, the
        ``GROUND_TRUTH_TABLE_COLUMNS`` when some record has planted causes), as ``summarize``
        computes them, sorted by the keys (the groups in ``summaries.GROUP_ORDER``, as in
        the table ``explain.py`` prints).
    """
    keys = config_keys(records) + (["group"] if by_group else [])
    robust = ("robust_impl" in records.columns and records["robust_impl"].notna().any())
    columns = [*TABLE_COLUMNS, *(ROBUSTNESS_TABLE_COLUMNS if robust else ()),
               *(GROUND_TRUTH_TABLE_COLUMNS if has_causes(records) else ())]
    table = sort_groups(summarize(records, by=keys)[[*keys, *columns]], keys)
    if "it_max" in keys:
        table["it_max"] = table["it_max"].astype("Int64")  # 300, not 300.000; NaN stays missing
    return table


def has_protocols(records: pd.DataFrame) -> bool:
    """Whether some record holds a curve of a protocol other than the common one."""
    return any(name in records.columns and any(
        v is not None and len(v) > 0 for v in records[name])
        for name in ("tgnnexplainer_curve_logits", "tempme_curve_logits",
                     "temgx_curve_logits"))


def protocol_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: each curve metric under each protocol, side by side
    (``PROTOCOL_TABLE_COLUMNS``; – where a run did not compute that protocol)."""
    keys = config_keys(records)
    table = summarize(records, by=keys)[[*keys, *PROTOCOL_TABLE_COLUMNS]]
    return table.sort_values(keys, ignore_index=True)


def benchmark_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: the benchmark's CHARR, monotonicity (``temgx`` protocol
    runs) and flip summary (``BENCHMARK_TABLE_COLUMNS``; – where not computed)."""
    keys = config_keys(records)
    table = summarize(records, by=keys)[[*keys, *BENCHMARK_TABLE_COLUMNS]]
    return table.sort_values(keys, ignore_index=True)


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
    with ``TABLE_COLUMNS`` (``strategy_name`` becomes ``strategy``).

    Args:
        table: Any table, e.g. from ``comparison_table``.

    Returns:
        The table, one line per row, without a trailing newline.
    """
    names = {**TABLE_COLUMNS, **ROBUSTNESS_TABLE_COLUMNS, **GROUND_TRUTH_TABLE_COLUMNS,
             **_KEY_HEADINGS, **BENCHMARK_TABLE_COLUMNS,
             **(PROTOCOL_TABLE_COLUMNS if set(table.columns) & {
                 "tgnnexplainer_best_fid", "tgnnexplainer_aufsc", "tempme_acc_auc"} else {})}
    heads = [names.get(str(c), str(c)) for c in table.columns]
    numeric = [pd.api.types.is_numeric_dtype(table[c]) for c in table.columns]
    rule = ["---:" if num else ":---" for num in numeric]
    lines = ["| " + " | ".join(heads) + " |", "| " + " | ".join(rule) + " |"]
    for row in table.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines)


def it_max_table(records: pd.DataFrame) -> pd.DataFrame:
    """CF-TGNN's metrics per dataset × model × strategy × ``it_max`` (via ``summarize``): the
    runs with an ``it_max`` (``cftgnn.reporting.runs`` reads it from their config)."""
    cf = records[records["it_max"].notna()]
    keys = ["dataset", "model", "strategy_name", "it_max"]
    if "settings" in config_keys(records):
        keys.append("settings")
    return summarize(cf, by=keys).sort_values(keys, ignore_index=True)




__all__ = ["GROUND_TRUTH_TABLE_COLUMNS", "PROTOCOL_TABLE_COLUMNS", "ROBUSTNESS_TABLE_COLUMNS",
           "TABLE_COLUMNS", "comparison_table", "has_protocols", "it_max_table",
           "markdown_table", "protocol_table"]
