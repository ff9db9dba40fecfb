"""The one result type every explainer returns, its flat record form and the record's
declaration.

``RESULT_COLUMNS`` declares a record's result columns once, in order, with the schema
version that added each and its value in older rows. Everything else is derived from it and
from [``ExplanationResult``][cftgnn.explain.ExplanationResult]'s annotations:
[``ExplanationResult.to_record``][cftgnn.explain.ExplanationResult.to_record],
[``ExplanationResult.from_record``][cftgnn.explain.ExplanationResult.from_record], ``column_types``
(which ``cftgnn.runs.records`` turns into the parquet schema ``RECORD_SCHEMA``),
``RECORD_DEFAULTS_V1`` and the version upgrade of old rows
(``cftgnn.runs.records.upgrade_records``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any

from cftgnn.errors import ExplainerError
from cftgnn.oracle.oracle import is_flip

#: Version of the record layout written by
#: [``ExplanationResult.to_record``][cftgnn.explain.ExplanationResult.to_record]. 2: certificates,
#: pruning, ``certify`` and constraints (``RECORD_DEFAULTS_V1`` fills them in records of version 1).
#: 3: several counterfactuals per event (``n_counterfactuals``, ``counterfactuals`` and their
#: logits and consequences; older records hold their one answer).
#: 4: every explainer's ranking of its removable events with an importance each
#: (``ranking``, ``importance``; empty in older records: no ranking was kept).
#: 5: the explained prediction's ``history`` and the logit the sampling group follows
#: (``group_logit``; ``event`` and ``screen`` in older records).
#: 6: the seconds of the checks after the search, beside ``time_s`` (``keep_time_s``,
#: ``curve_time_s``; NaN in older records: not measured).
#: 7: the curve protocols beside the common one (``curve_protocols``,
#: ``tgnnexplainer_curve_logits``, ``tempme_curve_logits`` and the negative pair's
#: ``tempme_neg_dst``, ``tempme_neg_logit``, ``tempme_neg_curve_logits``; older records hold the
#: common protocol's curves only).
#: 8: how far an exact enumeration cut short got (``next_size_share``; NaN in older records:
#: not recorded).
#: 9: the ``temgx`` protocol's curve and single-removal logits (``temgx_curve_logits``,
#: ``single_removal_logits``; empty in older records: not computed).
#: 10: what was explained (``target``: ``logit`` in older records) and, for the rank target,
#: its ``target_k``, ``num_negatives`` and TGB's ranks before and after the answer
#: (``rank_before``, ``rank_after``; null in older records and for the logit target).
#: 11: where each event ran (``device``, the torch device of its model and oracle; null in
#: older records: not recorded).
SCHEMA_VERSION = 11


@dataclass(frozen=True)
class Column:
    """One result column of a record. Its type is the annotation of the
    [``ExplanationResult``][cftgnn.explain.ExplanationResult] attribute (or property) of that name.

    Attributes:
        name: Column name (an attribute or property of
            [``ExplanationResult``][cftgnn.explain.ExplanationResult]).
        since: Schema version that added the column.
        old: Its value in rows written before ``since`` (when ``old_from`` is None).
        old_from: Or: the older column whose value it takes in those rows.
        unrecorded: Rows written before ``since`` did not record it: their ``old`` means
            "not recorded", so such a cell is not compared with another run's
            (``cftgnn.analysis.compare``).
    """

    name: str
    since: int = 1
    old: Any = None
    old_from: str | None = None
    unrecorded: bool = False


#: The result columns of a record, in order: the one declaration of the record layout.
#: Columns of version 3 read, in older rows, as the row's one answer when it flips
#: (``upgrade_records``).
RESULT_COLUMNS: tuple[Column, ...] = (
    Column("schema_version"), Column("explainer"), Column("event_id"), Column("status"),
    Column("oracle_mode"), Column("strategy"), Column("original_logit"),
    Column("final_logit"), Column("is_counterfactual"), Column("explanation"),
    Column("candidate_ids"), Column("size"), Column("num_candidates"), Column("sparsity"),
    Column("iterations"), Column("oracle_calls"), Column("search_calls"),
    Column("exact_calls"), Column("cache_hits"), Column("agreement"), Column("agreement_n"),
    Column("wall_time_s"), Column("oracle_time_s"), Column("setup_time_s"),
    # version 2: no certificate claimed for older rows, nothing pruned or certified
    Column("min_size_lower_bound", 2, old=0),
    Column("certified_minimal", 2, old=False),
    Column("cut_short", 2, old=False),
    Column("num_removable", 2, old_from="num_candidates"),
    Column("size_before_prune", 2, old_from="size"),
    Column("prune", 2, old=False),
    Column("certify", 2, old=0),
    Column("certify_replaced", 2, old=False),
    # version 3: several counterfactuals per event
    Column("n_counterfactuals", 3), Column("counterfactuals", 3),
    Column("counterfactual_logits", 3), Column("counterfactual_consequences", 3),
    # version 4: the explainer's ranking of R (docs/design.md §8); none kept in older rows
    Column("ranking", 4, old=(), unrecorded=True),
    Column("importance", 4, old=(), unrecorded=True),
    # version 8: how far a cut-short enumeration got; unknown (NaN) in older rows
    Column("next_size_share", 8, old=None, unrecorded=True),
)

#: Values of the version-2 result columns for records written before them (no certificate
#: claimed, nothing pruned or certified); None where the value is another column's
#: (``num_removable`` is the record's ``num_candidates``, ``size_before_prune`` its ``size``).
RECORD_DEFAULTS_V1: dict[str, Any] = {c.name: c.old for c in RESULT_COLUMNS if c.since == 2}


class ExplanationStatus(str, Enum):
    """Why a result looks the way it does.

    * ``ok`` — a search ran (the result may still be a non-counterfactual fallback; see
      ``is_counterfactual``).
    * ``no_candidates`` — the explained event has no candidate events; nothing to remove.
    * ``zero_logit`` — the original logit is exactly 0, so no perturbation can flip it.
    * ``no_removable`` — the event has candidates, but the user's constraints protect all of
      them.
    """

    OK = "ok"
    NO_CANDIDATES = "no_candidates"
    ZERO_LOGIT = "zero_logit"
    NO_REMOVABLE = "no_removable"


def explained(status: Any) -> Any:
    """Which records were explained (status ``ok``), as a boolean mask.

    Args:
        status: A record's status or a column of them (``pandas.Series`` or array).

    Returns:
        ``status == "ok"`` elementwise (a Series stays a Series).
    """
    return status == ExplanationStatus.OK.value


@dataclass(frozen=True)
class ExplanationResult:
    """The explanation of one predicted event.

    Attributes:
        explainer: Name of the explainer (``"cftgnn"``, ``"greedy"``, ...).
        event_id: Id of the explained event.
        original_logit: ``p_orig``.
        candidate_ids: Candidate event ids, ascending.
        explanation: Removed event ids, in the order the search added them.
        final_logit: Exact logit with the explanation removed.
        is_counterfactual: Whether ``final_logit`` flips ``original_logit`` (exact).
        iterations: Search iterations run.
        search_calls: Search-mode backend evaluations (including a strategy's preparation).
        exact_calls: Exact backend evaluations for confirmations and the final check.
        cache_hits: Requests answered from the oracle's cache.
        agreement: Share of sets evaluated both ways whose flip decision agreed, or None when
            no set was evaluated both ways.
        agreement_n: Number of sets evaluated both ways.
        wall_time_s: Wall time of ``explain``.
        oracle_time_s: Seconds spent inside oracle backends.
        setup_time_s: Seconds spent building the oracle before the search (candidates, base
            state, original logit); 0 when the oracle was built elsewhere.
        status: See [``ExplanationStatus``][cftgnn.explain.ExplanationStatus].
        oracle_mode: The oracle's search mode (``"exact"`` / ``"approximate"``).
        strategy: Repr of the selection strategy used.
        min_size_lower_bound: ``L``: every removable set smaller than ``L`` was evaluated
            exactly and none flips (docs/design.md §7); 0 when no search ran (another status).
        certified_minimal: A counterfactual was found and its size equals ``L``: no smaller
            counterfactual exists among the removable events.
        cut_short: The explainer's call or time budget (or ``certify_max_time_s``) ended its
            search early (for the exhaustive explainer: its claim that nothing of size
            ``≤ max_size`` flips is void; ``L`` still holds).
        next_size_share: When an exact enumeration by size (the exhaustive search, or
            ``certify``) was cut short: the share, in ``[0, 1]``, of the removable sets of
            size ``L`` (the first size not completed; sizes ``1..L-1`` are) whose exact logit
            is known ([``Oracle.exact_share``][cftgnn.oracle.Oracle.exact_share]). None
            otherwise: nothing was cut short, the cut search was not an enumeration (e.g. a
            greedy search out of calls), or no removable set has ``L`` events
            (docs/certified.md; NaN in records, and in records older than version 8).
        num_removable: ``|R|``, the candidates the constraints leave removable.
        size_before_prune: Size of the search's own answer, before pruning and ``certify``.
        prune: Whether the answer was pruned to 1-minimality.
        certify: ``K`` of ``certify``: after the search, every removable set smaller than the
            answer, up to size ``K``, was checked exactly (0: off).
        certify_replaced: Whether that check found a smaller counterfactual, which became the
            answer.
        counterfactuals: Every distinct counterfactual the explainer hands back, the answer
            first (explainers of one answer: the answer, when it flips). Default: the answer
            when ``is_counterfactual``, else none.
        counterfactual_logits: The exact logit of each of them.
        counterfactual_consequences: How many later history events each of them changes
            (``Oracle.consequence``), or None when not measured.
        ranking: The explainer's ranking of its removable events, most important first
            (docs/design.md §8): a factual explainer's by importance; a counterfactual
            one's answer first, in the order found, then the rest in its strategy's order.
            Empty when no search ran (another status) or in records older than version 4.
        importance: The importance of each ranked event, non-increasing along ``ranking``
            (a counterfactual explainer's: ``(m - j) / m`` for the ``j``-th of ``m``).
        coalitions: A search explainer's scored coalitions, as ``(kept, reward)`` pairs: the
            candidate events the coalition **keeps** (ascending) and the search's reward for
            it, in the order the search created them; None for explainers that keep none
            (every explainer but T-GNNExplainer). Read by the ``tgnnexplainer`` protocol,
            which scores a search explainer by its best coalition per sparsity level, as its
            authors' evaluator does; not written to records (like ``trace``).
        trace: Optional per-iteration trace (list of plain dicts).
    """

    explainer: str
    event_id: int
    original_logit: float
    candidate_ids: tuple[int, ...]
    explanation: tuple[int, ...]
    final_logit: float
    is_counterfactual: bool
    iterations: int
    search_calls: int
    exact_calls: int
    cache_hits: int
    agreement: float | None
    agreement_n: int
    wall_time_s: float
    oracle_time_s: float
    setup_time_s: float = 0.0
    status: ExplanationStatus = ExplanationStatus.OK
    oracle_mode: str = "exact"
    strategy: str = ""
    min_size_lower_bound: int = 0
    certified_minimal: bool = False
    cut_short: bool = False
    next_size_share: float | None = None
    num_removable: int | None = None
    size_before_prune: int | None = None
    prune: bool = False
    certify: int = 0
    certify_replaced: bool = False
    counterfactuals: tuple[tuple[int, ...], ...] = ()
    counterfactual_logits: tuple[float, ...] = ()
    counterfactual_consequences: tuple[int, ...] | None = None
    ranking: tuple[int, ...] = ()
    importance: tuple[float, ...] = ()
    coalitions: tuple[tuple[tuple[int, ...], float], ...] | None = field(default=None,
                                                                        compare=False)
    trace: tuple[dict[str, Any], ...] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", ExplanationStatus(self.status))
        object.__setattr__(self, "candidate_ids", tuple(int(e) for e in self.candidate_ids))
        object.__setattr__(self, "explanation", tuple(int(e) for e in self.explanation))
        if len(set(self.explanation)) != len(self.explanation):
            raise ExplainerError(f"explanation has duplicate events: {self.explanation}")
        outside = set(self.explanation) - set(self.candidate_ids)
        if outside:
            raise ExplainerError(f"explanation events {sorted(outside)} are not candidates")
        if self.num_removable is None:
            object.__setattr__(self, "num_removable", len(self.candidate_ids))
        if self.size_before_prune is None:
            object.__setattr__(self, "size_before_prune", len(self.explanation))
        for name in ("iterations", "search_calls", "exact_calls", "cache_hits", "agreement_n",
                     "min_size_lower_bound", "certify"):
            if getattr(self, name) < 0:
                raise ExplainerError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not (math.isfinite(self.original_logit) and math.isfinite(self.final_logit)):
            raise ExplainerError("logits must be finite")
        if self.agreement is not None and not 0.0 <= self.agreement <= 1.0:
            raise ExplainerError(f"agreement must be in [0, 1], got {self.agreement}")
        if self.next_size_share is not None:
            if not 0.0 <= self.next_size_share <= 1.0:
                raise ExplainerError("next_size_share must be in [0, 1], got "
                                     f"{self.next_size_share}")
            if not self.cut_short:
                raise ExplainerError("next_size_share is only for a search cut short")
        if self.is_counterfactual and not is_flip(self.original_logit, self.final_logit):
            raise ExplainerError("is_counterfactual contradicts the logits")
        if self.certified_minimal and not (
                self.is_counterfactual and self.size == self.min_size_lower_bound):
            raise ExplainerError("certified_minimal needs a counterfactual whose size equals "
                                 "min_size_lower_bound")
        if self.is_counterfactual and self.size < self.min_size_lower_bound:
            raise ExplainerError(f"a counterfactual of size {self.size} contradicts "
                                 f"min_size_lower_bound = {self.min_size_lower_bound}")
        self._check_counterfactuals()
        self._check_ranking()
        self._check_coalitions()

    def _check_coalitions(self) -> None:
        """The scored coalitions: sets of candidates with a finite reward each."""
        if self.coalitions is None:
            return
        cand = set(self.candidate_ids)
        coalitions = []
        for kept, reward in self.coalitions:
            kept_t = tuple(sorted(int(e) for e in kept))
            if len(set(kept_t)) != len(kept_t) or not set(kept_t) <= cand:
                raise ExplainerError(f"coalition {kept_t} holds an event twice or a "
                                     "non-candidate")
            if not math.isfinite(float(reward)):
                raise ExplainerError(f"coalition {kept_t} has a non-finite reward")
            coalitions.append((kept_t, float(reward)))
        object.__setattr__(self, "coalitions", tuple(coalitions))

    def _check_ranking(self) -> None:
        """The ranking: distinct candidates, one importance each, non-increasing."""
        ranking = tuple(int(e) for e in self.ranking)
        importance = tuple(float(x) for x in self.importance)
        object.__setattr__(self, "ranking", ranking)
        object.__setattr__(self, "importance", importance)
        if len(importance) != len(ranking):
            raise ExplainerError(f"{len(ranking)} ranked events but {len(importance)} "
                                 "importances")
        if len(set(ranking)) != len(ranking):
            raise ExplainerError("ranking holds an event twice")
        outside = set(ranking) - set(self.candidate_ids)
        if outside:
            raise ExplainerError(f"ranked events {sorted(outside)} are not candidates")
        if any(not math.isfinite(x) for x in importance):
            raise ExplainerError("importances must be finite")
        if any(b > a for a, b in zip(importance, importance[1:], strict=False)):
            raise ExplainerError("importances must not increase along the ranking")

    def _check_counterfactuals(self) -> None:
        """Fill in the default list and check it: distinct sets of candidates that flip,
        the answer first."""
        sets = tuple(tuple(int(e) for e in c) for c in self.counterfactuals)
        logits = tuple(float(p) for p in self.counterfactual_logits)
        if not sets and self.is_counterfactual:
            sets, logits = (self.explanation,), (self.final_logit,)
        object.__setattr__(self, "counterfactuals", sets)
        object.__setattr__(self, "counterfactual_logits", logits)
        if len(logits) != len(sets):
            raise ExplainerError(f"{len(sets)} counterfactuals but {len(logits)} logits")
        if len({frozenset(c) for c in sets}) != len(sets):
            raise ExplainerError("counterfactuals hold the same set twice")
        if sets and set(sets[0]) != set(self.explanation):
            raise ExplainerError("the first counterfactual must be the answer")
        if sets and not self.is_counterfactual:
            raise ExplainerError("counterfactuals listed but the answer does not flip")
        cand = set(self.candidate_ids)
        for c, p in zip(sets, logits, strict=True):
            if not set(c) <= cand:
                raise ExplainerError(f"counterfactual {c} holds non-candidate events")
            if not is_flip(self.original_logit, p):
                raise ExplainerError(f"counterfactual {c} does not flip (logit {p})")
        cons = self.counterfactual_consequences
        if cons is not None:
            cons = tuple(int(x) for x in cons)
            object.__setattr__(self, "counterfactual_consequences", cons)
            if len(cons) != len(sets):
                raise ExplainerError(f"{len(sets)} counterfactuals but {len(cons)} consequences")

    @property
    def schema_version(self) -> int:
        """The record layout [``to_record``][cftgnn.explain.ExplanationResult.to_record] writes
        ([``SCHEMA_VERSION``][cftgnn.explain.SCHEMA_VERSION])."""
        return SCHEMA_VERSION

    @property
    def num_candidates(self) -> int:
        """``|C|``."""
        return len(self.candidate_ids)

    @property
    def n_counterfactuals(self) -> int:
        """Number of distinct counterfactuals handed back."""
        return len(self.counterfactuals)

    @property
    def size(self) -> int:
        """Number of removed events."""
        return len(self.explanation)

    @property
    def oracle_calls(self) -> int:
        """All backend evaluations (search + exact)."""
        return self.search_calls + self.exact_calls

    @property
    def sparsity(self) -> float:
        """``|s| / |C|`` (0 when there are no candidates)."""
        return self.size / len(self.candidate_ids) if self.candidate_ids else 0.0

    def to_record(self, include_trace: bool = False) -> dict[str, Any]:
        """A flat dict of plain values (lists as lists), writable as one parquet row: the
        columns of ``RESULT_COLUMNS``, in order.

        Args:
            include_trace: Add the trace as a JSON string under ``"trace_json"``.
        """
        rec = {c.name: _plain(getattr(self, c.name)) for c in RESULT_COLUMNS}
        if include_trace:
            rec["trace_json"] = json.dumps(list(self.trace or ()))
        return rec

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ExplanationResult:
        """The result a record holds (a dict of
        [``to_record``][cftgnn.explain.ExplanationResult.to_record], or a row of ``read_records``,
        whose older rows are upgraded): the inverse of
        [``to_record``][cftgnn.explain.ExplanationResult.to_record].

        Columns derived from others (``size``, ``num_candidates``, ``sparsity``,
        ``oracle_calls``, ``n_counterfactuals``) are checked against the result; a
        ``trace_json`` column becomes the trace.

        Raises:
            ExplainerError: A column is missing, or the record contradicts itself.
        """
        kinds = column_types()
        names = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for c in RESULT_COLUMNS:
            if c.name not in names:
                continue
            if c.name not in record:
                raise ExplainerError(f"record lacks column {c.name!r} (records older than "
                                     "schema version 2 read through read_records, which "
                                     "upgrades them)")
            values[c.name] = _from_plain(record[c.name], kinds[c.name])
        trace = record.get("trace_json")
        if isinstance(trace, str):
            values["trace"] = tuple(json.loads(trace))
        result = cls(**values)
        for c in RESULT_COLUMNS:
            if c.name in names or c.name == "schema_version" or c.name not in record:
                continue
            want, got = getattr(result, c.name), record[c.name]
            if not (math.isclose(float(got), want, rel_tol=1e-12) if isinstance(want, float)
                    else int(got) == want):
                raise ExplainerError(f"record of event {result.event_id}: {c.name} = {got} "
                                     f"contradicts its other columns ({want})")
        return result


def _plain(value: Any) -> Any:
    """A result attribute as a plain record value (tuples as lists, enums as values)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _from_plain(value: Any, kind: Any) -> Any:
    """A record value (plain, numpy or pandas) as the attribute type ``kind``."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if type(None) in typing.get_args(kind):  # X | None
        return None if _missing(value) else _from_plain(value, args[0])
    if typing.get_origin(kind) is tuple:
        return tuple(_from_plain(v, args[0]) for v in value)
    if kind is bool:
        return bool(value)
    if kind is int:
        return int(value)
    if kind is float:
        return float(value)
    if isinstance(kind, type) and issubclass(kind, Enum):
        return kind(value)
    return str(value)


@cache
def column_types() -> dict[str, Any]:
    """Each result column's Python type: the annotation of the
    [``ExplanationResult``][cftgnn.explain.ExplanationResult] attribute, or the return annotation of
    the property, of that name (e.g. ``tuple[int, ...]``, ``float | None``)."""
    hints = typing.get_type_hints(ExplanationResult)
    out: dict[str, Any] = {}
    for c in RESULT_COLUMNS:
        prop = getattr(ExplanationResult, c.name, None)
        out[c.name] = (typing.get_type_hints(prop.fget)["return"]
                       if isinstance(prop, property) and prop.fget is not None
                       else hints[c.name])
    return out


__all__ = ["RECORD_DEFAULTS_V1", "RESULT_COLUMNS", "SCHEMA_VERSION", "Column",
           "ExplanationResult", "ExplanationStatus", "column_types", "explained"]
