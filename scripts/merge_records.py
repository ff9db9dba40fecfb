"""Merge shard runs: ``python scripts/merge_records.py outputs/sweeps/<time> [--out DIR]``."""

import sys

from cftgnn.errors import CftgnnError
from cftgnn.evaluation.merge import main

if __name__ == "__main__":
    try:
        main()
    except CftgnnError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
