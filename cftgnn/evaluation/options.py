"""``explain.py``'s top-level options, checked before anything loads (types, ranges, enum
values; the explainer's own parameters are checked by the explainer)."""

from __future__ import annotations

from enum import Enum
from typing import Any

from cftgnn.errors import ConfigError
from cftgnn.options import boolean, choice, integer, integer_list, number, text
from cftgnn.oracle.history import History


class PredictionGroup(str, Enum):
    """Which predictions to sample.

    * ``correct`` / ``incorrect`` — only that group;
    * ``both`` — half of the events from each group (``ceil(n/2)`` correct);
    * ``any`` — uniformly from the whole range, whatever the prediction.
    """

    CORRECT = "correct"
    INCORRECT = "incorrect"
    BOTH = "both"
    ANY = "any"


class CurveSet(str, Enum):
    """Which curve metrics ``explain.py`` computes for each explained event (their exact
    logits, one batched call after the search; ``cftgnn.evaluation.curves``).

    * ``none`` — none: ``fid_curve_logits`` and ``acc_curve_logits`` stay empty and
      ``best_fid``, ``aufsc_keep`` and ``acc_auc`` are NaN (the explanation, fidelity± and
      every other column are unchanged);
    * ``common`` — the common protocol: T-GNNExplainer's fidelity over kept shares (21
      logits) and TempME's ACC-AUC (16 logits).

    A value for every protocol's curves is left for when there is more than one protocol.
    The option also takes ``auto`` (the default, ``curves_choice``).
    """

    NONE = "none"
    COMMON = "common"


#: ``curves=auto`` computes the curves on streams of at most this many events. The kept sets
#: remove every candidate below the top share, the oldest included, so each replays the
#: explained event's history from its oldest candidate on, which a stream's length bounds: on
#: UCI (60k events) and Wikipedia (157k) the curve call costs a fraction of the explanation
#: (median 0.012 s against 0.047 s, 0.066 s against 0.26 s), on the 1M-event synthetic stream
#: 5 to 12 times it (70-200 s against 14-17 s); docs/metrics.md.
AUTO_CURVES_MAX_EVENTS = 200_000

#: The values of the ``curves`` option.
CURVES_OPTIONS = ("auto", *(c.value for c in CurveSet))


def curves_choice(value: str, num_events: int) -> CurveSet:
    """The curves a run computes: ``value`` (``curves``), with ``auto`` as ``common`` on a
    stream of at most ``AUTO_CURVES_MAX_EVENTS`` events and ``none`` on a longer one.

    Raises:
        ConfigError: For a value that is not one of ``CURVES_OPTIONS``.
    """
    if value not in CURVES_OPTIONS:
        raise ConfigError(f"curves must be one of {', '.join(CURVES_OPTIONS)}, got {value!r}")
    if value != "auto":
        return CurveSet(value)
    return CurveSet.COMMON if num_events <= AUTO_CURVES_MAX_EVENTS else CurveSet.NONE


def check_candidate_options(cfg: Any) -> None:
    """``m_max >= 1`` and ``k`` null or ``>= 1`` (``explain.py`` and the quality benchmark).

    Raises:
        ConfigError: Naming the option.
    """
    integer(cfg, "m_max", minimum=1)
    integer(cfg, "k", minimum=1, optional=True)


def check_explain_options(cfg: Any) -> None:
    """Refuse any top-level option of ``conf/explain.yaml`` of the wrong type or range.

    Counts (``n_events``, ``events``, ``seed``, ``shard``, ``num_shards``, ``num_threads``,
    ``certify``) must be integers (``1.5`` and ``abc`` are refused, never truncated);
    ``sample.prediction`` one of [``PredictionGroup``][cftgnn.evaluation.PredictionGroup]'s
    values; ``sample.range`` two numbers ``0 <= start < end <= 1``; ``history`` one of
    ``History``'s values; ``curves`` one of ``CURVES_OPTIONS`` (``auto`` or a
    [``CurveSet``][cftgnn.evaluation.CurveSet] value).

    Raises:
        ConfigError: Naming the first bad option.
    """
    integer(cfg, "n_events", minimum=0)
    integer_list(cfg, "events", optional=True)
    integer(cfg, "seed")
    integer(cfg, "shard", minimum=0)
    integer(cfg, "num_shards", minimum=1)
    integer(cfg, "num_threads", minimum=1)
    check_candidate_options(cfg)
    choice(cfg, "sample.prediction", [g.value for g in PredictionGroup])
    share = cfg.sample.range
    if (not hasattr(share, "__len__") or isinstance(share, str) or len(share) != 2
            or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in share)
            or not 0 <= share[0] < share[1] <= 1):
        raise ConfigError(f"sample.range must be [start, end] with 0 <= start < end <= 1, got "
                          f"{share!r}")
    number(cfg, "sample.min_abs_logit", minimum=0)
    number(cfg, "sample.max_abs_logit", minimum=0, optional=True)
    choice(cfg, "mode", ["approximate", "exact", "auto"])
    choice(cfg, "history", [h.value for h in History])
    choice(cfg, "curves", CURVES_OPTIONS)
    number(cfg, "auto_threshold", minimum=0, strict_minimum=True)
    boolean(cfg, "progress")
    boolean(cfg, "robustness")
    boolean(cfg, "picture")
    text(cfg, "checkpoint", optional=True)
    text(cfg, "out_dir", optional=True)
    text(cfg, "group", optional=True)


def check_train_explainer_options(cfg: Any) -> None:
    """Refuse a bad top-level option of ``conf/train_explainer.yaml`` before anything loads.

    Raises:
        ConfigError: Naming the first bad option.
    """
    integer(cfg, "seed")
    integer(cfg, "n_train_events", minimum=1)
    integer(cfg, "epochs", minimum=1)
    integer(cfg, "batch_size", minimum=1)
    integer(cfg, "hidden", minimum=1)
    integer(cfg, "num_threads", minimum=1)
    integer(cfg, "m_max", minimum=1)
    integer(cfg, "k", minimum=1, optional=True)
    number(cfg, "lr", minimum=0, strict_minimum=True)
    integer(cfg, "n_val_events", minimum=1)
    choice(cfg, "features", ("reference", "probe"))
    text(cfg, "note", optional=True)
    share = cfg.train_range
    if (isinstance(share, str) or not hasattr(share, "__len__") or len(share) != 2
            or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in share)
            or not 0 <= share[0] < share[1] <= 1):
        raise ConfigError(f"train_range must be [start, end] with 0 <= start < end <= 1 (a "
                          f"share of the training split), got {share!r}")
    boolean(cfg, "progress")
    boolean(cfg, "overwrite")
    text(cfg, "out_dir", optional=True)


__all__ = ["AUTO_CURVES_MAX_EVENTS", "CURVES_OPTIONS", "CurveSet", "PredictionGroup",
           "curves_choice", "check_candidate_options", "check_explain_options",
           "check_train_explainer_options"]
