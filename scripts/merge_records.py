"""Merge shard runs: ``python scripts/merge_records.py outputs/sweeps/<time> [--out DIR]``."""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from cftgnn.cli import friendly_errors
from cftgnn.runs.merge import main

if __name__ == "__main__":
    with friendly_errors():
        main()
