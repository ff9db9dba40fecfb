"""The command line as typed, before any config is composed: flags that are not Hydra's or
``-m`` after the overrides (``flag_problem``), the folders of ``hydra.searchpath``
(``search_paths``) and a ``group=option`` naming no config file (``unknown_choice``).

Nothing here reads a config file's contents or imports Hydra.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

#: Hydra flags after which the command line is not a run (help, config printing, completion):
#: left to Hydra.
HYDRA_INFO_FLAGS = ("-h", "--help", "--hydra-help", "--info", "-i", "--cfg", "-c",
                    "--shell-completion", "-sc", "--version", "--resolve", "-p", "--package",
                    "--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd",
                    "--experimental-rerun")

#: Hydra's flags that say how the overrides run (a sweep or one run); they go before them.
_MODE_FLAGS = ("-m", "--multirun", "-r", "--run")

#: ``[+|++]group=value[,value...]`` on the command line.
_CHOICE = re.compile(r"^\+{0,2}([A-Za-z_]\w*)=(.*)$")


def flag_problem(argv: Sequence[str], script: str) -> str | None:
    """A one-line message for a command line Hydra's argument parser would refuse with its
    usage block: a flag that is not Hydra's (``--n_events 3``: options are ``key=value``),
    or ``-m`` (``--multirun``) written after an override with more overrides after it
    (``n_events=2 -m sweep=shards``: ``-m`` goes first). None when Hydra takes the command
    line, or when it asks Hydra for help or another config (left to Hydra).

    Args:
        argv: The command line.
        script: The script's file name (``explain.py``), for the corrected command line.
    """
    if any(a.split("=")[0] in HYDRA_INFO_FLAGS for a in argv):
        return None
    overrides = [a for a in argv if not a.startswith("-")]
    for i, arg in enumerate(argv):
        if arg in _MODE_FLAGS:
            before = [a for a in argv[:i] if not a.startswith("-")]
            after = [a for a in argv[i + 1:] if not a.startswith("-")]
            if before and after:
                return (f"{arg} goes first, before the overrides (options are key=value): "
                        f"python scripts/{script} {shlex.join([arg, *overrides])}")
        elif arg.startswith("-"):
            key, eq, value = arg.lstrip("-").partition("=")
            if key and not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-") \
                    and "=" not in argv[i + 1]:
                value = argv[i + 1]
            given = arg if eq or not value else f"{arg} {value}"
            write = f"write {key}={value or '...'} instead of {given!r}" if key \
                else f"{given!r} is not one"
            return (f"options are key=value, not flags: {write} (-m, for a sweep, goes first, "
                    "before the overrides)")
    return None


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
    found = find_unknown_choice(argv, conf_dir)
    return found[0] if found is not None else None


def find_unknown_choice(argv: Sequence[str], conf_dir: str | Path) -> tuple[str, bool] | None:
    """``unknown_choice``'s message, and whether the value is one of several of its option
    (``a,b``: a sweep's, whose job ``main_guard`` names), or None."""
    confs = [Path(conf_dir), *search_paths(argv)]
    for arg in argv:
        m = _CHOICE.match(arg)
        if not m or not any((conf / m.group(1)).is_dir() for conf in confs):
            continue
        group, values = m.group(1), m.group(2)
        if values.startswith(("range(", "choice(", "glob(", "interval(")):
            continue
        options = sorted({p.stem for conf in confs for p in (conf / group).glob("*.yaml")})
        listed = values.split(",")
        for value in listed:
            if value not in options and value != "null":
                return (f"unknown {group} {value!r} (choose from: {', '.join(options)})",
                        len(listed) > 1)
    return None
