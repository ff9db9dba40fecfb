"""Orderings of explainers: ours beside the published ones, and how sure ours is.

The T-GNNExplainer paper (Xia et al., ICLR 2023, Table 2) and its TMLR 2024 reproduction
("[Re] Explaining Temporal Graph Models through an Explorer-Navigator Framework") rank the same
explainers on Wikipedia with TGAT and TGN by Best-FID and AUFSC. Their numbers come from their
own trained models, splits and samples, so only the **ordering** of the explainers can be
compared with ours. This module holds those published figures (``PUBLISHED``), names our runs by
the published rows they correspond to (``run_label``), and compares orderings:

* ``ordering``: explainers from best to worst by one metric;
* ``rank_agreement``: Kendall's τ between two orderings over the explainers both have
  (``scipy.stats.kendalltau``, τ-b with ties);
* ``bootstrap_wins``: how often explainer A beats B when the explained events are drawn again
  with replacement (the same draw for every explainer of a pair), so an ordering of ours is
  stated with how sure it is.

``python scripts/orderings.py RUN_OR_SWEEP_DIR [...]`` prints the comparison
(docs/results/reproduction.md). A protocol's tables need its curves in the records
(``explain.py protocol=…``, or ``rescore.py`` afterwards): a (dataset, model) whose runs hold
none of a protocol's curves gets no table of it, and one ``warning:`` line says which protocol
is missing and how to get it; when no run serves any table, one ``error:`` line (exit 2).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from cftgnn.errors import ConfigError, warn
from cftgnn.scoring.curves import aufsc_keep, best_fid

#: Our metric of each protocol for the published tables' two columns: (Best-FID, AUFSC)
#: under T-GNNExplainer's protocol, and the same pair under the common one.
PROTOCOL_METRICS: dict[str, tuple[str, str]] = {
    "tgnnexplainer": ("tgnnexplainer_best_fid", "tgnnexplainer_aufsc"),
    "common": ("best_fid", "aufsc_keep"),
}
#: The records' curve column of each protocol's Best-FID and AUFSC.
_CURVE_COLUMN = {"tgnnexplainer": "tgnnexplainer_curve_logits", "common": "fid_curve_logits"}


@dataclass(frozen=True)
class PublishedTable:
    """One published table of Best-FID and AUFSC per explainer (T-GNNExplainer's protocol).

    Attributes:
        source: Who measured it (``paper`` or ``reproduction``).
        where: Where the numbers are read.
        dataset: The dataset (``wikipedia``).
        model: The model (``tgn``, ``tgat``), as the table labels it.
        values: Per published row name, (Best-FID, AUFSC).
    """

    source: str
    where: str
    dataset: str
    model: str
    values: Mapping[str, tuple[float, float]]


_REPO = "repository m-krastev/fact8-temporal-graph"
#: The published Wikipedia rows. ``paper``: T-GNNExplainer's Table 2 as the reproduction
#: transcribes it (``notebooks/tables/tg{at,n}_results_og_tab.tex``); ``reproduction``: the
#: TMLR 2024 reproduction's own runs (``notebooks/tables/tg{at,n}_results_tab.md``). Row names
#: are the tables' own: ATTN (attention), PBONE (perturb-one), PG (PGExplainer), PGNavigator
#: and MLPNavigator (T-GNNExplainer with the PG or the MLP navigator), DotProductNavigator.
PUBLISHED: tuple[PublishedTable, ...] = (
    PublishedTable("paper", f"{_REPO}, notebooks/tables/tgat_results_og_tab.tex", "wikipedia",
                   "tgat", {"ATTN": (0.891, 0.564), "PBONE": (0.027, -2.227),
                            "PG": (1.354, 0.692), "PGNavigator": (1.836, 1.477)}),
    PublishedTable("paper", f"{_REPO}, notebooks/tables/tgn_results_og_tab.tex", "wikipedia",
                   "tgn", {"ATTN": (0.479, 0.073), "PBONE": (0.296, -0.601),
                           "PG": (0.464, -0.231), "PGNavigator": (0.866, 0.590)}),
    PublishedTable("reproduction", f"{_REPO}, notebooks/tables/tgat_results_tab.md",
                   "wikipedia", "tgat",
                   {"ATTN": (0.530, 0.082), "PBONE": (0.940, 0.537), "PG": (0.620, -0.322),
                    "PGNavigator": (1.155, 0.842), "MLPNavigator": (1.182, 0.777),
                    "DotProductNavigator": (0.987, 0.469)}),
    PublishedTable("reproduction", f"{_REPO}, notebooks/tables/tgn_results_tab.md",
                   "wikipedia", "tgn",
                   {"ATTN": (1.423, 0.788), "PBONE": (1.678, 0.751), "PG": (1.319, -0.011),
                    "PGNavigator": (1.821, 1.467), "MLPNavigator": (1.908, 1.494),
                    "DotProductNavigator": (1.301, 0.398)}),
)

#: Our explainer classes under the published tables' row names (the rest keep their own).
_CLASS_LABELS = {"AttentionExplainer": "ATTN", "PerturbOneExplainer": "PBONE",
                 "PGExplainer": "PG", "RandomExplainer": "random", "TempMEExplainer": "TempME",
                 "CFTGNNExplainer": "CF-TGNN", "GreedyExplainer": "greedy",
                 "BeamExplainer": "beam", "ExhaustiveExplainer": "exhaustive",
                 "NSGA2Explainer": "NSGA-II", "PSOExplainer": "PSO"}
#: T-GNNExplainer's published navigators by our ``navigator`` option.
_NAVIGATOR_LABELS = {"pgexplainer": "PGNavigator", "mlp": "MLPNavigator"}


def run_label(fingerprint: Mapping[str, Any]) -> str:
    """The published row name of a run (its ``run.json``), or a name of our own.

    T-GNNExplainer with the published explorer is ``PGNavigator`` / ``MLPNavigator`` (the
    tables' names) with those navigators and ``T-GNNExplainer (<navigator> navigator)``
    otherwise; with the narrowed explorer, ``T-GNNExplainer narrowed (<navigator>)``.

    Args:
        fingerprint: The run's ``run.json``.

    Returns:
        The label.
    """
    options = fingerprint.get("explainer") or {}
    name = str(options.get("_target_", "?")).rsplit(".", 1)[-1]
    if name != "TGNNExplainer":
        return _CLASS_LABELS.get(name, name)
    navigator = str(options.get("navigator", "pgexplainer"))
    if str(options.get("search", "published")) == "narrowed":
        return f"T-GNNExplainer narrowed ({navigator})"
    return _NAVIGATOR_LABELS.get(navigator, f"T-GNNExplainer ({navigator} navigator)")


def pair_label(fingerprint: Mapping[str, Any]) -> tuple[str, str]:
    """(dataset, model) of a run, the model as the tables name it (``tgn``, ``tgat``), with
    ``-2l`` for a TGN of 2 layers (the published setup; ours has 1)."""
    dataset = str((fingerprint.get("dataset") or {}).get("name", "?"))
    config = (fingerprint.get("model") or {}).get("config") or {}
    model = str(config.get("_target_", "?")).rsplit(".", 1)[-1].lower()
    if model == "tgn" and int(config.get("num_layers", 1)) != 1:
        model = f"tgn-{int(config['num_layers'])}l"
    return dataset, model


def ordering(values: Mapping[str, float]) -> list[str]:
    """Names from the best (highest) value to the worst; NaN values left out; ties keep the
    given order."""
    finite = [(name, v) for name, v in values.items() if not math.isnan(v)]
    return [name for name, _ in sorted(finite, key=lambda item: -item[1])]


def rank_agreement(ours: Mapping[str, float],
                   theirs: Mapping[str, float]) -> tuple[float, int]:
    """Kendall's τ-b between two orderings over the names both hold with a finite value.

    Args:
        ours: Value per explainer (higher is better).
        theirs: Value per explainer, e.g. a published column.

    Returns:
        (τ, number of shared explainers); τ is NaN with fewer than 2 shared explainers.
        τ = 1: the same ordering; −1: reversed.
    """
    from scipy.stats import kendalltau

    shared = [n for n in ours if n in theirs
              and not math.isnan(ours[n]) and not math.isnan(theirs[n])]
    if len(shared) < 2:
        return math.nan, len(shared)
    tau = kendalltau([ours[n] for n in shared], [theirs[n] for n in shared]).statistic
    return float(tau), len(shared)


def _curve_metric(protocol: str, metric: int
                  ) -> tuple[str, Callable[[npt.ArrayLike, Any], float]]:
    """The records' curve column of a protocol and the metric function (``metric`` 0:
    ``best_fid``, 1: ``aufsc_keep``) that ``summarize`` applies to it."""
    return _CURVE_COLUMN[protocol], (best_fid if metric == 0 else aufsc_keep)


def event_values(records: pd.DataFrame, protocol: str, metric: int) -> npt.NDArray[np.float64]:
    """Each record's own Best-FID (``metric`` 0: its best fidelity over the levels) or AUFSC
    (1: the area under its best-so-far curve) under a protocol, ``float [n]``; NaN for a
    record without that curve. Their mean over the finite ones is ``metric_value``."""
    column, function = _curve_metric(protocol, metric)
    if column not in records.columns:
        return np.full(len(records), math.nan)
    p0 = records["original_logit"].to_numpy(dtype=np.float64)
    return np.asarray([function(p0[i:i + 1], [curve])
                       for i, curve in enumerate(records[column])], dtype=np.float64)


def has_curves(records: pd.DataFrame, protocol: str) -> bool:
    """Whether any of ``records`` holds a curve of ``protocol`` (what its tables read): a
    record without one has an empty curve (or, in older records, none)."""
    column = _CURVE_COLUMN[protocol]
    return column in records.columns and any(
        hasattr(curve, "__len__") and len(curve) > 0 for curve in records[column])


def unserved(records: pd.DataFrame, protocols: Sequence[str]) -> dict[str, list[str]]:
    """Per protocol, the (dataset, model) pairs of ``records`` (as ``dataset · model``) none of
    whose runs holds its curves, so that ``orderings_markdown`` leaves its tables out; a
    protocol every pair serves is not a key."""
    out: dict[str, list[str]] = {}
    for pair in sorted(set(records["pair"])):
        group = records[records["pair"] == pair]
        for protocol in protocols:
            if not has_curves(group, protocol):
                out.setdefault(protocol, []).append(f"{pair[0]} · {pair[1]}")
    return out


def how_to_get(protocol: str) -> str:
    """How a run gets ``protocol``'s curves, for messages."""
    again = (" (T-GNNExplainer's own runs only by explaining again: its protocol reads the "
             "coalitions its search scored)" if protocol == "tgnnexplainer" else "")
    return (f"explain with protocol={protocol} or protocol=all (and curves other than none), or "
            f"add it to finished runs with `python scripts/rescore.py RUN --protocol "
            f"{protocol}`{again}")


def metric_value(records: pd.DataFrame, protocol: str, metric: int) -> float:
    """Best-FID (``metric`` 0) or AUFSC (1) of explained records under a protocol
    (``PROTOCOL_METRICS``), as ``summarize`` computes it (events without a curve left out)."""
    column, function = _curve_metric(protocol, metric)
    if column not in records.columns:
        return math.nan
    return function(records["original_logit"].to_numpy(dtype=np.float64),
                    list(records[column]))


def bootstrap_wins(records: Mapping[str, pd.DataFrame], protocol: str, metric: int,
                   n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """How often each explainer's value beats another's over bootstrap draws of the events.

    The events explained by every explainer are drawn with replacement ``n_boot`` times (one
    draw shared by all explainers, so the comparison is paired); each draw's value per
    explainer is the mean of its drawn events' ``event_values`` (``metric_value`` of the
    drawn records).

    Args:
        records: Per explainer label, its explained records (``event_id`` and the curves).
        protocol: ``tgnnexplainer`` or ``common``.
        metric: 0 for Best-FID, 1 for AUFSC.
        n_boot: Number of draws.
        seed: Seed of the draws.

    Returns:
        A square table: row A, column B holds the share of draws in which A's value is larger
        than B's (ties count half); the diagonal is NaN. Empty without a shared event.
    """
    names = list(records)
    shared = set.intersection(*(set(r["event_id"]) for r in records.values())) if names else set()
    events = np.asarray(sorted(shared))
    if not len(events):
        return pd.DataFrame()
    per_event = np.stack([event_values(
        r.drop_duplicates("event_id").set_index("event_id").loc[events], protocol, metric)
        for r in records.values()], axis=1)  # [events, explainers]
    draws = np.random.default_rng(seed).integers(0, len(events), (n_boot, len(events)))
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a draw without any curve: NaN
        values = np.nanmean(per_event[draws], axis=1)  # [n_boot, explainers]
    wins = np.full((len(names), len(names)), math.nan)
    for i in range(len(names)):
        for j in range(len(names)):
            if i != j:
                a, c = values[:, i], values[:, j]
                wins[i, j] = float(np.mean((a > c) + 0.5 * (a == c)))
    return pd.DataFrame(wins, index=names, columns=names)


def comparison_rows(ours: Mapping[str, float], tables: Sequence[PublishedTable],
                    metric: int) -> pd.DataFrame:
    """Our value and rank of each explainer beside each published table's.

    Args:
        ours: Our value per label (one protocol, one metric).
        tables: Published tables of the same dataset and model.
        metric: 0 for Best-FID, 1 for AUFSC.

    Returns:
        One row per label (ours, then the published rows we lack), columns ``ours``,
        ``ours rank`` and per table ``<source>`` and ``<source> rank`` (NaN where absent).
    """
    names = list(ours) + [n for t in tables for n in t.values if n not in ours]
    names = list(dict.fromkeys(names))
    frame = pd.DataFrame(index=pd.Index(names, name="explainer"))

    def column(values: Mapping[str, float], title: str) -> None:
        order = ordering(values)
        frame[title] = [values.get(n, math.nan) for n in names]
        frame[f"{title} rank"] = pd.array(
            [order.index(n) + 1 if n in order else pd.NA for n in names], dtype="Int64")

    column(ours, "ours")
    for table in tables:
        column({n: v[metric] for n, v in table.values.items()}, table.source)
    return frame


def shared_ordering(ours: Mapping[str, float], table: PublishedTable, metric: int
                    ) -> tuple[str, str, float, int]:
    """Our ordering and a published one over the explainers both have, as text
    (``a > b > c``), with ``rank_agreement``'s τ and count."""
    theirs = {n: v[metric] for n, v in table.values.items()}
    mine = {n: v for n, v in ours.items() if n in theirs and not math.isnan(v)}
    tau, n = rank_agreement(mine, theirs)
    return (" > ".join(ordering(mine)), " > ".join(ordering({k: theirs[k] for k in mine})),
            tau, n)


def labelled_records(paths: Sequence[str]) -> pd.DataFrame:
    """The explained records of every run below ``paths`` with ``pair`` ((dataset, model) by
    ``pair_label``) and ``label`` (``run_label``) columns; an event two runs of one label
    explained is kept once."""
    from cftgnn.explain.result import explained
    from cftgnn.reporting.runs import load_runs
    from cftgnn.runs.rundir import read_fingerprint

    records = load_runs(paths)
    prints = {run: read_fingerprint(run) for run in records["run"].unique()}
    records = records[explained(records["status"])].copy()
    records["pair"] = [pair_label(prints[r]) for r in records["run"]]
    records["label"] = [run_label(prints[r]) for r in records["run"]]
    return records.drop_duplicates(["pair", "label", "event_id"]).reset_index(drop=True)


def orderings_markdown(records: pd.DataFrame, protocols: Sequence[str] = ("tgnnexplainer",
                                                                          "common"),
                       n_boot: int = 1000, seed: int = 0) -> str:
    """The comparison as markdown: per (dataset, model) of the records and protocol, our
    Best-FID and AUFSC beside every published table of that pair, the orderings over the
    shared explainers with Kendall's τ, and the bootstrap share of draws in which each of our
    explainers beats the next one in our ordering. Every explainer of a pair is scored on the
    events all of them explained (runs over other samples or shards only add their common
    events), and the heading says how many. A protocol whose curves no run of a pair holds
    gets no table for that pair (``unserved``).

    Args:
        records: ``labelled_records``.
        protocols: Protocols to compare (keys of ``PROTOCOL_METRICS``).
        n_boot: Bootstrap draws (0: none).
        seed: Seed of the draws.

    Returns:
        The markdown text.
    """
    from cftgnn.reporting.tables import markdown_table

    lines: list[str] = []
    for pair in sorted(set(records["pair"])):
        dataset, model = str(pair[0]), str(pair[1])
        group = records[records["pair"] == pair]
        tables = [t for t in PUBLISHED if t.dataset == dataset and t.model == model.split("-")[0]]
        labels = list(dict.fromkeys(group["label"]))
        shared = set.intersection(*(set(group.loc[group["label"] == label, "event_id"])
                                    for label in labels))
        group = group[group["event_id"].isin(shared)]
        by_label = {str(label): group[group["label"] == label] for label in labels}
        for protocol in protocols:
            if not has_curves(group, protocol):
                continue
            lines.append(f"### {dataset} · {model}, protocol {protocol} ({len(shared)} events "
                         "explained by every explainer)")
            for metric, title in enumerate(("Best-FID", "AUFSC")):
                ours = {label: metric_value(g, protocol, metric) for label, g in by_label.items()}
                frame = comparison_rows(ours, tables, metric).reset_index()
                lines += ["", f"**{title}**", "", markdown_table(frame), ""]
                for table in tables:
                    mine, theirs, tau, n = shared_ordering(ours, table, metric)
                    lines.append(f"- {table.source}: {theirs or '–'}; ours: {mine or '–'}; "
                                 f"Kendall τ = {tau:.2f} over {n}")
                if n_boot:
                    wins = bootstrap_wins(by_label, protocol, metric, n_boot, seed)
                    order = [n for n in ordering(ours) if n in wins.index]
                    share = wins.to_numpy()
                    at = {name: i for i, name in enumerate(wins.index)}
                    steps = [f"{a} > {b}: {share[at[a], at[b]]:.2f}"
                             for a, b in zip(order, order[1:], strict=False)]
                    if steps:
                        lines.append(f"- ours, share of {n_boot} bootstrap draws of the shared "
                                     f"events in which each beats the next: " + "; ".join(steps))
                lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> str:
    """Command line: ``orderings.py PATH [PATH ...] [--protocol P ...] [--boot N] [--out FILE]``."""
    from cftgnn.cli import ArgumentParser
    from cftgnn.files import atomic_write, check_can_write

    parser = ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("paths", nargs="+", help="run directories or sweep directories")
    parser.add_argument("--protocol", nargs="+", choices=sorted(PROTOCOL_METRICS),
                        default=["tgnnexplainer", "common"], help="protocols to compare")
    parser.add_argument("--boot", type=int, default=1000,
                        help="bootstrap draws of the events (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws")
    parser.add_argument("--out", help="also write the markdown to this file")
    args = parser.parse_args(argv)
    if args.boot < 0:
        parser.error(f"--boot must be >= 0, got {args.boot}")
    if args.out:
        check_can_write(args.out, "--out", file=True)
    records = labelled_records(args.paths)
    missing = unserved(records, args.protocol)
    pairs = sorted({f"{p[0]} · {p[1]}" for p in set(records["pair"])})
    if all(missing.get(protocol) == pairs for protocol in args.protocol):
        needed = " or ".join(args.protocol)
        raise ConfigError(f"no run below {', '.join(args.paths)} holds the curves of protocol "
                          f"{needed} that the tables need; "
                          + "; ".join(how_to_get(p) for p in args.protocol))
    for protocol, left_out in missing.items():
        warn(f"no {protocol} tables for {', '.join(left_out)}: no run of "
             f"{'it' if len(left_out) == 1 else 'them'} holds the curves of protocol "
             f"{protocol}; {how_to_get(protocol)}")
    text = orderings_markdown(records, args.protocol, args.boot, args.seed)
    print(text, end="")
    if args.out:
        atomic_write(args.out, text.encode())
    return text


__all__ = ["PROTOCOL_METRICS", "PUBLISHED", "PublishedTable", "bootstrap_wins",
           "comparison_rows", "event_values", "has_curves", "how_to_get", "labelled_records",
           "main", "metric_value", "ordering", "orderings_markdown", "pair_label",
           "rank_agreement", "run_label", "shared_ordering", "unserved"]
