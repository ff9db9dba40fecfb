"""``mode=auto``: search with the exact oracle where it costs about what the approximate one does.

The approximate oracle exists to be cheap; where an exact call costs at most ``threshold``
(default 1.5) times an approximate one, the search should use the exact oracle and never be
misled by the approximation (on UCI · TGN the two cost about the same: the
oracle table of docs/benchmarks.md).
The ratio is measured on the explained stream with the model at hand: single-set calls of both
backends on a few events (random removal sets of one to ``|C|/4`` candidates, as the oracle
benchmark draws them), their medians compared.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cftgnn.errors import ConfigError
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.oracle.oracle import OracleMode

#: Exact mode is chosen when an exact call costs at most this many approximate calls.
DEFAULT_THRESHOLD = 1.5


@dataclass(frozen=True)
class ModeChoice:
    """The measured cost ratio and the search mode it picks.

    Attributes:
        mode: ``exact`` if ``ratio <= threshold``, else ``approximate``.
        ratio: Median exact single-call time / median approximate single-call time.
        threshold: The ratio up to which exact is chosen.
        calls: Single calls timed per mode.
    """

    mode: OracleMode
    ratio: float
    threshold: float
    calls: int


def pick_mode(exact_s: Sequence[float], approximate_s: Sequence[float],
              threshold: float = DEFAULT_THRESHOLD) -> ModeChoice:
    """Compare the median call times of the two backends.

    Args:
        exact_s: Seconds of single exact calls.
        approximate_s: Seconds of single approximate calls.
        threshold: Exact is chosen when ``median(exact) <= threshold · median(approximate)``.

    Raises:
        ConfigError: Without timings or with ``threshold <= 0``.
    """
    if not threshold > 0:
        raise ConfigError(f"auto mode threshold must be > 0, got {threshold}")
    if len(exact_s) == 0 or len(approximate_s) == 0:
        raise ConfigError("auto mode needs timings of both oracles (no event with candidates)")
    ratio = float(np.median(exact_s) / max(float(np.median(approximate_s)), 1e-12))
    mode = OracleMode.EXACT if ratio <= threshold else OracleMode.APPROXIMATE
    return ModeChoice(mode, ratio, float(threshold), min(len(exact_s), len(approximate_s)))


def measure_mode(engine: ReplayEngine, event_ids: Sequence[int], k: int | None, m_max: int,
                 threshold: float = DEFAULT_THRESHOLD, sets_per_event: int = 5,
                 max_events: int = 3, seed: int = 0) -> ModeChoice:
    """Time both backends on the first events with candidates and pick the mode.

    Args:
        engine: The run's replay engine.
        event_ids: Events of the run, in stream order (the first ``max_events`` with
            candidates are used).
        k: Hop radius.
        m_max: Candidate cap.
        threshold: See ``pick_mode``.
        sets_per_event: Random removal sets timed per event and mode.
        max_events: Events timed.
        seed: Seed of the removal sets.
    """
    rng = np.random.default_rng(seed)
    exact: list[float] = []
    approx: list[float] = []
    used = 0
    for event_id in event_ids:
        if used >= max_events:
            break
        replay = EventReplay(engine, int(event_id), k, m_max)
        cand = replay.candidates.ids
        if len(cand) == 0:
            continue
        used += 1
        for _ in range(sets_per_event):
            size = int(rng.integers(1, max(2, len(cand) // 4 + 1)))
            s = frozenset(rng.choice(cand, size=size, replace=False).tolist())
            for fn, out in ((replay.exact, exact), (replay.approximate, approx)):
                start = time.perf_counter()
                fn([s])
                out.append(time.perf_counter() - start)
    return pick_mode(exact, approx, threshold)


__all__ = ["DEFAULT_THRESHOLD", "ModeChoice", "measure_mode", "pick_mode"]
