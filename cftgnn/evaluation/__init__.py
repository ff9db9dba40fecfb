"""Explanation runs: sampling events, resumable records, metrics, the explain pipeline."""

from cftgnn.evaluation.records import RecordStore, RunDirectoryError, read_records
from cftgnn.evaluation.sampling import PredictionGroup, SamplingError, plan_events, sample_events

__all__ = [
    "PredictionGroup",
    "RecordStore",
    "RunDirectoryError",
    "SamplingError",
    "plan_events",
    "read_records",
    "sample_events",
]
