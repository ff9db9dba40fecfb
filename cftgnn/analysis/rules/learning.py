"""Rules from a decision tree: conditions on the candidates' features, read as actions.

Step 2 of the regional rules (see ``cftgnn.analysis.rules``): a shallow tree fitted on
the training half's feature table; every root-to-leaf path whose leaf predicts "in
explanation" is a ``Rule``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.tree import DecisionTreeClassifier

from cftgnn.analysis.rules.features import BINARY, DURATION, FEATURE_NAMES

_UNITS = (("d", 86_400.0), ("h", 3_600.0), ("min", 60.0), ("s", 1.0))


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
    """Rules from a feature table of the training half (``feature_table``).

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
