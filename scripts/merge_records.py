"""Merge shard runs: ``python scripts/merge_records.py outputs/sweeps/<time> [--out DIR]``."""

from cftgnn.cli import friendly_errors
from cftgnn.evaluation.merge import main

if __name__ == "__main__":
    with friendly_errors():
        main()
