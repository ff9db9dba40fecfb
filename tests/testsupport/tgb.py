"""Streams marked as TGB's (``meta["tgb"]``, as ``cftgnn.data.tgb`` marks them) and random
TGB negatives for them, for the tests of training and ranking on TGB's split."""

from __future__ import annotations

import numpy as np

from cftgnn.data.stream import EventStream
from cftgnn.data.synthetic import make_synthetic_stream
from cftgnn.data.tgb_negatives import TGBNegatives


def tgb_stream(num_events: int = 400, val_start: int = 283, test_start: int = 341,
               num_nodes: int = 30, feat_dim: int = 2) -> EventStream:
    """A synthetic stream with TGB's split in its meta, as ``cftgnn.data.tgb`` marks one."""
    stream = make_synthetic_stream(num_nodes=num_nodes, num_events=num_events,
                                   feat_dim=feat_dim, seed=3, name="tgbl-toy")
    stream.meta["tgb"] = {"name": "tgbl-toy", "val_start": val_start,
                          "test_start": test_start, "folder": "nowhere"}
    return stream


def tgb_tables(stream: EventStream, seed: int = 0, most: int = 9) -> dict[str, TGBNegatives]:
    """Ragged random negatives (0 to ``most`` per event) of TGB's val and test events; never
    the event's own destination, as TGB's sampler draws them."""
    rng = np.random.default_rng(seed)
    info = stream.meta["tgb"]
    parts = {"val": range(info["val_start"], info["test_start"]),
             "test": range(info["test_start"], stream.num_events)}

    def negatives(e: int) -> np.ndarray:
        others = np.setdiff1d(np.arange(stream.num_nodes), [stream.dst[e]])
        return rng.choice(others, int(rng.integers(0, most + 1)), replace=False)

    return {split: TGBNegatives.from_lists(split, {e: negatives(e) for e in events})
            for split, events in parts.items()}
