"""One line instead of a traceback: every script runs under ``friendly_errors`` (the
environment variables checked first, ``environment_problem``; bad input and a full disk in
one ``error:`` line, exit status 2; Ctrl-C in one line, exit status ``INTERRUPTED``), and
the argparse scripts parse with ``ArgumentParser``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from cftgnn.cli.run_dir import discard_empty_run_dir
from cftgnn.errors import user_error

#: Exit status of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130

#: What Ctrl-C says when a script names nothing better.
RESUME_HINT = "nothing complete was lost; rerun the same command to start again"


def fail(message: str) -> NoReturn:
    """Print ``error: <message>`` on stderr; exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _ctrl_c_raises() -> None:
    """Let Ctrl-C raise ``KeyboardInterrupt`` again (the scripts' start-up handler of
    ``scripts/_ctrl_c.py`` only covers loading the libraries)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def interrupted(hint: str) -> NoReturn:
    """One line for Ctrl-C and exit status ``INTERRUPTED`` (no traceback)."""
    print(f"interrupted (Ctrl-C): {hint}", file=sys.stderr)
    raise SystemExit(INTERRUPTED)


def environment_problem() -> str | None:
    """What is wrong with the project's environment variables (``CFTGNN_JIT`` not an on/off
    word), or None; every script asks this first (``friendly_errors``)."""
    from cftgnn.errors import ConfigError
    from cftgnn.options import JIT_ENV, environment_switch

    try:
        environment_switch(JIT_ENV)
    except ConfigError as error:
        return str(error)
    return None


def _refuse(message: str) -> NoReturn:
    """``fail`` of a run refused while it runs: its empty run directory is removed first
    (``discard_empty_run_dir``)."""
    discard_empty_run_dir()
    fail(message)


@contextmanager
def friendly_errors(on_interrupt: str = RESUME_HINT) -> Iterator[None]:
    """Every script runs under this (``main_guard`` too): first the project's environment
    variables are checked (``environment_problem``: ``CFTGNN_JIT=maybe`` is refused by
    every script, in one line); then bad input (``CftgnnError``, also when
    ``instantiate`` wrapped it) ends in one line on stderr and exit status 2 instead of a
    traceback, and so does a full disk (an ``ENOSPC``/``EDQUOT`` error behind the exception,
    ``cftgnn.files.no_space``: the file and its disk), a Hydra run's directory removed when
    it holds nothing but Hydra's own files (``discard_empty_run_dir``); Ctrl-C in one line,
    ``on_interrupt``, and exit status 130."""
    _ctrl_c_raises()
    problem = environment_problem()
    if problem is not None:
        _refuse(problem)
    try:
        yield
    except KeyboardInterrupt:
        interrupted(on_interrupt)
    except Exception as exc:
        error = user_error(exc)
        if error is not None:
            _refuse(str(error))
        from cftgnn.files import disk_full_message, no_space

        full = no_space(exc)
        if full is None:
            raise
        _refuse(disk_full_message(full.filename, full))


class ArgumentParser(argparse.ArgumentParser):
    """The argument parser of the argparse scripts (``report.py``, ``compare_runs.py``, ...):
    a bad argument (a missing one, a wrong type, an unknown flag) ends in one ``error:`` line
    naming it and exit status 2, instead of argparse's usage block; ``--help`` is unchanged.
    """

    def error(self, message: str) -> NoReturn:
        """Print ``error: <message> (see <prog> --help)`` on stderr; exit status 2."""
        fail(f"{message} (see {self.prog} --help)")
