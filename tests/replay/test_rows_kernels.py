"""The row map's kernels (``cftgnn.replay.tgn.rows_kernels``) find what the 2-D NumPy
operations they replace find: the same entries, column by column, the same rows of (set,
node) pairs, and the same groups of equal rows with the same first rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cftgnn import jit
from cftgnn.arrays import distinct_rows, mask_words
from cftgnn.replay.tgn import occupancy as occupancy_module
from cftgnn.replay.tgn import row_steps, rows_kernels
from cftgnn.replay.tgn.compare import probed_bits, rows_equal
from cftgnn.replay.tgn.occupancy import lowest_bit, occupancy, set_bits, write_entries
from cftgnn.replay.tgn.prune_steps import prune_candidates
from cftgnn.replay.tgn.record import SharedRows
from cftgnn.replay.tgn.row_steps import (
    mixed_pairs,
    mixed_rows,
    new_pending,
    revive_receivers,
    split_pairs,
    unique_inverse,
)
from cftgnn.replay.tgn.rows import RowTable
from cftgnn.replay.tgn.rows_kernels import (
    column_hits,
    column_view,
    groups,
    key_groups,
    last_kept,
    lookup,
    map_at,
    move_rows,
    referenced,
    remap_columns,
    revive_pairs,
    sender_rows,
    sorted_groups,
)
from cftgnn.replay.tgn.trajectory import BatchRecord
from cftgnn.replay.tgn.trajectory import receivers as trajectory_receivers


@pytest.fixture(params=[True, False], ids=["numba", "numpy"], autouse=True)
def compiled(request, monkeypatch):
    """Every test twice: with the compiled loops and with their NumPy (and torch) twins,
    which must give the same answers."""
    if request.param and not jit.ENABLED:
        pytest.skip("numba is not installed: only the NumPy twins run here")
    monkeypatch.setattr(jit, "ENABLED", request.param)
    return request.param


def _rowmap(seed: int, num_p: int = 37, num_c: int = 11, size: int = 9) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((num_p, num_c)) < 0.3, rng.integers(0, size, (num_p, num_c)), -1)
    return np.asfortranarray(dense.astype(np.int32))


@pytest.mark.parametrize("num_p", [37, 130], ids=["one word", "three words"])
@pytest.mark.parametrize("seed", range(5))
def test_column_scans_find_the_entries_of_np_nonzero_column_by_column(seed, num_p):
    rowmap = _rowmap(seed, num_p)
    occupied = occupancy(rowmap)
    rng = np.random.default_rng(seed + 100)
    cols = np.sort(rng.choice(rowmap.shape[1], size=5, replace=False))
    member = rng.random(9) < 0.5
    also = rng.random((rowmap.shape[0], len(cols))) < 0.1
    sub = rowmap[:, cols]
    for kwargs, mask in (({}, sub >= 0), ({"member": member}, (sub >= 0) & member[sub]),
                         ({"also": also}, (sub >= 0) | also)):
        pp, jj, rr = column_hits(rowmap, cols, **kwargs)
        want_j, want_p = np.nonzero(mask.T)  # column by column, sets ascending
        assert np.array_equal(pp, want_p) and np.array_equal(jj, want_j)
        assert np.array_equal(rr, sub[want_p, want_j])
    want_used = np.zeros(12, dtype=bool)  # rows 9..11: in no entry
    want_used[sub[sub >= 0]] = True
    assert np.array_equal(referenced(rowmap, occupied, cols, 12), want_used)
    table = rng.integers(-1, 9, size=9).astype(np.int32)
    want = rowmap.copy()
    want[:, cols] = np.where(sub >= 0, table[np.maximum(sub, 0)], -1)
    remap_columns(rowmap, occupied, cols, table)  # in place, through the column view
    assert np.array_equal(rowmap, want) and rowmap.flags.f_contiguous
    assert np.array_equal(occupied, occupancy(rowmap))  # the bits of the entries cleared
    view = column_view(rowmap)
    view[map_at(rowmap.shape[0], np.array([0]), cols[:1])] = -1  # the view writes to the map
    assert rowmap[0, cols[0]] == -1


@pytest.mark.parametrize("num_p", [1, 37, 64, 130], ids=lambda p: f"{p} sets")
@pytest.mark.parametrize("seed", range(4))
def test_occupancy_bits_follow_every_write_of_the_map(seed, num_p):
    rng = np.random.default_rng(seed)
    rowmap = _rowmap(seed, num_p, 9, 6)
    occupied = occupancy(rowmap)
    assert occupied.shape == (9, (num_p + 63) // 64) and occupied.dtype == np.uint64
    for c in range(9):  # bit p % 64 of word p // 64 of column c, exactly the entries held
        for q in range(num_p):
            bit = (int(occupied[c, q // 64]) >> (q % 64)) & 1
            assert bit == (rowmap[q, c] >= 0)
    cols = np.sort(rng.choice(9, 4, replace=False))
    pp, jj = set_bits(occupied, cols, num_p)  # column by column, sets ascending
    want_j, want_p = np.nonzero(rowmap[:, cols].T >= 0)
    assert np.array_equal(pp, want_p) and np.array_equal(jj, want_j)
    for _ in range(3):  # writes of rows and of -1 (distinct pairs), bits with them
        flat = rng.choice(num_p * 9, min(20, num_p * 9), replace=False)
        p, c = flat % num_p, flat // num_p
        values = rng.integers(-1, 6, len(flat))
        want = rowmap.copy()
        want[p, c] = values
        write_entries(rowmap, occupied, p, c, values)
        assert np.array_equal(rowmap, want) and rowmap.flags.f_contiguous
        assert np.array_equal(occupied, occupancy(rowmap))


@pytest.mark.parametrize(("num_bits", "words"), [(0, 1), (1, 1), (63, 1), (64, 1), (65, 2),
                                                  (128, 2), (129, 3)])
def test_a_mask_of_n_bits_has_a_word_per_64_bits_and_at_least_one(num_bits, words):
    assert mask_words(num_bits) == words


def test_a_row_map_of_no_sets_has_one_empty_word_per_column():
    """The occupancy bits follow the masks' rule (``mask_words``): before 2026-12-02 they
    alone counted no word for no sets, a bitmap of no column."""
    rowmap = np.full((0, 3), -1, dtype=np.int32, order="F")
    occupied = occupancy(rowmap)
    assert occupied.shape == (3, 1) and not occupied.any()
    table = RowTable(0, np.arange(3), 3, 2, torch.device("cpu"))
    assert np.array_equal(table.occupied, occupied) and table.occupied.shape == (3, 1)
    none = np.zeros(0, dtype=np.int64)
    write_entries(rowmap, occupied, none, none, none)
    assert not occupied.any() and all(len(a) == 0 for a in set_bits(occupied, np.arange(3), 0))
    assert not referenced(rowmap, occupied, np.arange(3), 4).any()


def test_lowest_bit_is_the_index_of_the_lowest_set_bit():
    assert sorted(occupancy_module._LOWEST.tolist()) == list(range(64))  # a permutation
    for i in range(64):
        for above in (0, 1 << 63, (1 << 64) - 1):
            word = np.uint64(((above >> (i + 1)) << (i + 1) if i < 63 else 0) | (1 << i))
            with np.errstate(over="ignore"):  # (the product is meant modulo 2**64)
                assert lowest_bit(word) == i


@pytest.mark.parametrize("num_p", [37, 130], ids=["one word", "three words"])
@pytest.mark.parametrize("seed", range(5))
def test_row_lookups_read_the_map_as_fancy_indexing_does(seed, num_p, monkeypatch):
    rowmap = _rowmap(seed, num_p)
    num_p, num_c = rowmap.shape
    rng = np.random.default_rng(seed + 200)
    num_nodes = 15
    columns = np.full(num_nodes, -1, dtype=np.int64)  # a few nodes have no column
    columns[rng.choice(num_nodes, num_c, replace=False)] = np.arange(num_c)
    p, n = rng.integers(0, num_p, 40), rng.integers(0, num_nodes, 40)
    want = np.where(columns[n] >= 0, rowmap[p, np.maximum(columns[n], 0)], -1)
    assert np.array_equal(lookup(rowmap, columns, p, n), want)
    src, dst = rng.integers(0, num_nodes, 30), rng.integers(0, num_nodes, 30)
    pend = rng.integers(-1, 30, 40)
    o = np.where(src[pend] == n, dst[pend], src[pend])  # models.tgn.other_endpoint
    want = np.where(pend < 0, -2, np.where(columns[o] >= 0, rowmap[p, np.maximum(columns[o], 0)],
                                           -1))
    assert np.array_equal(sender_rows(rowmap, columns, p, pend, n, src, dst), want)
    # revive's pairs: every (set, receiver) whose sender's row is flagged and which has no row
    senders = np.flatnonzero(columns >= 0)[:4]
    of = rng.integers(0, len(senders), 12)
    recv = rng.integers(0, num_nodes, 12)
    differs = rng.random(10) < 0.6
    occupied = occupancy(rowmap)
    pp, jj, key = revive_pairs(rowmap, occupied, columns, differs, senders, of, recv)
    monkeypatch.setattr(rows_kernels, "FEW_REVIVED", 1)  # the first lists overflow: go on
    again = revive_pairs(rowmap, occupied, columns, differs, senders, of, recv)
    assert all(np.array_equal(a, b) for a, b in zip((pp, jj, key), again, strict=True))
    want_rows = []
    for u, s_ in enumerate(senders):  # sender by sender, 64 sets at a time, receivers by
        for w in range(0, num_p, 64):  # index, sets ascending
            for j in np.flatnonzero(of == u):
                for q in range(w, min(w + 64, num_p)):
                    r = rowmap[q, columns[s_]]
                    if r >= 0 and differs[r] and (columns[recv[j]] < 0
                                                  or rowmap[q, columns[recv[j]]] < 0):
                        want_rows.append((q, j, r))
    assert [tuple(t) for t in np.stack([pp, jj, key], axis=1)] == want_rows
    assert len(want_rows) > 5  # pairs were found


@pytest.mark.parametrize("seed", range(8))
def test_mixed_pairs_are_the_pairs_whose_message_or_sender_differs_from_their_rows(
        seed, monkeypatch):
    rng = np.random.default_rng(seed)
    num_p, num_c, size, num_nodes = (23 if seed % 2 else 150), 7, 12, 10  # 1 or 3 words
    rowmap = _rowmap(seed, num_p, num_c, size)
    columns = np.full(num_nodes, -1, dtype=np.int64)
    columns[rng.choice(num_nodes, num_c, replace=False)] = np.arange(num_c)
    by_column = np.flatnonzero(columns >= 0)[np.argsort(columns[columns >= 0])]
    row_n = by_column[rng.integers(0, num_c, size)]  # each row's node has a column
    # the batch: 9 events among the nodes, each node's incidences ascending
    events = np.sort(rng.choice(500, 9, replace=False))
    src, dst = np.zeros(500, dtype=np.int64), np.zeros(500, dtype=np.int64)
    src[events], dst[events] = rng.integers(0, num_nodes, 9), rng.integers(0, num_nodes, 9)
    nodes = np.unique(np.concatenate([src[events], dst[events], row_n]))
    loc = np.full(num_nodes, -1, dtype=np.int64)
    loc[nodes] = np.arange(len(nodes))
    inc = [np.flatnonzero((src[events] == v) | (dst[events] == v)) for v in nodes]
    inc_k = np.concatenate(inc).astype(np.int64)
    inc_end = np.cumsum([len(i) for i in inc]).astype(np.int64)
    inc_start = inc_end - np.array([len(i) for i in inc])
    removable = rng.random(9) < 0.5  # the events some set may remove
    rem = (rng.random((num_p, 9)) < 0.5) & removable
    touched = rem.any(axis=0) | (rng.random(9) < 0.3)  # or more: the answer is the same
    is_m = np.append(rng.random(size) < 0.7, False)
    row_pend = rng.integers(-1, 500, size)
    row_pend[::2] = events[-1]
    mine = rng.integers(-2, size, size)
    want = []
    for c in range(num_c):  # column by column, sets ascending
        for q in range(num_p):
            r = rowmap[q, c]
            if r < 0 or not is_m[r] or not len(inc[loc[row_n[r]]]):
                continue
            kept = [k for k in inc[loc[row_n[r]]] if not rem[q, k]]
            e = int(events[max(kept)]) if kept else -1
            o = dst[e] if src[e] == row_n[r] else src[e]
            sender = -2 if e < 0 else (-1 if columns[o] < 0 else int(rowmap[q, columns[o]]))
            if e != row_pend[r] or sender != mine[r]:
                want.append((q, r, e, sender))
    has = np.array([len(inc[loc[row_n[r]]]) > 0 for r in range(size)] + [False])
    got = mixed_pairs(rowmap, occupancy(rowmap), columns, np.arange(num_c), is_m & has, row_n,
                      row_pend, mine, loc, events, inc_k, inc_start, inc_end, rem, touched,
                      src, dst)
    assert [tuple(t) for t in np.stack(got, axis=1).tolist()] == want
    assert all(a.dtype == np.int64 for a in got)
    monkeypatch.setattr(row_steps, "FEW_PAIRS", 3)  # the first lists overflow: run again
    again = mixed_pairs(rowmap, occupancy(rowmap), columns, np.arange(num_c), is_m & has,
                        row_n, row_pend, mine, loc, events, inc_k, inc_start, inc_end, rem,
                        touched, src, dst)
    assert all(np.array_equal(a, b) for a, b in zip(got, again, strict=True))


@pytest.mark.parametrize("seed", range(6))
def test_split_pairs_are_the_held_or_removing_entries_with_a_key(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    rowmap = _rowmap(seed, 29 if seed % 2 else 140, 8, 10)  # one word per column, or three
    num_p = rowmap.shape[0]
    cols = np.sort(rng.choice(8, 5, replace=False))
    rem = rng.random((num_p, 6)) < 0.2
    rem[:, 5] = False  # an event no set removes (touched or not: the same pairs)
    touched = rem.any(axis=0) | ((np.arange(6) == 5) & (seed % 3 == 0))
    last = rng.integers(0, 6, len(cols))
    width = 1 + seed % 2  # one word of removals, or two
    words = rng.integers(0, 2**63, (num_p, width), dtype=np.uint64) & np.uint64(0b1011)
    masks = rng.integers(0, 2**63, (len(cols), width), dtype=np.uint64) & np.uint64(0b0110)
    want = []
    for j, c in enumerate(cols):  # column by column, sets ascending
        for q in range(num_p):
            key = words[q] & masks[j]
            if (rowmap[q, c] >= 0 or rem[q, last[j]]) and key.any():
                want.append((q, j, *key.tolist()))
    occupied = occupancy(rowmap)
    got = split_pairs(rowmap, occupied, cols, rem, touched, last, words, masks)
    assert got[0].dtype == got[1].dtype == np.int64 and got[2].dtype == np.uint64
    assert [(q, j, *k) for q, j, k in zip(*(a.tolist() for a in got), strict=True)] == want
    monkeypatch.setattr(row_steps, "FEW_SPLIT", 2)  # the first lists overflow: go on
    again = split_pairs(rowmap, occupied, cols, rem, touched, last, words, masks)
    assert all(np.array_equal(a, b) for a, b in zip(got, again, strict=True))


@pytest.mark.parametrize("seed", range(4))
def test_move_rows_moves_the_rows_kept_down_in_place(seed):
    rng = np.random.default_rng(seed)
    mem = torch.randn(40, 5)
    keep = np.sort(rng.choice(40, int(rng.integers(0, 41)), replace=False))
    want, storage = mem[torch.as_tensor(keep)].clone(), mem.data_ptr()
    move_rows(mem, keep)
    assert torch.equal(mem[:len(keep)], want) and mem.data_ptr() == storage


@pytest.mark.parametrize("seed", range(8))
def test_revive_receivers_are_the_receivers_of_the_senders_holding_a_differing_row(seed):
    rng = np.random.default_rng(seed)
    num_nodes, size = 12, 30
    events = np.sort(rng.choice(300, 10, replace=False))
    src, dst = np.zeros(300, dtype=np.int64), np.zeros(300, dtype=np.int64)
    src[events], dst[events] = rng.integers(0, num_nodes, 10), rng.integers(0, num_nodes, 10)
    nodes = np.unique(np.concatenate([src[events], dst[events], rng.integers(0, num_nodes, 3)]))
    inc = [np.flatnonzero((src[events] == v) | (dst[events] == v)) for v in nodes]
    inc_end = np.cumsum([len(i) for i in inc]).astype(np.int64)
    empty = torch.zeros(len(nodes), 2)
    rec = BatchRecord(events, nodes, empty, empty, np.zeros(len(nodes)),
                      np.concatenate(inc).astype(np.int64), np.concatenate([[0], inc_end]))
    need = np.full(num_nodes, 10)
    receivers = trajectory_receivers(rec, 0, need, np.arange(num_nodes), src, dst)
    row_n = rng.integers(0, num_nodes, size + 5)  # a longer buffer than the rows in use
    differs = np.append(rng.random(size) < 0.2 * (seed % 4), False)
    got = revive_receivers(differs, row_n, num_nodes, receivers, rec, src, dst)
    holding = set(row_n[:size][differs[:-1]].tolist())
    pend = rec.recorded_pending()
    o = np.where(src[np.maximum(pend, 0)] == nodes, dst[np.maximum(pend, 0)],
                 src[np.maximum(pend, 0)])
    v = np.array([j for j in receivers[1] if o[j] in holding], dtype=np.int64)
    v.sort()
    senders = np.unique(o[v])
    want = (v, nodes[v], pend[v], senders, np.searchsorted(senders, o[v]))
    assert all(g.dtype == np.int64 and np.array_equal(g, w)
               for g, w in zip(got, want, strict=True))


@pytest.mark.parametrize("seed", range(6))
def test_mixed_rows_are_the_live_read_mixed_rows_with_a_new_message(seed):
    rng = np.random.default_rng(seed)
    num_p, num_c, num_nodes, size = 9, 6, 10, 25
    rowmap = _rowmap(seed, num_p, num_c, size)
    columns = np.full(num_nodes, -1, dtype=np.int64)
    columns[rng.choice(num_nodes, num_c, replace=False)] = np.arange(num_c)
    row_n = np.flatnonzero(columns >= 0)[rng.integers(0, num_c, size + 4)]
    mixed, alive = rng.random(size + 4) < 0.6, rng.random(size + 4) < 0.8
    read = rng.random(num_nodes) < 0.8
    loc = np.where(rng.random(num_nodes) < 0.8, rng.permutation(num_nodes), -1)
    inc_start = rng.integers(0, 3, num_nodes)
    inc_end = inc_start + rng.integers(0, 2, num_nodes)  # some without an event
    rep = rng.integers(0, num_p, size + 4)
    src, dst = rng.integers(0, num_nodes, 40), rng.integers(0, num_nodes, 40)
    row_pend = rng.integers(-1, 40, size + 4)
    is_m, mine, cols = mixed_rows(rowmap, columns, mixed, alive, row_n, size, read, loc,
                                  inc_start, inc_end, rep, row_pend, src, dst)
    want = [q for q in range(size) if mixed[q] and alive[q] and read[row_n[q]]
            and loc[row_n[q]] >= 0 and inc_end[loc[row_n[q]]] > inc_start[loc[row_n[q]]]]
    assert np.flatnonzero(is_m).tolist() == want and len(is_m) == size + 1
    assert np.array_equal(mine[want], sender_rows(rowmap, columns, rep[want], row_pend[want],
                                                  row_n[want], src, dst))
    assert cols.dtype == np.int64 and cols.tolist() == sorted(set(columns[row_n[want]]))


def _batch(rng: np.random.Generator, counts: tuple[int, ...]):
    """A batch of 12 events: ``(events, inc_k, inc_start, inc_end, rem)``, node ``v``'s
    events ``inc_k[inc_start[v]:inc_end[v]]`` (``counts[v]`` of them), 6 sets' removals."""
    events = np.sort(rng.choice(1000, 12, replace=False))
    inc_k = np.concatenate([np.sort(rng.choice(12, c, replace=False)) for c in counts])
    inc_end = np.cumsum(counts)
    inc_start = inc_end - np.array(counts)
    return events, inc_k, inc_start, inc_end, rng.random((6, 12)) < 0.4


@pytest.mark.parametrize("seed", range(5))
def test_last_kept_is_the_largest_event_of_the_node_the_set_keeps(seed):
    rng = np.random.default_rng(seed)
    events, inc_k, inc_start, inc_end, rem = _batch(rng, (3, 1, 5, 2))
    p, pos = rng.integers(0, 6, 50), rng.integers(0, 4, 50)
    want = [max((events[k] for k in inc_k[inc_start[v]:inc_end[v]] if not rem[q, k]),
                default=-1) for q, v in zip(p, pos, strict=True)]
    assert last_kept(events, inc_k, inc_start, inc_end, rem, p, pos).tolist() == want


def test_row_comparisons_are_bitwise():
    mem = torch.tensor([[1.0, 0.0, 2.0], [1.0, -0.0, 2.0], [1.0, 0.0, 2.0], [1.0, 0.0, 3.0]])
    a, b = np.array([0, 0, 0, 1]), np.array([1, 2, 3, 1])
    assert rows_equal(mem, a, b).tolist() == [False, True, False, True]  # -0.0 differs from 0.0
    cols = torch.tensor([0, 2])
    assert np.array_equal(probed_bits(mem, np.array([3, 1]), cols),
                          mem.view(torch.int32)[[3, 1]][:, [0, 2]].numpy())


def test_column_view_refuses_a_row_major_map():
    with pytest.raises(AssertionError, match="column-major"):
        column_view(np.ascontiguousarray(_rowmap(0)))


@pytest.mark.parametrize("seed", range(5))
def test_groups_partition_rows_as_distinct_rows_with_the_same_first_rows(seed):
    rng = np.random.default_rng(seed)
    key = rng.integers(-2, 3, size=(60, 4)) * np.array([1, 10**12, -(2**40), 1])
    key = np.repeat(key, rng.integers(1, 4, len(key)), axis=0)  # runs of equal rows
    first, inverse = groups(key)
    want_first, want_inverse = distinct_rows(key)
    assert np.array_equal(first[inverse], want_first[want_inverse])  # same first row per row
    assert np.array_equal(key[first][inverse], key)
    assert (first == np.array([np.flatnonzero(inverse == g).min()
                               for g in range(len(first))])).all()
    empty_first, empty_inverse = groups(key[:0])
    assert len(empty_first) == len(empty_inverse) == 0


@pytest.mark.parametrize("seed", range(5))
def test_sorted_groups_are_the_runs_of_a_stable_lexsort(seed):
    rng = np.random.default_rng(seed)
    m = 3000  # enough rows for the hash table's collisions and probe chains
    jj = rng.integers(0, 50, m)  # up to 1,250 groups
    words = rng.choice(np.array([0, 1, 2**63, 2**63 + 5, 2**40], dtype=np.uint64), (m, 2))
    heads, group = sorted_groups(np.column_stack([jj, words.view(np.int64)]),
                                 (*words.T[::-1], jj))
    order = np.lexsort((*words.T[::-1], jj))  # the sort it replaces (uint64 order, stable)
    sj, sw = jj[order], words[order]
    head = np.concatenate(([True], (sj[1:] != sj[:-1]) | (sw[1:] != sw[:-1]).any(axis=1)))
    want_group = np.empty(m, dtype=np.int64)
    want_group[order] = np.cumsum(head) - 1
    assert np.array_equal(heads, order[head]) and np.array_equal(group, want_group)


@pytest.mark.parametrize("seed", range(5))
def test_key_groups_are_sorted_groups_in_the_order_of_the_columns(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(0, 400))
    key = rng.integers(-3, 4, size=(m, 3)) * np.array([1, 2**62, 7])
    key[:, 1] |= rng.integers(0, 2, m) << 63  # negative as int64, large as uint64
    key = np.repeat(key, rng.integers(1, 4, m), axis=0)  # runs of equal rows
    for unsigned_from in (None, 1):
        columns = [key[:, c].view(np.uint64) if unsigned_from and c >= unsigned_from
                   else key[:, c] for c in range(3)]
        want = sorted_groups(key, tuple(columns[::-1]))
        got = key_groups(key, unsigned_from)
        assert all(g.dtype == np.int64 and np.array_equal(g, w)
                   for g, w in zip(got, want, strict=True))


def test_loops_compile_uncached_where_numba_finds_no_writable_cache():
    calls = []

    class NoCacheNumba:  # numba.njit(cache=True) raises this at decoration without a cache
        @staticmethod
        def njit(**options):
            calls.append(options)
            if options.get("cache"):
                raise RuntimeError("cannot cache function 'f': no locator available for file")
            return lambda f: f

    def f(x):
        return x

    assert jit._njit(NoCacheNumba, f) is f
    assert calls == [{"cache": True, "nogil": True}, {"nogil": True}]


def test_cftgnn_jit_0_runs_the_twins_without_importing_numba() -> None:
    """``CFTGNN_JIT=0``: numba is not imported and the compiled loops are off."""
    import subprocess
    import sys

    code = ("import sys, cftgnn.replay.tgn.rows_kernels, cftgnn.jit as j; "
            "print(j.ENABLED, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "CFTGNN_JIT": "0"}, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("seed", range(4))
def test_unique_inverse_is_np_unique_of_integers_in_a_range(seed):
    rng = np.random.default_rng(seed)
    key = rng.integers(-40, 60, 300)
    uniq, inverse = unique_inverse(key, -40, 60)
    want_uniq, want_inverse = np.unique(key, return_inverse=True)
    assert np.array_equal(uniq, want_uniq) and np.array_equal(inverse, want_inverse)
    assert uniq.dtype == inverse.dtype == np.int64
    empty = unique_inverse(key[:0], 0, 1)
    assert len(empty[0]) == len(empty[1]) == 0


@pytest.mark.parametrize("seed", range(4))
def test_new_pending_gives_live_read_rows_their_representatives_last_kept_event(seed):
    rng = np.random.default_rng(seed)
    events, inc_k, inc_start, inc_end, rem = _batch(rng, (3, 1, 5, 0))
    touched = rem.any(axis=0)
    size, num_nodes = 30, 7
    row_n, rep = rng.integers(0, num_nodes, size + 5), rng.integers(0, 6, size + 5)
    alive, read = rng.random(size + 5) < 0.8, rng.random(num_nodes) < 0.7
    loc = np.full(num_nodes, -1, dtype=np.int64)
    loc[rng.choice(num_nodes, 4, replace=False)] = np.arange(4)  # position 3: no event
    pend = rng.integers(-1, 1000, size + 5)
    want = pend.copy()
    for q in range(size):  # rows past size are left as they are
        v = loc[row_n[q]]
        if alive[q] and read[row_n[q]] and v >= 0 and inc_end[v] > inc_start[v]:
            want[q] = max((events[k] for k in inc_k[inc_start[v]:inc_end[v]]
                           if not rem[rep[q], k]), default=-1)
    new_pending(row_n, alive, rep, pend, size, read, loc, events, inc_k, inc_start, inc_end,
                rem, touched)
    assert np.array_equal(pend, want) and (pend != want).sum() == 0


@pytest.mark.parametrize("shared", [True, False], ids=["shared rows", "tensor"])
@pytest.mark.parametrize("seed", range(4))
def test_prune_candidates_are_the_rows_compared_with_the_recording(seed, shared):
    rng = np.random.default_rng(seed)
    size, num_nodes, dim, x = 40, 12, 6, 3
    alive = rng.random(size + 5) < 0.8  # longer than size: the rows past it are not read
    row_n = rng.integers(0, num_nodes, size + 5)
    need = rng.integers(1, 6, num_nodes)  # stale below x, the pending read above it
    nodes = np.sort(rng.choice(num_nodes, 7, replace=False))  # the batch's nodes
    loc = np.full(num_nodes, -1, dtype=np.int64)
    loc[nodes] = np.arange(7)
    recorded = torch.randn(7, dim)
    mem = recorded[rng.integers(0, 7, size + 5)].clone()
    mem[rng.random(size + 5) < 0.3, rng.integers(0, dim)] += 1.0  # differs on one coordinate
    for q in range(size):  # about half the rows of the batch's nodes equal their recording
        if loc[row_n[q]] >= 0 and rng.random() < 0.5:
            mem[q] = recorded[loc[row_n[q]]]
    lu_post = rng.choice([1.0, 2.0], 7)
    lu = rng.choice([1.0, 2.0], size + 5)
    events = np.array([10, 11, 12, 13], dtype=np.int64)
    inc = [rng.choice(4, int(rng.integers(0, 3)), replace=False) for _ in range(7)]
    inc_k = np.concatenate([np.sort(i) for i in inc]).astype(np.int64)
    inc_end = np.cumsum([len(i) for i in inc]).astype(np.int64)
    inc_start = inc_end - np.array([len(i) for i in inc])
    pend = rng.choice([-1, 10, 11, 12, 13], size + 5)
    if shared:  # the recording's rows in a shared table, in another order
        order = rng.permutation(7)
        table = torch.cat([torch.randn(2, dim), recorded[order]])
        ptr = torch.as_tensor(2 + np.argsort(order))
        mem_post = SharedRows(table, ptr)
    else:
        mem_post = recorded
    rec = BatchRecord(events, nodes, recorded, mem_post, lu_post, inc_k,
                      np.concatenate([inc_start[:1], inc_end]))
    got = prune_candidates(mem, alive, row_n, lu, pend, size, rec, loc, need, x, 0.0)
    stale, r = [], []
    for q in range(size):
        if alive[q] and need[row_n[q]] < x:
            stale.append(q)
        elif alive[q] and loc[row_n[q]] >= 0:
            r.append(q)
    lc = loc[row_n[r]]
    equal = [bool((mem[q].view(torch.int32) == recorded[p].view(torch.int32)).all())
             for q, p in zip(r, lc, strict=True)]
    theirs = [int(events[inc[p][inc[p].argmax()]]) if len(inc[p]) else -1 for p in lc]
    reads = need[row_n[r]] > x
    assert got.stale.tolist() == stale and got.r.tolist() == r and got.lc.tolist() == lc.tolist()
    assert np.flatnonzero(got.checked).tolist() == r
    assert np.flatnonzero(got.mem_eq).tolist() == [q for q, e in zip(r, equal, strict=True) if e]
    assert got.same.tolist() == [e and lu[q] == lu_post[p]
                                 for q, p, e in zip(r, lc, equal, strict=True)]
    assert got.theirs.tolist() == theirs and got.reads_pending.tolist() == reads.tolist()
    assert got.pend_ok.tolist() == [pend[q] == t or not rd
                                    for q, t, rd in zip(r, theirs, reads, strict=True)]
    assert len(stale) > 0 and 0 < sum(equal) < len(r)  # every kind of row was there
