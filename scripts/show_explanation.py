"""Draw one explained event: ``python scripts/show_explanation.py RUN_DIR EVENT_ID [--out PNG]``."""

from cftgnn.cli import friendly_errors
from cftgnn.reporting.picture import main

if __name__ == "__main__":
    with friendly_errors():
        main()
