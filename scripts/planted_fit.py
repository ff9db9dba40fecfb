"""How well models learned a planted stream's causes:
``python scripts/planted_fit.py CHECKPOINT [CHECKPOINT ...]``."""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from cftgnn.analysis.planted_fit import main
from cftgnn.cli import friendly_errors

if __name__ == "__main__":
    with friendly_errors():
        main()
