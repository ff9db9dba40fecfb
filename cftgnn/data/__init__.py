"""Event streams, their loaders and the temporal index (docs/design.md §4, first stage)."""

from cftgnn.data.index import Candidates, TemporalIndex
from cftgnn.data.loaders import load_uci, load_wikipedia
from cftgnn.data.paths import resolve_cache_dir, resolve_data_dir
from cftgnn.data.planted import make_planted_stream
from cftgnn.data.stream import EventCauses, EventStream
from cftgnn.data.synthetic import make_synthetic_stream
from cftgnn.data.user_streams import load_csv, load_jodie_ml

__all__ = [
    "Candidates",
    "EventCauses",
    "EventStream",
    "TemporalIndex",
    "load_csv",
    "load_jodie_ml",
    "load_uci",
    "load_wikipedia",
    "make_planted_stream",
    "make_synthetic_stream",
    "resolve_cache_dir",
    "resolve_data_dir",
]
