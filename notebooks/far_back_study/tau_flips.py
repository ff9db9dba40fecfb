"""Tolerance pruning's effect on flip decisions, near the decision boundary too (stop 38).

Every set of up to K of an event's 64 closest-ranked candidates is evaluated by the exact
cone replay and by the replay with tolerance pruning at each τ, in one process. A flip
decision compares a set's logit with the original one's sign; moving the decoder's output
bias by ``b`` subtracts ``b`` from every logit (in exact arithmetic), so the decision at
threshold ``b`` differs between the two replays exactly for the sets whose two logits lie on
either side of ``b``. The same exact replay with the sets in other passes (ranking order)
gives the float noise floor: two exact replays differ in their last bits too. The script
reports the largest logit difference and, over every threshold ``b`` (so also where the
boundary sits among the densest logits), the most sets whose decision would change, and that
count at the median logit.

    CFTGNN_DATA_DIR=../shared/data python notebooks/far_back_study/tau_flips.py \
        uci 54454 3 1e-5,1e-4

Arguments: dataset, event id, K, comma-separated τ values. One torch thread.
"""

import itertools
import time

import numpy as np
from engine import arguments, positive, tgn_engine, tolerances

from cftgnn.cli import friendly_errors
from cftgnn.explain import ClosestStrategy
from cftgnn.oracle.engine import EventReplay, ReplayEngine

CHUNK = 4096


def logits_of(engine: ReplayEngine, event: int, k: int, tau: float, time_order: bool = True
              ) -> tuple[list[frozenset[int]], np.ndarray, float]:
    """Logits of every set of up to ``k`` candidates (sizes in order, time order within a
    size unless ``time_order`` is false, in chunks), with tolerance ``tau`` (0: exact), and
    the seconds they took."""
    engine.replay.options.prune_tolerance = tau
    replay = EventReplay(engine, event, None, 64)
    oracle = replay.oracle("exact")
    strategy = ClosestStrategy()
    strategy.prepare(oracle)
    events = [int(e) for e in strategy.rank(oracle.removable)]
    events = sorted(events) if time_order else events
    sets = [frozenset(c) for size in range(1, k + 1)
            for c in itertools.combinations(events, size)]
    start = time.perf_counter()
    out = np.concatenate([replay.exact(sets[lo:lo + CHUNK])
                          for lo in range(0, len(sets), CHUNK)])
    return sets, out, time.perf_counter() - start


def most_changed(a: np.ndarray, b: np.ndarray) -> int:
    """The most sets whose two logits lie on either side of one threshold (any threshold)."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    # sweep: a set counts for thresholds in (lo, hi); events sorted, closings before openings
    points = np.concatenate([lo, hi])
    step = np.concatenate([np.ones(len(lo)), -np.ones(len(hi))])
    order = np.lexsort((step, points))
    return int(np.cumsum(step[order]).max(initial=0))


def main() -> None:
    dataset, event, k, taus = arguments("tau_flips.py DATASET EVENT K TAU[,TAU...]", str, int,
                                        positive, tolerances)
    engine = tgn_engine(dataset)
    sets, exact, seconds = logits_of(engine, event, k, 0.0)
    median = float(np.median(exact))
    print(f"{dataset} {event} K={k}: {len(sets)} sets, exact {seconds:.1f} s, logits "
          f"{exact.min():.3f}..{exact.max():.3f} (median {median:.3f})", flush=True)
    # the float noise floor: the same exact replay with the sets in other passes
    sets_r, again, secs = logits_of(engine, event, k, 0.0, time_order=False)
    where = {s: i for i, s in enumerate(sets_r)}
    again = again[[where[s] for s in sets]]
    runs = [("exact, ranking order", sets, again, secs)]
    for tau in taus:
        runs.append((f"τ={tau:g}", *logits_of(engine, event, k, tau)))
    for name, sets_t, got, secs in runs:
        assert sets_t == sets
        diff = np.abs(got - exact)
        at_median = int(((exact > median) != (got > median)).sum())
        print(f"  {name}: {secs:.1f} s ({seconds / secs:.1f}x), max |Δ logit| "
              f"{diff.max():.1e}, p99 {np.percentile(diff, 99):.1e}; decisions changed at "
              f"the median logit: {at_median}, at the worst threshold: "
              f"{most_changed(exact, got)} of {len(sets)}", flush=True)
    engine.replay.options.prune_tolerance = 0.0


if __name__ == "__main__":
    with friendly_errors():  # an event outside the stream: one error: line
        main()
