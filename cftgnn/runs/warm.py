"""``python -m cftgnn.runs.warm``: compile the cone replay's numba loops now, ahead of
the first exact run.

numba compiles the loops of ``cftgnn.jit`` at their first call and keeps them in its cache on
disk (``__pycache__`` next to the modules, or ``$NUMBA_CACHE_DIR``), so only the first exact
run after an install or an update pays their compilation (``explain.py`` says so in one
``note: compiling the replay's loops …`` line, ``cftgnn.jit.COLD_NOTICE``). This command pays
it where it is cheap: it explains two events of a 300-event synthetic stream exhaustively on
the exact oracle with fresh TGN models of one and two layers (the path of an exact run,
which calls the loops with the same types whatever the stream) and runs a compaction's two
loops on a few rows, then says how long that took
and where the cache is. Nothing is written but numba's cache.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from cftgnn import jit
from cftgnn.cli import ArgumentParser
from cftgnn.data.synthetic import make_synthetic_stream
from cftgnn.explain.base import explain_event
from cftgnn.explain.exhaustive import ExhaustiveExplainer
from cftgnn.models.tgn import TGN
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.oracle import OracleMode
from cftgnn.replay.tgn.occupancy import occupancy
from cftgnn.replay.tgn.rows_kernels import move_rows, referenced


def warm() -> tuple[bool, float]:
    """Call every loop an exact run calls once, compiling (or loading) it.

    Returns:
        Whether numba's cache was cold (``cftgnn.jit.cache_is_cold``), and the seconds it
        took. ``(False, 0.0)`` without numba (or with ``CFTGNN_JIT=0``): nothing to compile.
    """
    if not jit.ENABLED:
        return False, 0.0
    start = time.perf_counter()
    said: list[str] = []
    jit.warm_up(notice=said.append)
    stream = make_synthetic_stream(30, 300, seed=1, feat_dim=1)
    for layers in (1, 2):
        torch.manual_seed(0)
        model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8,
                    embedding_dim=16, num_layers=layers, num_neighbors=5, batch_size=20)
        engine = ReplayEngine(model, stream)
        for event in (290, 299):
            explain_event(engine, ExhaustiveExplainer(max_size=2), event, k=layers, m_max=16,
                          mode=OracleMode.EXACT)
    # a compaction's loops, which only replays of thousands of rows reach
    rowmap = np.full((4, 3), -1, dtype=np.int32, order="F")  # as RowStore keeps it
    rowmap[1, 2] = 0
    referenced(rowmap, occupancy(rowmap), np.array([2], dtype=np.int64), 1)
    move_rows(torch.zeros(3, 4), np.array([0, 2], dtype=np.int64))
    return bool(said), time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``python -m cftgnn.runs.warm``."""
    ArgumentParser(description=(__doc__ or "").splitlines()[0]).parse_args(argv)
    if not jit.ENABLED:
        print(f"nothing to compile: numba is not installed here (or {jit.ENV}=0)")
        return
    cold, seconds = warm()
    if cold:
        print(f"compiled the replay's numba loops in {seconds:.1f} s (cached from now on)")
    else:
        print(f"the replay's numba loops were compiled already (loaded in {seconds:.1f} s)")


if __name__ == "__main__":
    from cftgnn.cli import friendly_errors

    with friendly_errors():
        main()
