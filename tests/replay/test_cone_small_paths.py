"""The cone replay's cheaper paths for the few rows of a single removal set
give bitwise what the general paths give: each is compared here with the code it replaces,
unit by unit and through the logits of whole exact calls."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from testsupport.cone_cases import exact_logits, sparse_case

from cftgnn import arrays
from cftgnn.data import make_synthetic_stream
from cftgnn.data.index import concat_ranges
from cftgnn.models import TGN
from cftgnn.models import tgn as tgn_module
from cftgnn.models.tgn import other_endpoint
from cftgnn.replay.tgn import cone, rows_kernels, trajectory
from cftgnn.replay.tgn.occupancy import occupancy
from cftgnn.replay.tgn.rows import RowTable
from cftgnn.replay.tgn.rows_kernels import (
    groups,
    revive_pairs,
    sorted_groups,
)
from cftgnn.replay.tgn.trajectory import Dependencies, receivers


def _void_unique(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``distinct_rows`` as it was: ``np.unique`` of the rows as opaque bytes."""
    key = np.ascontiguousarray(key, dtype=np.int64)
    rows = key.view(np.dtype((np.void, 8 * key.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return first.astype(np.int64), inverse.reshape(-1).astype(np.int64)


@pytest.mark.parametrize("seed", range(3))
def test_small_unique_and_distinct_rows_are_numpys(seed):
    rng = np.random.default_rng(seed)
    for trial in range(400):
        m = int(rng.integers(0, 2 * arrays.SMALL + 2))  # both sides of the threshold
        c = int(rng.integers(1, 4))
        # few distinct values (ties), negative ones and ones whose bytes order differs
        # from their numeric order
        pool = (rng.integers(-2**62, 2**62, size=(4, c)) if trial % 2
                else rng.integers(-300, 300, size=(5, c)))
        key = pool[rng.integers(0, len(pool), size=m)].reshape(m, c)
        first, inverse = arrays.distinct_rows(key)
        want_first, want_inverse = _void_unique(key)
        assert np.array_equal(first, want_first) and np.array_equal(inverse, want_inverse)
        values = key[:, 0]
        for index in (False, True):
            for inv in (False, True):
                got = arrays.unique(values, return_index=index, return_inverse=inv)
                want = np.unique(values, return_index=index, return_inverse=inv)
                got, want = (g if isinstance(g, tuple) else (g,) for g in (got, want))
                assert len(got) == len(want)
                for g, w in zip(got, want, strict=True):
                    assert g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g, w)


def _update_as_it_was(model: TGN, ev, mem_self, lu_self, mem_other, other_of, chunk):
    """``TGN.message_update_shared`` before the shortcuts: every gather made, the edge
    features concatenated, the rows written to a buffer chunk by chunk."""
    d, gru, dev = model.memory_dim, model.gru, mem_self.device
    w_ih, b_hh = gru.weight_ih, gru.bias_hh
    w_self = torch.cat([w_ih[:, :d], gru.weight_hh])
    first, rest_of = _void_unique(np.stack([ev, lu_self.view(np.int64)], axis=1))
    dt = torch.as_tensor(model.stream.t[ev[first]] - lu_self[first], device=dev)
    rest = torch.cat([model.edge_features[torch.as_tensor(ev[first], device=dev)],
                      model.msg_time_enc(dt.to(mem_self.dtype))], dim=-1)
    y_rest = F.linear(rest, w_ih[:, 2 * d:], gru.bias_ih)
    y_other = F.linear(mem_other, w_ih[:, d:2 * d])
    o_t, r_t = torch.as_tensor(np.stack([other_of, rest_of]).astype(np.int64), device=dev)
    out = torch.empty_like(mem_self)
    for lo in range(0, len(ev), chunk):
        hi = min(lo + chunk, len(ev))
        h = mem_self[lo:hi]
        x = F.linear(h, w_self)
        gi = x[:, :3 * d] + y_other.index_select(0, o_t[lo:hi]) + y_rest.index_select(
            0, r_t[lo:hi])
        gh = x[:, 3 * d:] + b_hh
        r = torch.sigmoid(gi[:, :d] + gh[:, :d])
        z = torch.sigmoid(gi[:, d:2 * d] + gh[:, d:2 * d])
        n = torch.tanh(gi[:, 2 * d:] + r * gh[:, 2 * d:])
        out[lo:hi] = (1 - z) * n + z * h
    return out


@pytest.mark.parametrize("feat_dim", [0, 2])
@pytest.mark.parametrize("chunk", [1024, 2])
def test_gru_update_shortcuts_are_bitwise(monkeypatch, feat_dim, chunk):
    monkeypatch.setattr(tgn_module, "_GRU_CHUNK", chunk)  # 2: the in-order rows by chunk
    stream = make_synthetic_stream(20, 300, seed=1, feat_dim=feat_dim)
    torch.manual_seed(0)
    model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8,
                embedding_dim=8, num_layers=1, num_heads=1, num_neighbors=3, batch_size=20)
    model.attach(stream)
    rng = np.random.default_rng(feat_dim)
    cases = 0
    for m in (1, 2, 3, 5, 20, 40):
        ev = np.sort(rng.choice(np.arange(100, 200), size=m, replace=False))
        lu = stream.t[ev] - rng.integers(1, 50, m)
        mem_self = torch.randn(m, 16)
        for kind in ("in order", "shuffled", "shared", "same messages"):
            e, t = ev, lu
            if kind == "same messages":  # equal (event, last update): fewer rest rows
                e, t = np.repeat(ev[:1], m), np.repeat(lu[:1], m)
            if kind == "shared":
                mem_other, of = torch.randn((m + 1) // 2, 16), np.arange(m) // 2
            else:
                mem_other, of = torch.randn(m, 16), np.arange(m)
                if kind == "shuffled":
                    of = rng.permutation(m)
            with torch.no_grad():
                got = model.message_update_shared(e, mem_self, t, mem_other, of)
                want = _update_as_it_was(model, e, mem_self, t, mem_other, of, chunk)
            assert torch.equal(got.view(torch.int32), want.view(torch.int32)), (m, kind)
            cases += 1
    assert cases == 24


@pytest.mark.parametrize("seed", range(3))
def test_sorted_groups_of_increasing_keys_are_the_rows_in_order(seed):
    rng = np.random.default_rng(seed)
    for m in (0, 1, 2, 5, arrays.SMALL + 3, 60):
        primary = np.cumsum(rng.integers(1, 4, m))  # strictly increasing
        other = rng.integers(0, 3, m)
        key = np.column_stack([primary, other])
        heads, group = sorted_groups(key, (other, primary))
        first, inverse = groups(key)  # the general path, written out
        order = np.lexsort((other[first], primary[first]))
        rank = np.empty(len(first), dtype=np.int64)
        rank[order] = np.arange(len(first))
        assert np.array_equal(heads, first[order]) and np.array_equal(group, rank[inverse])
        assert np.array_equal(heads, np.arange(m)) and np.array_equal(group, np.arange(m))


@pytest.mark.parametrize("seed", range(3))
def test_one_sets_revive_pairs_are_the_general_paths(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    found = 0
    for _ in range(300):
        num_c, size = int(rng.integers(1, 8)), int(rng.integers(1, 6))
        rowmap = np.asfortranarray(rng.integers(-1, size, (1, num_c)).astype(np.int32))
        columns = np.where(rng.random(12) < 0.8, rng.integers(0, num_c, 12), -1)
        differs = np.append(rng.random(size) < 0.6, False)
        senders = np.unique(rng.integers(0, 12, int(rng.integers(1, 4))))
        k = int(rng.integers(1, arrays.SMALL + 1))
        of, n = rng.integers(0, len(senders), k), rng.integers(0, 12, k)
        occupied = occupancy(rowmap)
        got = revive_pairs(rowmap, occupied, columns, differs, senders, of, n)
        with monkeypatch.context() as m:
            m.setattr(rows_kernels, "SMALL", -1)  # the scans and the compiled loop
            want = revive_pairs(rowmap, occupied, columns, differs, senders, of, n)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype == np.int64 and np.array_equal(g, w)
        found += len(want[0])
    assert found > 50  # pairs were found, not only empty answers


def test_covers_is_membership():
    rng = np.random.default_rng(0)
    for _ in range(200):
        universe = np.unique(rng.integers(0, 40, int(rng.integers(0, 12))))
        events = np.unique(rng.integers(0, 40, int(rng.integers(0, 5))))
        deps = Dependencies(universe, [], [], np.zeros(0, dtype=np.int64),
                            np.zeros(0, dtype=np.int64), 0)
        assert deps.covers(events) == bool(np.isin(events, universe).all())


def _revive_as_it_was(self, rec, receivers_, mem_eq, checked, src, dst):
    """``RowTable.revive`` before the receivers were kept per batch: masks over the batch's
    nodes in every call (``receivers_`` unused; ``need`` and ``x`` from the test)."""
    need, x = _REVIVE_CONTEXT[-1]
    rec_pend = rec.recorded_pending()
    size = self.size
    differs = np.zeros(size + 1, dtype=bool)
    differs[:size] = self.alive[:size] & checked & ~mem_eq
    if not differs.any():
        return
    is_sender = np.zeros(len(self.columns), dtype=bool)
    is_sender[self.n[np.flatnonzero(differs[:size])]] = True
    v = np.flatnonzero((rec_pend >= 0) & (need[rec.nodes] > x) & (self.columns[rec.nodes] >= 0))
    if not len(v):
        return
    n = rec.nodes[v]
    o = other_endpoint(src, dst, rec_pend[v], n)
    hit = is_sender[o] & (o != n)
    v, n, o = v[hit], n[hit], o[hit]
    if not len(v):
        return
    senders, of = np.unique(o, return_inverse=True)
    pp, jj, key = revive_pairs(self.rowmap, self.occupied, self.columns, differs, senders,
                               of.reshape(-1), n)
    if not len(pp):
        return
    heads, group = sorted_groups(np.column_stack([jj, key]), (key, jj))
    lo_ = v[jj[heads]]
    new = self.add(pp[heads], n[jj[heads]], rec.mem_post[torch.as_tensor(lo_)],
                   rec.lu_post[lo_])
    self.pend[new] = rec_pend[lo_]
    self.write(pp, self.columns[n[jj]], new[group])
    self.mixed[new[np.bincount(group) > 1]] = True


_REVIVE_CONTEXT: list[tuple[np.ndarray, int]] = []


@pytest.mark.parametrize("num_layers", [1, 2])
def test_small_paths_leave_every_logit_bitwise_the_same(monkeypatch, num_layers):
    # long and sparse (far-back removals pruning retires early: quiet batches, revived
    # rows), one set at a time and 64 at once
    stream, model, sets, batch = sparse_case(num_layers)
    revived = []
    revive = RowTable.revive

    def counted(self, rec, receivers_, *args):
        revived.append(self.size)
        revive(self, rec, receivers_, *args)
        revived[-1] = self.size - revived[-1]

    monkeypatch.setattr(RowTable, "revive", counted)
    fast = exact_logits(stream, model, sets, batch)
    assert sum(revived) > 0  # rows were revived: the comparison covers that path
    monkeypatch.undo()
    # the general paths: NumPy's unique, every gather, hashing
    # and sorting to group, removals looked up in every batch, no batch skipped, the
    # receivers of revived rows found by masks over the batch's nodes in every call
    monkeypatch.setattr(arrays, "SMALL", -1)
    monkeypatch.setattr(tgn_module, "_in_order", lambda index, rows: False)
    monkeypatch.setattr(rows_kernels, "_increasing", lambda values: False)
    monkeypatch.setattr(rows_kernels, "SMALL", -1)
    monkeypatch.setattr(cone, "_removing",
                        lambda traj, removed: [True] * len(traj.batches))
    prune = RowTable.prune

    def prune_with_context(self, model_, rec, loc, x, need, *args):
        _REVIVE_CONTEXT.append((need, x))
        return prune(self, model_, rec, loc, x, need, *args)

    monkeypatch.setattr(RowTable, "prune", prune_with_context)
    monkeypatch.setattr(RowTable, "revive", _revive_as_it_was)
    slow = exact_logits(stream, model, sets, batch)
    for got, want in zip(fast, slow, strict=True):
        assert np.array_equal(got, want)  # bitwise, not within a tolerance


def test_receivers_are_the_nodes_a_sender_reaches():
    stream = make_synthetic_stream(30, 400, seed=2, feat_dim=0, p_tie=0.3)
    src, dst = stream.src, stream.dst
    events = np.arange(100, 140)
    nodes = np.unique(np.concatenate([src[events], dst[events], [0, 1]]))
    rec = trajectory.batch_record(events, nodes, None, None, np.zeros(len(nodes)), src, dst)
    rng = np.random.default_rng(0)
    need = rng.integers(0, 4, stream.num_nodes)
    columns = np.where(rng.random(stream.num_nodes) < 0.7, 1, -1)
    by_sender, at = receivers(rec, 2, need, columns, src, dst)
    pend = rec.recorded_pending()
    want = [v for v in range(len(nodes)) if pend[v] >= 0 and need[nodes[v]] > 2
            and columns[nodes[v]] >= 0
            and int(other_endpoint(src, dst, pend[v], nodes[v])) != nodes[v]]
    assert sorted(at.tolist()) == want and len(at) > 0
    assert np.array_equal(by_sender, other_endpoint(src, dst, pend[at], nodes[at]))
    assert (np.diff(by_sender) >= 0).all()
    for s in np.unique(by_sender):  # ascending positions within a sender
        assert (np.diff(at[by_sender == s]) > 0).all()
    # the positions of any few senders' receivers, in order, by binary search
    picked = np.unique(by_sender)[::2]
    lo, hi = np.searchsorted(by_sender, picked), np.searchsorted(by_sender, picked, "right")
    assert np.sort(at[concat_ranges(lo, hi)]).tolist() == [
        v for v in want if int(other_endpoint(src, dst, pend[v], nodes[v])) in set(picked.tolist())]
    assert np.array_equal(rec.pending_at(np.arange(len(nodes))), pend)


@pytest.mark.parametrize("dim", [16, 100])
def test_gru_update_of_many_other_endpoints_is_bitwise(dim):
    """More distinct other endpoints than ``_PRODUCT_CHUNK``: their product is computed in
    nearly equal chunks (``_linear_in_chunks``), with the bits of one product, including
    the counts that a fixed chunk size would leave a remainder of 1 to 3 rows for (the
    small-matrix path, whose bits differ)."""
    stream = make_synthetic_stream(20, 300, seed=1, feat_dim=2)
    torch.manual_seed(0)
    model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=dim, time_dim=8,
                embedding_dim=8, num_layers=1, num_heads=1, num_neighbors=3, batch_size=20)
    model.attach(stream)
    rng = np.random.default_rng(dim)
    chunk = tgn_module._PRODUCT_CHUNK
    for o in (chunk + 1, chunk + 3, 2 * chunk + 1, 3 * chunk - 2):
        m = o + 7
        ev = rng.integers(100, 200, m)
        lu = stream.t[ev] - rng.integers(1, 50, m)
        mem_self, mem_other = torch.randn(m, dim), torch.randn(o, dim)
        of = np.concatenate([rng.permutation(o), rng.integers(0, o, 7)])
        with torch.no_grad():
            got = model.message_update_shared(ev, mem_self, lu, mem_other, of)
            want = _update_as_it_was(model, ev, mem_self, lu, mem_other, of, 1024)
        assert torch.equal(got.view(torch.int32), want.view(torch.int32)), o
