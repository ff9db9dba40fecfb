"""Add curve protocols to finished runs without explaining again:
``python scripts/rescore.py RUN_OR_SWEEP_DIR [...] --protocol P [P ...]``."""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from cftgnn.analysis.rescore import main
from cftgnn.cli import friendly_errors

if __name__ == "__main__":
    with friendly_errors():
        main()
