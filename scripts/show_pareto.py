"""One event's counterfactuals: ``python scripts/show_pareto.py RUN_DIR EVENT_ID [--out PNG]``."""

import _ctrl_c  # noqa: F401, I001  (first: Ctrl-C while loading ends in one line)

from cftgnn.cli import friendly_errors
from cftgnn.reporting.pareto import main

if __name__ == "__main__":
    with friendly_errors():
        main()
