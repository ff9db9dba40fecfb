"""The config of a command line composed as Hydra will compose it, or the one line saying
why Hydra would refuse it: an override that does not parse (``n_events=[1,2``), a key the
config lacks, with the nearest valid key (``nevents=4``), a plain option that is also a
group's name (``compose_command_line``, ``compose_overrides``).

Hydra is imported inside the functions, when a command line is checked.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cftgnn.cli.command_line import HYDRA_INFO_FLAGS, search_paths


def first_line(text: str) -> str:
    """The first line of ``text`` that is not blank, stripped (all of it when none is)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), text.strip())


def _one_value(override: Any, text: str) -> str | None:
    """``text`` with a sweep (``a,b``, ``range(1,3)``) replaced by its first value, so the
    keys of a ``-m`` command can be checked by composing one of its jobs; None when the
    sweep has no listable first value (``glob``, ``interval``)."""
    if not override.is_sweep_override():
        return text
    try:
        first = next(iter(override.sweep_string_iterator()))
    except Exception:  # noqa: BLE001  (a sweep of another kind: not checked)
        return None
    return f"{override.get_key_element()}={first}"


def _nearest_key(key: str, overrides: Sequence[str], conf_dir: Path,
                 config_name: str) -> str:
    """`` (did you mean 'x'?)`` for a key the config lacks, by ``difflib`` among the keys
    of the deepest node of ``key`` that exists; empty when nothing is close."""
    from hydra import compose, initialize_config_dir
    from omegaconf import DictConfig

    try:
        with initialize_config_dir(str(conf_dir), version_base="1.3"):
            cfg: Any = compose(config_name, overrides=list(overrides),
                               return_hydra_config=key.startswith("hydra."))
    except Exception:  # noqa: BLE001  (the other overrides fail too: compare with defaults)
        try:
            with initialize_config_dir(str(conf_dir), version_base="1.3"):
                cfg = compose(config_name)
        except Exception:  # noqa: BLE001
            return ""
    parts = key.split(".")
    node, prefix = cfg, ""
    for part in parts[:-1]:
        if not isinstance(node, DictConfig) or part not in node:
            break
        node, prefix = node[part], f"{prefix}{part}."
    if not isinstance(node, DictConfig):
        return ""
    rest = key[len(prefix):]
    names = [str(k) for k in node]
    close, tail = [], ""
    if "." not in rest:
        close = difflib.get_close_matches(rest, names, n=1, cutoff=0.5)
    else:  # a typo in a group's name: keep the key below it
        head, tail = rest.split(".", 1)
        close = difflib.get_close_matches(head, names, n=1, cutoff=0.5)
        child = node[close[0]] if close else None
        tail = f".{tail}" if isinstance(child, DictConfig) and tail.split(".")[0] in child \
            else ""
    if not close:
        return ""
    near = f"{prefix}{close[0]}{tail}"
    return f" (did you mean {near!r}?)"


def compose_command_line(argv: Sequence[str], conf_dir: str | Path,
                         config_name: str) -> tuple[str | None, Any]:
    """Compose the config of this command line as Hydra will (a sweep's first value standing
    in for the sweep), or say in one line why Hydra would refuse it.

    Each override is parsed as Hydra parses it, then the config is composed with them (with
    its ``hydra`` node): a bad override (``n_events=[1,2``), a key the config lacks
    (``nevents=4``, with the nearest valid key) or another composition error is returned as
    one line. Command lines asking Hydra for help or another config are left to Hydra.

    Returns:
        ``(message, None)`` when Hydra would refuse the command line; ``(None, config)``
        when it composes; ``(None, None)`` when it is left to Hydra.
    """
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if any(a.split("=")[0] in HYDRA_INFO_FLAGS for a in argv):
        return None, None
    args = [a for a in argv if a not in ("-m", "--multirun")]
    if any(a.startswith("-") for a in args):
        return None, None  # a flag this check does not know: Hydra decides
    conf = Path(conf_dir).resolve()
    with initialize_config_dir(str(conf), version_base="1.3"):  # glob(...) lists a group's files
        parser = OverridesParser.create(config_loader=GlobalHydra.instance().config_loader())
    single: list[str] = []
    for arg in args:
        try:
            override = parser.parse_override(arg)
        except HydraException as exc:
            reason = [ln for ln in str(exc).splitlines()
                      if ln.strip() and not ln.startswith(("See https", "Error parsing"))]
            return (f"cannot read the option {arg!r}: {reason[0] if reason else 'bad syntax'} "
                    "(write key=value, e.g. n_events=4 or events=[1,2])"), None
        key = override.key_or_group
        if (override.is_add() and not any(c in key for c in "./@")
                and not any(p.joinpath(key).is_dir() for p in (conf, *search_paths(argv)))):
            others = [o for o in args if o != arg]
            return (f"unknown option {key!r}{_nearest_key(key, others, conf, config_name)}: "
                    f"'+{key}=' adds a key that nothing reads"), None
        override.config_loader = parser.config_loader  # parse_override leaves it out
        one = _one_value(override, arg)
        if one is not None:
            single.append(one)
    return compose_overrides(single, conf, config_name)


def compose_overrides(overrides: Sequence[str], conf: Path,
                      config_name: str) -> tuple[str | None, Any]:
    """Compose ``config_name`` with plain overrides (no sweep) and its ``hydra`` node:
    ``(None, config)``, or ``(message, None)`` saying in one line why Hydra would refuse
    them (a key the config lacks: with the nearest valid key)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException, HydraException
    from omegaconf.errors import OmegaConfBaseException

    single = list(overrides)
    try:
        with initialize_config_dir(str(conf), version_base="1.3"):
            cfg = compose(config_name, overrides=single, return_hydra_config=True)
    except ConfigCompositionException as exc:
        found = re.search(r"Could not (?:override|append to|delete from) '([^']+)'", str(exc))
        if found:
            key = found.group(1)
            others = [o for o in single if o.lstrip("+~").split("=")[0].split("@")[0] != key]
            return (_fixed_key(key, single, conf, config_name)
                    or f"unknown option {key!r}{_nearest_key(key, others, conf, config_name)}"
                    ), None
        return first_line(str(exc)), None
    except (HydraException, OmegaConfBaseException) as exc:
        return first_line(str(exc)), None
    return None, cfg


def _fixed_key(key: str, overrides: Sequence[str], conf_dir: Path,
               config_name: str) -> str | None:
    """The message for ``key=value`` where ``key`` is a plain top-level option of the config
    that is also the name of a config group (``explainer`` of ``train_explainer``): Hydra
    reads the override as a group choice and refuses it, so the option cannot be changed."""
    from hydra import compose, initialize_config_dir

    if "." in key or not (conf_dir / key).is_dir():
        return None
    try:
        with initialize_config_dir(str(conf_dir), version_base="1.3"):
            default = compose(config_name).get(key)
    except Exception:  # noqa: BLE001  (the nearest-key message says it instead)
        return None
    if default is None or not isinstance(default, str | int | float):
        return None
    given = next((o.split("=", 1)[1] for o in overrides
                  if o.lstrip("+~").split("=")[0] == key), "?")
    script = f"{config_name}.py"
    if given == str(default):
        return f"{script} takes {key}={default} only, its default: leave {key}= out"
    return f"{script} takes {key}={default} only (got {key}={given})"


def hydra_problem(argv: Sequence[str], conf_dir: str | Path, config_name: str) -> str | None:
    """The one-line message of what Hydra would refuse on this command line, or None
    (``compose_command_line`` without the config)."""
    return compose_command_line(argv, conf_dir, config_name)[0]
