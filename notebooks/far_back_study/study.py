"""A measurement study: how do far-back removal perturbations evolve through TGN memory?

For one explained event: records the unperturbed replay from the batch boundary b0 at or
before the oldest candidate, then replays single removals and random pairs with its own
(slow, simple) masked replay that follows the model's arithmetic row for row (the same
``TGN.message_update`` call on the same rows in the same order as ``apply_batch``, so rows
whose inputs are equal come out bit for bit equal), and measures

* the perturbation over time (nodes whose memory differs, max-abs / L2),
* the work a cone replay would do (node updates whose inputs carry a perturbation), exact and
  with tolerance pruning (memory rows within tau in max-abs snapped back to the recording),
  and the logit error / flip changes tolerance pruning causes,
* scalar per-node bound propagation (global Lipschitz from weight norms, and a local
  first-order one from the GRU Jacobian norms at the unperturbed trajectory), through the
  embedding attention and the decoder, compared with the true |delta logit| and |p_orig|.

Nothing in the package is modified. Usage:
    python notebooks/far_back_study/study.py {uci|wikipedia} EVENT [n_pairs] [tol_singles]
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

os.environ.setdefault("CFTGNN_DATA_DIR", "../shared/data")  # run from the repository root

import numpy as np
import torch

torch.set_num_threads(1)
np.seterr(over='ignore', invalid='ignore')

from cftgnn.data import load_uci, load_wikipedia  # noqa: E402
from cftgnn.models.neighbors import reachable_nodes, recent_kept_neighbors  # noqa: E402
from cftgnn.models.tgn import other_endpoint  # noqa: E402
from cftgnn.oracle import ReplayEngine  # noqa: E402
from cftgnn.replay.tgn.trajectory import batch_record, needed_until  # noqa: E402

TAUS = [0.0, 1e-7, 1e-6, 1e-5, 1e-4]
CKPT = {"uci": "checkpoints/tgn_uci.pt",
        "wikipedia": "checkpoints/tgn_wikipedia.pt"}


def spec(m: torch.Tensor) -> float:
    return float(torch.linalg.matrix_norm(m.double(), ord=2))


# ----------------------------------------------------------------------------- GRU constants
class GRUConst:
    def __init__(self, model):
        gru = model.gru
        d = model.memory_dim
        self.d = d
        wi, wh = gru.weight_ih.detach(), gru.weight_hh.detach()
        bi, bh = gru.bias_ih.detach(), gru.bias_hh.detach()
        self.wi, self.wh, self.bi, self.bh = wi, wh, bi, bh
        Wir, Wiz, Win = wi[:d], wi[d:2 * d], wi[2 * d:]
        Whr, Whz, Whn = wh[:d], wh[d:2 * d], wh[2 * d:]
        self.Rs, self.Ro = Wir[:, :d] + Whr, Wir[:, d:2 * d]
        self.Zs, self.Zo = Wiz[:, :d] + Whz, Wiz[:, d:2 * d]
        self.Ns, self.No, self.Whn = Win[:, :d], Win[:, d:2 * d], Whn
        self.bhn = bh[2 * d:]
        n = {k: spec(getattr(self, k)) for k in ("Rs", "Ro", "Zs", "Zo", "Ns", "No", "Whn")}
        self.norms = n
        self.Ginf = float((Whn.abs().sum(1) + self.bhn.abs()).max())  # |h|_inf < 1
        # global bound of |dh'| for |dh_self| = 1, |dh_other| = 0 and vice versa
        self.Lg_self = self.glob(1.0, 0.0)
        self.Lg_other = self.glob(0.0, 1.0)

    def glob(self, bs, bo):
        """Sound global bound of |delta h'|_2 given |delta self|_2 <= bs, |delta other| <= bo."""
        n = self.norms
        bs = np.asarray(bs, dtype=np.float64)
        bo = np.asarray(bo, dtype=np.float64)
        dr = 0.25 * (n["Rs"] * bs + n["Ro"] * bo)
        dz = 0.25 * (n["Zs"] * bs + n["Zo"] * bo)
        dn = (n["Ns"] + n["Whn"]) * bs + n["No"] * bo + self.Ginf * dr
        return np.sqrt(dn ** 2 + bs ** 2) + 2.0 * dz

    def ibp(self, model, ev, h, lu, o, rh, ro):
        """Interval bound propagation through one GRU memory update: the centre output at
        (h, o) and a sound per-coordinate radius of the output over the box
        |h' - h| <= rh, |o' - o| <= ro (float64 [M, d] each)."""
        d = self.d
        with torch.no_grad():
            evt = torch.as_tensor(ev)
            dt = (model._t[evt] - lu).to(h.dtype)
            msg = model.message(h, o, model._feat[evt], model.msg_time_enc(dt))
            gi = (msg @ self.wi.T + self.bi).double()
            gh = (h @ self.wh.T + self.bh).double()
            A = lambda W: W.abs().double()  # noqa: E731
            ar, az = gi[:, :d] + gh[:, :d], gi[:, d:2 * d] + gh[:, d:2 * d]
            i_n, g = gi[:, 2 * d:], gh[:, 2 * d:]
            rr = rh @ A(self.Rs).T + ro @ A(self.Ro).T
            rz = rh @ A(self.Zs).T + ro @ A(self.Zo).T
            rn = rh @ A(self.Ns).T + ro @ A(self.No).T
            rg = rh @ A(self.Whn).T
            r_lo, r_hi = torch.sigmoid(ar - rr), torch.sigmoid(ar + rr)
            z_lo, z_hi = torch.sigmoid(az - rz), torch.sigmoid(az + rz)
            g_lo, g_hi = g - rg, g + rg
            p = torch.stack([r_lo * g_lo, r_lo * g_hi, r_hi * g_lo, r_hi * g_hi])
            n_lo = torch.tanh(i_n - rn + p.min(0).values)
            n_hi = torch.tanh(i_n + rn + p.max(0).values)
            hd = h.double()
            h_lo, h_hi = hd - rh, hd + rh
            # h' = n + z (h - n), multilinear in (z, n, h): extremes at the box's vertices
            vs = [nv + zv * (hv - nv) for zv in (z_lo, z_hi) for nv in (n_lo, n_hi)
                  for hv in (h_lo, h_hi)]
            V = torch.stack(vs)
            r = torch.sigmoid(ar)
            n0 = torch.tanh(i_n + r * g)
            z0 = torch.sigmoid(az)
            c = (1 - z0) * n0 + z0 * hd
            rad = torch.maximum(V.max(0).values - c, c - V.min(0).values).clamp(min=0, max=2.0)
        return c, rad

    def local_norms(self, model, ev, h, lu, o):
        """Spectral norms of dh'/dh_self and dh'/dh_other at the given points, float64 [M, 2]
        (first order only: a local constant, not a sound bound)."""
        d = self.d
        with torch.no_grad():
            evt = torch.as_tensor(ev)
            t = model._t[evt]
            dt = (t - lu).to(h.dtype)
            msg = model.message(h, o, model._feat[evt], model.msg_time_enc(dt))
            gi = msg @ self.wi.T + self.bi
            gh = h @ self.wh.T + self.bh
            r = torch.sigmoid(gi[:, :d] + gh[:, :d])
            z = torch.sigmoid(gi[:, d:2 * d] + gh[:, d:2 * d])
            hn = gh[:, 2 * d:]
            nn_ = torch.tanh(gi[:, 2 * d:] + r * hn)
            rp, zp, npr = r * (1 - r), z * (1 - z), 1 - nn_ ** 2
            dr_h = rp[:, :, None] * self.Rs[None]
            dr_o = rp[:, :, None] * self.Ro[None]
            dz_h = zp[:, :, None] * self.Zs[None]
            dz_o = zp[:, :, None] * self.Zo[None]
            dn_h = npr[:, :, None] * (self.Ns[None] + hn[:, :, None] * dr_h
                                       + r[:, :, None] * self.Whn[None])
            dn_o = npr[:, :, None] * (self.No[None] + hn[:, :, None] * dr_o)
            J_h = (1 - z)[:, :, None] * dn_h + (h - nn_)[:, :, None] * dz_h + torch.diag_embed(z)
            J_o = (1 - z)[:, :, None] * dn_o + (h - nn_)[:, :, None] * dz_o
            out = torch.stack([torch.linalg.matrix_norm(J_h, ord=2),
                               torch.linalg.matrix_norm(J_o, ord=2)], dim=1)
        return out.double().numpy()


# ----------------------------------------------------------------------------- embedding
class Embed1:
    """One-layer TGN embedding + decoder computed step by step (validated against predict)."""

    def __init__(self, model):
        self.m = model
        conv = model.embedding.convs[0]
        self.conv = conv
        self.H, self.C = conv.heads, conv.out_channels
        hc = self.H * self.C
        Wq, Wk, Wv = conv.lin_query.weight.detach(), conv.lin_key.weight.detach(), \
            conv.lin_value.weight.detach()
        self.nQ = [spec(Wq[h * self.C:(h + 1) * self.C]) for h in range(self.H)]
        self.nK = [spec(Wk[h * self.C:(h + 1) * self.C]) for h in range(self.H)]
        self.nV = [spec(Wv[h * self.C:(h + 1) * self.C]) for h in range(self.H)]
        self.nSkip = spec(conv.lin_skip.weight.detach())
        dec = model.decoder
        self.nDs, self.nDd = spec(dec.lin_src.weight.detach()), spec(dec.lin_dst.weight.detach())
        self.nOut = float(dec.lin_out.weight.detach().norm())
        self.rs = dec.lin_src.weight.detach().double().norm(dim=1).numpy()
        self.rd = dec.lin_dst.weight.detach().double().norm(dim=1).numpy()
        self.wout = dec.lin_out.weight.detach().double().abs()[0].numpy()
        assert hc == conv.lin_skip.weight.shape[0]

    def targets(self, X, nodes, before, t, removed, num_removed):
        m = self.m
        with torch.no_grad():
            nbr, eid, valid = recent_kept_neighbors(m.index, nodes, before, m.num_neighbors,
                                                    removed, num_removed)
            out = []
            for b, u in enumerate(nodes):
                cols = np.flatnonzero(valid[b])
                nb, e = nbr[b, cols], eid[b, cols]
                hu = X[int(u)][None]
                q = self.conv.lin_query(hu).view(self.H, self.C)
                rec = dict(node=int(u), nbr=nb, eid=e, q=q)
                if len(cols):
                    dt = (torch.tensor([float(t[b])], dtype=torch.float64)
                          - m._t[torch.as_tensor(e)]).to(X.dtype)
                    ea = torch.cat([m.embedding.time_enc(dt), m._feat[torch.as_tensor(e)]], -1)
                    eproj = self.conv.lin_edge(ea).view(-1, self.H, self.C)
                    hk = X[torch.as_tensor(nb)]
                    key = self.conv.lin_key(hk).view(-1, self.H, self.C) + eproj
                    val = self.conv.lin_value(hk).view(-1, self.H, self.C) + eproj
                    score = (q[None] * key).sum(-1) / math.sqrt(self.C)  # [K, H]
                    alpha = torch.softmax(score, dim=0)
                    agg = (val * alpha[:, :, None]).sum(0).reshape(-1)
                    rec.update(key=key, val=val, alpha=alpha)
                else:
                    agg = torch.zeros(self.H * self.C)
                    rec.update(key=None, val=None, alpha=None)
                rec["z"] = agg + self.conv.lin_skip(hu)[0]
                out.append(rec)
        return out

    def logit(self, X, src, dst, t, pos, removed=None, num_removed=0):
        recs = self.targets(X, np.array([src, dst]), np.array([pos, pos]), np.array([t, t]),
                            removed, num_removed)
        dec = self.m.decoder
        with torch.no_grad():
            lg = float(dec(recs[0]["z"][None], recs[1]["z"][None])[0])
        return lg, recs

    def bound(self, recs, b):
        """Sound bound on |delta logit| from node-input perturbations |delta X[n]|_2 <= b[n],
        around the point ``recs`` (same neighbour structure): per head, the query, keys and
        values move by at most |W| b; the scores by the product rule; the softmax by
        |d alpha|_1 <= min(2, max |d score|); the aggregate by
        |V| (sum_k alpha_k b_k + |d alpha|_1 max_k b_k) + |d alpha|_1 / 2 * diam(values');
        the decoder through its hidden units, a unit whose pre-activation stays below 0
        contributing nothing (and never more than the spectral bound)."""
        dz = []
        for rec in recs:
            bu = float(b[rec["node"]])
            tot2 = np.float64(0.0)
            if rec["key"] is not None:
                bk = np.asarray(b[rec["nbr"]], dtype=np.float64)
                for h in range(self.H):
                    q = float(rec["q"][h].norm())
                    keyn = rec["key"][:, h].norm(dim=-1).double().numpy()
                    al = rec["alpha"][:, h].double().numpy()
                    dq = self.nQ[h] * bu
                    dkey = self.nK[h] * bk
                    ds = (dq * (keyn + dkey) + q * dkey) / math.sqrt(self.C)
                    dalpha1 = min(2.0, float(ds.max()))
                    v = rec["val"][:, h].double()
                    diam = float(torch.cdist(v, v).max()) + 2 * self.nV[h] * float(bk.max())
                    dh = np.float64(self.nV[h] * min(float(bk.max()), float((al * bk).sum()) + dalpha1 * float(bk.max()))
                                    + 0.5 * dalpha1 * diam)
                    tot2 += dh ** 2
            dz.append(np.sqrt(tot2) + self.nSkip * bu)
        spectral = self.nOut * (self.nDs * dz[0] + self.nDd * dz[1])
        dec = self.m.decoder
        with torch.no_grad():
            a = (dec.lin_src(recs[0]["z"]) + dec.lin_dst(recs[1]["z"])).double().numpy()
        u = self.rs * dz[0] + self.rd * dz[1]  # bound on |delta a_i|
        contrib = np.where(a >= 0, u, np.clip(a + u, 0.0, None))
        unit = float((self.wout * np.minimum(contrib, u)).sum())
        return float(min(spectral, unit))

# ----------------------------------------------------------------------------- the study
def set_pending(PP, ev, S, src, dst, N):
    """Each endpoint's pending message after a batch ``ev`` with the events of ``S`` removed:
    its last kept event there (TGN keeps the last message of a batch)."""
    keep = ev[~np.isin(ev, S)]
    if len(keep):
        nodes = np.concatenate([src[keep], dst[keep]])
        evs = np.concatenate([keep, keep])
        last = np.full(N, -1, dtype=np.int64)
        np.maximum.at(last, nodes, evs)
        tn = np.flatnonzero(last >= 0)
        PP[torch.as_tensor(tn)] = torch.as_tensor(last[tn])


class Study:
    def __init__(self, ds, event, ckpt_every=32):
        t0 = time.perf_counter()
        self.ds, self.event = ds, event
        stream = load_uci() if ds == "uci" else load_wikipedia()
        self.stream = stream
        engine = ReplayEngine.from_checkpoint(CKPT[ds], stream)
        model = engine.model
        model.eval()
        self.model = model
        self.src, self.dst = stream.src, stream.dst
        self.N = model.num_nodes
        self.cand = engine.index.candidates(event, model.num_layers, 64).ids
        self.b0 = engine.boundary(int(self.cand[0]))
        base = engine.base_state(self.b0)
        self.t_setup_base = time.perf_counter() - t0
        with torch.no_grad():
            model.restore(base)
            st = model.state
            self.steps = model.history_steps(self.b0, event, None, model.is_idle(st))
            self.rec = []
            self.ckpts = {}
            brs = []
            for x, ev in enumerate(self.steps):
                if x % ckpt_every == 0:
                    self.ckpts[x] = (st.memory.clone(), st.last_update.clone(),
                                     st.pending.clone())
                pn = (st.pending >= 0).nonzero(as_tuple=True)[0]
                pe = st.pending[pn].clone()
                model.apply_batch(st, torch.as_tensor(ev))
                self.rec.append((pn.numpy(), pe.numpy(), st.memory[pn].clone(),
                                 st.last_update[pn].clone()))
                nodes = np.unique(np.concatenate([pn.numpy(), self.src[ev], self.dst[ev]]))
                brs.append(batch_record(ev, nodes, None, None, None, self.src, self.dst))
            st.position = event
            fpn = (st.pending >= 0).nonzero(as_tuple=True)[0]
            self.final_pend = (fpn.numpy(), st.pending[fpn].clone().numpy())
            self.U_fin = model.node_input(st).clone()
            self.p_pred = float(model.predict([self.src[event]], [self.dst[event]],
                                              [stream.t[event]])[0])
        self.emb = Embed1(model)
        self.p_orig, _ = self.emb.logit(self.U_fin, int(self.src[event]), int(self.dst[event]),
                                        float(stream.t[event]), event)
        # which step holds each event
        self.step_of = {}
        for x, ev in enumerate(self.steps):
            for e in ev.tolist():
                self.step_of[e] = x
        link = np.array([self.src[event], self.dst[event]])
        final = reachable_nodes(model.index, link, np.full(2, event), model.num_neighbors,
                                model.num_layers, self.cand, None)
        self.final_nodes = final
        self.need = needed_until(brs, final, self.N, self.src, self.dst, self.cand)
        self.g = GRUConst(model)
        self.clamp = 2.0 * math.sqrt(model.memory_dim)
        # local Jacobian norms on the recorded rows whose inputs may be perturbed (in the
        # union dependency cone of all candidates) and whose state is needed
        t1 = time.perf_counter()
        inc = np.zeros(self.N, dtype=bool)  # nodes whose past meets a candidate (union cone)
        cand_set = set(self.cand.tolist())
        U = base.memory.clone()
        LU = base.last_update.clone()
        self.jn = []
        self.n_jac_rows = 0
        for x, ev in enumerate(self.steps):
            pn, pe, post, lupost = self.rec[x]
            oth = other_endpoint(self.src, self.dst, pe, pn)
            # conservative: any event of the previous step could be a node's message
            # under removals, so a node is reached if any of its partners there is
            hit = np.zeros(self.N, dtype=bool)
            if x > 0 and len(self.steps[x - 1]):
                pe_all = self.steps[x - 1]
                s_, d_ = self.src[pe_all], self.dst[pe_all]
                hit[s_[inc[d_]]] = True
                hit[d_[inc[s_]]] = True
            sel = (inc[pn] | hit[pn]) & (self.need[pn] >= x + 1)
            jn = np.zeros((len(pn), 2))
            if sel.any():
                idx = np.flatnonzero(sel)
                jn[idx] = self.g.local_norms(model, pe[idx], U[torch.as_tensor(pn[idx])],
                                             LU[torch.as_tensor(pn[idx])],
                                             U[torch.as_tensor(oth[idx])])
                self.n_jac_rows += len(idx)
            self.jn.append(jn)
            inc[pn] |= hit[pn]
            U[torch.as_tensor(pn)] = post
            LU[torch.as_tensor(pn)] = lupost
            # endpoints of candidate events become dependent after this batch
            for e in ev.tolist():
                if e in cand_set:
                    inc[self.src[e]] = True
                    inc[self.dst[e]] = True
        # final pending application
        fpn, fpe = self.final_pend
        foth = other_endpoint(self.src, self.dst, fpe, fpn)
        self.jn_final = self.g.local_norms(model, fpe, U[torch.as_tensor(fpn)],
                                           LU[torch.as_tensor(fpn)], U[torch.as_tensor(foth)])
        self.t_jac = time.perf_counter() - t1
        self.base_mem, self.base_lu, self.base_pend = (base.memory.clone(),
                                                        base.last_update.clone(),
                                                        base.pending.clone())
        self.t_setup = time.perf_counter() - t0

    # ------------------------------------------------------------------ one removal set
    def run(self, S, tau=0.0, bounds=True):
        m, src, dst = self.model, self.src, self.dst
        S = np.asarray(sorted(S), dtype=np.int64)
        x0 = min(self.step_of[int(e)] for e in S)
        c0 = max(c for c in self.ckpts if c <= x0)
        P, PLU, PP = (a.clone() for a in self.ckpts[c0])
        U, LU = P.clone(), PLU.clone()
        N = self.N
        maxabs = np.zeros(N)
        l2 = np.zeros(N)
        bg = np.zeros(N)
        bl = np.zeros(N)
        Rv = torch.zeros(N, self.model.memory_dim, dtype=torch.float64)  # IBP radii
        br = np.zeros(N)  # tolerance: bound on the effect of the dropped residuals (local)
        n_steps = len(self.steps)
        tr_pert = np.zeros(n_steps, dtype=np.int64)     # nodes whose memory differs
        tr_pert_need = np.zeros(n_steps, dtype=np.int64)  # ... and whose state is still read
        tr_work = np.zeros(n_steps, dtype=np.int64)      # updates with perturbed inputs
        tr_work_need = np.zeros(n_steps, dtype=np.int64)
        tr_max = np.zeros(n_steps)
        tr_l2 = np.zeros(n_steps)
        tr_bg = np.zeros(n_steps)
        tr_bl = np.zeros(n_steps)
        tr_bi = np.zeros(n_steps)
        gains = []
        snaps = 0
        viol_ibp = viol_g = viol_l = 0
        removed_set = set(S.tolist())
        with torch.no_grad():
            for x in range(c0, n_steps):
                ev = self.steps[x]
                pn, pe, post, lupost = self.rec[x]
                if len(pn) == 0:
                    set_pending(PP, ev, S, src, dst, N)
                    tr_pert[x] = (maxabs > 0).sum()
                    continue
                pnt = torch.as_tensor(pn)
                evp = PP[pnt].numpy()
                has = evp >= 0
                ev_use = np.where(has, evp, pe)
                oth_o = other_endpoint(src, dst, pe, pn)
                oth_p = other_endpoint(src, dst, ev_use, pn)
                lu_p = PLU[pnt]
                struct = (evp != pe) | (lu_p != LU[pnt]).numpy()
                need_now = self.need[pn] >= x + 1
                pin = struct | (maxabs[pn] > 0) | (has & (maxabs[oth_p] > 0))
                tr_work[x] = pin.sum()
                tr_work_need[x] = (pin & need_now).sum()
                # bounds (use only the recording, the discrete structure and the bounds)
                if bounds:
                    bs, bo = bg[pn], np.where(has, bg[oth_p], 0.0)
                    bsl, bol = bl[pn], np.where(has, bl[oth_p], 0.0)
                    exact = np.zeros(len(pn))
                    si = np.flatnonzero(struct)
                    if len(si):
                        sit = torch.as_tensor(pn[si])
                        alt = U[sit].clone()
                        hs = np.flatnonzero(has[si])
                        if len(hs):
                            a_new, _ = m.message_update(
                                ev_use[si][hs], U[sit][hs], lu_p[torch.as_tensor(si[hs])],
                                U[torch.as_tensor(oth_p[si][hs])])
                            alt[hs] = a_new
                        exact[si] = (alt - post[torch.as_tensor(si)]).double().norm(dim=1).numpy()
                    jn = self.jn[x]
                    gl = self.g.glob(bs, bo)
                    lo = jn[:, 0] * bsl + jn[:, 1] * bol
                    diffmsg = (evp != pe) & has  # another message: no recorded Jacobian
                    lo = np.where(diffmsg, self.g.glob(bsl, bol), lo)
                    # interval bounds: rows whose inputs may be perturbed
                    act = struct | (Rv[pnt].abs().sum(1) > 0).numpy() | (
                        has & (Rv[torch.as_tensor(oth_p)].abs().sum(1) > 0).numpy())
                    Rnew = None
                    if act.any():
                        ai = np.flatnonzero(act)
                        ait = torch.as_tensor(ai)
                        rows = torch.as_tensor(pn[ai])
                        cen, rad = self.g.ibp(m, ev_use[ai], U[rows], lu_p[ait],
                                              U[torch.as_tensor(oth_p[ai])], Rv[rows],
                                              Rv[torch.as_tensor(oth_p[ai])])
                        post_a = post[ait].double()
                        hasa = torch.as_tensor(has[ai])
                        Rnew = torch.where(hasa[:, None], (cen - post_a).abs() + rad,
                                           Rv[rows] + (U[rows].double() - post_a).abs())
                        Rnew = Rnew.clamp(max=2.0)
                    bg_new = np.minimum(np.where(has, exact + gl, bs + exact), self.clamp)
                    bl_new = np.minimum(np.where(has, exact + lo, bsl + exact), self.clamp)
                # exact perturbed update, same rows and order as apply_batch
                new, tnew = m.message_update(ev_use, P[pnt], lu_p,
                                             P[torch.as_tensor(oth_p)])
                hs_t = torch.as_tensor(np.flatnonzero(has))
                P[pnt[hs_t]] = new[hs_t]
                PLU[pnt[hs_t]] = tnew[hs_t]
                PP[pnt] = -1
                set_pending(PP, ev, S, src, dst, N)
                U[pnt] = post
                LU[pnt] = lupost
                dif = (P[pnt] - post).double()
                ma = dif.abs().max(dim=1).values.numpy()
                if tau > 0:
                    jn = self.jn[x]
                    has_o = has & (br[oth_p] > 0)
                    brn = jn[:, 0] * br[pn] + np.where(has, jn[:, 1] * br[oth_p], 0.0)
                    miss = (jn[:, 0] == 0) & ((br[pn] > 0) | has_o)
                    brn = np.where(miss, self.g.glob(br[pn], np.where(has, br[oth_p], 0)), brn)
                    brn = np.where(has, brn, br[pn])
                    sm = (ma > 0) & (ma < tau)
                    brn = brn + np.where(sm, dif.norm(dim=1).numpy(), 0.0)
                    br[pn] = np.minimum(brn, self.clamp)
                    if sm.any():
                        snaps += int(sm.sum())
                        P[pnt[torch.as_tensor(np.flatnonzero(sm))]] = post[
                            torch.as_tensor(np.flatnonzero(sm))]
                        dif[torch.as_tensor(np.flatnonzero(sm))] = 0
                        ma = np.where(sm, 0.0, ma)
                nl2 = dif.norm(dim=1).numpy()
                # empirical gain of non-structural perturbed updates
                ns = (~struct) & has & (ma >= 0) & ((l2[pn] > 0) | (l2[oth_p] > 0))
                if ns.any():
                    inp = np.maximum(l2[pn][ns], l2[oth_p][ns])
                    gains.append(nl2[ns] / inp)
                maxabs[pn] = ma
                l2[pn] = nl2
                if bounds:
                    bg[pn] = bg_new
                    bl[pn] = bl_new
                    if Rnew is not None:
                        Rv[torch.as_tensor(pn[ai])] = Rnew
                    viol_ibp += int((dif.abs() > Rv[pnt] + 1e-5).sum())
                    viol_g += int((nl2 > bg[pn] + 1e-5).sum())
                    viol_l += int((nl2 > bl[pn] + 1e-5).sum())
                pert = maxabs > 0
                tr_pert[x] = pert.sum()
                tr_pert_need[x] = (pert & (self.need >= x + 1)).sum()
                tr_max[x] = maxabs.max()
                tr_l2[x] = math.sqrt(float((l2 ** 2).sum()))
                tr_bg[x] = bg[self.need >= x + 1].max() if bounds else 0
                tr_bl[x] = bl[self.need >= x + 1].max() if bounds else 0
                if bounds:
                    tr_bi[x] = float(Rv[torch.as_tensor(np.flatnonzero(self.need >= x + 1))].max())
            # final: pending messages applied (node input), same rows as node_input
            fpn, fpe = self.final_pend
            fpt = torch.as_tensor(fpn)
            evp = PP[fpt].numpy()
            has = evp >= 0
            ev_use = np.where(has, evp, fpe)
            oth_p = other_endpoint(src, dst, ev_use, fpn)
            new, _ = m.message_update(ev_use, P[fpt], PLU[fpt], P[torch.as_tensor(oth_p)])
            X = P.clone()
            X[fpt[torch.as_tensor(np.flatnonzero(has))]] = new[torch.as_tensor(np.flatnonzero(has))]
            fpost = self.U_fin[fpt]
            if tau > 0:
                jf = self.jn_final
                br[fpn] = np.minimum(np.where(has, jf[:, 0] * br[fpn] + jf[:, 1] * br[oth_p],
                                              br[fpn]), self.clamp)
            if bounds:
                struct = (evp != fpe) | (PLU[fpt] != LU[fpt]).numpy()
                exact = np.zeros(len(fpn))
                si = np.flatnonzero(struct)
                if len(si):
                    sit = torch.as_tensor(fpn[si])
                    alt = U[sit].clone()
                    hs = np.flatnonzero(has[si])
                    if len(hs):
                        a_new, _ = m.message_update(ev_use[si][hs], U[sit][hs],
                                                    PLU[fpt][torch.as_tensor(si[hs])],
                                                    U[torch.as_tensor(oth_p[si][hs])])
                        alt[hs] = a_new
                    exact[si] = (alt - fpost[torch.as_tensor(si)]).double().norm(dim=1).numpy()
                bs, bo = bg[fpn], np.where(has, bg[oth_p], 0.0)
                bsl, bol = bl[fpn], np.where(has, bl[oth_p], 0.0)
                cen, rad = self.g.ibp(m, ev_use, U[fpt], PLU[fpt], U[torch.as_tensor(oth_p)],
                                      Rv[fpt], Rv[torch.as_tensor(oth_p)])
                fpd = fpost.double()
                hasf = torch.as_tensor(has)
                Rv[fpt] = torch.where(hasf[:, None], (cen - fpd).abs() + rad,
                                      Rv[fpt] + (U[fpt].double() - fpd).abs()).clamp(max=2.0)
                jn = self.jn_final
                lo = np.where((evp != fpe) & has, self.g.glob(bsl, bol),
                              jn[:, 0] * bsl + jn[:, 1] * bol)
                bg[fpn] = np.minimum(np.where(has, exact + self.g.glob(bs, bo), bs + exact),
                                     self.clamp)
                bl[fpn] = np.minimum(np.where(has, exact + lo, bsl + exact), self.clamp)
        rm = np.zeros(self.stream.num_events, dtype=bool)
        rm[S] = True
        ev_i = self.event
        s_, d_, t_ = int(src[ev_i]), int(dst[ev_i]), float(self.stream.t[ev_i])
        logit, recs = self.emb.logit(X, s_, d_, t_, ev_i, rm, len(S))
        logit_struct, recs0 = self.emb.logit(self.U_fin, s_, d_, t_, ev_i, rm, len(S))
        read = np.unique(np.concatenate([[r["node"] for r in recs]] + [r["nbr"] for r in recs]))
        dX = (X - self.U_fin).double()
        res = dict(
            S=S.tolist(), tau=tau, x0=int(x0), steps_from_removal=int(n_steps - x0),
            events_back=int(self.event - S.min()),
            logit=logit, dlogit=logit - self.p_orig, logit_struct=logit_struct,
            dlogit_struct=logit_struct - self.p_orig, flip=bool(logit * self.p_orig < 0),
            snaps=snaps,
            work=int(tr_work.sum()), work_need=int(tr_work_need.sum()),
            peak_pert=int(tr_pert.max()), peak_pert_need=int(tr_pert_need.max()),
            final_pert_nodes=int((dX.abs().max(dim=1).values > 0).sum()),
            read_nodes=len(read),
            reach_read=bool((bg[read] > 0).any()) if bounds else None,
            read_pert=int((dX[torch.as_tensor(read)].abs().max(dim=1).values > 0).sum()),
            read_maxabs=float(dX[torch.as_tensor(read)].abs().max()),
            read_l2max=float(dX[torch.as_tensor(read)].norm(dim=1).max()),
            endpoint_l2=[float(dX[s_].norm()), float(dX[d_].norm())],
        )
        if bounds:
            res.update(
                bound_glob_read=float(bg[read].max()), bound_loc_read=float(bl[read].max()),
                true_l2_read=float(dX[torch.as_tensor(read)].norm(dim=1).max()),
                B_glob=abs(logit_struct - self.p_orig) + self.emb.bound(recs0, bg),
                B_ibp=abs(logit_struct - self.p_orig)
                + self.emb.bound(recs0, Rv.norm(dim=1).numpy()),
                violations=dict(ibp=viol_ibp, glob=viol_g, loc=viol_l),
                bound_ibp_read=float(Rv[torch.as_tensor(read)].norm(dim=1).max()),
                ibp_rad_inf_read=float(Rv[torch.as_tensor(read)].max()),
                B_loc=abs(logit_struct - self.p_orig) + self.emb.bound(recs0, bl),
                B_att_with_true_mem=abs(logit_struct - self.p_orig)
                + self.emb.bound(recs0, dX.norm(dim=1).numpy()),
                b_star=self.b_star(recs0, abs(self.p_orig) - abs(logit_struct - self.p_orig)),
                B_trivial=abs(logit_struct - self.p_orig)
                + self.emb.bound(recs0, np.full(self.N, self.clamp)),
            )
            g = np.concatenate(gains) if gains else np.zeros(0)
            res.update(gain_n=int(len(g)),
                       gain_med=float(np.median(g)) if len(g) else None,
                       gain_p90=float(np.percentile(g, 90)) if len(g) else None,
                       gain_frac_lt1=float((g < 1).mean()) if len(g) else None)
        if tau > 0:
            res["tol_err_bound_local"] = self.emb.bound(recs, br)
            res["tol_resid_read_local"] = float(br[read].max())
        trace = dict(pert=tr_pert, pert_need=tr_pert_need, work=tr_work, work_need=tr_work_need,
                     maxabs=tr_max, l2=tr_l2, bg=tr_bg, bl=tr_bl, bi=tr_bi)
        return res, trace

    def b_star(self, recs, room):
        """Largest uniform bound b on |dX[n]|_2 at every node for which the attention +
        decoder bound stays below ``room`` (bisection in log space)."""
        if room <= 0:
            return 0.0
        lo, hi = 1e-12, self.clamp
        if self.emb.bound(recs, np.full(self.N, hi)) < room:
            return hi
        for _ in range(60):
            mid = math.sqrt(lo * hi)
            if self.emb.bound(recs, np.full(self.N, mid)) < room:
                lo = mid
            else:
                hi = mid
        return lo

    def generic_logit(self, S):
        """The model's own masked replay + predict (validation)."""
        m = self.model
        st = m.state
        from cftgnn.models.state import State
        base = State(self.b0, torch.zeros(self.stream.num_events, dtype=torch.bool),
                     self.base_mem, self.base_lu, self.base_pend)
        m.restore(base)
        mask = np.zeros(self.stream.num_events, dtype=bool)
        mask[list(S)] = True
        with torch.no_grad():
            m.advance(self.b0, self.event, mask)
            return float(m.predict([self.src[self.event]], [self.dst[self.event]],
                                   [self.stream.t[self.event]])[0])


def main():
    ds, event = sys.argv[1], int(sys.argv[2])
    n_pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    tol_singles = int(sys.argv[4]) if len(sys.argv) > 4 else 16
    out = f"notebooks/far_back_study/out/{ds}_{event}"
    os.makedirs(out, exist_ok=True)
    st = Study(ds, event)
    g = st.g
    info = dict(dataset=ds, event=event, b0=st.b0, candidates=st.cand.tolist(),
                span=int(event - st.cand[0]), steps=len(st.steps), p_orig=st.p_orig,
                p_predict=st.p_pred, setup_s=st.t_setup, base_s=st.t_setup_base,
                jac_s=st.t_jac, jac_rows=st.n_jac_rows,
                total_rows=int(sum(len(r[0]) for r in st.rec)),
                needed_rows=int(sum((st.need[r[0]] >= x + 1).sum() for x, r in enumerate(st.rec))),
                final_nodes=len(st.final_nodes),
                gru_norms=g.norms, Ginf=g.Ginf, Lg_self=float(g.Lg_self),
                Lg_other=float(g.Lg_other),
                emb=dict(nQ=st.emb.nQ, nK=st.emb.nK, nV=st.emb.nV, nSkip=st.emb.nSkip,
                         nDs=st.emb.nDs, nDd=st.emb.nDd, nOut=st.emb.nOut),
                jn_quantiles={k: np.percentile(np.concatenate([j[:, c] for j in st.jn])[
                    np.concatenate([j[:, c] for j in st.jn]) > 0], [10, 50, 90, 99]).tolist()
                    for c, k in ((0, "self"), (1, "other"))})
    print(json.dumps({k: v for k, v in info.items() if k != "candidates"}, indent=1), flush=True)
    rng = np.random.default_rng(event)
    cand = st.cand.tolist()
    singles = [[c] for c in cand]
    pairs = [sorted(rng.choice(cand, 2, replace=False).tolist()) for _ in range(n_pairs)]
    # validation against the model's own replay
    val = []
    for S in [singles[0], singles[len(singles) // 2], pairs[0]]:
        r, _ = st.run(S, bounds=False)
        val.append(dict(S=S, mine=r["logit"], generic=st.generic_logit(S)))
    info["validation"] = val
    print("validation", val, flush=True)
    results, traces = [], {}
    t0 = time.perf_counter()
    for kind, sets in (("single", singles), ("pair", pairs)):
        for S in sets:
            r, tr = st.run(S, 0.0, bounds=True)
            r["kind"] = kind
            results.append(r)
            traces["exact_" + "_".join(map(str, S))] = tr
            print(kind, S, {k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()
                            if k in ("events_back", "dlogit", "dlogit_struct", "flip", "work_need",
                                     "peak_pert", "read_l2max", "B_glob", "B_loc", "gain_med")},
                  flush=True)
    info["exact_s"] = time.perf_counter() - t0
    if os.environ.get("EXACT_ONLY"):
        json.dump(dict(info=info, exact=results), open(f"{out}/results_exact.json", "w"),
                  indent=1, default=float)
        print("done exact only", info["exact_s"])
        return
    # tolerance pruning on a subset: the oldest singles (spread) and all pairs
    idx = np.unique(np.linspace(0, len(singles) - 1, tol_singles).round().astype(int))
    tol_sets = [("single", singles[i]) for i in idx] + [("pair", p) for p in pairs]
    t0 = time.perf_counter()
    tol = []
    for kind, S in tol_sets:
        for tau in TAUS[1:]:
            r, tr = st.run(S, tau, bounds=False)
            r["kind"] = kind
            tol.append(r)
            traces[f"tau{tau:g}_" + "_".join(map(str, S))] = tr
    info["tol_s"] = time.perf_counter() - t0
    json.dump(dict(info=info, exact=results, tol=tol), open(f"{out}/results.json", "w"),
              indent=1, default=float)
    np.savez_compressed(f"{out}/traces.npz", **{f"{k}__{kk}": vv for k, v in traces.items()
                                               for kk, vv in v.items()})
    print("done", info["exact_s"], info["tol_s"])


if __name__ == "__main__":
    main()
