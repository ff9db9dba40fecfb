"""Streams marked as TGB's (``meta["tgb"]``, as ``cftgnn.data.tgb`` marks them) and random
TGB negatives for them, for the tests of training and ranking on TGB's split."""

from __future__ import annotations

from pathlib import Path

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


def write_tgb_wiki(root: Path, num_events: int = 400, num_src: int = 12, num_dst: int = 10,
                   feat_dim: int = 3, most: int = 6, seed: int = 0,
                   count: int | None = None) -> Path:
    """A tiny ``tgbl-wiki`` in TGB's own layout under ``root/tgbl_wiki/``: the edge list
    (``user_id,item_id,timestamp,state_label,features...``, destinations from 0, which TGB
    shifts by ``max(src) + 1``) and the validation and test negatives pickles (TGB's dict from
    ``(src, dst, t)`` in TGB's ids to an array of other destinations, 0 to ``most`` each, or
    ``count`` each when given).

    Returns:
        ``root`` (what ``dataset.data_dir`` takes).
    """
    import pickle

    from cftgnn.data.tgb import load_tgb

    rng = np.random.default_rng(seed)
    folder = root / "tgbl_wiki"
    folder.mkdir(parents=True, exist_ok=True)
    src = rng.integers(0, num_src, num_events)
    dst = (src * 3 + rng.integers(0, 3, num_events)) % num_dst  # predictable partners
    t = np.cumsum(rng.integers(1, 20, num_events))
    feat = rng.normal(size=(num_events, feat_dim)).round(4)
    lines = ["user_id,item_id,timestamp,state_label,comma_separated_list_of_features"]
    lines += [",".join([str(s), str(d), str(int(x)), "0", *map(str, f)])
              for s, d, x, f in zip(src, dst, t, feat, strict=True)]
    (folder / "tgbl-wiki_edgelist_v2.csv").write_text("\n".join(lines) + "\n")
    stream = load_tgb("tgbl-wiki", root, use_cache=False)  # TGB's ids and split
    info = stream.meta["tgb"]
    shift = int(src.max()) + 1
    for split, lo, hi in (("val", info["val_start"], info["test_start"]),
                          ("test", info["test_start"], stream.num_events)):
        table = {}
        for e in range(lo, hi):
            others = np.setdiff1d(np.arange(shift, shift + num_dst), [stream.dst[e]])
            key = (np.int64(stream.src[e]), np.int64(stream.dst[e]), np.int64(stream.t[e]))
            n = count if count is not None else int(rng.integers(0, most + 1))
            table.setdefault(key, rng.choice(others, n, replace=False))
        with open(folder / f"tgbl-wiki_{split}_ns_v2.pkl", "wb") as f:
            pickle.dump(table, f)
    return root
