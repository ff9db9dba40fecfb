"""NSGA-II and binary PSO: Pareto sets / several counterfactuals on toy oracles.

The references are brute force: every subset of the removable events (the true Pareto set of
size, margin and consequence), or every set the backend's log says was evaluated (what the
search can know about).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pytest

from cftgnn.errors import ExplainerError
from cftgnn.explain.nsga2 import NSGA2Explainer
from cftgnn.explain.pso import PSOExplainer
from cftgnn.explain.result import ExplanationResult
from cftgnn.oracle.oracle import Oracle, is_flip, margin
from cftgnn.testing import (
    AdditiveBackend,
    HashedBackend,
    InteractionBackend,
    ShiftedBackend,
    make_candidates,
)
from cftgnn.testing.backends import ToyBackend

F = frozenset
Consequence = Callable[[frozenset[int]], int]


def toy_consequence(removed: frozenset[int]) -> int:
    """A non-additive toy consequence: each event's weight, plus 2 for {0, 1} together."""
    return sum(e % 4 for e in removed) + 2 * int({0, 1} <= removed)


def batched(fn: Consequence) -> Callable[[Sequence[frozenset[int]]], list[int]]:
    return lambda sets: [fn(F(s)) for s in sets]


def make(backend: ToyBackend, ids: Sequence[int], consequence: Consequence | None = None,
         removable: Iterable[int] | None = None, max_size: int | None = None,
         approximate: ToyBackend | None = None) -> Oracle:
    p0 = backend.logit(F())
    return Oracle(make_candidates(ids), p0, exact=backend, approximate=approximate,
                  mode="exact" if approximate is None else "approximate", removable=removable,
                  max_size=max_size,
                  consequence=None if consequence is None else batched(consequence))


def objectives(s: frozenset[int], p: float, p0: float,
               consequence: Consequence | None) -> tuple[float, ...]:
    """Minimised objectives: size, −margin, consequence (when measured)."""
    obj: tuple[float, ...] = (len(s), -margin(p0, p))
    return obj if consequence is None else (*obj, consequence(s))


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and a != b


def front(items: dict[frozenset[int], float], p0: float,
          consequence: Consequence | None) -> set[frozenset[int]]:
    """The non-dominated sets among counterfactuals ``{set: logit}`` (equal rows all kept)."""
    obj = {s: objectives(s, p, p0, consequence) for s, p in items.items()}
    return {s for s in obj if not any(dominates(o, obj[s]) for o in obj.values())}


def flips(backend: ToyBackend, sets: Iterable[frozenset[int]], p0: float,
          limit: int) -> dict[frozenset[int], float]:
    """The counterfactuals among ``sets`` within the size limit, with their logits."""
    out = {}
    for s in sets:
        p = backend.logit(s)
        if s and len(s) <= limit and is_flip(p0, p):
            out[s] = p
    return out


def every_subset(ids: Iterable[int]) -> list[frozenset[int]]:
    ids = sorted(ids)
    return [F(c) for k in range(1, len(ids) + 1) for c in itertools.combinations(ids, k)]


def check_counterfactuals(result: ExplanationResult, backend: ToyBackend,
                          consequence: Consequence | None, pareto: bool) -> None:
    """What every result of several counterfactuals holds: exact flips, distinct, the answer
    first, ordered by size then margin; mutually non-dominated for a Pareto set."""
    p0 = result.original_logit
    sets = [F(c) for c in result.counterfactuals]
    assert result.is_counterfactual and sets and sets[0] == F(result.explanation)
    assert len(set(sets)) == len(sets) == result.n_counterfactuals
    for s, p in zip(sets, result.counterfactual_logits, strict=True):
        assert p == backend.logit(s) and is_flip(p0, p)
    keys = [(len(s), -margin(p0, p)) for s, p in zip(sets, result.counterfactual_logits,
                                                      strict=True)]
    assert keys == sorted(keys)  # the answer: the smallest, ties by the largest margin
    if pareto:
        obj = [objectives(s, p, p0, consequence)
               for s, p in zip(sets, result.counterfactual_logits, strict=True)]
        assert not any(dominates(a, b) for a in obj for b in obj)
    if consequence is None:
        assert result.counterfactual_consequences is None
    else:
        assert result.counterfactual_consequences == tuple(consequence(s) for s in sets)


# ---------------------------------------------------------------------------- toy problems
def hashed(seed: int) -> HashedBackend:
    return HashedBackend(1.0, spread=1.0, seed=seed)


def pairs() -> InteractionBackend:
    """Ten events; only two pairs flip (with everything added): {2, 7} by a margin of
    0.5, {4, 9} by 0.2 (+0.1 per further event). Under ``toy_consequence`` {4, 9} is the
    cheaper (1 against 5), so both are on the three-objective front."""
    return InteractionBackend(3.0, dict.fromkeys(range(10), 0.1),
                              {F({2, 7}): 3.3, F({4, 9}): 3.0})


SIX = list(range(6))  # 63 non-empty subsets: one population of 64 covers them all
TEN = list(range(10))


# ---------------------------------------------------------------------------- NSGA-II
@pytest.mark.parametrize("consequence", [None, toy_consequence], ids=["2obj", "3obj"])
@pytest.mark.parametrize("seed", [0, 3, 7])
@pytest.mark.parametrize("mode", ["exact", "approximate"])
def test_nsga2_small_space_returns_the_true_pareto_set(seed, consequence, mode):
    backend = hashed(seed)
    # approximate = exact shifted towards a flip: every exact flip is also a search-mode flip
    approx = ShiftedBackend(backend, shift=-0.3) if mode == "approximate" else None
    oracle = make(backend, SIX, consequence, approximate=approx)
    p0 = oracle.original_logit
    truth = front(flips(backend, every_subset(SIX), p0, 6), p0, consequence)
    assert truth
    result = NSGA2Explainer(pop_size=64, max_iterations=10, seed=seed).explain(oracle)
    check_counterfactuals(result, backend, consequence, pareto=True)
    assert {F(c) for c in result.counterfactuals} == truth
    assert oracle.stats.search_batches == 1 and result.iterations == 0  # one batch of all
    minimal = min(len(s) for s in truth)
    assert result.size == minimal
    best = max(margin(p0, backend.logit(s)) for s in truth if len(s) == minimal)
    assert margin(p0, result.final_logit) == best


@pytest.mark.parametrize("consequence", [None, toy_consequence], ids=["2obj", "3obj"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nsga2_ga_finds_the_true_minimum_and_a_pareto_set_of_what_it_met(seed, consequence):
    backend = pairs()
    oracle = make(backend, TEN, consequence)
    p0 = oracle.original_logit
    truth = front(flips(backend, every_subset(TEN), p0, 10), p0, consequence)
    result = NSGA2Explainer(pop_size=32, max_iterations=25, seed=seed).explain(oracle)
    check_counterfactuals(result, backend, consequence, pareto=True)
    assert result.iterations == 25 and not result.cut_short
    # the true front's smallest members are found; the answer has the largest margin
    smallest = {F({2, 7})} if consequence is None else {F({2, 7}), F({4, 9})}
    assert {s for s in truth if len(s) == 2} == smallest
    assert smallest <= {F(c) for c in result.counterfactuals}
    assert F(result.explanation) == F({2, 7})
    # the Pareto set of every counterfactual the search evaluated (exact mode: the log)
    met = front(flips(backend, set(backend.log), p0, 10), p0, consequence)
    assert {F(c) for c in result.counterfactuals} == met


def test_nsga2_non_monotone_ga_case_is_a_pareto_set_of_what_it_met():
    backend = hashed(11)
    oracle = make(backend, TEN, toy_consequence)
    result = NSGA2Explainer(pop_size=24, max_iterations=8, seed=5).explain(oracle)
    check_counterfactuals(result, backend, toy_consequence, pareto=True)
    p0 = oracle.original_logit
    met = front(flips(backend, set(backend.log), p0, 10), p0, toy_consequence)
    assert {F(c) for c in result.counterfactuals} == met


def test_nsga2_recency_objective_still_gives_flips():
    backend = pairs()
    result = NSGA2Explainer(pop_size=32, max_iterations=15, seed=0, recency=True).explain(
        make(backend, TEN))
    check_counterfactuals(result, backend, None, pareto=False)
    assert result.size == 2


@pytest.mark.parametrize("explainer, ids", [
    (lambda seed: NSGA2Explainer(pop_size=16, max_iterations=6, seed=seed), TEN),
    (lambda seed: NSGA2Explainer(pop_size=64, max_iterations=6, seed=seed), SIX),  # exhaustive
    (lambda seed: PSOExplainer(n_particles=16, max_iterations=8, seed=seed, n_counterfactuals=4),
     TEN),
], ids=["nsga2", "nsga2-exhaustive", "pso"])
def test_seeded_runs_are_reproducible(explainer, ids):
    def run(seed: int) -> ExplanationResult:
        return explainer(seed).explain(make(hashed(4), ids, toy_consequence))

    a, b = run(3), run(3)
    fields = ("explanation", "final_logit", "counterfactuals", "counterfactual_logits",
              "counterfactual_consequences", "iterations", "search_calls", "exact_calls",
              "cache_hits")
    assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    assert a.n_counterfactuals >= 1


@pytest.mark.parametrize("explainer", [
    NSGA2Explainer(pop_size=64, max_iterations=5),  # |R| = 6: exhaustive
    NSGA2Explainer(pop_size=16, max_iterations=10, seed=2),
    PSOExplainer(n_particles=16, max_iterations=10, n_counterfactuals=10, seed=2),
], ids=["nsga2-exhaustive", "nsga2", "pso"])
@pytest.mark.parametrize("ids", [SIX, TEN], ids=["six", "ten"])
def test_protected_events_and_max_size_are_honoured(explainer, ids):
    # removing 0 or 1 alone flips, but both are protected; without them the cheapest flips are
    # pairs of {2, 3, 4} (1.6 each), the triple {5, 6, 7}... is over max_size
    w = {0: 5.0, 1: 5.0, 2: 1.6, 3: 1.6, 4: 1.6}
    w.update({e: 0.9 for e in ids if e >= 5})
    backend = AdditiveBackend(3.0, w)
    removable = [e for e in ids if e not in (0, 1)]
    oracle = make(backend, ids, removable=removable, max_size=2)
    result = explainer.explain(oracle)
    check_counterfactuals(result, backend, None, pareto=isinstance(explainer, NSGA2Explainer))
    assert result.num_removable == len(removable)
    for c in result.counterfactuals:
        assert not {0, 1} & set(c) and len(c) <= 2
    assert result.size == 2
    assert not any({0, 1} & s for s in backend.log)  # pinned: never even evaluated
    if len(ids) == 6 and isinstance(explainer, NSGA2Explainer):
        p0 = oracle.original_logit
        truth = front(flips(backend, every_subset(removable), p0, 2), p0, None)
        assert {F(c) for c in result.counterfactuals} == truth


def test_nsga2_ga_with_max_size_one_and_a_small_first_population():
    # |R| = 10 > pop_size: the GA runs, but only singletons are feasible
    w = {e: 0.5 for e in TEN} | {6: 3.5, 8: 4.0}
    backend = AdditiveBackend(3.0, w)
    result = NSGA2Explainer(pop_size=16, max_iterations=5, seed=0).explain(
        make(backend, TEN, max_size=1))
    check_counterfactuals(result, backend, None, pareto=True)
    assert result.counterfactuals == ((8,),)  # {6} flips too but {8} dominates it


def test_nsga2_consequences_are_measured_only_with_a_measure():
    backend = hashed(3)
    plain = NSGA2Explainer(pop_size=64, max_iterations=0).explain(make(backend, SIX))
    measured = NSGA2Explainer(pop_size=64, max_iterations=0).explain(
        make(backend, SIX, toy_consequence))
    assert plain.counterfactual_consequences is None
    assert measured.counterfactual_consequences == tuple(
        toy_consequence(F(c)) for c in measured.counterfactuals)
    # a third objective keeps every set of the two-objective front (hashed logits: no two
    # sets tie on size and margin)
    assert {F(c) for c in plain.counterfactuals} <= {F(c) for c in measured.counterfactuals}
    rec = measured.to_record()
    assert rec["n_counterfactuals"] == measured.n_counterfactuals
    assert rec["counterfactual_consequences"] == list(measured.counterfactual_consequences)


@pytest.mark.parametrize("explainer", [
    NSGA2Explainer(pop_size=64, max_iterations=3),
    NSGA2Explainer(pop_size=8, max_iterations=3),
    PSOExplainer(n_particles=8, max_iterations=3),
], ids=["nsga2-exhaustive", "nsga2", "pso"])
@pytest.mark.parametrize("ids", [SIX, TEN], ids=["six", "ten"])
def test_no_counterfactual_exists(explainer, ids):
    backend = AdditiveBackend(3.0, dict.fromkeys(ids, 0.1))
    result = explainer.explain(make(backend, ids, toy_consequence))
    assert not result.is_counterfactual and result.final_logit > 0
    assert result.counterfactuals == () and result.counterfactual_logits == ()
    assert result.n_counterfactuals == 0 and result.counterfactual_consequences is None
    assert set(result.explanation) <= set(ids)


@pytest.mark.parametrize("mode", ["exact", "approximate"])
def test_nsga2_makes_one_search_batch_per_generation(mode):
    backend = pairs()
    approx = ShiftedBackend(backend, shift=-0.05, noise=0.1) if mode == "approximate" else None
    oracle = make(backend, TEN, toy_consequence, approximate=approx)
    generations = 6
    result = NSGA2Explainer(pop_size=20, max_iterations=generations, seed=1).explain(oracle)
    stats = oracle.stats
    assert 1 < stats.search_batches <= generations + 1
    if mode == "approximate":
        assert approx is not None and approx.batches == stats.search_batches
        assert stats.exact_batches <= generations + 1  # one confirmation batch per generation
        assert backend.batches == stats.exact_batches
    else:
        assert backend.batches == stats.search_batches and stats.exact_batches == 0
    assert result.search_calls == stats.search_calls <= 20 * (generations + 1)


def test_pso_makes_one_search_batch_per_iteration():
    backend = hashed(2)
    oracle = make(backend, TEN)
    result = PSOExplainer(n_particles=12, max_iterations=7, seed=0).explain(oracle)
    assert oracle.stats.search_batches <= 8 and result.iterations == 7
    assert result.search_calls <= 12 * 8


@pytest.mark.parametrize("explainer", [
    NSGA2Explainer(pop_size=16, max_iterations=50, seed=0, max_oracle_calls=40),
    PSOExplainer(n_particles=16, max_iterations=50, seed=0, max_oracle_calls=40),
], ids=["nsga2", "pso"])
def test_call_budget_cuts_the_search_short(explainer):
    # the budget counts backend evaluations (cache hits are free); a hashed oracle keeps
    # proposing new sets
    result = explainer.explain(make(hashed(9), TEN))
    assert result.cut_short and result.search_calls <= 40 and result.iterations < 50


# ---------------------------------------------------------------------------- PSO
@pytest.mark.parametrize("n", [1, 3, 8])
@pytest.mark.parametrize("seed", [0, 5])
def test_pso_returns_the_n_smallest_counterfactuals_it_met(n, seed):
    backend = hashed(seed + 20)
    oracle = make(backend, TEN, toy_consequence)
    result = PSOExplainer(n_particles=20, max_iterations=15, n_counterfactuals=n,
                          seed=seed).explain(oracle)
    check_counterfactuals(result, backend, toy_consequence, pareto=False)
    p0 = oracle.original_logit
    met = flips(backend, set(backend.log), p0, 10)
    expected = sorted(met, key=lambda s: (len(s), -margin(p0, met[s])))[:n]
    assert [F(c) for c in result.counterfactuals] == expected
    assert result.n_counterfactuals == min(n, len(met))


def test_pso_finds_the_single_flip_first():
    backend = pairs()
    # one strong event makes the minimum a singleton the first positions hold
    backend.weights[5] = 3.5
    result = PSOExplainer(n_particles=16, max_iterations=5, seed=0).explain(make(backend, TEN))
    assert result.explanation == (5,) and result.counterfactuals[0] == (5,)
    check_counterfactuals(result, backend, None, pareto=False)


# ---------------------------------------------------------------------------- options
@pytest.mark.parametrize("kwargs", [
    {"pop_size": 3}, {"pop_size": 4.5}, {"pop_size": True}, {"max_iterations": -1},
    {"max_iterations": 1.5}, {"mutation_rate": 0.0}, {"mutation_rate": 1.5},
    {"init_density": 0.0}, {"init_density": 1.2}, {"recency": "yes"},
    {"max_oracle_calls": -1}, {"max_time_s": -0.5}, {"max_time_s": float("nan")},
    {"certify": -1},
])
def test_nsga2_rejects_invalid_options(kwargs):
    with pytest.raises(ExplainerError):
        NSGA2Explainer(**kwargs)


@pytest.mark.parametrize("kwargs", [
    {"n_particles": 2}, {"n_particles": 3.5}, {"max_iterations": -1}, {"n_counterfactuals": 0},
    {"n_counterfactuals": False}, {"inertia": 1.0}, {"inertia": -0.1}, {"cognitive": -1.0},
    {"social": -0.5}, {"v_max": 0.0}, {"density": 0.0}, {"density": 1.0},
    {"max_oracle_calls": -1}, {"max_time_s": -1.0}, {"ceiling": 1},
])
def test_pso_rejects_invalid_options(kwargs):
    with pytest.raises(ExplainerError):
        PSOExplainer(**kwargs)


def test_valid_edge_options_are_accepted():
    NSGA2Explainer(pop_size=4, max_iterations=0, mutation_rate=1.0, init_density=1.0,
                   max_oracle_calls=0, max_time_s=0.0)
    PSOExplainer(n_particles=3, max_iterations=0, inertia=0.0, cognitive=0.0, social=0.0,
                 n_counterfactuals=1)


def test_a_zero_time_budget_still_evaluates_the_first_population():
    backend = pairs()
    backend.weights[3] = 3.5
    for explainer in (NSGA2Explainer(pop_size=16, max_iterations=20, max_time_s=0.0),
                      PSOExplainer(n_particles=16, max_iterations=20, max_time_s=0.0)):
        result = explainer.explain(make(backend, TEN))
        assert result.cut_short and result.iterations == 0
        assert result.explanation == (3,)  # the singletons are in the first population
    assert np.isfinite(result.final_logit)
