"""Oracle: caching, counters, validation, batching, two-stage confirmation, semantics helpers."""

from __future__ import annotations

import numpy as np
import pytest

from cftgnn.errors import CftgnnError, ExplainerError, OracleError
from cftgnn.oracle import Oracle, OracleMode, delta, is_flip, node_score
from cftgnn.testing import AdditiveBackend, ShiftedBackend, make_candidates

F = frozenset
W = {10: 1.0, 11: 2.0, 12: 0.5, 13: 4.0}


def _oracle(mode: str = "exact", shift: float = 0.0) -> tuple[Oracle, AdditiveBackend,
                                                              ShiftedBackend]:
    exact = AdditiveBackend(3.0, W)
    approx = ShiftedBackend(exact, shift=shift)
    oracle = Oracle(make_candidates(list(W)), 3.0, exact=exact, approximate=approx, mode=mode)
    return oracle, exact, approx


def test_delta_score_flip() -> None:
    assert delta(2.0, 0.5) == 1.5
    assert delta(-2.0, 0.5) == 2.5
    assert node_score(2.0, 3.0) == 0.0
    assert node_score(-2.0, 1.0) == pytest.approx(1.5)
    assert node_score(2.0, -1.0) > 1 and is_flip(2.0, -1.0)
    assert not is_flip(2.0, 0.0) and not is_flip(0.0, -1.0) and not is_flip(-1.0, -3.0)
    with pytest.raises(ExplainerError):
        node_score(0.0, 1.0)


def test_cache_hit_does_not_call_backend() -> None:
    oracle, exact, _ = _oracle()
    assert oracle(F({10, 11})) == 0.0
    assert oracle([11, 10]) == 0.0  # any iterable, same set
    assert exact.calls == 1
    s = oracle.stats
    assert (s.search_calls, s.exact_calls, s.cache_hits, s.search_batches) == (1, 0, 1, 1)
    assert s.calls == 1 and s.time_s >= 0


def test_original_logit_is_free() -> None:
    oracle, exact, _ = _oracle()
    assert oracle(F()) == 3.0 and oracle.exact(F()) == 3.0
    assert exact.calls == 0 and oracle.stats.cache_hits == 2


def test_bad_ids_raise() -> None:
    oracle, _, _ = _oracle()
    with pytest.raises(OracleError, match="not candidates"):
        oracle(F({10, 99}))
    with pytest.raises(CftgnnError):
        oracle.batch([F({10}), F({-1})])
    with pytest.raises(OracleError, match="integers"):
        oracle([1.5])
    with pytest.raises(OracleError):
        Oracle(make_candidates([1]), 1.0, exact=AdditiveBackend(1.0, {}), mode="fancy")
    with pytest.raises(OracleError, match="approximate backend"):
        Oracle(make_candidates([1]), 1.0, exact=AdditiveBackend(1.0, {}), mode="approximate")


def test_batch_equals_one_at_a_time_and_dedupes() -> None:
    sets = [F({10}), F({11, 12}), F({10}), F(), F({13, 10, 11})]
    oracle, exact, _ = _oracle()
    out = oracle.batch(sets)
    assert exact.batches == 1 and exact.calls == 3  # {10} once, ∅ from the cache
    assert oracle.stats.cache_hits == 2
    ref, _, _ = _oracle()
    np.testing.assert_allclose(out, [ref(s) for s in sets])
    oracle.batch(sets)
    assert exact.calls == 3


def test_bad_backend_answer() -> None:
    oracle = Oracle(make_candidates([1, 2]), 1.0, exact=lambda sets: np.zeros(len(sets) + 1))
    with pytest.raises(OracleError, match="logits for"):
        oracle(F({1}))
    oracle = Oracle(make_candidates([1, 2]), 1.0, exact=lambda sets: [float("nan")] * len(sets))
    with pytest.raises(OracleError, match="non-finite"):
        oracle(F({1}))


def test_empty_candidate_set() -> None:
    oracle = Oracle(make_candidates([]), -2.0, exact=AdditiveBackend(-2.0, {}))
    assert oracle(F()) == -2.0
    assert oracle.batch([]).shape == (0,)
    assert not oracle.is_counterfactual(F())
    with pytest.raises(OracleError):
        oracle(F({0}))


def test_exact_mode_confirm_is_free() -> None:
    oracle, exact, approx = _oracle()
    c = oracle.confirm(F({13}))
    assert c.search_logit == -1.0 and c.exact_logit == -1.0 and c.is_counterfactual
    assert exact.calls == 1 and approx.calls == 0
    assert oracle.stats.exact_calls == 0
    assert oracle.agreement() == (1, 1)


def test_approximate_confirmation_rejects_approx_only_flip() -> None:
    # {10, 11}: exact logit 0.0 (not a flip), approximate -0.25 (a flip).
    oracle, exact, approx = _oracle(mode=OracleMode.APPROXIMATE, shift=-0.25)
    assert oracle.mode is OracleMode.APPROXIMATE
    c = oracle.confirm(F({10, 11}))
    assert c.search_logit == -0.25 and c.exact_logit == 0.0
    assert not c.is_counterfactual and c.logit == 0.0
    # not a flip under the approximation either -> no exact evaluation
    c2 = oracle.confirm(F({10}))
    assert c2.exact_logit is None and not c2.is_counterfactual and c2.logit == 1.75
    # a true flip is confirmed
    assert oracle.is_counterfactual(F({13}))
    s = oracle.stats
    assert (s.search_calls, s.exact_calls) == (3, 2)
    assert (approx.calls, exact.calls) == (3, 2)
    assert oracle.cached_search(F({10, 11})) == -0.25
    assert oracle.cached_exact(F({10, 11})) == 0.0
    assert oracle.cached_exact(F({10})) is None
    assert oracle.agreement() == (1, 2)


def test_stats_difference() -> None:
    oracle, _, _ = _oracle()
    s0 = oracle.stats
    oracle.batch([F({10}), F({11})])
    d = oracle.stats - s0
    assert d.search_calls == 2 and d.search_batches == 1 and d.cache_hits == 0
