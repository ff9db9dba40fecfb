"""How long a TGB edge list takes to load, cold and from its processed copy.

``python -m cftgnn.benchmarks.tgb_load /tmp/tgb`` writes a synthetic edge list of tgbl-wiki's
size in TGB's layout (``/tmp/tgb/tgbl_wiki/tgbl-wiki_edgelist_v2.csv``, unless one is there),
then loads it with ``load_tgb`` in fresh processes: once with an empty processed cache (parse
and write the copy), then ``--repeats`` times from the copy, printing the wall time and the peak
memory of each (docs/datasets.md, "The Temporal Graph Benchmark"). ``--pytgb`` then times
py-tgb's own ``LinkPropPredDataset`` on a copy of the file the same way.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

#: tgbl-wiki's size: events, users, pages, features.
WIKI_SIZE = (157_474, 8_227, 1_000, 172)

_CHILD = """
import json, resource, sys, time
from cftgnn.data import load_tgb
t0 = time.perf_counter()
s = load_tgb("tgbl-wiki", data_dir=sys.argv[1], cache_dir=sys.argv[2])
wall = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"cached": "from_cache" in s.meta, "wall_s": wall, "peak_rss_gib": rss,
                  "events": s.num_events, "features": s.feat_dim}))
"""

_PYTGB_CHILD = """
import json, os, resource, sys, time
t0 = time.perf_counter()
from tgb.linkproppred.dataset import LinkPropPredDataset
from tgb.utils.info import PROJ_DIR
t1 = time.perf_counter()
d = LinkPropPredDataset("tgbl-wiki", root=os.path.relpath(sys.argv[1], PROJ_DIR), download=False)
wall = time.perf_counter() - t1
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"cached": sys.argv[2] == "1", "wall_s": wall, "peak_rss_gib": rss,
                  "import_s": t1 - t0, "events": len(d.full_data["sources"]),
                  "features": d.edge_feat.shape[1]}))
"""


def write_wiki_like(root: Path, events: int, users: int, items: int, features: int,
                    seed: int = 0) -> Path:
    """A sorted synthetic edge list in TGB's jodie layout (tgbl-wiki's file), features standard
    normal with 6 decimals as in JODIE's file; returns its path."""
    path = root / "tgbl_wiki" / "tgbl-wiki_edgelist_v2.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    head = pd.DataFrame({
        "user_id": rng.integers(0, users, events), "item_id": rng.integers(0, items, events),
        "timestamp": np.sort(rng.integers(0, 31 * 86_400, events)).astype(float),
        "state_label": (rng.random(events) < 0.001).astype(int)})
    feat = pd.DataFrame(rng.normal(size=(events, features)).round(6),
                        columns=[f"f{j}" for j in range(features)])
    pd.concat([head, feat], axis=1).to_csv(path, index=False, float_format="%.6f")
    return path


def time_loads(root: Path, cache: Path, repeats: int) -> list[dict[str, float]]:
    """One cold load (the cache emptied first) and ``repeats`` loads from the copy, each in a
    fresh process."""
    shutil.rmtree(cache, ignore_errors=True)
    rows = []
    for _ in range(1 + repeats):
        done = subprocess.run([sys.executable, "-c", _CHILD, str(root), str(cache)],
                              capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


def time_pytgb_loads(root: Path, repeats: int) -> list[dict[str, float]]:
    """py-tgb's ``LinkPropPredDataset`` on a copy of ``root/tgbl_wiki`` (it writes its
    ``ml_*.pkl`` copies there), offline (a ``root`` relative to its package folder): one cold
    load, then ``repeats`` from its copies, each in a fresh process."""
    copy = root / "pytgb"
    shutil.rmtree(copy, ignore_errors=True)
    (copy / "tgbl_wiki").mkdir(parents=True)
    shutil.copy(root / "tgbl_wiki" / "tgbl-wiki_edgelist_v2.csv", copy / "tgbl_wiki")
    rows = []
    for k in range(1 + repeats):
        done = subprocess.run([sys.executable, "-c", _PYTGB_CHILD, str(copy), str(int(k > 0))],
                              capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="folder for the synthetic tgbl_wiki/")
    parser.add_argument("--events", type=int, default=WIKI_SIZE[0])
    parser.add_argument("--features", type=int, default=WIKI_SIZE[3])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pytgb", action="store_true",
                        help="also time py-tgb's own loader, alternating with ours")
    args = parser.parse_args(argv)
    path = args.root / "tgbl_wiki" / "tgbl-wiki_edgelist_v2.csv"
    if not path.is_file():
        write_wiki_like(args.root, args.events, WIKI_SIZE[1], WIKI_SIZE[2], args.features)
    print(f"{path}: {path.stat().st_size / 1e6:.0f} MB")
    rows = time_loads(args.root, args.root / "cache", args.repeats)
    theirs = time_pytgb_loads(args.root, args.repeats) if args.pytgb else []
    for who, table in (("cftgnn", rows), ("py-tgb", theirs)):
        for row in table:
            what = "from the processed copy" if row["cached"] else "cold"
            extra = f", import {row['import_s']:.1f} s" if "import_s" in row else ""
            print(f"{who:<7} {what:<24} {row['wall_s']:6.2f} s  peak RSS "
                  f"{row['peak_rss_gib']:.2f} GiB  ({int(row['events']):,} events, "
                  f"F = {int(row['features'])}{extra})")
    return rows + theirs


if __name__ == "__main__":
    main()
