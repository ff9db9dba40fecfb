"""``scripts/dataset_info.py``: print what a dataset config loads."""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig

from cftgnn.data.stream import EventStream


def format_summary(stream: EventStream) -> str:
    """A small aligned table of the stream's counts, span, feature dimension and source."""
    span = stream.time_span
    rows = [
        ("dataset", stream.name),
        ("events", f"{stream.num_events:,}"),
        ("nodes", f"{stream.num_nodes:,}"),
        ("time span", f"{span:,.0f} s ({span / 86400:.1f} days)"),
        ("feature dim", str(stream.feat_dim)),
        ("data file", str(stream.meta.get("source", "(generated)"))),
    ]
    if stream.causes is not None:
        caused = int((stream.causes.counts() > 0).sum())
        rows.append(("causes", f"{caused:,} events have planted causes "
                               f"({stream.causes.parents.size:,} cause links)"))
    if "sha256" in stream.meta:
        rows.append(("sha256", str(stream.meta["sha256"])))
    if "from_cache" in stream.meta:
        rows.append(("read from", str(stream.meta["from_cache"])))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def run(cfg: DictConfig) -> EventStream:
    """Load ``cfg.dataset`` and print its summary."""
    stream: EventStream = instantiate(cfg.dataset)
    print(format_summary(stream))
    return stream
