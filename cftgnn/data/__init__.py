"""Event streams, their loaders and the temporal index (docs/design.md §4, first stage).

The names load on first use (``cftgnn.lazy``), so that the light parts (``cftgnn.data.index``,
``cftgnn.data.stream``) import without pandas, which the loaders need: the option checks that
run before any work (``cftgnn.runs.options``) reach ``cftgnn.data.index`` through the
oracle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cftgnn.lazy import lazy_attribute

if TYPE_CHECKING:  # loaded on first use (cftgnn.lazy)
    from cftgnn.data.index import Candidates, TemporalIndex
    from cftgnn.data.loaders import load_uci, load_wikipedia
    from cftgnn.data.paths import resolve_cache_dir, resolve_data_dir
    from cftgnn.data.planted import make_planted_stream
    from cftgnn.data.stream import EventCauses, EventStream
    from cftgnn.data.synthetic import make_synthetic_stream
    from cftgnn.data.tgb import load_tgb, load_tgb_negatives
    from cftgnn.data.tgb_negatives import TGBNegatives
    from cftgnn.data.user_streams import load_csv, load_jodie_ml

_EXPORTS = {
    "cftgnn.data.index": ("Candidates", "TemporalIndex"),
    "cftgnn.data.loaders": ("load_uci", "load_wikipedia"),
    "cftgnn.data.paths": ("resolve_cache_dir", "resolve_data_dir"),
    "cftgnn.data.planted": ("make_planted_stream",),
    "cftgnn.data.stream": ("EventCauses", "EventStream"),
    "cftgnn.data.synthetic": ("make_synthetic_stream",),
    "cftgnn.data.tgb": ("load_tgb", "load_tgb_negatives"),
    "cftgnn.data.tgb_negatives": ("TGBNegatives",),
    "cftgnn.data.user_streams": ("load_csv", "load_jodie_ml"),
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _EXPORTS, name)


__all__ = [
    "Candidates",
    "EventCauses",
    "EventStream",
    "TGBNegatives",
    "TemporalIndex",
    "load_csv",
    "load_jodie_ml",
    "load_tgb",
    "load_tgb_negatives",
    "load_uci",
    "load_wikipedia",
    "make_planted_stream",
    "make_synthetic_stream",
    "resolve_cache_dir",
    "resolve_data_dir",
]
