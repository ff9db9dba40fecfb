"""Explanation runs: the explain pipeline, sampling events, resumable records and run folders.

The names below load on first use (``cftgnn.lazy``): ``cftgnn.runs.options``
checks ``explain.py``'s options before torch loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cftgnn.lazy import lazy_attribute

if TYPE_CHECKING:
    from cftgnn.runs.records import RecordStore, RunDirectoryError, read_records
    from cftgnn.runs.sampling import SamplingError, plan_events, sample_events
    from cftgnn.scoring.groups import PredictionGroup
    from cftgnn.scoring.protocols import CurveSet

_EXPORTS = {
    "cftgnn.runs.records": ("RecordStore", "RunDirectoryError", "read_records"),
    "cftgnn.runs.sampling": ("SamplingError", "plan_events", "sample_events"),
    "cftgnn.scoring.groups": ("PredictionGroup",),
    "cftgnn.scoring.protocols": ("CurveSet",),
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _EXPORTS, name)


__all__ = [
    "CurveSet",
    "PredictionGroup",
    "RecordStore",
    "RunDirectoryError",
    "SamplingError",
    "plan_events",
    "read_records",
    "sample_events",
]
