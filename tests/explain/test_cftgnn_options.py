"""CF-TGNN's options beyond the seed: progressive widening and the deep phase."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cftgnn.errors import ExplainerError
from cftgnn.explain import CFTGNNExplainer, RandomStrategy, RecentStrategy, SelectionStrategy
from cftgnn.oracle import Oracle, delta
from cftgnn.testing import (
    AdditiveBackend,
    HashedBackend,
    InteractionBackend,
    brute_force_minimal,
    make_candidates,
)

F = frozenset


class WrongWay(SelectionStrategy):
    """A prior pointing the wrong way: the events that matter rank last."""

    def __init__(self, good: set[int]) -> None:
        super().__init__()
        self.good = good

    def rank(self, events: npt.ArrayLike) -> npt.NDArray[np.int64]:
        ids = np.asarray(events, dtype=np.int64).reshape(-1)
        return np.array(sorted(ids.tolist(), key=lambda e: (e in self.good, e)), dtype=np.int64)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(0, 10_000), st.sampled_from([0.0, 0.3, 0.5, 1.0]))
def test_widening_run_to_exhaustion_finds_the_minimum(n: int, seed: int, a: float) -> None:
    ids = list(range(n))
    backend = HashedBackend(1.0, spread=0.8, seed=seed)
    minimal = brute_force_minimal(backend, ids, 1.0)
    oracle = Oracle(make_candidates(ids), 1.0, exact=backend)
    result = CFTGNNExplainer(RandomStrategy(seed), it_max=10_000, widening=a).explain(oracle)
    assert result.iterations < 10_000  # the tree was exhausted
    if minimal:
        assert result.is_counterfactual and F(result.explanation) in minimal
    else:
        subsets = [F(c) for k in range(n + 1) for c in itertools.combinations(ids, k)]
        assert not result.is_counterfactual
        assert delta(1.0, result.final_logit) == max(delta(1.0, backend.logit(s))
                                                     for s in subsets)


def test_widening_with_a_wrong_way_prior_still_finds_the_minimum_given_budget() -> None:
    ids = list(range(10))
    weights = dict.fromkeys(ids, 0.05)
    weights[3] = weights[7] = 0.6
    backend = AdditiveBackend(1.0, weights)  # unique minimum {3, 7}
    oracle = Oracle(make_candidates(ids), 1.0, exact=backend)
    result = CFTGNNExplainer(WrongWay({3, 7}), it_max=2000, widening=0.5,
                             widening_k=1.0).explain(oracle)
    assert F(result.explanation) == F({3, 7})


def test_widening_adds_children_gradually() -> None:
    ids = list(range(20))
    backend = AdditiveBackend(5.0, dict.fromkeys(ids, 0.01))  # nothing flips
    trace = CFTGNNExplainer(RecentStrategy(), it_max=30, widening=0.5, widening_k=2.0,
                            trace=True).explain(Oracle(make_candidates(ids), 5.0, exact=backend))
    assert trace.trace is not None
    assert trace.trace[0]["children"] == 2  # max(1, floor(2 * 1 ** 0.5)) at the first expansion
    plain = CFTGNNExplainer(RecentStrategy(), it_max=30, trace=True).explain(
        Oracle(make_candidates(ids), 5.0, exact=backend))
    assert plain.trace is not None and plain.trace[0]["children"] == 20


def test_deep_phase_descends_from_the_most_promising_node() -> None:
    # a counterfactual needs 5 events; 8 iterations of the tree cannot get that deep
    ids = list(range(8))
    backend = InteractionBackend(1.0, dict.fromkeys(ids, 0.21), {})
    def oracle() -> Oracle:
        return Oracle(make_candidates(ids), 1.0, exact=backend)
    plain = CFTGNNExplainer(RecentStrategy(), it_max=8).explain(oracle())
    assert not plain.is_counterfactual
    deep = CFTGNNExplainer(RecentStrategy(), it_max=8, deep_phase=True,
                           deep_sample_size=3).explain(oracle())
    assert deep.is_counterfactual and deep.size == 5
    assert set(plain.explanation) <= set(deep.explanation)


@pytest.mark.parametrize("kwargs", [{"widening": 1.5}, {"widening": -0.1},
                                    {"widening_k": 0.0}, {"deep_sample_size": 0}])
def test_bad_options(kwargs: dict[str, float]) -> None:
    with pytest.raises(ExplainerError):
        CFTGNNExplainer(**kwargs)  # type: ignore[arg-type]
