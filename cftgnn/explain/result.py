"""The one result type every explainer returns, and its flat record form."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from cftgnn.errors import ExplainerError
from cftgnn.oracle.contract import is_flip

#: Version of the record layout written by :meth:`ExplanationResult.to_record`.
#: 2: certificates, pruning, ``certify`` and constraints (:data:`RECORD_DEFAULTS_V1` fills
#: them in records of version 1).
#: 3: several counterfactuals per event (``n_counterfactuals``, ``counterfactuals`` and their
#: logits and consequences; older records hold their one answer).
SCHEMA_VERSION = 3

#: Values of the version-2 columns for records written before them (no certificate claimed,
#: nothing pruned or certified, no constraint). ``size_before_prune`` is the record's ``size``.
RECORD_DEFAULTS_V1: dict[str, Any] = {
    "min_size_lower_bound": 0,
    "certified_minimal": False,
    "cut_short": False,
    "prune": False,
    "certify": 0,
    "certify_replaced": False,
    "num_removable": None,  # the record's num_candidates
}


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
        status: See :class:`ExplanationStatus`.
        oracle_mode: The oracle's search mode (``"exact"`` / ``"approximate"``).
        strategy: Repr of the selection strategy used.
        min_size_lower_bound: ``L``: every removable set smaller than ``L`` was evaluated
            exactly and none flips (DESIGN.md §7); 0 when no search ran (another status).
        certified_minimal: A counterfactual was found and its size equals ``L``: no smaller
            counterfactual exists among the removable events.
        cut_short: The explainer's call or time budget (or ``certify_max_time_s``) ended its
            search early (for the exhaustive explainer: its claim that nothing of size
            ``≤ max_size`` flips is void; ``L`` still holds).
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
            (:meth:`Oracle.consequence`), or None when not measured.
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
    num_removable: int | None = None
    size_before_prune: int | None = None
    prune: bool = False
    certify: int = 0
    certify_replaced: bool = False
    counterfactuals: tuple[tuple[int, ...], ...] = ()
    counterfactual_logits: tuple[float, ...] = ()
    counterfactual_consequences: tuple[int, ...] | None = None
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
        """A flat dict of plain values (lists as lists), writable as one parquet row.

        Args:
            include_trace: Add the trace as a JSON string under ``"trace_json"``.
        """
        rec: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "explainer": self.explainer,
            "event_id": self.event_id,
            "status": self.status.value,
            "oracle_mode": self.oracle_mode,
            "strategy": self.strategy,
            "original_logit": self.original_logit,
            "final_logit": self.final_logit,
            "is_counterfactual": self.is_counterfactual,
            "explanation": list(self.explanation),
            "candidate_ids": list(self.candidate_ids),
            "size": self.size,
            "num_candidates": len(self.candidate_ids),
            "sparsity": self.sparsity,
            "iterations": self.iterations,
            "oracle_calls": self.oracle_calls,
            "search_calls": self.search_calls,
            "exact_calls": self.exact_calls,
            "cache_hits": self.cache_hits,
            "agreement": self.agreement,
            "agreement_n": self.agreement_n,
            "wall_time_s": self.wall_time_s,
            "oracle_time_s": self.oracle_time_s,
            "setup_time_s": self.setup_time_s,
            "min_size_lower_bound": self.min_size_lower_bound,
            "certified_minimal": self.certified_minimal,
            "cut_short": self.cut_short,
            "num_removable": self.num_removable,
            "size_before_prune": self.size_before_prune,
            "prune": self.prune,
            "certify": self.certify,
            "certify_replaced": self.certify_replaced,
            "n_counterfactuals": self.n_counterfactuals,
            "counterfactuals": [list(c) for c in self.counterfactuals],
            "counterfactual_logits": list(self.counterfactual_logits),
            "counterfactual_consequences": (None if self.counterfactual_consequences is None
                                            else list(self.counterfactual_consequences)),
        }
        if include_trace:
            rec["trace_json"] = json.dumps(list(self.trace or ()))
        return rec


__all__ = ["RECORD_DEFAULTS_V1", "SCHEMA_VERSION", "ExplanationResult", "ExplanationStatus",
           "explained"]
