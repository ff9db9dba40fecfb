"""Where does the exact exhaustive search's time go (cone replay vs embeddings vs rest)?
cProfile of cftgnn.benchmarks.tail.search_event on one event."""
import cProfile, pstats, io, os, sys, json
os.environ.setdefault("CFTGNN_DATA_DIR", "../shared/data")  # run from the repository root
import torch; torch.set_num_threads(1)
from cftgnn.data import load_uci, load_wikipedia
from cftgnn.oracle import ReplayEngine
from cftgnn.benchmarks.tail import search_event
ds, ev, K = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
stream = load_uci() if ds == "uci" else load_wikipedia()
engine = ReplayEngine.from_checkpoint(f"checkpoints/tgn_{ds}.pt", stream)
pr = cProfile.Profile(); pr.enable()
row = search_event(engine, ev, K, None, 64)
pr.disable()
print(json.dumps({k: v for k, v in row.items() if k != "explanation"}, default=str))
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(35); print(s.getvalue()[:9000])
