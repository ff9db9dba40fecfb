"""Compare runs: ``python scripts/report.py RUN_OR_SWEEP_DIR [...] [--out DIR]``."""

import _ctrl_c  # noqa: F401, I001  (first: Ctrl-C while loading ends in one line)

from cftgnn.cli import friendly_errors
from cftgnn.reporting.report import main

if __name__ == "__main__":
    with friendly_errors():
        main()
