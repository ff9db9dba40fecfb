"""Regional counterfactual rules, checked on held-out events with the exact oracle:
``python scripts/rules.py RUN [RUN ...] [--out DIR] [--max-depth 3] [--min-coverage 0.05]
[--top 5] [--seed 0]``."""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from cftgnn.analysis.rules import main
from cftgnn.cli import friendly_errors

if __name__ == "__main__":
    with friendly_errors():
        main()
