"""Where the cone replay's bookkeeping goes, step by step: the CPU seconds of each step of the
row table (``cftgnn.replay.tgn.rows.RowTable``), read only when someone asks for them
(``ConeStats.steps``; ``scripts/benchmark_far_back.py parts=[bookkeeping]`` prints them)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from time import process_time
from typing import Concatenate, ParamSpec, Protocol, TypeVar


@dataclass
class RowStepTimes:
    """CPU seconds (``time.process_time``) of each step of ``RowTable``, summed over the
    calls of every table they are given to (``RowTable.step_times``; the cone replay hands
    on ``ConeStats.steps``). A step's seconds include those of the steps it calls: ``prune``
    holds ``drop``, ``merge`` and ``revive``. A table without one reads no clock."""

    split: float = 0.0
    new_pending: float = 0.0
    split_mixed: float = 0.0
    prune: float = 0.0
    merge: float = 0.0
    revive: float = 0.0
    drop: float = 0.0
    compact: float = 0.0
    other_memory: float = 0.0

    def as_dict(self) -> dict[str, float]:
        """The seconds by step name, in the order of a batch."""
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}


class _Timed(Protocol):
    step_times: RowStepTimes | None


_T = TypeVar("_T", bound=_Timed)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def timed(step: Callable[Concatenate[_T, _P], _R]) -> Callable[Concatenate[_T, _P], _R]:
    """``step`` (a method of the row table), adding its CPU seconds to the table's
    ``step_times`` under its name where the table has one (else no clock is read)."""
    name = step.__name__

    @functools.wraps(step)
    def run(self: _T, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        times = self.step_times
        if times is None:
            return step(self, *args, **kwargs)
        began = process_time()
        try:
            return step(self, *args, **kwargs)
        finally:
            setattr(times, name, getattr(times, name) + process_time() - began)

    return run


__all__ = ["RowStepTimes", "timed"]
