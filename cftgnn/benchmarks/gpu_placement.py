"""``device=auto``'s rule measured by the CPU-vs-GPU benchmark (``cftgnn.benchmarks.gpu``).

Every event's timed exact calls, a single set at a time and one batch, on both sides, with
the event's number of history batches, are the timings ``cftgnn.oracle.placement.fit_costs``
fits the rule's four constants to. The benchmark reports the fit (what a GPU session writes
into ``MEASURED_COSTS``), the call size from which the fitted rule takes the GPU, and how
the rule would have done on the very calls it timed: on how many it picks the faster side,
and its seconds against the left side's (the CPU's) alone, which ``device=auto`` must never
exceed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from cftgnn.oracle.placement import (
    MEASURED_COSTS,
    CallTiming,
    DeviceCosts,
    Place,
    fit_costs,
    place_call,
)


def event_calls(left: Mapping[str, Any], right: Mapping[str, Any],
                batch_size: int) -> list[CallTiming]:
    """One event's timed exact calls as ``CallTiming``s (left: the CPU, right: the GPU)."""
    batches = int(left.get("history_batches", 0))
    if batches < 1 or "exact_s" not in left or "exact_s" not in right:
        return []
    calls = [CallTiming(1, batches, a, b)
             for a, b in zip(left["exact_s"], right["exact_s"], strict=True)]
    calls.append(CallTiming(batch_size, batches, left["batch_s"], right["batch_s"]))
    return calls


def _score(calls: Sequence[CallTiming], costs: DeviceCosts | None) -> dict[str, Any]:
    """The rule of ``costs`` on ``calls``: calls it sends to the GPU, calls where its side
    was the faster one (ties: either), and its seconds against the CPU's."""
    picks = [place_call(c.sets, costs) for c in calls]
    seconds = [c.gpu_s if p is Place.GPU else c.cpu_s for c, p in zip(calls, picks, strict=True)]
    right = sum((p is Place.GPU) == (c.gpu_s < c.cpu_s) or c.gpu_s == c.cpu_s
                for c, p in zip(calls, picks, strict=True))
    cpu = sum(c.cpu_s for c in calls)
    return {"on_gpu": sum(p is Place.GPU for p in picks), "faster_side": right,
            "calls": len(calls), "auto_s": sum(seconds), "cpu_s": cpu,
            "auto_over_cpu": sum(seconds) / cpu if cpu > 0 else float("nan")}


def placement_figures(rows: Sequence[Mapping[str, Any]], sides: Sequence[str],
                      batch_size: int) -> dict[str, Any]:
    """The rule's fit and scores over a pair's events (``rows``, status ``ok``)."""
    left, right = sides[0], sides[-1]
    calls = [c for r in rows for c in event_calls(r["oracle"][left], r["oracle"][right],
                                                   batch_size)]
    out: dict[str, Any] = {"calls": len(calls),
                           "measured_costs": _score(calls, MEASURED_COSTS)}
    try:
        fitted = fit_costs(calls)
    except ValueError as exc:
        out["error"] = str(exc)
        return out
    out["fitted"] = dataclasses.asdict(fitted)
    out["crossover_sets"] = fitted.crossover_sets
    out["fitted_rule"] = _score(calls, fitted)
    return out


def placement_line(pair: str, part: Mapping[str, Any], left: str) -> str | None:
    """The pair's row of the GPU table for the rule, or None without figures."""
    fig = part.get("placement")
    if not fig:
        return None
    if "error" in fig:
        return f"| {pair} | device=auto's rule: no fit ({fig['error']}) | | | | |"
    rule = fig["fitted_rule"]
    cross = fig["crossover_sets"]
    where = "never" if cross == float("inf") else f"from {cross:,.0f} sets a call on"
    ratio = rule["auto_over_cpu"]
    return (f"| {pair} | device=auto, the rule fitted to these calls: the GPU {where}; "
            f"the faster side on {rule['faster_side']}/{rule['calls']} calls; seconds "
            f"against {left} alone | | | {ratio:.2f} | ≤ 1: "
            f"{'ok' if ratio <= 1 else 'SLOWER'} |")


__all__ = ["event_calls", "placement_figures", "placement_line"]
