"""Compare two runs event by event: ``python scripts/compare_runs.py RUN_A RUN_B [--strict]``."""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from cftgnn.analysis.compare import main
from cftgnn.cli import friendly_errors

if __name__ == "__main__":
    with friendly_errors():
        main()
