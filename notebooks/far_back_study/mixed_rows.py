"""Mixed rows of the cone replay, side by side in one process on one event (stop 38).

The replay as it was before mixed rows were split (``_split_mixed`` disabled) with the sets
in ranking order, the fixed replay in ranking order, and the fixed replay in time order (as
``search_by_size`` orders them now): seconds, rows updated, and every logit compared with the
fixed replay's; then how many flip decisions the old replay got wrong.

    CFTGNN_DATA_DIR=../shared/data python notebooks/far_back_study/mixed_rows.py uci 54454 3

Arguments: dataset, event id, K (every set of up to K of the event's 64 closest-ranked
candidates, in chunks of 4096 through ``EventReplay.exact``). One torch thread.
"""

import itertools
import time

import numpy as np
from engine import arguments, positive, tgn_engine

from cftgnn.cli import friendly_errors
from cftgnn.explain import ClosestStrategy
from cftgnn.oracle.engine import EventReplay
from cftgnn.replay.tgn.cone import ConeStats
from cftgnn.replay.tgn.rows import RowTable

CHUNK = 4096


def all_sets(replay: EventReplay, k: int, time_order: bool) -> list[tuple[int, ...]]:
    """Every set of up to ``k`` candidates, by size, in ranking or time order."""
    oracle = replay.oracle("exact")
    strategy = ClosestStrategy()
    strategy.prepare(oracle)
    ranked = [int(e) for e in strategy.rank(oracle.removable)]
    events = sorted(ranked) if time_order else ranked
    return [c for size in range(1, k + 1) for c in itertools.combinations(events, size)]


def main() -> None:
    dataset, event, k = arguments("mixed_rows.py DATASET EVENT K", str, int, positive)
    engine = tgn_engine(dataset)
    fixed = RowTable.split_mixed
    runs = [("before the fix, ranking order", False, False),
            ("fixed, ranking order", True, False), ("fixed, time order", True, True)]
    logits: dict[str, dict[frozenset[int], float]] = {}
    for name, split, time_order in runs:
        RowTable.split_mixed = fixed if split else (lambda *args, **kwargs: 0)  # type: ignore
        stats = ConeStats()
        engine.replay.options.stats = stats
        replay = EventReplay(engine, event, None, 64)
        sets = all_sets(replay, k, time_order)
        start = time.perf_counter()
        out: dict[frozenset[int], float] = {}
        for lo in range(0, len(sets), CHUNK):
            chunk = [frozenset(c) for c in sets[lo:lo + CHUNK]]
            out.update(zip(chunk, replay.exact(chunk).tolist(), strict=True))
        seconds = time.perf_counter() - start
        logits[name] = out
        print(f"{dataset} {event} K={k} {name}: {seconds:.1f} s, rows updated "
              f"{stats.row_updates}, rows made {stats.rows_made}, largest cone replay "
              f"{stats.peak_bytes / 2**20:.0f} MiB", flush=True)
    RowTable.split_mixed = fixed  # type: ignore[method-assign]
    ref = logits["fixed, ranking order"]
    keys = list(ref)
    want = np.array([ref[s] for s in keys])
    for name, out in logits.items():
        diff = np.abs(np.array([out[s] for s in keys]) - want)
        print(f"{name}: max |Δ logit| vs fixed {diff.max():.2e}, sets off by > 1e-5: "
              f"{int((diff > 1e-5).sum())}")
    p0 = EventReplay(engine, event, None, 64).oracle("exact").original_logit
    old = np.array([logits["before the fix, ranking order"][s] for s in keys])
    flips = (np.sign(old) != np.sign(p0)) != (np.sign(want) != np.sign(p0))
    print(f"flip decisions that differ before/after the fix: {int(flips.sum())}; "
          f"smallest |logit| {float(np.abs(want).min()):.3f}")


if __name__ == "__main__":
    with friendly_errors():  # an event outside the stream: one error: line
        main()
