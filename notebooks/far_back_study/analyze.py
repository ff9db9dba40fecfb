"""Tables from notebooks/far_back_study/out/*/results.json and traces.npz (the far-back study)."""

import glob
import json
import sys

import numpy as np


def q(a, ps=(50, 90, 100)):
    a = np.asarray(a, dtype=float)
    if not len(a):
        return "-"
    return "/".join(f"{np.percentile(a, p):.3g}" for p in ps)


def main():
    import os
    for d in sorted(glob.glob("notebooks/far_back_study/out/*/")):
        path = d + "results.json"
        if not os.path.exists(path):
            if not os.path.exists(d + "results_exact.json"):
                continue
            R = json.load(open(d + "results_exact.json"))
            R["tol"] = []
            R["info"]["tol_s"] = 0
        else:
            R = json.load(open(path))
        info, ex, tol = R["info"], R["exact"], R["tol"]
        import os
        pe = path.replace("results.json", "results_exact.json")
        if os.path.exists(pe):
            ex = json.load(open(pe))["exact"]  # same logits, refined bounds
        tp = path.replace("results.json", "traces.npz")
        tr = np.load(tp) if os.path.exists(tp) else {}
        p = abs(info["p_orig"])
        print(f"\n## {info['dataset']} event {info['event']}: p_orig {info['p_orig']:.4f}, "
              f"span {info['span']}, {info['steps']} batches, rows recorded "
              f"{info['total_rows']} (needed {info['needed_rows']}), final read nodes "
              f"{info['final_nodes']}; setup {info['setup_s']:.0f} s; exact runs "
              f"{info['exact_s']:.0f} s; tol runs {info['tol_s']:.0f} s")
        print("validation (mine vs model.advance+predict):",
              [f"{abs(v['mine'] - v['generic']):.1e}" for v in info["validation"]])
        print(f"GRU global L_self {info['Lg_self']:.2f}, L_other {info['Lg_other']:.2f}; "
              f"local |J_self| p10/50/90/99 {[round(x, 3) for x in info['jn_quantiles']['self']]}"
              f", |J_other| {[round(x, 3) for x in info['jn_quantiles']['other']]}")
        e = info["emb"]
        print(f"decoder Lipschitz |w_out|*max(|W_src|,|W_dst|) = "
              f"{e['nOut'] * max(e['nDs'], e['nDd']):.2f}; skip {e['nSkip']:.2f}, V {e['nV']}")
        for kind in ("single", "pair"):
            rows = [r for r in ex if r["kind"] == kind]
            eff = [r for r in rows if r["work"] > 0 or r["dlogit"] != 0]
            dead = [r for r in eff if r["final_pert_nodes"] == 0]
            print(f"\n{kind}s: {len(rows)}, with any effect {len(eff)}, effect died out "
                  f"bitwise before the end {len(dead)}, flips {sum(r['flip'] for r in rows)}")
            if not eff:
                continue
            print("  (median/p90/max over sets with an effect)")
            print("  events back               ", q([r["events_back"] for r in eff]))
            print("  peak nodes perturbed      ", q([r["peak_pert"] for r in eff]))
            print("  peak needed nodes pert.   ", q([r["peak_pert_need"] for r in eff]))
            print("  perturbed at the end      ", q([r["final_pert_nodes"] for r in eff]))
            print("  node updates w/ pert (all)", q([r["work"] for r in eff]))
            print("  ... needed (cone work)    ", q([r["work_need"] for r in eff]))
            print("  read nodes perturbed      ", q([r["read_pert"] for r in eff]), "of",
                  q([r["read_nodes"] for r in eff]))
            print("  max-abs dmem at read nodes", q([r["read_maxabs"] for r in eff]))
            print("  max L2 dmem at read nodes ", q([r["read_l2max"] for r in eff]))
            print("  |dlogit|                  ", q([abs(r["dlogit"]) for r in eff]))
            print("  |dlogit| / |p_orig|       ", q([abs(r["dlogit"]) / p for r in eff]))
            print("  |dlogit| neighbour-only   ", q([abs(r["dlogit_struct"]) for r in eff]))
            g = [r["gain_med"] for r in eff if r.get("gain_med") is not None]
            print("  per-update gain |dh'|/max(|dh|,|do|): median over sets of the median",
                  q(g), "; of p90", q([r["gain_p90"] for r in eff if r.get("gain_p90")]),
                  "; share <1", q([r["gain_frac_lt1"] for r in eff if r.get("gain_frac_lt1")]))
            # bounds
            rr = [r for r in eff if r.get("reach_read")]
            print(f"  sets whose memory perturbation reaches a node the prediction reads: "
                  f"{len(rr)} (the others: bound = exact neighbour-only change)")
            if rr:
                bg_ = np.array([r["B_glob"] for r in rr]); bl_ = np.array([r["B_loc"] for r in rr])
                bt_ = np.array([r["B_att_with_true_mem"] for r in rr])
                print(f"   among them certified no-flip: global {(bg_ < p).sum()}, local "
                      f"{(bl_ < p).sum()}, attention bound fed the TRUE memory change "
                      f"{(bt_ < p).sum()} of {len(rr)}; |dlogit| {q([abs(r['dlogit']) for r in rr])}"
                      f", true-memory attention bound {q(bt_)}")
            if "B_ibp" in eff[0]:
                bi = np.array([r["B_ibp"] for r in rr]) if rr else np.zeros(0)
                vi = sum(r["violations"]["ibp"] for r in eff)
                vg = sum(r["violations"]["glob"] for r in eff)
                vl = sum(r["violations"]["loc"] for r in eff)
                print(f"   interval (IBP) bound among reaching sets {q(bi)}, certified "
                      f"{(bi < p).sum()}/{len(rr)}; IBP radius at read nodes (inf-norm) "
                      f"{q([r['ibp_rad_inf_read'] for r in rr])}; soundness check, rows whose "
                      f"true change exceeds the bound: IBP {vi} (coords), global {vg}, local {vl} "
                      f"(local is not sound)")
            bg = np.array([r["B_glob"] for r in eff])
            bl = np.array([r["B_loc"] for r in eff])
            bt = np.array([r["B_att_with_true_mem"] for r in eff])
            print(f"  bound on |dlogit|: global {q(bg)}; local {q(bl)}; "
                  f"attention+decoder bound with the TRUE memory change {q(bt)}")
            print(f"  sets certified no-flip (bound < |p_orig| = {p:.3f}): global "
                  f"{(bg < p).sum()}/{len(eff)}, local {(bl < p).sum()}/{len(eff)}, "
                  f"true-memory+attention {(bt < p).sum()}/{len(eff)}")
            bs_ = np.array([r["b_star"] for r in eff]); btr = np.array([r["B_trivial"] for r in eff])
            print("  b* = uniform |dmem|_2 bound at read nodes the attention+decoder bound tolerates",
                  q(bs_, (0, 50, 100)), "(min/med/max); true max L2 at read nodes <= b* in",
                  int((np.array([r["true_l2_read"] for r in eff]) <= bs_).sum()), "sets;",
                  "trivial bound (|dmem|<=2 sqrt d everywhere)", q(btr, (0, 50, 100)))
            print("  bound on max L2 at read nodes: global", q([r["bound_glob_read"] for r in eff]),
                  "local", q([r["bound_loc_read"] for r in eff]), "true",
                  q([r["true_l2_read"] for r in eff]))
        # traces of the exact runs: how n_pert and max-abs evolve after the removal
        print("\nevolution after the removal (singles with an effect; median over sets) at "
              "fractions of the batches from the removal to the prediction:")
        fr = [0.02, 0.1, 0.25, 0.5, 0.75, 1.0]
        rows_np, rows_ma, rows_l2, rows_bl, rows_w = [], [], [], [], []
        for r in ex:
            if r["kind"] != "single" or r["work"] == 0:
                continue
            key = "exact_" + "_".join(map(str, r["S"]))
            if key + "__pert" not in tr:
                continue
            x0, n = r["x0"], info["steps"]
            L = n - x0
            idx = [min(n - 1, x0 + max(0, int(round(f * L)) - 1)) for f in fr]
            rows_np.append(tr[key + "__pert"][idx])
            rows_ma.append(tr[key + "__maxabs"][idx])
            rows_l2.append(tr[key + "__l2"][idx])
            rows_bl.append(tr[key + "__bl"][idx])
            rows_w.append(tr[key + "__work_need"][idx])
        if rows_np and False:
            pass
        if rows_np:
            print("  fraction          ", fr)
            print("  nodes perturbed   ", np.median(rows_np, 0).round(0).tolist())
            print("  needed updates/b. ", np.median(rows_w, 0).round(0).tolist())
            print("  max-abs (all nodes)", [f"{v:.2e}" for v in np.median(rows_ma, 0)])
            print("  total L2 (all)    ", [f"{v:.2e}" for v in np.median(rows_l2, 0)])
            print("  local bound max   ", [f"{v:.1e}" for v in np.median(rows_bl, 0)])
        # tolerance pruning
        exact = {tuple(r["S"]): r for r in ex}
        marg = [abs(r["logit"]) for r in ex]
        print(f"\nclosest exact logit to 0 among measured sets: {min(marg):.4f} "
              f"(p_orig {info['p_orig']:.4f}); largest |dlogit| {max(abs(r['dlogit']) for r in ex):.4f}")
        if not tol:
            continue
        print("\ntolerance pruning (sets: "
              f"{len({tuple(r['S']) for r in tol})}; work = node updates with perturbed "
              "inputs among needed states, summed over sets):")
        print("| tau | cone work | vs exact | sets still perturbed at the end | "
              "max abs logit err | median err (sets w/ effect) | max err/|p_orig| | "
              "flip decisions changed | snapped rows | peak needed nodes perturbed (median/max) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        sets = sorted({tuple(r["S"]) for r in tol})
        w0 = sum(exact[s]["work_need"] for s in sets)
        alive0 = sum(exact[s]["final_pert_nodes"] > 0 for s in sets)
        pk0 = [exact[s]["peak_pert_need"] for s in sets if exact[s]["work"] > 0]
        print(f"| 0 (exact) | {w0} | 1 | {alive0}/{len(sets)} | 0 | 0 | 0 | 0 | 0 | "
              f"{np.median(pk0):.0f}/{max(pk0)} |")
        for tau in sorted({r["tau"] for r in tol}):
            rs = [r for r in tol if r["tau"] == tau]
            eb = np.array([r.get("tol_err_bound_local", np.nan) for r in rs])
            er = np.array([abs(r["logit"] - exact[tuple(r["S"])]["logit"]) for r in rs])
            print(f"   tau {tau:g}: first-order local bound on the tolerance error, med/max "
                  f"{np.nanmedian(eb):.2e}/{np.nanmax(eb):.2e} (true err max {er.max():.2e}); "
                  f"sets whose residual bound < their exact |logit| (flip decision safe): "
                  f"{sum(1 for r, b in zip(rs, eb) if b < abs(exact[tuple(r['S'])]['logit']))}/{len(rs)}")
            w = sum(r["work_need"] for r in rs)
            err = np.array([abs(r["logit"] - exact[tuple(r["S"])]["logit"]) for r in rs])
            effm = np.array([exact[tuple(r["S"])]["work"] > 0 for r in rs])
            flips = sum(r["flip"] != exact[tuple(r["S"])]["flip"] for r in rs)
            alive = sum(r["final_pert_nodes"] > 0 for r in rs)
            print(f"| {tau:g} | {w} | {w / max(w0, 1):.3f} | {alive}/{len(rs)} | "
                  f"{err.max():.2e} | {np.median(err[effm]) if effm.any() else 0:.2e} | "
                  f"{err.max() / p:.1e} | {flips} | {sum(r['snaps'] for r in rs)} | "
                  f"{np.median([r['peak_pert_need'] for r, e_ in zip(rs, effm) if e_]):.0f}/"
                  f"{max(r['peak_pert_need'] for r in rs)} |")


if __name__ == "__main__":
    main()
