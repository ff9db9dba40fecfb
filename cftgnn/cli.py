"""Helpers shared by the Hydra entry points in ``scripts/``: friendly one-line errors."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from cftgnn.errors import user_error

#: ``[+|++]group=value[,value...]`` on the command line.
_CHOICE = re.compile(r"^\+{0,2}([A-Za-z_]\w*)=(.*)$")


def unknown_choice(argv: Sequence[str], conf_dir: str | Path) -> str | None:
    """A one-line message for the first ``group=option`` naming a missing config file.

    Only top-level config groups (folders of ``conf_dir``) are checked; sweep values
    (``a,b``) are checked one by one; ``null`` is always allowed.

    Returns:
        The message, or None when every option exists.
    """
    conf = Path(conf_dir)
    for arg in argv:
        m = _CHOICE.match(arg)
        if not m or not (conf / m.group(1)).is_dir():
            continue
        group, values = m.group(1), m.group(2)
        if values.startswith(("range(", "choice(", "glob(", "interval(")):
            continue
        options = sorted(p.stem for p in (conf / group).glob("*.yaml"))
        for value in values.split(","):
            if value not in options and value != "null":
                return f"unknown {group} {value!r} (choose from: {', '.join(options)})"
    return None


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main_guard(main: Callable[[], None], conf_dir: str | Path,
               argv: Sequence[str] | None = None) -> None:
    """Call a Hydra ``main`` unless a ``group=option`` names no config file (then one line on
    stderr and exit status 2, before Hydra prints its longer message)."""
    message = unknown_choice(sys.argv[1:] if argv is None else argv, conf_dir)
    if message is not None:
        _fail(message)
    main()


@contextmanager
def friendly_errors() -> Iterator[None]:
    """Inside a Hydra ``main``: bad input (:class:`~cftgnn.errors.CftgnnError`, also when
    ``instantiate`` wrapped it) ends in one line on stderr and exit status 2 instead of a
    traceback."""
    try:
        yield
    except Exception as exc:
        error = user_error(exc)
        if error is None:
            raise
        _fail(str(error))


__all__ = ["friendly_errors", "main_guard", "unknown_choice"]
