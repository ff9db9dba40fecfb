"""The package-shipped test helpers (cftgnn.testing)."""

from __future__ import annotations

import pytest

from cftgnn.testing import (
    AdditiveBackend,
    InteractionBackend,
    ScriptedBackend,
    ScriptedStrategy,
    ShiftedBackend,
    brute_force_minimal,
    make_candidates,
    make_oracle,
)

F = frozenset


def test_make_candidates_sorts_with_hops() -> None:
    c = make_candidates([9, 2, 5], [2, 0, 1])
    assert c.ids.tolist() == [2, 5, 9] and c.hops.tolist() == [0, 1, 2]
    assert c.event_id == 10 and len(c) == 3 and c.oldest == 2
    assert make_candidates([]).oldest is None
    with pytest.raises(ValueError):
        make_candidates([1, 1])
    with pytest.raises(ValueError):
        make_candidates([1, 2], [0])


def test_backends() -> None:
    inter = InteractionBackend(3.0, {1: 0.5, 2: 0.5}, {F({1, 2}): 2.5})
    assert inter([F(), F({1}), F({1, 2})]).tolist() == [3.0, 2.5, -0.5]
    assert inter.calls == 3 and inter.batches == 1 and inter.log[-1] == F({1, 2})
    shifted = ShiftedBackend(AdditiveBackend(1.0, {1: 0.5}), shift=-0.2)
    assert shifted.logit(F()) == 1.0 and shifted.logit(F({1})) == pytest.approx(0.3)
    with pytest.raises(KeyError):
        ScriptedBackend({F({1}): 0.0}).logit(F({2}))


def test_brute_force_minimal() -> None:
    backend = AdditiveBackend(2.0, {1: 1.0, 2: 1.5, 3: 0.6})
    assert sorted(map(sorted, brute_force_minimal(backend, [1, 2, 3], 2.0))) == [[1, 2], [2, 3]]
    assert brute_force_minimal(backend, [1, 3], 2.0) == []
    assert make_oracle(make_candidates([1, 2, 3]), backend).original_logit == 2.0


def test_scripted_strategy() -> None:
    s = ScriptedStrategy([[3, 1]])
    assert s.rank([1, 2, 3]).tolist() == [3, 1, 2]  # unscripted events last
    assert s.rank([1, 2]).tolist() == [2, 1]  # script exhausted -> recency
    assert s.calls == [[1, 2, 3], [1, 2]]
