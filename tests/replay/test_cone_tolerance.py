"""Tolerance pruning of the causal-cone replay (``prune_tolerance``): ``0.0`` is the exact,
bitwise path unchanged; ``τ > 0`` is opt-in and not exact, but on toy streams its logits stay
close to fresh replays while it updates fewer rows."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from testsupport.planted import huge_cone_stream

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.models import TGN
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.replay.tgn import TGNReplay, TGNReplayOptions
from cftgnn.replay.tgn.compare import memory_equal
from cftgnn.replay.tgn.cone import ConeStats


def tgn(stream: EventStream, num_layers: int = 1, seed: int = 0) -> TGN:
    torch.manual_seed(seed)
    return TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8, embedding_dim=16,
               num_layers=num_layers, num_heads=2, num_neighbors=5, batch_size=20)


def small_sets(cand: list[int], k: int) -> list[frozenset[int]]:
    return [frozenset(c) for s in range(1, k + 1) for c in itertools.combinations(cand, s)]


def replay(model: TGN, stream: EventStream, event: int, m_max: int, **options: float
           ) -> tuple[EventReplay, ConeStats]:
    stats = ConeStats()
    engine = ReplayEngine(model, stream)
    assert isinstance(engine.replay, TGNReplay)
    engine.replay.options = TGNReplayOptions(local_max_events=0, stats=stats,
                                              memory_budget_gb=None, **options)
    return EventReplay(engine, event, m_max=m_max), stats


def test_zero_tolerance_compares_bit_for_bit():
    rec = torch.tensor([[0.0, 1.0], [0.5, -0.25], [0.5, 0.25]])
    mem = rec.clone()
    mem[1, 1] = torch.nextafter(rec[1, 1], torch.tensor(1.0))  # one ulp apart
    mem[2, 0] = 0.5 + 1e-6
    mem[0, 0] = -0.0  # equal as numbers, not as bits
    idx = torch.arange(3)
    assert memory_equal(mem, idx, rec, idx, 0.0).tolist() == [False, False, False]
    assert memory_equal(mem, idx, rec, idx, 1e-7).tolist() == [True, True, False]
    assert memory_equal(mem, idx, rec, idx, 1e-5).tolist() == [True, True, True]
    assert memory_equal(rec, idx, rec, idx, 0.0).tolist() == [True, True, True]


@pytest.mark.parametrize("rows", [3, 200])  # one pass of few rows, two passes of many
@pytest.mark.parametrize("compiled", [False, True])
def test_every_cpu_path_of_the_exact_comparison_gives_the_same_booleans(rows, compiled,
                                                                        monkeypatch):
    """The compiled loop, NumPy's gather (few rows, no numba: a single call's search) and
    torch's (many rows, no numba) answer alike, host or tensor indices, -0.0 unlike 0.0."""
    from cftgnn import jit

    if compiled and not jit.ENABLED:
        pytest.skip("numba is not installed (or CFTGNN_JIT=0) here")
    monkeypatch.setattr(jit, "ENABLED", compiled)
    gen = torch.Generator().manual_seed(rows)
    rec = torch.randint(-2, 3, (50, 6), generator=gen).float() / 4  # many equal values
    rec[rec == 0] = -0.0 if rows == 3 else 0.0
    src = torch.randint(0, 50, (40,), generator=gen)  # mem's row i is rec's row src[i]...
    mem = rec[src].clone()
    mem[torch.arange(40) % 3 == 0, 0] = 0.0  # ...but a third of them part by a sign bit
    rt = torch.randint(0, 40, (rows,), generator=gen)
    lt = torch.randint(0, 50, (rows,), generator=gen)
    lt[: (rows + 1) // 2] = src[rt[: (rows + 1) // 2]]  # half compared with their own row
    rt[0], lt[0] = 1, src[1]  # one pair equal for certain
    want = (mem[rt].view(torch.int32) == rec[lt].view(torch.int32)).all(dim=1).numpy()
    assert want.any() and not want.all()
    for r, l_ in ((rt, lt), (rt.numpy(), lt.numpy())):
        np.testing.assert_array_equal(memory_equal(mem, r, rec, l_, 0.0), want)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_zero_tolerance_is_the_exact_path(num_layers):
    # a stream where exact pruning retires rows: τ = 0 must give the very same logits
    stream = make_synthetic_stream(60, 2000, seed=3, feat_dim=1, p_tie=0.3)
    model = tgn(stream, num_layers)
    default, s_default = replay(model, stream, 1999, 24)
    zero, s_zero = replay(model, stream, 1999, 24, prune_tolerance=0.0)
    sets = small_sets(default.candidates.ids.tolist(), 2)
    want = default.exact(sets)
    got = zero.exact(sets)
    assert np.array_equal(got, want)  # bit for bit
    assert s_default.rows_pruned > 0  # pruning took place
    assert (s_zero.row_updates, s_zero.rows_pruned) == (s_default.row_updates,
                                                        s_default.rows_pruned)
    some = sets[:: max(1, len(sets) // 20)]
    np.testing.assert_allclose(zero.exact(some), zero.exact_replay(some), atol=1e-5)


@pytest.mark.parametrize("tau", [1e-5, 1e-4])
def test_tolerance_stays_close_to_fresh_replays_with_less_work(tau):
    # far-back removals perturb every node a little for thousands of events
    stream = huge_cone_stream(num_events=1500, name="far_back")
    model = tgn(stream, 1, seed=3)
    last = stream.num_events - 1
    exact, s_exact = replay(model, stream, last, 16)
    approx, s_approx = replay(model, stream, last, 16, prune_tolerance=tau)
    cand = exact.candidates.ids.tolist()
    rng = np.random.default_rng(0)
    sets = [frozenset([c]) for c in cand] + [
        frozenset(rng.choice(cand, size=int(rng.integers(2, 6)), replace=False).tolist())
        for _ in range(20)]
    want = exact.exact(sets)
    got = approx.exact(sets)
    assert s_exact.calls == s_approx.calls == 1  # the same sets in one call each
    assert s_approx.row_updates <= s_exact.row_updates
    assert s_approx.row_updates < s_exact.row_updates  # and it does prune more here
    np.testing.assert_allclose(got, want, atol=1e-4)  # not exact: close, on this stream
    some = sets[::4]
    np.testing.assert_allclose(approx.exact(some), exact.exact_replay(some), atol=1e-4)


@pytest.mark.parametrize("bad", [-1e-6, float("nan"), float("inf")])
def test_a_negative_or_infinite_tolerance_is_refused(bad):
    stream = huge_cone_stream(12, 300, name="far_back")
    model = tgn(stream, 1)
    rep, _ = replay(model, stream, 299, 8, prune_tolerance=bad)
    with pytest.raises(ValueError, match="tolerance must be a finite number >= 0"):
        rep.exact([frozenset([int(rep.candidates.ids[0])])])
