"""Explanation runs: sampling events, resumable records, metrics, the explain pipeline.

The names below load on first use (``cftgnn.lazy``): ``cftgnn.evaluation.options``
checks ``explain.py``'s options before torch loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cftgnn.lazy import lazy_attribute

if TYPE_CHECKING:
    from cftgnn.evaluation.options import CurveSet, PredictionGroup
    from cftgnn.evaluation.records import RecordStore, RunDirectoryError, read_records
    from cftgnn.evaluation.sampling import SamplingError, plan_events, sample_events

_EXPORTS = {
    "cftgnn.evaluation.options": ("CurveSet", "PredictionGroup"),
    "cftgnn.evaluation.records": ("RecordStore", "RunDirectoryError", "read_records"),
    "cftgnn.evaluation.sampling": ("SamplingError", "plan_events", "sample_events"),
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
