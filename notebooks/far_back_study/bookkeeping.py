"""The cone replay's bookkeeping on the tail events, two versions of the code interleaved
(2026-11-26).

    git worktree add --detach /tmp/old ab6c33f     # the other version, outside the tree
    CFTGNN_DATA_DIR=../shared/data python notebooks/far_back_study/bookkeeping.py /tmp/old .

Each (event, tree) runs in a subprocess of its own with ``PYTHONPATH`` = the tree and one
torch thread: the tail benchmark's ``search_event`` (the exhaustive search, closest ranking,
exact oracle, a fresh plan) on one event, timed in wall and CPU seconds (``process_time``:
what a loaded machine disturbs least), with the cone replay and the memory updates
(``TGN.message_update_shared`` inside it) timed from outside the same way for both trees, the
CPU seconds of each ``RowTable`` step, and a SHA-256 of every exact logit of the search
(bitwise). The two trees alternate which goes first from one event to the next. Prints one
JSON line per run, then a table: CPU seconds, the bookkeeping share (the cone replay's CPU
time but its memory updates, of the event's), and whether the logits are the same.

Arguments: the two trees, then optionally ``dataset:event:K`` specs (default: UCI 56484,
54454 at K = 3, Wikipedia 141227 and UCI 57464 at K = 2).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

DEFAULT = ["uci:56484:3", "uci:54454:3", "wikipedia:141227:2", "uci:57464:2"]
STEPS = ("split", "new_pending", "split_mixed", "prune", "merge", "revive", "drop", "compact",
         "other_memory")


def worker(tree: str, dataset: str, event: int, k: int) -> None:
    """One search with the code of ``tree``; prints one JSON line."""
    import torch

    torch.set_num_threads(1)
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    import cftgnn
    import cftgnn.config  # noqa: F401  (the ${cftgnn_root:} resolver)
    import cftgnn.replay.tgn as pkg
    from cftgnn.benchmarks.tail import search_event
    from cftgnn.models.tgn import TGN
    from cftgnn.oracle.engine import ReplayEngine
    from cftgnn.replay.tgn.rows import RowTable
    from cftgnn.training.resolve import resolve_model

    assert Path(cftgnn.__file__).resolve().is_relative_to(Path(tree).resolve()), cftgnn.__file__
    cpu: dict[str, float] = {}
    inside = [False]

    def timed(f, key, only_inside=False):
        def g(*a, **kw):
            if only_inside and not inside[0]:
                return f(*a, **kw)
            start = time.process_time()
            try:
                return f(*a, **kw)
            finally:
                cpu[key] = cpu.get(key, 0.0) + time.process_time() - start
        return g

    cone = pkg.cone_replay

    def cone_replay(*a, **kw):
        inside[0] = True
        try:
            return cone(*a, **kw)
        finally:
            inside[0] = False

    pkg.cone_replay = timed(cone_replay, "cone_replay")
    TGN.message_update_shared = timed(TGN.message_update_shared, "memory_updates", True)
    for name in STEPS:
        setattr(RowTable, name, timed(getattr(RowTable, name), name))
    with initialize_config_dir(config_dir=str(Path(tree).resolve() / "conf"), version_base="1.3"):
        cfg = compose("benchmark_tail", overrides=[f"dataset={dataset}", "model=tgn"])
    stream = instantiate(cfg.dataset)
    model, _ = resolve_model(cfg.model, stream, cfg.checkpoint, cfg.paths.checkpoint_dir,
                             torch.device("cpu"), 0)
    engine = ReplayEngine(model, stream, memory_budget_gb=cfg.memory_budget_gb)
    c0, w0 = time.process_time(), time.perf_counter()
    row = search_event(engine, event, k, None, 64, logits_digest=True)
    cpu_s, wall_s = time.process_time() - c0, time.perf_counter() - w0
    book = cpu.get("cone_replay", 0.0) - cpu.get("memory_updates", 0.0)
    print(json.dumps({"tree": tree, "dataset": dataset, "event": event, "K": k, "wall_s": wall_s,
                      "cpu_s": cpu_s, "bookkeeping_cpu_s": book, "bookkeeping_share": book / cpu_s,
                      "cpu_by_step": cpu, "rss_mib": row.get("rss_mib"),
                      "logits_sha256": row.get("logits_sha256")}), flush=True)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--worker"]:
        worker(argv[1], argv[2], int(argv[3]), int(argv[4]))
        return
    old, new, *specs = argv
    runs = []
    for i, spec in enumerate(specs or DEFAULT):
        dataset, event, k = spec.split(":")
        for tree in ((old, new) if i % 2 == 0 else (new, old)):
            env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
            done = subprocess.run([sys.executable, __file__, "--worker", tree, dataset, event, k],
                                  env=env, capture_output=True, text=True, check=True)
            line = done.stdout.strip().splitlines()[-1]
            print(line, flush=True)
            runs.append(json.loads(line))
    print("\n| event | K | old CPU s | new CPU s | speedup | bookkeeping old → new | same logits |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for a in runs[::2]:
        b = next(r for r in runs if r["event"] == a["event"] and r["tree"] != a["tree"])
        o, n = (a, b) if a["tree"] == old else (b, a)
        print(f"| {o['dataset']} {o['event']} | {o['K']} | {o['cpu_s']:.2f} | {n['cpu_s']:.2f} | "
              f"{o['cpu_s'] / n['cpu_s']:.2f}× | {o['bookkeeping_share']:.1%} → "
              f"{n['bookkeeping_share']:.1%} | {o['logits_sha256'] == n['logits_sha256']} |")


if __name__ == "__main__":
    main(sys.argv[1:])
