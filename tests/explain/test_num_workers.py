"""``num_workers``: one size's sets split across forked processes give what one process gives
(answers, certificates, the oracle's cache and counters, every logit bitwise), and a bad
value is refused in one line."""

from __future__ import annotations

import itertools
import struct

import numpy as np
import pytest
import torch

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.errors import ConfigError, ExplainerError, OracleError
from cftgnn.explain import (
    ClosestStrategy,
    ExhaustiveExplainer,
    GreedyExplainer,
    RecentStrategy,
    search_by_size,
)
from cftgnn.explain import post as post_module
from cftgnn.explain.post import PostProcessing
from cftgnn.models import TGN
from cftgnn.oracle import Oracle
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.oracle.workers import check_workers, fork_available
from cftgnn.testing import AdditiveBackend, HashedBackend, ToyBackend, make_candidates

pytestmark = pytest.mark.skipif(not fork_available(), reason="num_workers > 1 needs fork")

F = frozenset
IDS = list(range(3, 40, 3))  # 13 removable events: 78 pairs, 286 triples


@pytest.fixture(autouse=True)
def one_thread():
    """num_workers > 1 runs with one torch thread (the workers' own)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _toy(backend: ToyBackend, num_workers: int = 1) -> Oracle:
    return Oracle(make_candidates(IDS), backend.logit(F()), exact=backend,
                  num_workers=num_workers)


def _logits(oracle: Oracle, max_size: int) -> list[bytes | None]:
    """Every exact logit the oracle holds for sets of sizes 1..max_size, as bytes."""
    events = sorted(int(e) for e in oracle.removable)
    out: list[bytes | None] = []
    for size in range(1, max_size + 1):
        for combo in itertools.combinations(events, size):
            value = oracle.cached_exact(F(combo))
            out.append(None if value is None else struct.pack("<d", value))
    return out


def _same(one: Oracle, many: Oracle, max_size: int) -> None:
    """The two oracles hold the same logits bitwise, the same certificate and counters
    (the backends' seconds apart)."""
    assert _logits(one, max_size) == _logits(many, max_size)
    assert one.certificate() == many.certificate()
    a, b = one.stats, many.stats
    assert (a.exact_calls, a.cache_hits, a.exact_batches, a.search_calls) == \
        (b.exact_calls, b.cache_hits, b.exact_batches, b.search_calls)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_toy_searches_agree_with_one_process(seed: int) -> None:
    """Hashed logits: flips at unrelated sizes; chunks of 16 sets across 2 processes."""
    backend = HashedBackend(1.0, spread=1.6, seed=seed)
    runs = {}
    for n in (1, 2):
        oracle = _toy(backend)
        oracle.exact_batch([F([IDS[0]]), F(IDS[1:3])])  # already cached: hits in the chunks
        runs[n] = oracle, search_by_size(oracle, IDS[::-1], 3, chunk_size=16, num_workers=n)
    (one, res1), (many, res2) = runs[1], runs[2]
    assert res1 == res2
    _same(one, many, 3)


def test_ties_across_chunks_go_to_the_better_ranked_set_as_with_one_process() -> None:
    # every pair flips with the same margin: the answer is the ranking's first pair, which
    # lies in another process's chunk than the first pair in time
    backend = AdditiveBackend(1.0, dict.fromkeys(IDS, 0.6))
    ranked = IDS[::-1]  # the latest events first: their pair is the last chunk in time
    results = [search_by_size(_toy(backend), ranked, 3, chunk_size=8, num_workers=n)
               for n in (1, 2, 3)]
    assert results[0].explanation == (ranked[0], ranked[1])
    assert results[1] == results[0] == results[2]


def test_a_call_budget_cuts_at_the_same_set() -> None:
    backend = HashedBackend(5.0, spread=1.0, seed=3)  # nothing flips: the budget decides
    runs = {}
    for n in (1, 2):
        oracle = _toy(backend)
        oracle.exact_batch([F(IDS[:2])])
        runs[n] = oracle, search_by_size(oracle, IDS, 3, chunk_size=10, max_calls=100,
                                         num_workers=n)
    (one, res1), (many, res2) = runs[1], runs[2]
    assert res1.cut_short and res1.sizes_done == 2  # 13 + 78 sets, then 9 triples
    assert res1 == res2
    assert one.stats.exact_calls == 1 + 100 == many.stats.exact_calls  # the pair before
    _same(one, many, 3)


def test_an_exhaustive_search_cut_short_records_the_share_one_process_records() -> None:
    """The same chunks are evaluated, and the parent enters every worker's logits into its
    oracle, so the share of the size cut short is one process's."""
    backend = HashedBackend(5.0, spread=1.0, seed=3)  # nothing flips: the budget decides
    results = {n: ExhaustiveExplainer(max_size=3, max_oracle_calls=100, chunk_size=10)
               .explain(_toy(backend, num_workers=n)) for n in (1, 2)}
    for result in results.values():  # 13 singles + 78 pairs, then 9 of the 286 triples
        assert result.cut_short and result.min_size_lower_bound == 3
        assert result.next_size_share == 9 / 286
    assert results[1].next_size_share == results[2].next_size_share


def test_the_oracle_default_is_used_and_bad_counts_are_refused() -> None:
    backend = HashedBackend(1.0, spread=1.6, seed=0)
    assert search_by_size(_toy(backend, num_workers=2), IDS, 2, chunk_size=16) == \
        search_by_size(_toy(backend), IDS, 2, chunk_size=16)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ExplainerError, match="num_workers must be an integer >= 1"):
            search_by_size(_toy(backend), IDS, 2, num_workers=bad)  # type: ignore[arg-type]
        with pytest.raises(OracleError, match="num_workers must be an integer >= 1"):
            _toy(backend, num_workers=bad)  # type: ignore[arg-type]


class _Failing(HashedBackend):
    """Fails on sets of three (evaluated in the workers)."""

    def logit(self, removed: frozenset[int]) -> float:
        if len(removed) == 3:
            raise OracleError("backend failed on a triple")
        return super().logit(removed)


def test_a_workers_error_is_raised_in_the_parent() -> None:
    oracle = _toy(_Failing(5.0, spread=0.5, seed=0))
    with pytest.raises(OracleError, match="backend failed on a triple"):
        search_by_size(oracle, IDS, 3, chunk_size=16, num_workers=2)


# ------------------------------------------------------------- a real model and stream
def _model(stream: EventStream) -> TGN:
    torch.manual_seed(0)
    return TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8, embedding_dim=16,
               num_layers=1, num_heads=2, num_neighbors=5, batch_size=20)


@pytest.fixture(scope="module")
def engines() -> dict[int, ReplayEngine]:
    stream = make_synthetic_stream(30, 1500, seed=5, feat_dim=1, p_tie=0.3)
    model = _model(stream)
    return {n: ReplayEngine(model, stream, num_workers=n) for n in (1, 2)}


@pytest.mark.parametrize("event", [1100, 1499])
def test_exhaustive_on_a_tgn_stream_equals_one_process_bitwise(engines, event) -> None:
    out = {}
    for n, engine in engines.items():
        oracle = engine.oracle(event, m_max=14, mode="exact")
        evaluations = engine.counters.evaluations
        result = ExhaustiveExplainer(ClosestStrategy(), max_size=3, chunk_size=40).explain(
            oracle)
        out[n] = oracle, result, engine.counters.evaluations - evaluations
    (one, r1, e1), (many, r2, e2) = out[1], out[2]
    assert (r1.explanation, r1.final_logit, r1.is_counterfactual, r1.min_size_lower_bound,
            r1.certified_minimal, r1.cut_short, r1.oracle_calls) == \
        (r2.explanation, r2.final_logit, r2.is_counterfactual, r2.min_size_lower_bound,
         r2.certified_minimal, r2.cut_short, r2.oracle_calls)
    assert e1 == e2 > 40  # the workers' replays are counted in the engine too
    _same(one, many, 3)


def test_a_shifted_tgn_replay_finds_the_same_counterfactual(engines) -> None:
    """The untrained model's logits keep their sign under small removals; shifted by a
    constant between the original logit and the farthest pair's, some pairs flip."""
    replay = EventReplay(engines[1], 1499, m_max=14)
    ids = [int(e) for e in replay.candidates.ids]
    p0 = float(replay.exact([F()])[0])
    pairs = replay.exact([F(c) for c in itertools.combinations(ids, 2)])
    far = float(pairs[np.argmax(np.abs(pairs - p0))])
    shift = p0 + 0.8 * (far - p0)
    out = {}
    for n in (1, 2):
        oracle = Oracle(replay.candidates, p0 - shift, num_workers=n,
                        exact=lambda sets: replay.exact(sets) - shift)
        out[n] = oracle, search_by_size(oracle, ids, 3, chunk_size=20)
    (one, res1), (many, res2) = out[1], out[2]
    assert res1.explanation is not None and len(res1.explanation) == 2
    assert res1 == res2
    _same(one, many, 2)


def test_a_plan_spilled_to_its_file_is_read_by_each_worker_at_its_offset(monkeypatch) -> None:
    """The workers share the plan file's descriptor (and so its position): each reads its
    segments at an offset, so their logits equal one process's bitwise."""
    from cftgnn.replay.tgn import record

    monkeypatch.setattr(record, "_MIN_SEGMENT_BYTES", 2048)  # segments of a toy size

    def no_replay(self, j):  # type: ignore[no-untyped-def]
        raise AssertionError("a spilled segment was computed again")

    monkeypatch.setattr(record._Replayed, "__call__", no_replay)
    reads = []
    spilled_read = record._Spilled.__call__
    monkeypatch.setattr(record._Spilled, "__call__",
                        lambda self, j: reads.append(j) or spilled_read(self, j))
    stream = make_synthetic_stream(300, 2000, seed=3, feat_dim=1, p_tie=0.2)  # far back
    model = _model(stream)
    out = {}
    for n in (1, 2):
        engine = ReplayEngine(model, stream, memory_budget_gb=2e-5, num_workers=n)
        oracle = engine.oracle(1990, m_max=10, mode="exact")
        search_by_size(oracle, oracle.removable, 2, chunk_size=12)
        out[n] = oracle
    assert reads  # the parent read segments back (the workers' reads are not seen here)
    _same(out[1], out[2], 2)


def test_certify_on_a_tgn_stream_equals_one_process_bitwise(engines, monkeypatch) -> None:
    monkeypatch.setattr(post_module, "DEFAULT_CHUNK", 32)  # several chunks per size
    out = {}
    for n, engine in engines.items():
        oracle = engine.oracle(1499, m_max=14, mode="exact")
        explainer = GreedyExplainer(RecentStrategy(), PostProcessing(certify=2))
        out[n] = oracle, explainer.explain(oracle)
    (one, r1), (many, r2) = out[1], out[2]
    assert r1.to_record() | {"wall_time_s": 0, "oracle_time_s": 0} == \
        r2.to_record() | {"wall_time_s": 0, "oracle_time_s": 0}
    _same(one, many, 2)


def test_more_than_one_torch_thread_is_refused() -> None:
    """A forked child cannot run OpenMP threads its parent ran (it hangs), and one thread
    rounds some logits otherwise than two."""
    torch.set_num_threads(2)
    with pytest.raises(OracleError, match="needs one torch thread in this process, not 2"):
        search_by_size(_toy(HashedBackend(5.0, spread=0.5, seed=0)), IDS, 2, chunk_size=16,
                       num_workers=2)
    with pytest.raises(ConfigError, match="num_workers=2 needs num_threads=1, got "
                                          "num_threads=4"):
        check_workers(2, "cpu", num_threads=4)


def test_check_workers_refuses_a_gpu_and_a_platform_without_fork(monkeypatch, capsys) -> None:
    check_workers(1, "cuda", num_threads=8)  # one process: anything goes
    check_workers(2, "cpu")
    with pytest.raises(ConfigError, match="num_workers=2 needs device=cpu"):
        check_workers(2, "cuda:0")
    monkeypatch.setattr("cftgnn.oracle.workers.usable_cores", lambda: 2)
    check_workers(3, "cpu")
    assert capsys.readouterr().err.strip() == (
        "warning: num_workers=3 is more than the 2 usable core(s): the workers share them, "
        "so a certification gets no faster")
    monkeypatch.setattr("cftgnn.oracle.workers.fork_available", lambda: False)
    with pytest.raises(ConfigError, match="needs the fork start method"):
        check_workers(2, "cpu")


def test_logits_are_float64_arrays() -> None:
    """(The bitwise comparison above reads the cache; the batch's array agrees with it.)"""
    oracle = _toy(HashedBackend(1.0, spread=1.6, seed=0))
    search_by_size(oracle, IDS, 2, chunk_size=16, num_workers=2)
    sets = [F(c) for c in itertools.combinations(IDS, 2)]
    got = oracle.exact_batch(sets)
    assert got.dtype == np.float64
    assert [oracle.cached_exact(s) for s in sets] == got.tolist()


def test_the_workers_inherit_a_started_numba(monkeypatch) -> None:
    """``ForkedWorkers`` starts numba before forking (``cftgnn.jit.warm_up``): otherwise every
    worker would start it again for every event, 0.3-0.45 CPU s each (docs/benchmarks.md)."""
    from cftgnn import jit

    calls = []
    monkeypatch.setattr(jit, "warm_up", lambda: calls.append("warm"))
    backend = HashedBackend(5.0, spread=1.0, seed=3)  # nothing flips: the pairs are forked
    search_by_size(_toy(backend), IDS[::-1], 2, chunk_size=16, num_workers=2)
    assert calls == ["warm"]
    monkeypatch.undo()
    jit.warm_up()  # the real one: starts numba where installed, nothing where not
    jit.warm_up()
