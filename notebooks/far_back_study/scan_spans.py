import os, numpy as np, time
os.environ.setdefault("CFTGNN_DATA_DIR", "../shared/data")  # run from the repository root
import torch; torch.set_num_threads(1)
from cftgnn.data import load_wikipedia
from cftgnn.data.index import TemporalIndex
s = load_wikipedia(); idx = TemporalIndex(s)
print(s.num_events, s.num_nodes)
rng = np.random.default_rng(0)
ev = np.sort(rng.choice(np.arange(133853, s.num_events), 1500, replace=False))
rows = []
t0 = time.time()
for i in ev:
    c = idx.candidates(int(i), 1, 64)
    if len(c.ids): rows.append((int(i), int(i - c.ids[0]), len(c.ids)))
print(time.time() - t0)
rows.sort(key=lambda r: -r[1])
print(rows[:15])
spans = np.array([r[1] for r in rows]); print("median span", np.median(spans), "p90", np.percentile(spans, 90), "frac>100k", (spans > 100000).mean())
c = idx.candidates(141227, 1, 64); print(141227, 141227 - c.ids[0], len(c.ids), c.ids[:5], c.ids[-5:])
