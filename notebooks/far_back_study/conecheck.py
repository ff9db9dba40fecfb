"""Cross-check: the real cone replay's row_updates for the singles (and pairs) of an event,
prune_perturbations on/off, against this study's per-set 'work' counts (which have no
row sharing between sets)."""
import json, os, sys, time
os.environ.setdefault("CFTGNN_DATA_DIR", "../shared/data")  # run from the repository root
import numpy as np, torch
torch.set_num_threads(1)
from cftgnn.data import load_uci, load_wikipedia
from cftgnn.oracle import ReplayEngine
from cftgnn.oracle.engine import EventReplay
from cftgnn.replay.tgn.cone import ConeStats

ds, ev = sys.argv[1], int(sys.argv[2])
stream = load_uci() if ds == "uci" else load_wikipedia()
engine = ReplayEngine.from_checkpoint(f"checkpoints/tgn_{ds}.pt", stream)
R = json.load(open(f"notebooks/far_back_study/out/{ds}_{ev}/results.json"))
out = {}
for prune in (True, False):
    engine.replay.options.prune_perturbations = prune
    replay = EventReplay(engine, ev, None, 64)
    cand = replay.candidates.ids.tolist()
    for kind, sets in (("single", [frozenset([c]) for c in cand]),
                       ("pair", [frozenset(r["S"]) for r in R["exact"] if r["kind"] == "pair"])):
        stats = ConeStats(); engine.replay.options.stats = stats
        t = time.perf_counter(); lg = replay.exact(sets); dt = time.perf_counter() - t
        mine = {tuple(r["S"]): r for r in R["exact"] if r["kind"] == kind}
        err = max(abs(lg[i] - mine[tuple(sorted(s))]["logit"]) for i, s in enumerate(sets))
        out[f"{kind}_prune{prune}"] = dict(sets=len(sets), seconds=dt, row_updates=stats.row_updates,
            rows_pruned=stats.rows_pruned, settled=stats.settled_sets,
            study_work_need=sum(mine[tuple(sorted(s))]["work_need"] for s in sets),
            max_logit_diff_vs_study=float(err))
        print(kind, prune, out[f"{kind}_prune{prune}"], flush=True)
        engine.replay.options.stats = None
json.dump(out, open(f"notebooks/far_back_study/out/{ds}_{ev}/conecheck.json", "w"), indent=1)
