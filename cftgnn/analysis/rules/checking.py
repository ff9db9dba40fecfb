"""Rules checked on held-out events with the exact oracle, and ordered by the result.

Step 3 of the regional rules (see ``cftgnn.analysis.rules``): coverage and precision of
each rule, the removal of everything it matches evaluated by the exact oracle
(``RunOracles`` builds those oracles from a run's stream and model).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from cftgnn.analysis.rules.learning import Rule
from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.models.base import TemporalModel
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.oracle import Oracle, OracleMode, is_flip
from cftgnn.runs.rundir import Run

#: ``event_id -> Oracle``: the exact oracle of one explained event.
OracleFactory = Callable[[int], Oracle]


@dataclass
class RuleCheck:
    """Held-out counts of one rule (see ``check_rules``)."""

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
    and a set counts as a flip when [``is_flip``][cftgnn.oracle.is_flip] says so.

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



class RunOracles:
    """The exact oracles of a group of runs (one stream, model, ``k``, ``m_max``,
    constraints, history), built on one [``ReplayEngine``][cftgnn.oracle.ReplayEngine]: call it in
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
        self.history = run.history
        self.logits = dict(original_logits)
        self.atol = atol
        self.where = str(run.path)

    def __call__(self, event_id: int) -> Oracle:
        oracle = self.engine.oracle(event_id, self.k, self.m_max, OracleMode.EXACT,
                                    self.constraints, self.history)
        want = self.logits.get(int(event_id))
        got = oracle.original_logit
        if want is not None and abs(got - want) > self.atol * (1 + abs(want)):
            raise ConfigError(f"the model rebuilt from {self.where}/run.json gives event "
                              f"{event_id} the logit {got:.6g}, the record {want:.6g}: the "
                              "weights or the stream are not the run's")
        return oracle
