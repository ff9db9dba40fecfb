"""Our orderings of the explainers beside the published ones:
``python scripts/orderings.py RUN_OR_SWEEP_DIR [...] [--protocol P ...] [--boot N] [--out FILE]``
(docs/results/reproduction.md)."""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from cftgnn.cli import friendly_errors
from cftgnn.reporting.orderings import main

if __name__ == "__main__":
    with friendly_errors():
        main()
