"""Regional counterfactual rules: short, checked statements of *what* to remove.

``python scripts/rules.py RUN [RUN ...] [--out DIR] [--max-depth 3] [--min-coverage 0.05]
[--top 5] [--seed 0]`` reads explanation runs and, per dataset × model, learns rules of the
form "remove the candidates that link u and v and are the latest event between their two
nodes", then checks each rule with the exact oracle on events it was not learned from.

1. **Features** (:func:`candidate_features`, pure). Every removable candidate event ``e`` of
   every explained record (status ``ok``) of the explained event ``ε_i = (u, v, t_i)`` is
   described by :data:`FEATURES`: its hop distance from ``{u, v}``, whether it links ``u`` and
   ``v`` (either direction), whether it touches ``u`` / ``v``, its recency rank among the
   candidates and among the candidates between its own two nodes (0 = newest), the time gap
   ``t_i − t_e``, the smaller and larger number of events its endpoints took part in before
   ``ε_i``, and whether the explained prediction is correct (the record's ``group``). Its
   label is whether it is in the record's explanation when that explanation flips the
   prediction (``is_counterfactual``).
2. **Rules** (:func:`learn_rules`, pure). The explained events are split in two seeded halves
   (:func:`split_events`). On the first, a shallow decision tree — scikit-learn's
   :class:`~sklearn.tree.DecisionTreeClassifier`, the well-kept library for this; classes
   weighted ``balanced`` because explanations hold few of the candidates — separates the
   candidates in explanations from the others. Every root-to-leaf path whose leaf predicts
   "in explanation" is a :class:`Rule`, a conjunction of :class:`Condition` on the features;
   read as an action it says "remove every removable candidate that satisfies it". A leaf
   holds at least ``min_coverage`` × (training events) candidates, and a rule is kept only if
   it matches a candidate in at least that share of the training events (its support).
3. **Held-out check** (:func:`check_rules`). On the other half, for each rule: *coverage* =
   share of the held-out explained events with at least one removable candidate satisfying
   it; *precision* = share of covered events where removing **all** removable candidates that
   satisfy it flips the prediction, evaluated by the **exact** oracle (never read off the
   explanations). The whole matched set is removed — that is the rule's action — and
   ``mean_removed`` reports how many events that is, so a rule that flips by removing most of
   the history is visible as such. Oracles come from a factory ``event_id -> Oracle``, so
   tests inject toy oracles; the command line builds them from each run's stream and model
   (:class:`RunOracles`). Events are checked in stream order, all rules of an event in one
   batched call.
4. **Table** (:func:`rules_table`): per dataset × model, the rules ordered by held-out
   precision × coverage (ties: fewer events removed, then higher training support), the best
   ``top`` of them, into ``rules.md`` and ``rules.csv``.

Runs of one dataset × model are pooled when they share the stream, the weights, ``k``,
``m_max`` and the constraints (the oracle is then the same); runs that differ in any of these
form separate tables, labelled by what differs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import torch
from sklearn.tree import DecisionTreeClassifier
from tqdm.auto import tqdm

from cftgnn.data.index import Candidates, TemporalIndex
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.evaluation.rundir import (
    Run,
    load_run,
    load_run_model,
    load_run_stream,
    run_checkpoint,
)
from cftgnn.explain.result import explained
from cftgnn.models.base import TemporalModel
from cftgnn.oracle.constraints import Constraints
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.oracle import Oracle, OracleMode, is_flip

#: The features of a candidate event ``e`` of an explained event ``ε_i = (u, v, t_i)``.
FEATURES: dict[str, str] = {
    "hop": "hop distance of e from {u, v} (0: e touches u or v)",
    "same_pair": "1 if e links u and v (either direction)",
    "touches_src": "1 if e touches the explained source u",
    "touches_dst": "1 if e touches the explained destination v",
    "recency_rank": "rank of e among the candidates by recency (0 = newest)",
    "pair_rank": "rank of e among the candidates between its own two nodes (0 = newest)",
    "time_gap": "t_i - t_e, in the stream's time unit (seconds for UCI and Wikipedia)",
    "min_degree": "events the less active endpoint of e took part in before ε_i",
    "max_degree": "events the more active endpoint of e took part in before ε_i",
    "correct": "1 if the explained prediction is correct (the record's group)",
}
FEATURE_NAMES: tuple[str, ...] = tuple(FEATURES)
#: Features that take the values 0 and 1 only.
BINARY = frozenset({"same_pair", "touches_src", "touches_dst", "correct"})
#: Features measured in time (rendered with a unit).
DURATION = frozenset({"time_gap"})

#: ``event_id -> Oracle``: the exact oracle of one explained event.
OracleFactory = Callable[[int], Oracle]

_UNITS = (("d", 86_400.0), ("h", 3_600.0), ("min", 60.0), ("s", 1.0))


# --------------------------------------------------------------------------- features


def candidate_features(stream: EventStream, index: TemporalIndex,
                       candidates: Candidates) -> pd.DataFrame:
    """The interpretable features of each candidate of one explained event.

    Args:
        stream: The event stream.
        index: Its temporal index (for endpoint degrees).
        candidates: The candidates of the explained event ``i`` (ids oldest first, hops).

    Returns:
        One row per candidate, in the candidates' order: ``event_id`` (``i``),
        ``candidate`` (the candidate's id) and every feature of :data:`FEATURES` except
        ``correct`` (a property of the record, not of the stream).
    """
    i = int(candidates.event_id)
    ids = np.asarray(candidates.ids, dtype=np.int64)
    m = len(ids)
    u, v = int(stream.src[i]), int(stream.dst[i])
    src, dst = stream.src[ids], stream.dst[ids]
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    # rank among the candidates between the same two nodes: count later ones of the pair
    pair_rank = np.zeros(m, dtype=np.int64)
    seen: dict[tuple[int, int], int] = {}
    for n in range(m - 1, -1, -1):  # newest first
        key = (int(lo[n]), int(hi[n]))
        pair_rank[n] = seen.get(key, 0)
        seen[key] = pair_rank[n] + 1
    deg_src = index.degree_before(src, i) if m else np.zeros(0, dtype=np.int64)
    deg_dst = index.degree_before(dst, i) if m else np.zeros(0, dtype=np.int64)
    return pd.DataFrame({
        "event_id": np.full(m, i, dtype=np.int64),
        "candidate": ids,
        "hop": np.asarray(candidates.hops, dtype=np.int64),
        "same_pair": (((src == u) & (dst == v)) | ((src == v) & (dst == u))).astype(np.int64),
        "touches_src": ((src == u) | (dst == u)).astype(np.int64),
        "touches_dst": ((src == v) | (dst == v)).astype(np.int64),
        "recency_rank": np.arange(m - 1, -1, -1, dtype=np.int64),
        "pair_rank": pair_rank,
        "time_gap": float(stream.t[i]) - np.asarray(stream.t[ids], dtype=np.float64),
        "min_degree": np.minimum(deg_src, deg_dst).astype(np.int64),
        "max_degree": np.maximum(deg_src, deg_dst).astype(np.int64),
    })


def _correct(record: Mapping[str, Any]) -> int:
    """1 for a correct prediction: the record's group, else the sign of its logit (every
    event happened, so a positive logit is a correct prediction)."""
    group = record.get("group")
    if group in ("correct", "incorrect"):
        return int(group == "correct")
    return int(float(record["original_logit"]) > 0)


def record_features(stream: EventStream, index: TemporalIndex, record: Mapping[str, Any],
                    k: int, m_max: int, constraints: Constraints) -> pd.DataFrame:
    """:func:`candidate_features` of one explained record, with ``correct``, ``removable``
    (not protected by the run's constraints) and ``label`` (in the explanation, and the
    explanation flips the prediction).

    Raises:
        ConfigError: The stream's candidates of the event (``k``, ``m_max``) are not the
            record's ``candidate_ids`` (another stream or other settings than the run's).
    """
    event_id = int(record["event_id"])
    cands = index.candidates(event_id, k, m_max)
    recorded = np.sort(np.asarray(record["candidate_ids"], dtype=np.int64))
    if not np.array_equal(recorded, cands.ids):
        raise ConfigError(f"the candidates of event {event_id} in this stream (k={k}, "
                          f"m_max={m_max}) are not the record's; is it the run's stream?")
    table = candidate_features(stream, index, cands)
    table["correct"] = _correct(record)
    table["removable"] = np.isin(cands.ids, constraints.removable(cands, stream))
    removed = (np.asarray(record["explanation"], dtype=np.int64)
               if bool(record["is_counterfactual"]) else np.zeros(0, dtype=np.int64))
    table["label"] = np.isin(cands.ids, removed)
    return table


def feature_table(stream: EventStream, records: pd.DataFrame, k: int, m_max: int,
                  constraints: Constraints, index: TemporalIndex | None = None) -> pd.DataFrame:
    """:func:`record_features` of every explained record (status ``ok``), stacked.

    Records of several runs may explain the same event: each contributes its rows (with its
    own labels).
    """
    index = index if index is not None else TemporalIndex(stream)
    rows = records[explained(records["status"])] if "status" in records else records
    parts = [record_features(stream, index, {str(c): v for c, v in r.items()}, k, m_max,
                             constraints) for r in rows.to_dict("records")]
    if not parts:
        columns = ["event_id", "candidate", *FEATURE_NAMES, "removable", "label"]
        return pd.DataFrame({c: pd.Series(dtype=np.float64) for c in columns})
    return pd.concat(parts, ignore_index=True)


def split_events(event_ids: Iterable[int], seed: int = 0
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Split distinct events into a training half and a held-out half, seeded.

    Returns:
        ``(train, held_out)``, each sorted; the training half has ``ceil(n / 2)`` events.
    """
    ids = np.unique(np.asarray(list(event_ids), dtype=np.int64))
    order = np.random.default_rng(seed).permutation(len(ids))
    cut = (len(ids) + 1) // 2
    return np.sort(ids[order[:cut]]), np.sort(ids[order[cut:]])


# --------------------------------------------------------------------------- rules


def _duration(seconds: float) -> str:
    """``seconds`` in a readable unit (``3.2h``)."""
    for unit, size in _UNITS:
        if abs(seconds) >= size:
            return f"{seconds / size:.3g}{unit}"
    return f"{seconds:.3g}s"


@dataclass(frozen=True)
class Condition:
    """``low < feature <= high`` (the tree's own split semantics; ±inf when open).

    For an integer feature ``low < x <= high`` is ``floor(low) + 1 <= x <= floor(high)``,
    which is how it is written.
    """

    feature: str
    low: float = -math.inf
    high: float = math.inf

    def mask(self, table: pd.DataFrame) -> npt.NDArray[np.bool_]:
        """Which rows of ``table`` satisfy it."""
        x = table[self.feature].to_numpy(dtype=np.float64)
        return np.asarray((x > self.low) & (x <= self.high), dtype=np.bool_)

    def _bounds(self) -> tuple[int | None, int | None]:
        """Inclusive integer bounds (None when open)."""
        lo = None if math.isinf(self.low) else math.floor(self.low) + 1
        hi = None if math.isinf(self.high) else math.floor(self.high)
        if lo is not None and lo <= 0:
            lo = None  # every integer feature is >= 0
        return lo, hi

    def text(self) -> str:
        """``same_pair = 1``, ``recency_rank <= 2``, ``3 <= hop <= 4``,
        ``time_gap <= 3.2h``."""
        f = self.feature
        if f in BINARY:
            return f"{f} = {0 if self.high < 1 else 1}"
        if f in DURATION:
            if math.isinf(self.low):
                return f"{f} <= {_duration(self.high)}"
            if math.isinf(self.high):
                return f"{f} > {_duration(self.low)}"
            return f"{_duration(self.low)} < {f} <= {_duration(self.high)}"
        lo, hi = self._bounds()
        if hi is not None and (lo or 0) == hi:
            return f"{f} = {hi}"
        if lo is None:
            return f"{f} <= {hi}" if hi is not None else f"{f} >= 0"
        return f"{f} >= {lo}" if hi is None else f"{lo} <= {f} <= {hi}"

    def phrase(self) -> str:
        """The condition in words, completing "remove the candidates that …"."""
        f, lo, hi = self.feature, *self._bounds()
        if f in BINARY:
            yes = self.low >= 0
            return {
                "same_pair": "link u and v" if yes else "do not link u and v",
                "touches_src": "touch u" if yes else "do not touch u",
                "touches_dst": "touch v" if yes else "do not touch v",
                "correct": "",
            }[f]
        if f == "time_gap":
            if math.isinf(self.low):
                return f"happened at most {_duration(self.high)} before"
            if math.isinf(self.high):
                return f"happened more than {_duration(self.low)} before"
            return (f"happened between {_duration(self.low)} and {_duration(self.high)} "
                    "before")
        if f == "recency_rank":
            if hi is not None and lo is None:
                return ("are the newest candidate" if hi == 0
                        else f"are among the {hi + 1} newest candidates")
            if hi is None and lo is not None:
                return f"are older than the {lo} newest candidates"
            return f"have recency rank {lo}..{hi} (0 = newest)"
        if f == "pair_rank":
            if hi is not None and lo is None:
                return ("are the latest event between their two nodes" if hi == 0
                        else f"are among the {hi + 1} latest events between their two nodes")
            if hi is None and lo is not None:
                return f"have at least {lo} later events between their two nodes"
            return f"have {lo}..{hi} later events between their two nodes"
        if f == "hop":
            if hi is not None and lo is None:
                return "touch u or v" if hi == 0 else f"lie within {hi} hops of u or v"
            if hi is None and lo is not None:
                return f"lie at least {lo} hops from u and v"
            return f"lie {lo}..{hi} hops from u and v"
        if f in ("min_degree", "max_degree"):
            low_end = f == "min_degree"
            if hi is not None and lo is None:
                who = "an endpoint" if low_end else "both endpoints"
                return f"have {who} with at most {hi} earlier events"
            if hi is None and lo is not None:
                who = "both endpoints" if low_end else "an endpoint"
                return f"have {who} with at least {lo} earlier events"
            who = "less" if low_end else "more"
            return f"have their {who} active endpoint with {lo}..{hi} earlier events"
        return self.text()


@dataclass(frozen=True)
class Rule:
    """A conjunction of conditions on the candidates' features, read as an action: remove
    every removable candidate that satisfies all of them.

    Attributes:
        conditions: The conditions (one per feature, in the order the tree first split on
            them).
        support: Share of the training events with at least one removable candidate that
            satisfies the rule.
        purity: Share of the training candidates satisfying it that are in an explanation.
        matched: Training candidates satisfying it.
    """

    conditions: tuple[Condition, ...]
    support: float = math.nan
    purity: float = math.nan
    matched: int = 0

    def mask(self, table: pd.DataFrame) -> npt.NDArray[np.bool_]:
        """Which rows of a feature table satisfy every condition."""
        out = np.ones(len(table), dtype=np.bool_)
        for c in self.conditions:
            out &= c.mask(table)
        return out

    @property
    def text(self) -> str:
        """``same_pair = 1 and pair_rank = 0`` (``all candidates`` without a condition)."""
        return " and ".join(c.text() for c in self.conditions) or "all candidates"

    @property
    def action(self) -> str:
        """The rule in words: ``remove the candidates that link u and v and are the latest
        event between their two nodes`` (prefixed with the predictions it is for)."""
        scope = ""
        phrases = []
        for c in self.conditions:
            if c.feature == "correct":
                scope = ("correct predictions: " if c.low >= 0
                         else "incorrect predictions: ")
            else:
                phrases.append(c.phrase())
        what = ("remove the candidates that " + " and ".join(phrases) if phrases
                else "remove all candidates")
        return scope + what


def _path_conditions(path: Sequence[tuple[str, float, bool]]) -> tuple[Condition, ...]:
    """Merge a tree path's splits ``(feature, threshold, went_left)`` into one interval per
    feature, in the order of first use."""
    bounds: dict[str, list[float]] = {}
    for feature, threshold, left in path:
        low, high = bounds.setdefault(feature, [-math.inf, math.inf])
        bounds[feature] = [low, min(high, threshold)] if left else [max(low, threshold), high]
    return tuple(Condition(f, lo, hi) for f, (lo, hi) in bounds.items())


def tree_rules(tree: DecisionTreeClassifier, features: Sequence[str]) -> list[tuple[Condition,
                                                                                   ...]]:
    """The root-to-leaf paths of a fitted tree whose leaf predicts class 1 ("in explanation").

    Args:
        tree: A fitted classifier on labels 0/1.
        features: The names of its input columns, in order.
    """
    t = tree.tree_
    positive = list(tree.classes_).index(1) if 1 in tree.classes_ else None
    if positive is None:
        return []
    out: list[tuple[Condition, ...]] = []

    def walk(node: int, path: list[tuple[str, float, bool]]) -> None:
        left, right = int(t.children_left[node]), int(t.children_right[node])
        if left == right:  # a leaf
            if int(np.argmax(t.value[node][0])) == positive:
                out.append(_path_conditions(path))
            return
        name, threshold = features[int(t.feature[node])], float(t.threshold[node])
        walk(left, [*path, (name, threshold, True)])
        walk(right, [*path, (name, threshold, False)])

    walk(0, [])
    return out


def event_coverage(mask: npt.ArrayLike, event_ids: npt.ArrayLike) -> float:
    """Share of the distinct events in ``event_ids`` with at least one row in ``mask``."""
    ids = np.asarray(event_ids)
    events = np.unique(ids)
    if len(events) == 0:
        return math.nan
    return float(len(np.unique(ids[np.asarray(mask, dtype=bool)])) / len(events))


def learn_rules(table: pd.DataFrame, max_depth: int = 3, min_coverage: float = 0.05,
                seed: int = 0, features: Sequence[str] = FEATURE_NAMES) -> list[Rule]:
    """Rules from a feature table of the training half (:func:`feature_table`).

    A decision tree (scikit-learn, classes weighted ``balanced``, at most ``max_depth``
    levels, leaves of at least ``ceil(min_coverage × events)`` candidates) is fitted on the
    removable candidates; every leaf that predicts "in explanation" gives a rule, kept when
    its support (share of the events with a matching removable candidate) is at least
    ``min_coverage``.

    Args:
        table: Rows of candidates with the features, ``event_id``, ``removable`` and
            ``label``.
        max_depth: Depth of the tree (conditions per rule, at most).
        min_coverage: Smallest training support of a rule, in ``[0, 1]``.
        seed: The tree's ``random_state`` (ties between equally good splits).
        features: The columns the rules may use.

    Returns:
        The rules, most supported first; empty when no candidate is labelled.
    """
    rows = table[table["removable"].astype(bool)] if "removable" in table else table
    labels = rows["label"].to_numpy(dtype=bool)
    if len(rows) == 0 or not labels.any() or labels.all():
        return []
    n_events = rows["event_id"].nunique()
    x = rows[list(features)].to_numpy(dtype=np.float64)
    tree = DecisionTreeClassifier(
        max_depth=max_depth, class_weight="balanced", random_state=seed,
        min_samples_leaf=max(1, math.ceil(min_coverage * n_events)))
    tree.fit(x, labels.astype(np.int64))
    rules = []
    for conditions in tree_rules(tree, features):
        rule = Rule(conditions)
        mask = rule.mask(rows)
        support = event_coverage(mask, rows["event_id"])
        if support < min_coverage or not mask.any():
            continue
        rules.append(Rule(conditions, support=support, purity=float(labels[mask].mean()),
                          matched=int(mask.sum())))
    return sorted(rules, key=lambda r: (-r.support, -r.purity, r.text))


# --------------------------------------------------------------------------- checking


@dataclass
class RuleCheck:
    """Held-out counts of one rule (see :func:`check_rules`)."""

    events: int = 0
    covered: int = 0
    flips: int = 0
    removed: list[int] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        """Covered share of the held-out events."""
        return self.covered / self.events if self.events else math.nan

    @property
    def precision(self) -> float:
        """Share of the covered events whose prediction the rule's removal flips."""
        return self.flips / self.covered if self.covered else math.nan


def check_rules(rules: Sequence[Rule], table: pd.DataFrame, oracle_for: OracleFactory,
                progress: bool = True, desc: str = "checking rules") -> pd.DataFrame:
    """Coverage and precision of rules on held-out events, with the exact oracle.

    For each event of ``table`` (stream order) the oracle is built once; for each rule the
    removal set is every removable candidate satisfying it (intersected with the oracle's
    removable events); the distinct non-empty sets go to ``oracle.exact_batch`` in one call,
    and a set counts as a flip when :func:`~cftgnn.oracle.oracle.is_flip` says so.

    Args:
        rules: The rules.
        table: Feature table of the held-out events (one event may have rows of several
            runs; its candidates are the same, so the first run's rows are used).
        oracle_for: The exact oracle of an event id.
        progress: Show a progress bar over the events.
        desc: The progress bar's label.

    Returns:
        One row per rule, in order: ``rule``, ``action``, ``train_support``,
        ``train_purity``, ``heldout_events``, ``covered``, ``flips``, ``coverage``,
        ``precision``, ``mean_removed`` (events removed, mean over covered events).
    """
    checks = [RuleCheck() for _ in rules]
    grouped = {int(e): rows for e, rows in table.groupby("event_id", sort=True)}  # type: ignore[arg-type]
    events = sorted(grouped)
    for event_id in tqdm(events, desc=desc, unit="event", disable=not progress,
                         dynamic_ncols=True):
        rows = grouped[event_id].drop_duplicates("candidate")
        sets: list[frozenset[int]] = []
        for check, rule in zip(checks, rules, strict=True):
            check.events += 1
            keep = rule.mask(rows)
            if "removable" in rows:
                keep &= rows["removable"].to_numpy(dtype=bool)
            sets.append(frozenset(rows["candidate"].to_numpy()[keep].tolist()))
        if not any(sets):
            continue
        oracle = oracle_for(event_id)
        sets = [s & oracle.removable_ids for s in sets]
        todo = sorted({s for s in sets if s}, key=lambda s: (len(s), sorted(s)))
        logits = dict(zip(todo, oracle.exact_batch(todo).tolist(), strict=True))
        for check, s in zip(checks, sets, strict=True):
            if not s:
                continue
            check.covered += 1
            check.flips += bool(is_flip(oracle.original_logit, logits[s]))
            check.removed.append(len(s))
    return pd.DataFrame([{
        "rule": rule.text,
        "action": rule.action,
        "train_support": rule.support,
        "train_purity": rule.purity,
        "heldout_events": check.events,
        "covered": check.covered,
        "flips": check.flips,
        "coverage": check.coverage,
        "precision": check.precision,
        "mean_removed": float(np.mean(check.removed)) if check.removed else math.nan,
    } for rule, check in zip(rules, checks, strict=True)], columns=CHECK_COLUMNS)


CHECK_COLUMNS = ["rule", "action", "train_support", "train_purity", "heldout_events", "covered",
                 "flips", "coverage", "precision", "mean_removed"]


def order_rules(checked: pd.DataFrame, top: int | None = None) -> pd.DataFrame:
    """Rules ordered by held-out ``score`` = precision × coverage (an unmeasured value counts
    as 0), ties by fewer events removed, then higher training support; the best ``top``."""
    out = checked.copy()
    out["score"] = (out["precision"].fillna(0.0) * out["coverage"].fillna(0.0)).astype(float)
    out = out.sort_values(["score", "mean_removed", "train_support"],
                          ascending=[False, True, False], na_position="last", kind="stable")
    out = out.reset_index(drop=True)
    return out if top is None else out.head(top)


# --------------------------------------------------------------------------- runs


def group_runs(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """Runs pooled by :attr:`Run.key`, labelled ``dataset · model`` (with what differs when
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


class RunOracles:
    """The exact oracles of a group of runs (one stream, model, ``k``, ``m_max``,
    constraints), built on one :class:`~cftgnn.oracle.engine.ReplayEngine`: call it in
    stream order.

    Args:
        run: Any run of the group (its settings).
        stream: The run's stream.
        model: The run's model.
        original_logits: The recorded ``p_orig`` per event; the rebuilt oracle must agree.
        index: A prebuilt index of ``stream``.
        atol: Tolerance of that agreement (absolute plus relative).

    Raises:
        ConfigError: (on a call) The rebuilt model's logit of an event is not the recorded one.
    """

    def __init__(self, run: Run, stream: EventStream, model: TemporalModel,
                 original_logits: Mapping[int, float], index: TemporalIndex | None = None,
                 atol: float = 1e-4) -> None:
        self.engine = ReplayEngine(model, stream, index)
        self.k, self.m_max, self.constraints = run.k, run.m_max, run.constraints
        self.logits = dict(original_logits)
        self.atol = atol
        self.where = str(run.path)

    def __call__(self, event_id: int) -> Oracle:
        oracle = self.engine.oracle(event_id, self.k, self.m_max, OracleMode.EXACT,
                                    self.constraints)
        want = self.logits.get(int(event_id))
        got = oracle.original_logit
        if want is not None and abs(got - want) > self.atol * (1 + abs(want)):
            raise ConfigError(f"the model rebuilt from {self.where}/run.json gives event "
                              f"{event_id} the logit {got:.6g}, the record {want:.6g}: the "
                              "weights or the stream are not the run's")
        return oracle


# --------------------------------------------------------------------------- tables

TABLE_COLUMNS = {"rule": "rule", "train_support": "support (train)",
                 "coverage": "coverage", "precision": "precision",
                 "heldout_events": "held-out events", "mean_removed": "mean removed"}


def rules_table(name: str, checked: pd.DataFrame, train_events: int) -> pd.DataFrame:
    """``checked`` (:func:`order_rules`) with the group's name and training size."""
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
                                     first.constraints, index) for r in runs],
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
    md.write_text(header + "\n\n" + "\n\n".join(format_result(r) for r in results) + "\n")
    tables = [r.table for r in results if not r.table.empty]
    (pd.concat(tables, ignore_index=True) if tables
     else pd.DataFrame(columns=["group", "rank", *CHECK_COLUMNS, "score", "train_events"])
     ).to_csv(csv, index=False)
    return [md, csv]


HEADER = ("# Regional counterfactual rules\n\nRules learned on a seeded half of the explained "
          "events (decision tree, max depth {depth}, training support >= {cov:g}, seed "
          "{seed}); coverage and precision measured on the other half with the exact oracle "
          "(removing every removable candidate the rule matches). Ordered by precision × "
          "coverage.")


def main(argv: Sequence[str] | None = None) -> list[GroupResult]:
    """``rules.py RUN [RUN ...] [--out DIR] [--max-depth 3] [--min-coverage 0.05] [--top 5]
    [--seed 0]``: print and write the rules per dataset × model."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
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
    parser.add_argument("--checkpoint-dir", help="where to look for a run's checkpoint when "
                        "its recorded path is gone (default: <project>/checkpoints)")
    parser.add_argument("--device", default="cpu", help="torch device of the oracle (cpu)")
    parser.add_argument("--num-threads", type=int, default=1,
                        help="torch CPU threads (default 1, as explain.py)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
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
    out = Path(args.out) if args.out else runs[0].path / "rules"
    header = HEADER.format(depth=args.max_depth, cov=args.min_coverage, seed=args.seed)
    files = write_results(results, out, header)
    print("wrote " + ", ".join(str(f) for f in files), file=sys.stdout)
    return results


__all__ = [
    "FEATURES",
    "FEATURE_NAMES",
    "Condition",
    "GroupResult",
    "OracleFactory",
    "Rule",
    "Run",
    "RunOracles",
    "candidate_features",
    "check_rules",
    "event_coverage",
    "feature_table",
    "group_rules",
    "group_runs",
    "learn_rules",
    "run_checkpoint",
    "load_run",
    "load_run_model",
    "main",
    "order_rules",
    "record_features",
    "split_events",
    "tree_rules",
]
