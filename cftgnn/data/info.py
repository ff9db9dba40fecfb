"""``scripts/dataset_info.py``: print what a dataset config loads."""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig

from cftgnn.data.stream import EventStream
from cftgnn.data.tgb_negatives import tgb_split_points
from cftgnn.errors import ConfigError


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
    tgb = tgb_split_points(stream)
    if tgb is not None:
        v, t = tgb
        rows.append(("TGB split", f"train [0, {v}), val [{v}, {t}), test [{t}, "
                                  f"{stream.num_events}) by time"))
    if "sha256" in stream.meta:
        rows.append(("sha256", str(stream.meta["sha256"])))
    if "from_cache" in stream.meta:
        rows.append(("read from", str(stream.meta["from_cache"])))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _tgb_negatives_file(cfg: DictConfig) -> str | None:
    """``cfg.tgb_negatives`` (val or test), checked before the stream loads: the dataset must
    be a TGB one and the file must be there."""
    split = cfg.get("tgb_negatives")
    if split is None:
        return None
    from cftgnn.data.tgb import find_tgb_folder, tgb_negatives_path

    if not str(cfg.dataset.get("_target_", "")).endswith("load_tgb"):
        raise ConfigError("tgb_negatives needs dataset=tgb (TGB's negatives belong to a TGB "
                          "stream)")
    folder = find_tgb_folder(cfg.dataset.name, cfg.dataset.get("data_dir"))
    tgb_negatives_path(cfg.dataset.name, folder, str(split))
    return str(split)


def run(cfg: DictConfig) -> EventStream:
    """Load ``cfg.dataset`` and print its summary (and, with ``tgb_negatives``, the count of
    TGB's negatives of that split)."""
    split = _tgb_negatives_file(cfg)
    stream: EventStream = instantiate(cfg.dataset)
    print(format_summary(stream))
    if split is not None:
        from cftgnn.data.tgb import load_tgb_negatives

        neg = load_tgb_negatives(stream, split)
        counts = neg.counts()
        print(f"{'negatives':<11}  {split}: {neg.num_events:,} events from "
              f"{int(neg.event_ids[0]) if neg.num_events else '-'}, "
              f"{int(counts.min()) if counts.size else 0}-{int(counts.max()) if counts.size else 0}"
              f" each ({neg.source})")
    return stream
