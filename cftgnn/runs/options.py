"""``explain.py``'s top-level options, checked before anything loads (types, ranges, enum
values), with the explainer's own parameters by its declaration
(``cftgnn.explain.params.check_explainer_options``)."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from cftgnn.errors import ConfigError
from cftgnn.explain.params import check_explainer_options, check_strategy_options
from cftgnn.explain.post import PostProcessing
from cftgnn.options import boolean, choice, integer, integer_list, number, text
from cftgnn.oracle.history import History
from cftgnn.oracle.target import Target
from cftgnn.runs.targets import target_options
from cftgnn.scoring.groups import PredictionGroup
from cftgnn.scoring.protocols import CurveSet, Protocol
from cftgnn.training.options import checkpoint_file, device

#: ``curves=auto`` computes the curves on streams of at most this many events. The kept sets
#: remove every candidate below the top share, the oldest included, so each replays the
#: explained event's history from its oldest candidate on, which a stream's length bounds: on
#: UCI (60k events) and Wikipedia (157k) the curve call costs a fraction of the explanation
#: (median 0.012 s against 0.047 s, 0.066 s against 0.26 s), on the 1M-event synthetic stream
#: 5 to 12 times it (70-200 s against 14-17 s); docs/metrics.md.
AUTO_CURVES_MAX_EVENTS = 200_000

#: The values of the ``replay.cone`` option: ``cftgnn.replay.tgn.Cone``'s, listed here so that
#: the option is checked before torch loads (a test holds the two equal).
CONE_OPTIONS = ("auto", "rows", "dense")

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


#: The values of the ``protocol`` option: a protocol's name, or ``all``.
PROTOCOL_OPTIONS = (*(p.value for p in Protocol), "all")


def protocols_choice(value: Any) -> tuple[Protocol, ...]:
    """The protocols the ``protocol`` option names: one name, a list of names, or ``all``
    (every protocol), in ``Protocol``'s order, each once.

    Raises:
        ConfigError: For an empty list, or a value that is not one of ``PROTOCOL_OPTIONS``
            (nor a list of them).
    """
    names = [value] if isinstance(value, str) else value
    if (not isinstance(names, list | tuple) or not names
            or not all(isinstance(n, str) and n in PROTOCOL_OPTIONS for n in names)):
        raise ConfigError(f"protocol must be one of {', '.join(PROTOCOL_OPTIONS)}, or a list "
                          f"of them (e.g. protocol=[common,tempme]), got {value!r}")
    if "all" in names:
        return tuple(Protocol)
    return tuple(p for p in Protocol if p.value in names)


def protocol_option(cfg: Any) -> tuple[Protocol, ...]:
    """``cfg.protocol`` by ``protocols_choice`` (``common`` when absent)."""
    value = cfg.get("protocol", Protocol.COMMON.value)
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=True)
    return protocols_choice(value)


def check_candidate_options(cfg: Any) -> None:
    """``m_max >= 1`` and ``k`` null or ``>= 1`` (``explain.py`` and the quality benchmark).

    Raises:
        ConfigError: Naming the option.
    """
    integer(cfg, "m_max", minimum=1)
    integer(cfg, "k", minimum=1, optional=True)


def shard_of(cfg: Any) -> tuple[int, int]:
    """``(shard, num_shards)``: integers with ``0 <= shard < num_shards`` (the one rule of
    both, used by ``check_explain_options`` before a run, or every job of a ``-m`` sweep,
    starts and by the pipeline that splits the events).

    Raises:
        ConfigError: Naming the option that is not an integer in range.
    """
    shard = integer(cfg, "shard", minimum=0)
    num = integer(cfg, "num_shards", minimum=1)
    assert shard is not None and num is not None  # neither is optional
    if shard >= num:
        raise ConfigError(f"shard must be in [0, num_shards), got shard={shard} "
                          f"num_shards={num}")
    return shard, num


def check_explain_options(cfg: Any) -> None:
    """Refuse any top-level option of ``conf/explain.yaml`` of the wrong type or range.

    Counts (``n_events``, ``events``, ``seed``, ``shard``, ``num_shards``, ``num_threads``,
    ``num_workers``, ``certify``) must be integers (``1.5`` and ``abc`` are refused, never
    truncated), ``shard`` one of ``num_shards`` (``shard_of``);
    ``sample.prediction`` one of [``PredictionGroup``][cftgnn.runs.PredictionGroup]'s
    values; ``sample.range`` two numbers ``0 <= start < end <= 1``; ``history`` one of
    ``History``'s values; ``replay.cone`` one of ``CONE_OPTIONS``; ``curves`` one of
    ``CURVES_OPTIONS`` (``auto`` or a [``CurveSet``][cftgnn.runs.CurveSet] value);
    ``protocol`` a protocol's name, a list of them or ``all`` (``protocols_choice``); the
    ``explainer.*`` options by the explainer's declaration (``check_explainer_options``),
    the ``strategy.*`` options by the strategy's (``check_strategy_options``) and
    ``ceiling``, ``prune``, ``certify``, ``certify_max_time_s`` by ``PostProcessing``'s,
    without torch; ``device`` one this machine has (``cftgnn.training.options.device``:
    torch loads for a device other than ``cpu`` or ``auto``).

    Raises:
        ConfigError: Naming the first bad option.
        ExplainerError: Naming the first bad ``explainer.*``, ``strategy.*`` or post-search
            option.
    """
    integer(cfg, "n_events", minimum=0)
    integer_list(cfg, "events", optional=True)
    integer(cfg, "seed")
    shard_of(cfg)
    integer(cfg, "num_threads", minimum=1)
    integer(cfg, "num_workers", minimum=1)
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
    if cfg.get("replay") is not None:
        choice(cfg, "replay.cone", CONE_OPTIONS)
    protocols = protocol_option(cfg)
    number(cfg, "auto_threshold", minimum=0, strict_minimum=True)
    boolean(cfg, "progress")
    boolean(cfg, "robustness")
    boolean(cfg, "picture")
    checkpoint_file(cfg)
    if cfg.get("robustness") is True:
        checkpoint_file(cfg, "robust.checkpoint", "robust.checkpoint=auto: the committed "
                        "_seed1 one, robust.checkpoint=null: no model noise")
    text(cfg, "out_dir", optional=True)
    text(cfg, "group", optional=True)
    check_explainer_options(cfg.get("explainer"))  # explainer.*: its Params, without torch
    check_strategy_options(cfg.get("strategy"))  # strategy.*: likewise
    if target_options(cfg).target is Target.RANK and (
            Protocol.TEMPME in protocols or cfg.get("curves") == CurveSet.ALL.value):
        raise ConfigError("protocol=tempme scores negative pairs' logits against the explained "
                          "logit; it is not available with target=rank (use protocol=common or "
                          "tgnnexplainer)")
    PostProcessing.from_config(cfg)  # ceiling, prune, certify, certify_max_time_s: the same
    device(cfg)  # last: a device other than cpu or auto loads torch to be checked


__all__ = ["AUTO_CURVES_MAX_EVENTS", "CONE_OPTIONS", "CURVES_OPTIONS", "PROTOCOL_OPTIONS",
           "PredictionGroup", "curves_choice", "protocol_option",
           "protocols_choice", "check_candidate_options", "check_explain_options", "shard_of"]
