"""Extra: tau = 1e-3 on the 48 random pairs of Wikipedia 141227 (pairs dominate a K=2 search)."""
import json, numpy as np
from study import Study
R = json.load(open("notebooks/far_back_study/out/wikipedia_141227/results.json"))
ex = {tuple(r["S"]): r for r in R["exact"]}
pairs = [r["S"] for r in R["exact"] if r["kind"] == "pair"]
st = Study("wikipedia", 141227)
out = []
for S in pairs:
    r, _ = st.run(S, 1e-3, bounds=False)
    out.append(r)
w0 = sum(ex[tuple(S)]["work_need"] for S in pairs); w = sum(r["work_need"] for r in out)
err = [abs(r["logit"] - ex[tuple(r["S"])]["logit"]) for r in out]
flips = sum(r["flip"] != ex[tuple(r["S"])]["flip"] for r in out)
print(f"tau 1e-3 on {len(pairs)} pairs: work {w} vs exact {w0} ({w / w0:.3f}); max |logit err| {max(err):.2e}, median {np.median(err):.2e}; flips changed {flips}")
for t in (1e-7, 1e-6, 1e-5, 1e-4):
    rs = [r for r in R["tol"] if r["tau"] == t and r["kind"] == "pair"]
    print(f"tau {t:g} on pairs: work ratio {sum(r['work_need'] for r in rs) / w0:.3f}, max err {max(abs(r['logit'] - ex[tuple(r['S'])]['logit']) for r in rs):.2e}")
json.dump(dict(tau=1e-3, results=out), open("notebooks/far_back_study/out/wikipedia_141227/tau1e-3_pairs.json", "w"), default=float)
