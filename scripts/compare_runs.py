"""Compare two runs event by event: ``python scripts/compare_runs.py RUN_A RUN_B [--strict]``."""

import _ctrl_c  # noqa: F401, I001  (first: Ctrl-C while loading ends in one line)

from cftgnn.cli import friendly_errors
from cftgnn.evaluation.compare import main

if __name__ == "__main__":
    with friendly_errors():
        main()
