"""Merge shard runs: ``python scripts/merge_records.py outputs/sweeps/<time> [--out DIR]``."""

import _ctrl_c  # noqa: F401, I001  (first: Ctrl-C while loading ends in one line)

from cftgnn.cli import friendly_errors
from cftgnn.evaluation.merge import main

if __name__ == "__main__":
    with friendly_errors():
        main()
