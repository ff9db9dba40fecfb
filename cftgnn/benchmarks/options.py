"""The benchmarks' top-level options, checked before anything loads (this module imports
neither torch nor the models: ``cftgnn.cli.main_guard`` runs these first, and each
benchmark's ``run`` again)."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from cftgnn.config import group_options
from cftgnn.errors import ConfigError
from cftgnn.explain.params import check_explainer_options, check_strategy_options
from cftgnn.explain.post import PostProcessing
from cftgnn.options import (
    boolean,
    choice,
    integer,
    integer_list,
    is_integer,
    number,
    option_value,
)
from cftgnn.runs.options import CURVES_OPTIONS, check_candidate_options
from cftgnn.training.options import checkpoint_file, device, device_name


def _known(cfg: Any, group: str, name: str, option: str) -> None:
    options = group_options(cfg, group)
    if options is not None and name not in options:
        raise ConfigError(f"{option}: unknown {group} {name!r} (choose from: "
                          f"{', '.join(options)})")


def pair_of(cfg: Any, pair: Any, option: str = "pairs") -> tuple[str, str]:
    """One ``<dataset>-<model>`` name of ``option`` as ``(dataset, model)``.

    Raises:
        ConfigError: For a name that is not ``<dataset>-<model>``, or a dataset or model
            without a file of ``conf/dataset/`` / ``conf/model/``.
    """
    parts = str(pair).split("-")
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"{option} must be <dataset>-<model> names, e.g. uci-tgn; got "
                          f"{pair!r}")
    _known(cfg, "dataset", parts[0], f"{option} entry {pair!r}")
    _known(cfg, "model", parts[1], f"{option} entry {pair!r}")
    return parts[0], parts[1]


def pairs(cfg: Any) -> list[tuple[str, str]]:
    """``cfg.pairs`` as ``(dataset, model)`` tuples, each named by a config file.

    Raises:
        ConfigError: For an empty list, a name that is not ``<dataset>-<model>``, or a dataset
            or model without a file of ``conf/dataset/`` / ``conf/model/``.
    """
    out = [pair_of(cfg, pair) for pair in cfg.pairs or []]
    if not out:
        raise ConfigError("pairs is empty; name at least one <dataset>-<model>")
    return out


def check_explainers_options(cfg: Any) -> None:
    """``benchmark_explainers.py``: ``n_events >= 1``, known pairs and explainers.

    Raises:
        ConfigError: Naming the first bad option.
    """
    integer(cfg, "n_events", minimum=1)
    pairs(cfg)
    if not cfg.explainers:
        raise ConfigError("explainers is empty; name at least one of conf/explainer/")
    for name in cfg.explainers:
        _known(cfg, "explainer", str(name), "explainers")
    device(cfg)


def check_oracle_options(cfg: Any) -> None:
    """``benchmark_oracle.py``: counts of the right type and range.

    Raises:
        ConfigError: Naming the first bad option.
    """
    integer(cfg, "n_events", minimum=1)
    integer(cfg, "sets_per_event", minimum=1)
    integer(cfg, "naive_per_event", minimum=0)
    integer(cfg, "batch_size", minimum=1)
    integer(cfg, "m_max", minimum=1)
    integer(cfg, "k", minimum=1, optional=True)
    integer(cfg, "num_threads", minimum=1)
    checkpoint_file(cfg)
    device(cfg)


def check_rank_options(cfg: Any) -> None:
    """``benchmark_rank.py``: counts of the right type and range, the mode, the explainer's
    and the post-processing options.

    Raises:
        ConfigError: Naming the first bad option.
    """
    integer(cfg, "n_events", minimum=1)
    integer(cfg, "num_negatives", minimum=1)
    integer(cfg, "target_k", minimum=1)
    integer(cfg, "m_max", minimum=1)
    integer(cfg, "k", minimum=1, optional=True)
    integer(cfg, "num_threads", minimum=1)
    choice(cfg, "mode", ["approximate", "exact"])
    if int(cfg.target_k) > int(cfg.num_negatives):
        raise ConfigError(f"target_k={cfg.target_k} is more than num_negatives="
                          f"{cfg.num_negatives}")
    check_explainer_options(cfg.get("explainer"))
    check_strategy_options(cfg.get("strategy"))
    PostProcessing.from_config(cfg)
    checkpoint_file(cfg)
    device(cfg)


def check_index_options(cfg: Any) -> None:
    """``benchmark_index.py``: ``ks`` hop radii ``>= 1`` (as ``explain.py``'s ``k``), counts.

    Raises:
        ConfigError: Naming the first bad option.
    """
    integer(cfg, "n_events", minimum=1)
    if not integer_list(cfg, "ks", optional=False, minimum=1):
        raise ConfigError("ks is empty; name at least one hop radius, e.g. ks=[1,2]")
    integer(cfg, "m_max", minimum=1)
    integer(cfg, "seed")
    integer(cfg, "repeats", minimum=1)


def check_memory_options(cfg: Any) -> None:
    """``benchmark_memory.py``: ``streams`` of ``[num_events >= 1, num_nodes >= 2]`` (and an
    optional third entry, ``feat_dim >= 0``), counts,
    ``curves`` as ``explain.py``'s, ``stop_after`` one of ``engine``, ``sampling``,
    ``events``, the ``explainer.*`` and ``strategy.*`` options by their
    declarations (the ``budgets`` entries are checked by the engine's own
    rule when the run starts).

    Raises:
        ConfigError: Naming the first bad option.
    """
    streams = OmegaConf.to_container(cfg.streams)
    if not isinstance(streams, list) or not all(
            isinstance(s, list) and len(s) in (2, 3) for s in streams):
        raise ConfigError("streams must be a list of [num_events, num_nodes] or "
                          "[num_events, num_nodes, feat_dim]")
    for entry in streams:
        num_events, num_nodes, feat_dim = [*entry, 0][:3]
        if not (is_integer(num_events) and is_integer(num_nodes) and is_integer(feat_dim)
                and num_events >= 1 and num_nodes >= 2 and feat_dim >= 0):
            raise ConfigError(f"streams must hold [num_events, num_nodes] integers (and "
                              f"feat_dim >= 0), got {entry!r}")
    budgets = OmegaConf.to_container(cfg.budgets)
    if not isinstance(budgets, list) or not budgets:
        raise ConfigError("budgets must be a non-empty list of GiB (null = no bound)")
    integer(cfg, "n_events", minimum=0)
    integer(cfg, "m_max", minimum=1)
    integer(cfg, "num_threads", minimum=1)
    integer(cfg, "seed")
    integer(cfg, "k", minimum=1, optional=True)
    number(cfg, "timeout_s", minimum=0, strict_minimum=True, optional=True)
    choice(cfg, "curves", CURVES_OPTIONS)
    choice(cfg, "stop_after", ("engine", "sampling", "events"))
    check_explainer_options(cfg.get("explainer"))
    check_strategy_options(cfg.get("strategy"))


def check_tail_options(cfg: Any) -> None:
    """``benchmark_tail.py``: ``max_size >= 1``, ``n_events >= 1`` (without ``events``), the
    pruning options, ``num_workers >= 1``.

    Raises:
        ConfigError: Naming the first bad option.
    """
    integer(cfg, "max_size", minimum=1)
    if not cfg.get("events"):
        integer(cfg, "n_events", minimum=1)
    boolean(cfg, "prune_perturbations")
    number(cfg, "prune_tolerance", minimum=0.0, finite=True)
    integer(cfg, "num_workers", minimum=1)
    checkpoint_file(cfg)
    device(cfg)


#: The parts of ``benchmark_far_back.py`` (``cftgnn.benchmarks.far_back``).
PARTS = ("effects", "flips", "bookkeeping", "jacobian")


def far_back_tolerances(cfg: Any) -> list[float]:
    """``cfg.tolerances``: a list (maybe empty) of finite numbers ``> 0``.

    Raises:
        ConfigError: Naming the first entry that is not one.
    """
    value = option_value(cfg, "tolerances")
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ConfigError(f"tolerances must be a list of numbers > 0 such as [1e-5,1e-4], "
                          f"got {value!r}")
    out = []
    for item in value:
        if (isinstance(item, bool) or not isinstance(item, int | float)
                or not 0.0 < float(item) < float("inf")):
            raise ConfigError(f"tolerances must be finite numbers > 0, got {item!r} in "
                              f"{list(value)}")
        out.append(float(item))
    return out


def check_far_back_options(cfg: Any) -> None:
    """``benchmark_far_back.py``: ``events`` a non-empty list of event ids, ``parts`` of
    ``PARTS``, ``max_size >= 1``, ``tolerances`` finite and ``> 0``, counts.

    Raises:
        ConfigError: Naming the first bad option.
    """
    if not integer_list(cfg, "events", optional=False, minimum=0):
        raise ConfigError("events is empty; name at least one event id, e.g. events=[56484]")
    parts = option_value(cfg, "parts")
    if not isinstance(parts, list | tuple) or not parts:
        raise ConfigError(f"parts must be a non-empty list of {', '.join(PARTS)}, got "
                          f"{parts!r}")
    for part in parts:
        if part not in PARTS:
            raise ConfigError(f"parts: unknown {part!r} (choose from: {', '.join(PARTS)})")
    integer(cfg, "max_size", minimum=1)
    far_back_tolerances(cfg)
    integer(cfg, "n_pairs", minimum=0)
    integer(cfg, "jacobian_rows", minimum=1)
    integer(cfg, "m_max", minimum=1)
    integer(cfg, "k", minimum=1, optional=True)
    integer(cfg, "seed")
    integer(cfg, "num_threads", minimum=1)
    checkpoint_file(cfg)
    device(cfg)


def check_gpu_options(cfg: Any) -> None:
    """``benchmark_gpu.py``: two devices, each one this machine has (``device``'s rule, last:
    a device other than ``cpu`` or ``auto`` loads torch to be checked), known pairs, counts,
    the explainers' overrides and the tail event (its ``pair`` known, ``max_size >= 1``).

    Raises:
        ConfigError: Naming the first bad option.
    """
    devices = option_value(cfg, "devices")
    if (not isinstance(devices, list) or len(devices) != 2
            or not all(isinstance(d, str) for d in devices)):
        raise ConfigError(f"devices must name two devices, left and right, e.g. [cpu,cuda]; "
                          f"got {devices!r}")
    pairs(cfg)
    integer(cfg, "n_events", minimum=1)
    integer(cfg, "sets_per_event", minimum=1)
    integer(cfg, "batch_size", minimum=1)
    integer(cfg, "num_threads", minimum=1)
    integer(cfg, "seed")
    check_candidate_options(cfg)
    number(cfg, "atol", minimum=0.0, finite=True)
    checkpoint_file(cfg)
    number(cfg, "time_budget_s", minimum=0.0, strict_minimum=True, optional=True)
    sample_range = cfg.get("sample_range")
    if (sample_range is None or isinstance(sample_range, str) or len(sample_range) != 2
            or not all(isinstance(x, int | float) and not isinstance(x, bool)
                       for x in sample_range)
            or not 0.0 <= sample_range[0] < sample_range[1] <= 1.0):
        raise ConfigError(f"sample_range must be [lo, hi] shares of the stream with "
                          f"0 <= lo < hi <= 1, got {sample_range!r}")
    explainers = OmegaConf.to_container(cfg.explainers) if cfg.get("explainers") else {}
    if not isinstance(explainers, dict) or not all(
            isinstance(v, list) and all(isinstance(o, str) for o in v)
            for v in explainers.values()):
        raise ConfigError("explainers must map a name to a list of explain.py overrides, e.g. "
                          "{search_plus: [experiment=search_plus]}")
    tail = cfg.get("tail")
    if tail is not None and tail.get("event") is not None:
        pair_of(cfg, tail.get("pair"), "tail.pair")
        integer(tail, "event", minimum=0)
        integer(tail, "max_size", minimum=1)
    _check_gpu_extras(cfg)
    for name in devices:  # last: torch loads for a device other than cpu or auto
        device_name(name)


def _check_gpu_extras(cfg: Any) -> None:
    """``benchmark_gpu.py``'s ``parts`` (of ``pairs``, ``tail``, ``searches``),
    ``right_cone``, ``batch_sizes`` (``{pair, size}``: known pairs, sizes >= 1) and
    ``searches`` (each a known pair, an event, ``max_size >= 1``, ``sides`` both or right,
    optional targets ``max_s`` and ``min_speedup`` > 0)."""
    chosen = cfg.get("parts")
    if chosen is not None and (isinstance(chosen, str) or not set(chosen) <= {
            "pairs", "tail", "searches"} or not len(chosen)):
        raise ConfigError(f"parts must be a non-empty list of pairs, tail, searches, got "
                          f"{chosen!r}")
    if cfg.get("right_cone") is not None:
        choice(cfg, "right_cone", ("auto", "rows", "dense"))
    for i, entry in enumerate(cfg.get("batch_sizes") or []):
        if not OmegaConf.is_dict(entry) and not isinstance(entry, dict) or \
                set(entry) != {"pair", "size"}:
            raise ConfigError(f"batch_sizes[{i}] must be {{pair, size}}, got {entry!r}")
        pair_of(cfg, entry.get("pair"), f"batch_sizes[{i}].pair")
        integer(entry, "size", minimum=1)
    searches = cfg.get("searches") or []
    if not OmegaConf.is_list(searches) and not isinstance(searches, list):
        raise ConfigError(f"searches must be a list of {{pair, event, max_size, sides}}, "
                          f"got {searches!r}")
    for i, search in enumerate(searches):
        if not OmegaConf.is_dict(search) and not isinstance(search, dict):
            raise ConfigError(f"searches[{i}] must be {{pair, event, max_size, sides}}, got "
                              f"{search!r}")
        unknown = set(search) - {"pair", "event", "max_size", "sides", "max_s", "min_speedup"}
        if unknown:
            raise ConfigError(f"searches[{i}]: unknown key(s) {', '.join(sorted(unknown))} "
                              "(known: pair, event, max_size, sides, max_s, min_speedup)")
        pair_of(cfg, search.get("pair"), f"searches[{i}].pair")
        integer(search, "event", minimum=0)
        integer(search, "max_size", minimum=1)
        if search.get("sides", "both") not in ("both", "right"):
            raise ConfigError(f"searches[{i}].sides must be both or right, got "
                              f"{search.get('sides')!r}")
        for key in ("max_s", "min_speedup"):
            number(search, key, minimum=0.0, strict_minimum=True, optional=True)


def check_quality_options(cfg: Any) -> None:
    """``benchmark_quality.py``: ``max_size >= 1``, ``n_events >= 1``, the candidates'
    ``m_max`` and ``k`` (the configurations of ``explainers`` are checked when the run
    starts).

    Raises:
        ConfigError: Naming the first bad option.
    """
    integer(cfg, "max_size", minimum=1)
    check_candidate_options(cfg)
    integer(cfg, "n_events", minimum=1)
    checkpoint_file(cfg)
    device(cfg)


__all__ = ["PARTS", "check_explainers_options", "check_far_back_options", "check_gpu_options",
           "check_index_options", "check_memory_options", "check_oracle_options",
           "check_quality_options", "check_tail_options", "far_back_tolerances", "pair_of",
           "pairs"]
