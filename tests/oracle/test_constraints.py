"""User constraints: which candidates are removable, and every explainer honouring them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cftgnn.data import EventStream, TemporalIndex
from cftgnn.errors import ConfigError, OracleError
from cftgnn.explain import (
    CFTGNNExplainer,
    ClosestStrategy,
    ExhaustiveExplainer,
    Explainer,
    GreedyExplainer,
    OneBestStrategy,
    PostProcessing,
    RandomStrategy,
)
from cftgnn.oracle import Constraints, Oracle
from cftgnn.testing import HashedBackend, brute_force_minimal, make_candidates

F = frozenset


def _stream() -> EventStream:
    #        0  1  2  3  4  5  6  7  (event 7 = the explained event 0 -> 1)
    src = [0, 1, 2, 0, 3, 1, 0, 0]
    dst = [1, 2, 0, 3, 1, 0, 2, 1]
    t = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    return EventStream(np.array(src), np.array(dst), np.array(t), None, None, 5, "toy")


def _candidates() -> tuple[EventStream, object]:
    stream = _stream()
    return stream, TemporalIndex(stream).candidates(7, k=2, m_max=64)


def test_each_constraint_protects_what_it_names() -> None:
    stream, cand = _candidates()
    ids = cand.ids.tolist()  # type: ignore[attr-defined]
    assert ids == list(range(7))
    removable = lambda c: Constraints(**c).removable(cand, stream).tolist()  # noqa: E731
    assert removable({}) == ids
    assert removable({"protect_pair": True}) == [1, 2, 3, 4, 6]  # 0 (0->1), 5 (1->0)
    assert removable({"before": 3.0}) == [3, 4, 5, 6]
    assert removable({"nodes": [3]}) == [0, 1, 2, 5, 6]
    assert removable({"events": [2, 6]}) == [0, 1, 3, 4, 5]
    hops = dict(zip(ids, cand.hops.tolist(), strict=True))  # type: ignore[attr-defined]
    assert removable({"hops": [1, 2]}) == [e for e in ids if hops[e] >= 1]
    assert removable({"protect_pair": True, "events": [1], "before": 2.0}) == [2, 3, 4, 6]


@pytest.mark.parametrize("cfg,match", [
    ({"max_size": 0}, "max_size"),
    ({"max_size": "a"}, "max_size"),
    ({"hops": [2, 1]}, "hops"),
    ({"hops": [1]}, "hops"),
    ({"nodes": [-1]}, "negative"),
    ({"events": "3"}, "events"),
    ({"before": "soon"}, "before"),
    ({"before": float("inf")}, "before"),
    ({"protect_pair": "yes"}, "protect_pair"),
    ({"colour": 1}, "unknown constraint"),
])
def test_bad_constraints_are_refused(cfg: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Constraints.from_config(cfg)


def test_unknown_nodes_and_events_are_refused() -> None:
    stream = _stream()
    Constraints(nodes=(4,), events=(7,)).validate(stream)
    with pytest.raises(ConfigError, match="unknown node 5"):
        Constraints(nodes=(5,)).validate(stream)
    with pytest.raises(ConfigError, match="event id 8"):
        Constraints(events=(8,)).validate(stream)


def test_json_round_trip() -> None:
    c = Constraints(protect_pair=True, nodes=(3, 1), hops=(0, 1), max_size=2)
    assert Constraints.from_config(c.to_dict()) == c and c.active and not Constraints().active
    assert '"nodes":[1,3]' in c.to_json()


def test_oracle_refuses_protected_events() -> None:
    backend = HashedBackend(1.0)
    oracle = Oracle(make_candidates([1, 2, 3]), 1.0, exact=backend, removable=[1, 3])
    with pytest.raises(OracleError, match="protected"):
        oracle.exact([2])
    with pytest.raises(OracleError, match="not candidates"):
        Oracle(make_candidates([1, 2]), 1.0, exact=backend, removable=[5])
    with pytest.raises(OracleError, match="max_size"):
        Oracle(make_candidates([1, 2]), 1.0, exact=backend, max_size=0)


EXPLAINERS: dict[str, Callable[[], Explainer]] = {
    "cftgnn": lambda: CFTGNNExplainer(RandomStrategy(2), it_max=40),
    "cftgnn_one_best": lambda: CFTGNNExplainer(OneBestStrategy(), PostProcessing(prune=True),
                                               it_max=40),
    "greedy": lambda: GreedyExplainer(ClosestStrategy(), PostProcessing(prune=True, certify=2),
                                      sample_size=4),
    "exhaustive": lambda: ExhaustiveExplainer(OneBestStrategy(), max_size=3),
}


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(0, 10_000), st.data(),
       st.sampled_from(["exact", "approximate"]))
def test_every_explainer_honours_random_constraints(
    n: int, seed: int, data: st.DataObject, mode: str
) -> None:
    ids = list(range(10, 10 + n))
    removable = sorted(data.draw(st.sets(st.sampled_from(ids), max_size=n)))
    max_size = data.draw(st.one_of(st.none(), st.integers(1, 3)))
    backend = HashedBackend(1.0, spread=0.9, seed=seed)
    minimal = brute_force_minimal(backend, removable, 1.0, max_size=min(3, max_size or 3))
    for name, make in EXPLAINERS.items():
        backend.log.clear()
        approx = HashedBackend(1.0, spread=0.9, seed=seed + 1)
        approx.log.clear()
        oracle = Oracle(make_candidates(ids, [e % 3 for e in ids]), 1.0, exact=backend,
                        approximate=approx, mode=mode, removable=removable,
                        max_size=max_size)
        result = make().explain(oracle)
        for s in backend.log + approx.log:
            assert s <= F(removable), (name, s)
        assert set(result.explanation) <= set(removable), name
        if max_size is not None:
            assert result.size <= max_size, name
        assert result.num_removable == len(removable)
        if not removable:
            assert result.status.value == "no_removable"
        if name == "exhaustive":
            assert result.is_counterfactual == bool(minimal), name
            if minimal:
                assert F(result.explanation) in minimal
