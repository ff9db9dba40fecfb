"""Helpers shared by the entry points in ``scripts/``: friendly one-line errors.

Before a Hydra script runs, :func:`main_guard` checks the command line the way Hydra will read
it (:func:`hydra_problem`): an unknown ``group=option``, an override that does not parse
(``n_events=[1,2``) or a key the config does not have (``nevents=4``) ends in one ``error:``
line naming it and the nearest valid key, exit status 2, instead of Hydra's multi-line
message. Ctrl-C in any script ends in one line (exit status 130) instead of a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from cftgnn.errors import user_error
from cftgnn.files import unwritable_reason

#: Exit status of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130
#: Hydra flags after which the command line is not a run (help, config printing, completion):
#: left to Hydra.
_HYDRA_INFO_FLAGS = ("-h", "--help", "--hydra-help", "--info", "-i", "--cfg", "-c",
                     "--shell-completion", "-sc", "--version", "--resolve", "-p", "--package",
                     "--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd",
                     "--experimental-rerun")

#: ``[+|++]group=value[,value...]`` on the command line.
_CHOICE = re.compile(r"^\+{0,2}([A-Za-z_]\w*)=(.*)$")


def search_paths(argv: Sequence[str]) -> list[Path]:
    """The folders of ``hydra.searchpath=[file://...]`` on the command line (a user's own
    config folder, e.g. ``explainer/<name>.yaml`` of an explainer outside the package)."""
    out: list[Path] = []
    for arg in argv:
        key, _, value = arg.lstrip("+").partition("=")
        if key != "hydra.searchpath":
            continue
        for item in value.strip("[]").split(","):
            item = item.strip().strip("'\"")
            if item.startswith("file://"):
                out.append(Path(item[len("file://"):]))
    return out


def unknown_choice(argv: Sequence[str], conf_dir: str | Path) -> str | None:
    """A one-line message for the first ``group=option`` naming a missing config file.

    Only top-level config groups (folders of ``conf_dir`` and of the command line's
    ``hydra.searchpath``) are checked; sweep values (``a,b``) are checked one by one; ``null``
    is always allowed.

    Returns:
        The message, or None when every option exists.
    """
    confs = [Path(conf_dir), *search_paths(argv)]
    for arg in argv:
        m = _CHOICE.match(arg)
        if not m or not any((conf / m.group(1)).is_dir() for conf in confs):
            continue
        group, values = m.group(1), m.group(2)
        if values.startswith(("range(", "choice(", "glob(", "interval(")):
            continue
        options = sorted({p.stem for conf in confs for p in (conf / group).glob("*.yaml")})
        for value in values.split(","):
            if value not in options and value != "null":
                return f"unknown {group} {value!r} (choose from: {', '.join(options)})"
    return None


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _first_line(text: str) -> str:
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
    """`` (did you mean 'x'?)`` for a key the config lacks, by :mod:`difflib` among the keys
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


def hydra_problem(argv: Sequence[str], conf_dir: str | Path, config_name: str) -> str | None:
    """The one-line message of what Hydra would refuse on this command line, or None.

    Each override is parsed as Hydra parses it, then the config is composed with them (a
    sweep's first value standing in for the sweep): a bad override (``n_events=[1,2``), a
    key the config lacks (``nevents=4``, with the nearest valid key) or another composition
    error is returned as one line. Command lines asking Hydra for help or another config
    are left to Hydra.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import ConfigCompositionException, HydraException
    from omegaconf.errors import OmegaConfBaseException

    if any(a.split("=")[0] in _HYDRA_INFO_FLAGS for a in argv):
        return None
    args = [a for a in argv if a not in ("-m", "--multirun")]
    if any(a.startswith("-") for a in args):
        return None  # a flag this check does not know: Hydra decides
    parser = OverridesParser.create()
    single: list[str] = []
    for arg in args:
        try:
            override = parser.parse_override(arg)
        except HydraException as exc:
            reason = [ln for ln in str(exc).splitlines()
                      if ln.strip() and not ln.startswith(("See https", "Error parsing"))]
            return (f"cannot read the option {arg!r}: {reason[0] if reason else 'bad syntax'} "
                    "(write key=value, e.g. n_events=4 or events=[1,2])")
        one = _one_value(override, arg)
        if one is not None:
            single.append(one)
    conf = Path(conf_dir).resolve()
    try:
        with initialize_config_dir(str(conf), version_base="1.3"):
            compose(config_name, overrides=single)
    except ConfigCompositionException as exc:
        found = re.search(r"Could not (?:override|append to|delete from) '([^']+)'", str(exc))
        if found:
            key = found.group(1)
            others = [o for o in single if o.lstrip("+~").split("=")[0].split("@")[0] != key]
            return f"unknown option {key!r}{_nearest_key(key, others, conf, config_name)}"
        return _first_line(str(exc))
    except (HydraException, OmegaConfBaseException) as exc:
        return _first_line(str(exc))
    return None


def unwritable_run_dir(argv: Sequence[str]) -> str | None:
    """A one-line message when ``hydra.run.dir`` / ``hydra.sweep.dir`` (as given on the
    command line, without interpolations) cannot be created: Hydra makes these folders before
    the script's code runs. None when they can be, or were not given."""
    for arg in argv:
        key, _, value = arg.lstrip("+").partition("=")
        if key not in ("hydra.run.dir", "hydra.sweep.dir") or not value or "${" in value:
            continue
        reason = unwritable_reason(value)
        if reason is not None:
            return f"{key} {value!r} cannot be written ({reason})"
    return None


def _config_name(main: Callable[[], None]) -> str | None:
    """The ``config_name`` a ``@hydra.main`` function was decorated with (None if unknown)."""
    try:
        name = inspect.getclosurevars(main).nonlocals.get("config_name")
    except TypeError:
        return None
    return name if isinstance(name, str) else None


def _ctrl_c_raises() -> None:
    """Let Ctrl-C raise :class:`KeyboardInterrupt` again (the scripts' start-up handler of
    ``scripts/_ctrl_c.py`` only covers loading the libraries)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def interrupted(hint: str) -> NoReturn:
    """One line for Ctrl-C and exit status :data:`INTERRUPTED` (no traceback)."""
    print(f"interrupted (Ctrl-C): {hint}", file=sys.stderr)
    raise SystemExit(INTERRUPTED)


#: What Ctrl-C says when a script names nothing better.
RESUME_HINT = "nothing complete was lost; rerun the same command to start again"


def main_guard(main: Callable[[], None], conf_dir: str | Path,
               argv: Sequence[str] | None = None, config_name: str | None = None,
               on_interrupt: str = RESUME_HINT) -> None:
    """Call a Hydra ``main`` unless the command line is one Hydra would refuse: a
    ``group=option`` naming no config file (:func:`unknown_choice`), an override that does
    not parse or names a key the config lacks (:func:`hydra_problem`) — then one line on
    stderr and exit status 2, before Hydra prints its longer message. Ctrl-C ends in one
    line, ``on_interrupt``, and exit status 130.

    Args:
        main: The ``@hydra.main`` function.
        conf_dir: The config folder.
        argv: The command line (default ``sys.argv[1:]``).
        config_name: The primary config (default: the one ``main`` was decorated with).
        on_interrupt: What to tell the user after Ctrl-C (how to resume).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    _ctrl_c_raises()
    try:
        missing = [p for p in search_paths(args) if not p.is_dir()]
        message = (f"hydra.searchpath folder {str(missing[0])!r} does not exist" if missing
                   else unknown_choice(args, conf_dir) or unwritable_run_dir(args))
        name = config_name or _config_name(main)
        if message is None and name is not None:
            message = hydra_problem(args, conf_dir, name)
        if message is not None:
            _fail(message)
        main()
    except KeyboardInterrupt:
        interrupted(on_interrupt)


@contextmanager
def friendly_errors(on_interrupt: str = RESUME_HINT) -> Iterator[None]:
    """Inside a script's ``main``: bad input (:class:`~cftgnn.errors.CftgnnError`, also when
    ``instantiate`` wrapped it) ends in one line on stderr and exit status 2 instead of a
    traceback; Ctrl-C in one line, ``on_interrupt``, and exit status 130."""
    _ctrl_c_raises()
    try:
        yield
    except KeyboardInterrupt:
        interrupted(on_interrupt)
    except Exception as exc:
        error = user_error(exc)
        if error is None:
            raise
        _fail(str(error))


class ArgumentParser(argparse.ArgumentParser):
    """The argument parser of the argparse scripts (``report.py``, ``compare_runs.py``, ...):
    a bad argument (a missing one, a wrong type, an unknown flag) ends in one ``error:`` line
    naming it and exit status 2, instead of argparse's usage block; ``--help`` is unchanged.
    """

    def error(self, message: str) -> NoReturn:
        """Print ``error: <message> (see <prog> --help)`` on stderr; exit status 2."""
        _fail(f"{message} (see {self.prog} --help)")


__all__ = ["INTERRUPTED", "RESUME_HINT", "ArgumentParser", "friendly_errors", "hydra_problem",
           "interrupted", "search_paths",
           "main_guard", "unknown_choice", "unwritable_run_dir"]
