"""Imported first by every script: Ctrl-C while the libraries load ends in one line and exit
status 130 instead of a traceback from inside an import. ``cftgnn.cli.main_guard`` and
``cftgnn.cli.friendly_errors`` then hand Ctrl-C back to Python and say how to resume."""

import signal
import sys


def _stop(signum: int, frame: object) -> None:
    print("interrupted (Ctrl-C) while starting; nothing was done", file=sys.stderr)
    raise SystemExit(130)


signal.signal(signal.SIGINT, _stop)
