"""Each selection strategy's ordering on a hand-built candidate set."""

from __future__ import annotations

import numpy as np
import pytest

from cftgnn.errors import ExplainerError
from cftgnn.explain import ClosestStrategy, OneBestStrategy, RandomStrategy, RecentStrategy
from cftgnn.oracle import Oracle
from cftgnn.testing import AdditiveBackend, make_candidates

# id:  3  5  8  9  12
# hop: 1  0  1  2  0
IDS, HOPS = [3, 5, 8, 9, 12], [1, 0, 1, 2, 0]
# single-removal Δ (p_orig = 5): 3 -> 1, 5 -> 2, 8 -> 2, 9 -> -1, 12 -> 0.5
WEIGHTS = {3: 1.0, 5: 2.0, 8: 2.0, 9: -1.0, 12: 0.5}


def _oracle() -> tuple[Oracle, AdditiveBackend]:
    backend = AdditiveBackend(5.0, WEIGHTS)
    return Oracle(make_candidates(IDS, HOPS), 5.0, exact=backend), backend


def test_recent() -> None:
    s = RecentStrategy()
    assert s.rank([5, 12, 3]).tolist() == [12, 5, 3]
    assert s.best([9, 3]) == 9


def test_closest() -> None:
    s = ClosestStrategy()
    s.prepare(_oracle()[0])
    assert s.rank(IDS).tolist() == [12, 5, 8, 3, 9]
    assert s.rank([3, 8]).tolist() == [8, 3]
    assert s.rank([]).tolist() == []
    with pytest.raises(ExplainerError):
        s.rank([4])
    with pytest.raises(ExplainerError, match="prepare"):
        ClosestStrategy().rank([3])


def test_one_best_counts_its_calls() -> None:
    oracle, backend = _oracle()
    s = OneBestStrategy()
    s.prepare(oracle)
    assert backend.batches == 1 and backend.calls == 5
    assert oracle.stats.search_calls == 5
    assert s.rank(IDS).tolist() == [8, 5, 3, 12, 9]  # Δ desc, tie 8/5 -> more recent first
    assert s.rank([12, 9]).tolist() == [12, 9]
    assert s.deltas is not None and s.deltas.tolist() == [1.0, 2.0, 2.0, -1.0, 0.5]
    with pytest.raises(ExplainerError):
        OneBestStrategy().rank([3])


def test_random_is_seeded_per_event() -> None:
    oracle, _ = _oracle()
    a, b = RandomStrategy(seed=1), RandomStrategy(seed=1)
    a.prepare(oracle)
    b.prepare(oracle)
    ra = [a.rank(IDS).tolist() for _ in range(4)]
    assert ra == [b.rank(IDS).tolist() for _ in range(4)]
    assert all(sorted(r) == IDS for r in ra)
    assert len({tuple(r) for r in ra}) > 1  # fresh order per call
    b.prepare(oracle)  # re-preparing restarts the stream
    assert b.rank(IDS).tolist() == ra[0]
    assert repr(a) == "RandomStrategy(seed=1)"
    assert isinstance(a.rank(np.array([3])), np.ndarray)
