"""Checks of top-level config values, each failing in one ``ConfigError`` line that names
the option, what it must be and what it got.

Hydra passes command-line values through as YAML reads them (``n_events=abc`` is the string
``"abc"``, ``n_events=1.5`` a float), so every count is checked to be an integer, never
truncated, before any work starts (``as_integer``: ``1e3`` is ``1000``, ``1.5`` an error).
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from cftgnn.errors import ConfigError


def option_value(cfg: Any, key: str) -> Any:
    """``cfg.<key>`` (a dotted key; a config or a plain dict), as a plain value."""
    value = OmegaConf.select(cfg, key) if OmegaConf.is_config(cfg) else cfg.get(key)
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def as_integer(value: Any) -> int | None:
    """``value`` as an ``int`` when it names one, else None: the one integer rule of every
    option check (top-level options here, explainer parameters in
    ``cftgnn.explain.params.check_value``, constraints).

    Taken: an ``int`` (or NumPy integer) that is not a ``bool``, and an integral float, which
    is how Hydra reads ``1e3`` or ``1000.0`` (``1000``; converting it loses nothing). Refused:
    any other float (``1.5`` is never truncated), ``nan`` and ``inf``, ``True`` / ``False``,
    strings (``"3"``) and everything else.
    """
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return int(value)
    return None


def is_integer(value: Any) -> bool:
    """Whether ``value`` names an integer by ``as_integer``'s rule."""
    return as_integer(value) is not None


def integer(cfg: Any, key: str, minimum: int | None = None, optional: bool = False) -> int | None:
    """``cfg.<key>`` as an integer ``>= minimum`` (null allowed when ``optional``).

    Raises:
        ConfigError: For a non-integer (``1.5``, ``abc``, ``true``; ``as_integer``) or a
            value below ``minimum``.
    """
    value = option_value(cfg, key)
    if value is None and optional:
        return None
    bound = "" if minimum is None else f" >= {minimum}"
    whole = as_integer(value)
    if whole is None or (minimum is not None and whole < minimum):
        null = "null or " if optional else ""
        raise ConfigError(f"{key} must be {null}an integer{bound}, got {value!r}")
    return whole


def number(cfg: Any, key: str, minimum: float | None = None, maximum: float | None = None,
           optional: bool = False, strict_minimum: bool = False,
           finite: bool = False) -> float | None:
    """``cfg.<key>`` as a number within bounds (null allowed when ``optional``; infinities
    refused when ``finite``).

    Raises:
        ConfigError: For a value that is not a number or out of bounds.
    """
    value = option_value(cfg, key)
    if value is None and optional:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value == value
    if ok and minimum is not None:
        ok = value > minimum if strict_minimum else value >= minimum
    if ok and maximum is not None:
        ok = value <= maximum
    if ok and finite:
        ok = math.isfinite(value)
    if not ok:
        bounds = []
        if minimum is not None:
            bounds.append(f"{'>' if strict_minimum else '>='} {minimum}")
        if maximum is not None:
            bounds.append(f"<= {maximum}")
        null = "null or " if optional else ""
        within = f" {' and '.join(bounds)}" if bounds else ""
        kind = "a finite number" if finite else "a number"
        raise ConfigError(f"{key} must be {null}{kind}{within}, got {value!r}")
    return float(value)


def boolean(cfg: Any, key: str) -> bool:
    """``cfg.<key>`` as ``true`` / ``false``.

    Raises:
        ConfigError: For anything else.
    """
    value = option_value(cfg, key)
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    return value


#: The environment variable that turns ``cftgnn.jit``'s compiled loops off (``0``); read
#: there, and checked by ``cftgnn.cli.friendly_errors`` before every script starts.
JIT_ENV = "CFTGNN_JIT"
_SWITCH_OFF = ("0", "false", "no", "off")
_SWITCH_ON = ("1", "true", "yes", "on")


def environment_switch(name: str) -> bool:
    """An on/off environment variable: on when unset or empty, or one of ``1``, ``true``,
    ``yes``, ``on``; off for ``0``, ``false``, ``no``, ``off`` (any case, spaces ignored).

    Raises:
        ConfigError: For any other value (a typo must not leave the setting as it was).
    """
    value = os.environ.get(name)
    word = (value or "").strip().lower()
    if word in _SWITCH_OFF:
        return False
    if word in ("", *_SWITCH_ON):
        return True
    raise ConfigError(f"environment variable {name} must be one of "
                      f"{', '.join(_SWITCH_ON + _SWITCH_OFF)}, got {value!r}")


def choice(cfg: Any, key: str, options: Collection[str]) -> str:
    """``cfg.<key>``, one of ``options``.

    Raises:
        ConfigError: Naming the options.
    """
    value = option_value(cfg, key)
    if not isinstance(value, str) or value not in options:
        raise ConfigError(f"{key} must be one of {', '.join(options)}, got {value!r}")
    return value


def text(cfg: Any, key: str, optional: bool = False) -> str | None:
    """``cfg.<key>`` as a string (null allowed when ``optional``).

    Raises:
        ConfigError: For a list, a mapping or (unless ``optional``) null.
    """
    value = option_value(cfg, key)
    if value is None and optional:
        return None
    if isinstance(value, list | dict) or value is None:
        raise ConfigError(f"{key} must be {'null or ' if optional else ''}a text, got {value!r}")
    return str(value)


def integer_list(cfg: Any, key: str, optional: bool = True,
                 minimum: int | None = None) -> list[int] | None:
    """``cfg.<key>`` as a list of integers, each ``>= minimum`` (null allowed when
    ``optional``).

    Raises:
        ConfigError: Naming the first entry that is not an integer or is below ``minimum``.
    """
    value = option_value(cfg, key)
    if value is None and optional:
        return None
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{key} must be a list of integers such as [1,2], got {value!r}")
    out: list[int] = []
    for item in value:
        whole = as_integer(item)
        if whole is None:
            raise ConfigError(f"{key} must be a list of integers, got {item!r} in {list(value)}")
        if minimum is not None and whole < minimum:
            raise ConfigError(f"{key} must be a list of integers >= {minimum}, got {item!r} in "
                              f"{list(value)}")
        out.append(whole)
    return out


#: Device names every machine has, taken without loading torch (``device``).
PLAIN_DEVICES = ("cpu", "auto")


__all__ = ["PLAIN_DEVICES", "as_integer", "boolean", "choice", "integer",
           "integer_list", "is_integer", "number", "option_value", "text"]
