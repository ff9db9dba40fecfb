"""Compare two runs event by event: ``python scripts/compare_runs.py RUN_A RUN_B [--strict]``."""

from cftgnn.cli import friendly_errors
from cftgnn.evaluation.compare import main

if __name__ == "__main__":
    with friendly_errors():
        main()
