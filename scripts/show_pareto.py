"""One event's counterfactuals: ``python scripts/show_pareto.py RUN_DIR EVENT_ID [--out PNG]``."""

from cftgnn.cli import friendly_errors
from cftgnn.reporting.pareto import main

if __name__ == "__main__":
    with friendly_errors():
        main()
