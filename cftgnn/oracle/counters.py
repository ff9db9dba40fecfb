"""The work counters of a replay engine (``ReplayCounters``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ReplayCounters:
    """Work done by a [``ReplayEngine``][cftgnn.oracle.ReplayEngine] (cumulative).

    Attributes:
        evaluations: Removal sets evaluated (each one masked replay plus one prediction).
        events_replayed: History events fed through the model by those replays (kept ones).
        setup_events: Events advanced to move the unperturbed cursor or to reach a base state.
        setup_s: Seconds spent building base states.
        eval_s: Seconds spent in masked replays and predictions.
    """

    evaluations: int = 0
    events_replayed: int = 0
    setup_events: int = 0
    setup_s: float = 0.0
    eval_s: float = 0.0


__all__ = ["ReplayCounters"]
