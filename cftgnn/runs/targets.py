"""``explain.py``'s ``target``, ``target_k`` and ``target_negatives``: what a run explains.

``target=logit`` (the default) explains the logit's sign; ``target=rank`` the true
destination's TGB rank among the event's negatives (``cftgnn.oracle.target``): a
counterfactual takes it out of the top ``target_k`` (into it, for an event outside it). The
negatives are TGB's, read for the split each explained event is in
(``cftgnn.data.tgb.load_tgb_negatives``, a stream of ``dataset=tgb``), or a table of the
project's own (``target_negatives=<file.npz>``, ``cftgnn.data.negatives_io``). Every refusal
is one ``error:`` line before any event is explained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cftgnn.data.negatives_io import load_negatives
from cftgnn.data.stream import EventStream
from cftgnn.data.tgb_negatives import TGB_KEY, TGBNegatives
from cftgnn.errors import ConfigError, DataNotFoundError
from cftgnn.explain.result import ExplanationResult
from cftgnn.options import choice, integer, text
from cftgnn.oracle.oracle import Oracle
from cftgnn.oracle.target import RankTargets, Target


@dataclass(frozen=True)
class TargetOptions:
    """The run's target options, checked.

    Attributes:
        target: ``logit`` or ``rank``.
        k: ``target_k`` (``>= 1``).
        negatives: ``target_negatives``: a negatives file, or None (TGB's own).
    """

    target: Target
    k: int
    negatives: str | None

    def as_dict(self) -> dict[str, Any]:
        """The run.json keys (nothing for the logit target, as before the option)."""
        if self.target is Target.LOGIT:
            return {}
        return {"target": self.target.value, "target_k": self.k,
                "target_negatives": self.negatives}


def target_options(cfg: Any) -> TargetOptions:
    """``target`` (``logit`` when absent), ``target_k`` (1), ``target_negatives`` (null).

    Raises:
        ConfigError: Naming the bad option; ``target=rank`` with ``robustness=true`` (its
            model and implementation noise read the logit).
    """
    plain = {"target": cfg.get("target", Target.LOGIT.value), "target_k": cfg.get("target_k", 1),
             "target_negatives": cfg.get("target_negatives")}
    target = Target(choice(plain, "target", [t.value for t in Target]))
    k = integer(plain, "target_k", minimum=1)
    assert k is not None
    negatives = text(plain, "target_negatives", optional=True)
    if target is Target.RANK and cfg.get("robustness", False) is True:
        raise ConfigError("robustness=true measures the logit's flip; it is not available "
                          "with target=rank")
    return TargetOptions(target, k, negatives)


def _tgb_negatives(stream: EventStream) -> tuple[TGBNegatives, ...]:
    """TGB's negatives of every split of a ``dataset=tgb`` stream whose files are there."""
    if TGB_KEY not in (getattr(stream, "meta", None) or {}):
        raise ConfigError(f"target=rank needs TGB's negatives: stream {stream.name!r} is not a "
                          "TGB dataset (dataset=tgb dataset.name=tgbl-...); or give a table of "
                          "your own with target_negatives=<file.npz>")
    # here, not at the top: the TGB reader needs pandas, which the option checks that import
    # this module must not load (tests/faults/test_option_faults.py)
    from cftgnn.data.tgb import load_all_tgb_negatives

    try:
        return tuple(load_all_tgb_negatives(stream, strict=False).values())
    except DataNotFoundError as exc:
        raise DataNotFoundError(f"target=rank: {exc}") from None


def rank_targets_of(cfg: Any, stream: EventStream) -> RankTargets | None:
    """The run's rank targets (None for ``target=logit``), with explicit ``events`` checked
    against them (each must have at least ``target_k`` negatives).

    Raises:
        ConfigError: No negatives for the stream, an explicit event without negatives, or a
            ``target_k`` above the negatives of an explicit event or of every event.
        DataNotFoundError, DataFormatError: A negatives file missing or malformed.
    """
    opts = target_options(cfg)
    if opts.target is Target.LOGIT:
        return None
    tables = ((load_negatives(opts.negatives, stream),) if opts.negatives is not None
              else _tgb_negatives(stream))
    targets = RankTargets(tables, opts.k)
    if cfg.get("events") is not None:
        targets.check(list(cfg.events))
    elif not len(targets.eligible()):
        most = max((int(t.counts().max()) for t in tables if t.num_events), default=0)
        raise ConfigError(f"target_k={opts.k} is more than the negatives of every event "
                          f"(at most {most})")
    return targets


def rank_columns(oracle: Oracle, result: ExplanationResult) -> dict[str, Any]:
    """The record's target columns of one explained event (``EventContext``): the target,
    k, the number of negatives, and TGB's rank of the true destination before and after
    the answer is removed (exact; NaN after when nothing was answered). Nothing for the
    logit target (the columns' defaults)."""
    scores = oracle.target
    if scores is None:
        return {}
    removed = result.explanation if result.explanation else None
    return {"target": scores.kind.value, "target_k": scores.k,
            "num_negatives": scores.num_negatives,
            "rank_before": scores.rank(frozenset()),
            "rank_after": float("nan") if removed is None else scores.rank(removed)}


__all__ = ["TargetOptions", "rank_columns", "rank_targets_of", "target_options"]
