"""Typed, validated declarations of explainer parameters: one frozen dataclass per explainer.

Each explainer declares its parameters once, as a frozen dataclass deriving from
[``Params``][cftgnn.explain.Params] ([``BudgetParams``][cftgnn.explain.BudgetParams] for searches,
which every explainer is). A field is an ``option``: its default, its range or choices and a
one-line description. Validation runs in ``__post_init__`` from the field's type and metadata, so
every parameter is checked the same way and a bad value raises ``ExplainerError`` naming the option:

* ``int`` fields take integers only, by the rule of every option check
  (``cftgnn.options.as_integer``): an integral float (Hydra's ``1e3``) is taken as that
  integer, any other number (``1.5``) is refused, never truncated; ``bool`` is refused;
* ``float`` fields take any real number (not ``bool``), and ``NaN`` fails every range;
* ``bool`` fields take ``True`` / ``False`` only;
* enum fields take a member or its value;
* ``X | None`` fields take ``None`` as well.

Defaults are written once, here. The YAML files of ``conf/explainer/`` list every key with the
same default (a test asserts YAML == declaration for every key and every explainer) rather than
only what differs, because Hydra overrides only keys the config holds (``explainer.x=1`` of a
key not listed needs a ``+``), and the YAML comments are where users read the options.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from omegaconf import OmegaConf

from cftgnn.errors import ExplainerError
from cftgnn.options import as_integer

P = TypeVar("P", bound="Params")


def option(default: Any, doc: str, *, low: float | None = None, high: float | None = None,
           low_open: bool = False, high_open: bool = False) -> Any:
    """A parameter field: its default, a one-line description and its range.

    Args:
        default: The default value.
        doc: What the parameter does.
        low: Smallest value allowed (``None``: no bound).
        high: Largest value allowed (``None``: no bound).
        low_open: ``low`` itself is refused.
        high_open: ``high`` itself is refused.
    """
    return field(default=default, metadata={"doc": doc, **bounds(low, high, low_open,
                                                                  high_open)})


def bounds(low: float | None = None, high: float | None = None, low_open: bool = False,
           high_open: bool = False) -> dict[str, Any]:
    """A range as the metadata ``check_value`` reads (see ``option``)."""
    return {"low": low, "high": high, "low_open": low_open, "high_open": high_open}


def _range_text(meta: Mapping[str, Any]) -> str:
    low, high = meta.get("low"), meta.get("high")
    low_open, high_open = meta.get("low_open", False), meta.get("high_open", False)
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high:g}"
    return ""


def _in_range(value: float, meta: Mapping[str, Any]) -> bool:
    low, high = meta.get("low"), meta.get("high")
    if math.isnan(value):
        return low is None and high is None
    if low is not None and not (value > low if meta.get("low_open") else value >= low):
        return False
    return high is None or (value < high if meta.get("high_open") else value <= high)


def _split_optional(kind: Any) -> tuple[Any, bool]:
    """``X | None`` -> ``(X, True)``; ``X`` -> ``(X, False)``."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(kind)) == 2:
            return args[0], True
    return kind, False


def check_value(name: str, kind: Any, value: Any, meta: Mapping[str, Any]) -> Any:
    """``value`` checked against a field's type and range, as that type.

    Raises:
        ExplainerError: Naming ``name``, the rule and the value.
    """
    kind, optional = _split_optional(kind)
    rng = _range_text(meta)
    if value is None:
        if optional:
            return None
        raise ExplainerError(f"{name} must be set (not null)")
    if kind is bool:
        if not isinstance(value, bool):
            raise ExplainerError(f"{name} must be true or false, got {value!r}")
        return value
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(value)
        except ValueError:
            names = " | ".join(str(m.value) for m in kind)
            raise ExplainerError(f"{name} must be one of {names}, got {value!r}") from None
    if kind is int:
        whole = as_integer(value)  # the one integer rule of every option (cftgnn.options)
        if whole is None:
            raise ExplainerError(f"{name} must be an integer{' ' + rng if rng else ''}"
                                 f"{' or null' if optional else ''}, got {value!r}")
        value = whole
    elif kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ExplainerError(f"{name} must be a number{' ' + rng if rng else ''}"
                                 f"{' or null' if optional else ''}, got {value!r}")
        value = float(value)
    elif kind is str:
        return str(value)
    else:  # pragma: no cover - a declaration error, not a user's
        raise TypeError(f"unsupported parameter type {kind!r} of {name}")
    if not _in_range(value, meta):
        kind_name = "an integer" if kind is int else "a number"
        raise ExplainerError(f"{name} must be {kind_name} {rng}"
                             f"{' or null' if optional else ''}, got {value!r}")
    return value


@dataclass(frozen=True)
class Params:
    """Base of every parameter declaration: checks and converts each field on creation."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            value = check_value(f.name, hints[f.name], getattr(self, f.name), f.metadata)
            object.__setattr__(self, f.name, value)

    @classmethod
    def from_options(cls: type[P], options: Mapping[str, Any]) -> P:
        """The declaration of ``options``; an unknown key is refused by name.

        Raises:
            ExplainerError: On an unknown option or a bad value.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            listed = f"known: {', '.join(sorted(known))}" if known else "it takes none"
            raise ExplainerError(f"unknown option{'s' if len(unknown) > 1 else ''} "
                                 f"{', '.join(unknown)} of {cls.__name__} ({listed})")
        return cls(**dict(options))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every option with its default (enum members as their values)."""
        return {f.name: (f.default.value if isinstance(f.default, enum.Enum) else f.default)
                for f in dataclasses.fields(cls)}

    def as_dict(self) -> dict[str, Any]:
        """The options as plain values."""
        return {f.name: (v.value if isinstance(v := getattr(self, f.name), enum.Enum) else v)
                for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class BudgetParams(Params):
    """The budget every explainer exposes under the same three names (unset: no cap).

    Reaching ``max_iterations`` ends a search as configured; running out of
    ``max_oracle_calls`` or ``max_time_s`` cuts it short (the result's ``cut_short``).
    [``BudgetMeter``][cftgnn.explain.BudgetMeter] enforces all three.

    Attributes:
        max_iterations: Iterations of the search's main loop (CF-TGNN: MCTS iterations, greedy:
            events added, beam: levels, exhaustive: set sizes, NSGA-II: generations after the
            first population, swarm: iterations after the first positions).
        max_oracle_calls: Search-mode backend evaluations the search itself may make (a
            strategy's preparation is counted in the result but not charged).
        max_time_s: Seconds of the search (checked between iterations).
    """

    #: The explainer's own option for its iteration cap (CF-TGNN's ``it_max``, the seed's
    #: name; T-GNNExplainer's ``rollouts``), None when it has none: ``max_iterations``, when
    #: set, replaces it (``iteration_cap``; the report reads ``cap_of``).
    own_cap: ClassVar[str | None] = None

    max_iterations: int | None = option(None, "iterations of the search's main loop", low=0)
    max_oracle_calls: int | None = option(None, "search-mode oracle evaluations of the search",
                                          low=0)
    max_time_s: float | None = option(None, "seconds of the search", low=0)

    @property
    def iteration_cap(self) -> int | None:
        """The search's iteration cap (None: none): ``max_iterations`` when set, else the
        explainer's own cap option (``own_cap``)."""
        return self.cap_of(vars(self))

    @classmethod
    def cap_of(cls, options: Mapping[str, Any]) -> int | None:
        """The iteration cap that ``options`` (an explainer config, unchecked: a finished run's
        ``run.json``) set, by the rule of ``iteration_cap``; None when neither is set."""
        value = options.get("max_iterations")
        if value is None and cls.own_cap is not None:
            value = options.get(cls.own_cap)
        return None if value is None else int(value)


#: The parameter declaration of each explainer of the package whose module loads torch, by
#: the explainer's ``_target_``: declared in a light module of its own, so that
#: ``explainer_params`` finds it without torch. Every other explainer's module is light and
#: its class's ``Params`` is read (tests/faults/test_explainer_options.py checks both for
#: every file of ``conf/explainer/``).
LIGHT_PARAMS = {
    "cftgnn.explain.pgexplainer.PGExplainer":
        "cftgnn.explain.pgexplainer_params.PGExplainerParams",
    "cftgnn.explain.tempme.explainer.TempMEExplainer": "cftgnn.explain.tempme.params.TempMEParams",
    "cftgnn.explain.tgnnexplainer.explainer.TGNNExplainer":
        "cftgnn.explain.tgnnexplainer.params.TGNNExplainerParams",
}

#: Keys of a config node that ``hydra.utils.instantiate`` reads itself, not the explainer.
INSTANTIATE_KEYS = frozenset({"_target_", "_recursive_", "_convert_", "_partial_", "_args_"})


def _imported(path: str) -> Any:
    """The object ``module.name`` names, or None when it does not import (the run reports a
    bad ``_target_``)."""
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None


def _declaration(params: Any) -> type[Params] | None:
    return params if isinstance(params, type) and issubclass(params, Params) else None


def explainer_params(target: str) -> type[Params] | None:
    """The parameter declaration of the explainer class ``target`` (a config's ``_target_``),
    found without loading torch for the package's explainers (``LIGHT_PARAMS``).

    Returns:
        Its ``Params``, or None when ``target`` does not import or names no class with a
        declaration (an explainer of the user's own: its constructor checks its options).
    """
    path = LIGHT_PARAMS.get(target, target)
    found = _imported(path)
    return _declaration(found if path != target else getattr(found, "Params", None))


def strategy_params(target: str) -> type[Params] | None:
    """The option declaration of the selection strategy class ``target`` (a config's
    ``_target_``): the ``Params`` the class declares in its own body (every strategy of
    ``cftgnn.explain.strategies``, a module without torch).

    Returns:
        Its ``Params``, or None when ``target`` does not import or declares none itself (a
        strategy of the user's own that inherits one but takes arguments of its own: its
        constructor checks them).
    """
    found = _imported(target)
    return _declaration(vars(found).get("Params") if isinstance(found, type) else None)


def _check_declared(node: Any, params_of: Any) -> None:
    """``params_of(node._target_).from_options`` of the node's keys (the
    ``INSTANTIATE_KEYS`` left out); nothing when the node or its declaration is missing."""
    if not OmegaConf.is_dict(node) and not isinstance(node, Mapping):
        return
    target = node.get("_target_")
    params = params_of(str(target)) if isinstance(target, str) else None
    if params is None:
        return
    items = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    assert isinstance(items, Mapping)
    params.from_options({str(k): v for k, v in items.items() if k not in INSTANTIATE_KEYS})


def check_explainer_options(node: Any) -> None:
    """Refuse a bad option of an explainer's config node (``cfg.explainer``) by the rule its
    constructor applies: its ``Params.from_options`` of the node's keys (the
    ``INSTANTIATE_KEYS`` left out). For ``explain.py``'s check before the run directory is
    made and before torch loads; a node without ``_target_``, or whose declaration
    ``explainer_params`` cannot find, is left to the constructor.

    Raises:
        ExplainerError: On an unknown option or a bad value, naming it.
    """
    _check_declared(node, explainer_params)


def check_strategy_options(node: Any) -> None:
    """Refuse a bad option of a selection strategy's config node (``cfg.strategy``) by the
    rule its constructor applies (its ``Params``, ``strategy_params``), before torch loads:
    ``+strategy.bogus=1`` is ``unknown option bogus of ClosestStrategyParams (it takes
    none)``, ``strategy=random strategy.seed=-1`` is ``seed must be an integer >= 0, got
    -1``. A node whose class declares no ``Params`` itself is left to the constructor.

    Raises:
        ExplainerError: On an unknown option or a bad value, naming it.
    """
    _check_declared(node, strategy_params)


__all__ = ["INSTANTIATE_KEYS", "LIGHT_PARAMS", "BudgetParams", "Params", "bounds",
           "check_explainer_options", "check_strategy_options", "check_value",
           "explainer_params", "option", "strategy_params"]
