"""Finding and loading explanation runs for reports: every run directory below some paths,
its records, and what sets a run apart from other runs of its configuration."""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from cftgnn.errors import ConfigError
from cftgnn.explain.params import BudgetParams, explainer_params
from cftgnn.runs.records import flatten
from cftgnn.runs.rundir import FINGERPRINT, find_runs, read_fingerprint, read_records

#: Columns naming one configuration, in table order (``it_max`` and ``settings`` only when
#: they vary).
KEYS: tuple[str, ...] = ("dataset", "model", "explainer", "strategy_name", "it_max", "settings")
#: Fingerprint fields that name the configuration a run belongs to (see ``run_settings``).
_CONFIG_FIELDS = ("dataset.name", "model.config._target_", "explainer._target_",
                  "strategy._target_")
#: Fingerprint fields in which runs of one configuration may differ and still be pooled.
_SHARED_FIELDS = {"shard", "num_shards", "merged_shards", "model.weights", "explainer.it_max"}

#: Record columns the report groups by (besides the metric inputs ``summarize`` reads).
_NEEDED = ("dataset", "model", "explainer", "strategy_name", "status", "group")


def _it_max(fingerprint: Mapping[str, Any]) -> float:
    """The iteration cap of a run whose explainer's own cap option is ``it_max`` (CF-TGNN's
    seed name), by its declaration's rule (``BudgetParams.cap_of``: ``max_iterations``
    replaces it when set); NaN for other explainers."""
    options = dict(fingerprint.get("explainer") or {})
    params = explainer_params(str(options.pop("_target_", "")))
    if params is None or not issubclass(params, BudgetParams) or params.own_cap != "it_max":
        return math.nan
    cap = params.cap_of(options)
    return math.nan if cap is None else float(cap)


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
    ``run_settings``) and ``run`` (its run directory). Shard runs are left out when a
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
        raise ConfigError(f"no run directories (folders with {FINGERPRINT}) in "
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


def config_keys(records: pd.DataFrame) -> list[str]:
    """The ``KEYS`` that name a configuration here (``it_max``, ``settings`` only when
    they vary)."""
    keys = [k for k in KEYS if k not in ("it_max", "settings")]
    if records["it_max"].dropna().nunique() > 1:
        keys.append("it_max")
    if "settings" in records.columns and records["settings"].nunique() > 1:
        keys.append("settings")
    return keys



__all__ = ["KEYS", "config_keys", "load_runs", "run_settings"]
