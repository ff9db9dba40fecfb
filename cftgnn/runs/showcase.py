"""The one explained prediction a run shows in words, before its summary table.

``pick_shown`` chooses the record: the smallest counterfactual found (the first in stream
order among equals); when none was found, the closest attempt (the explained event whose
final logit came nearest to the other side, relative to its original logit).
``describe_record`` puts it in words with the stream: the event, the original and the final
logit, and the removed events with their times. ``explain.py`` prints both and draws the
record's picture (``cftgnn.reporting.picture``) next to the records.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from cftgnn.data.stream import EventStream
from cftgnn.explain.result import explained
from cftgnn.oracle.oracle import is_flip

#: Removed events listed one a line; the rest are counted.
MAX_LISTED = 5
_UNITS = (("days", 86_400.0), ("hours", 3_600.0), ("minutes", 60.0), ("seconds", 1.0))


def time_unit(seconds: float) -> tuple[str, float]:
    """A readable unit for a span of ``seconds``: ``(name, seconds per unit)`` (the words
    here and the picture's time axis)."""
    for name, size in _UNITS:
        if abs(seconds) >= 2 * size:
            return name, size
    return _UNITS[-1]


def _span(seconds: float) -> str:
    """``seconds`` in ``time_unit``'s unit, three significant digits (``3.85 minutes``)."""
    name, size = time_unit(seconds)
    return f"{seconds / size:.3g} {name}"


def pick_shown(records: pd.DataFrame) -> pd.Series | None:
    """The record a run shows.

    Args:
        records: The run's records (``status``, ``event_id``, ``size``, ``original_logit``,
            ``final_logit``).

    Returns:
        Among the explained records that flip, one of the smallest size, the earliest event
        among equals; without a flip, the explained record whose ``final_logit /
        original_logit`` is smallest (the closest attempt), the earliest among equals; None
        without an explained record.
    """
    if records.empty or "status" not in records.columns:
        return None
    ok = records[explained(records["status"])].sort_values("event_id", kind="stable")
    if ok.empty:
        return None
    p0 = ok["original_logit"].to_numpy(dtype=np.float64)
    p = ok["final_logit"].to_numpy(dtype=np.float64)
    flips = is_flip(p0, p)
    if flips.any():
        sizes = ok["size"].to_numpy(dtype=np.float64)
        sizes[~flips] = np.inf
        return ok.iloc[int(np.argmin(sizes))]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p0 != 0, p / p0, np.inf)
    return ok.iloc[int(np.argmin(np.nan_to_num(ratio, nan=np.inf)))]


def logit_text(logit: float) -> str:
    """A logit as a reader sees it, in words and in the picture's title: three decimals, and
    where those would show fewer than two significant digits (``|logit| < 0.1``) three
    significant ones, so that a small logit keeps its value and its sign (``-0.000174``, not
    ``-0.000``; ``1.74e-05``); ``n/a`` for NaN (unknown)."""
    x = float(logit)
    if math.isnan(x):
        return "n/a"
    return f"{x:.3f}" if x == 0 or abs(x) >= 0.1 else f"{x:.3g}"


def _time(value: float) -> str:
    """A timestamp: whole seconds with thousands separators, else two decimals."""
    return f"{value:,.0f} s" if float(value).is_integer() else f"{value:,.2f} s"


def _prediction(logit: float) -> str:
    """What a logit says of an event that happened (every explained event did)."""
    if logit > 0:
        return "correct: predicts the link"
    return "incorrect: predicts no link" if logit < 0 else "undecided"


def why_shown(record: pd.Series | Mapping[str, Any]) -> str:
    """Why ``pick_shown`` chose ``record``: it flips, or no record of the run does."""
    if is_flip(float(record["original_logit"]), float(record["final_logit"])):
        return "the smallest counterfactual found"
    return "no counterfactual found; the closest attempt"


def describe_record(record: pd.Series | Mapping[str, Any], stream: EventStream,
                    why: str = "") -> str:
    """The record of one explained event in words, a few lines.

    Args:
        record: A record of the run (e.g. ``pick_shown``'s).
        stream: The run's stream (endpoints and times of the events named).
        why: Said after the event (e.g. ``why_shown``'s words).

    Returns:
        Lines such as ``explained prediction: event 284 (3 → 17 at t=2,841.50 s): ...``,
        the original and the final logit, then the removed events (at most
        ``MAX_LISTED``, the rest counted), each with its endpoints, time and how long
        before the event.
    """
    event = int(record["event_id"])
    t0 = float(stream.t[event])
    p0, p = float(record["original_logit"]), float(record["final_logit"])
    removed = [int(e) for e in record["explanation"]]
    flips = is_flip(p0, p)
    head = (f"explained prediction: event {event} "
            f"({int(stream.src[event])} → {int(stream.dst[event])} at t={_time(t0)})")
    if why:
        head += f": {why}"
    verdict = "flipped" if flips else "not flipped"
    if record.get("target", "logit") == "rank":  # the margins, read as TGB's ranks
        k, before, after = (int(record["target_k"]), float(record["rank_before"]),
                            float(record["rank_after"]))
        inside = "in" if p0 > 0 else "not in"
        moved = f"rank {after:g}" if math.isfinite(after) else "nothing removed"
        result = f"  true destination's rank {before:g} of {int(record['num_negatives']) + 1} "
        result += f"({inside} the top {k}) → {moved} ({verdict})"
    else:
        result = (f"  original logit {logit_text(p0)} ({_prediction(p0)}) → final logit "
                  f"{logit_text(p)} ({verdict})")
    lines = [head, result,
             f"  after removing {len(removed)} of {int(record['num_candidates'])} candidate "
             "events" + (":" if removed else "")]
    for e in removed[:MAX_LISTED]:
        t = float(stream.t[e])
        lines.append(f"    event {e}: {int(stream.src[e])} → {int(stream.dst[e])} at "
                     f"t={_time(t)}, {_span(t0 - t)} before")
    if len(removed) > MAX_LISTED:
        lines.append(f"    ... and {len(removed) - MAX_LISTED} more")
    return "\n".join(lines)


__all__ = ["MAX_LISTED", "describe_record", "logit_text", "pick_shown", "time_unit",
           "why_shown"]
