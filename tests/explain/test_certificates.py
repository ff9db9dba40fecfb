"""Exhaustive search, certificates, pruning and certify against brute force on toy oracles.

The toy oracles include non-monotone ones (docs/design.md §7): a superset of a counterfactual that
does not flip, a counterfactual whose subsets all fail, and ``HashedBackend``, where every
set has an unrelated logit.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cftgnn.errors import ExplainerError
from cftgnn.explain import (
    BeamExplainer,
    CFTGNNExplainer,
    ExhaustiveExplainer,
    Explainer,
    ExplanationStatus,
    GreedyExplainer,
    RandomStrategy,
    RecentStrategy,
    prune,
    search_by_size,
)
from cftgnn.explain.post import PostProcessing
from cftgnn.oracle import Oracle, is_flip, margin
from cftgnn.testing import (
    AdditiveBackend,
    HashedBackend,
    InteractionBackend,
    ToyBackend,
    brute_force_minimal,
    make_candidates,
)

F = frozenset


def _oracle(backend: ToyBackend, ids: list[int], mode: str = "exact",
            removable: list[int] | None = None, max_size: int | None = None) -> Oracle:
    p0 = backend.logit(F())
    approx = HashedBackend(p0, spread=0.5, seed=99) if mode == "approximate" else None
    return Oracle(make_candidates(ids), p0, exact=backend, approximate=approx, mode=mode,
                  removable=removable, max_size=max_size)


def _flips(backend: ToyBackend, s: frozenset[int]) -> bool:
    return is_flip(backend.logit(F()), backend.logit(s))


def _true_min(backend: ToyBackend, ids: list[int]) -> int | None:
    minimal = brute_force_minimal(backend, ids, backend.logit(F()))
    return len(next(iter(minimal))) if minimal else None


# ---------------------------------------------------------------- exhaustive
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), st.integers(1, 4), st.integers(0, 10_000),
       st.sampled_from([1.0, -1.0]))
def test_exhaustive_equals_brute_force(n: int, k: int, seed: int, sign: float) -> None:
    ids = list(range(3, 3 + 2 * n, 2))
    backend = HashedBackend(sign * 1.0, spread=0.9, seed=seed)
    p0 = backend.logit(F())
    minimal = brute_force_minimal(backend, ids, p0, max_size=k)
    result = ExhaustiveExplainer(max_size=k, chunk_size=3).explain(_oracle(backend, ids))
    if minimal:
        best = max(margin(p0, backend.logit(s)) for s in minimal)
        assert result.is_counterfactual and F(result.explanation) in minimal
        assert margin(p0, result.final_logit) == best
        assert result.certified_minimal and result.min_size_lower_bound == result.size
    else:
        assert not result.is_counterfactual and result.explanation == ()
        assert not result.certified_minimal
        assert result.min_size_lower_bound == min(k, n) + 1  # nothing of size <= K flips
    assert not result.cut_short


def test_exhaustive_non_monotone_cases() -> None:
    ids = [1, 2, 3, 4]
    # {1} flips; its superset {1, 2} does not (2 pushes back); {3, 4} flips only together.
    backend = InteractionBackend(1.0, {1: 1.5, 2: -2.0, 3: 0.4, 4: 0.4}, {F({3, 4}): 1.0})
    assert _flips(backend, F({1})) and not _flips(backend, F({1, 2}))
    result = ExhaustiveExplainer(max_size=3).explain(_oracle(backend, ids))
    assert result.explanation == (1,) and result.certified_minimal
    # without event 1, the only counterfactuals need {3, 4} together (all subsets fail)
    result = ExhaustiveExplainer(max_size=3).explain(_oracle(backend, ids, removable=[2, 3, 4]))
    assert set(result.explanation) == {3, 4} and result.min_size_lower_bound == 2
    assert not _flips(backend, F({3})) and not _flips(backend, F({4}))


def test_exhaustive_enumerates_by_size_in_time_order_and_takes_the_largest_margin() -> None:
    backend = AdditiveBackend(1.0, {1: 0.6, 2: 0.6, 3: 0.5, 4: 0.9})
    oracle = _oracle(backend, [1, 2, 3, 4])
    result = ExhaustiveExplainer(RecentStrategy(), max_size=3, chunk_size=2).explain(oracle)
    # margin 0.5, tied with {1, 4}, which an earlier chunk found: the better-ranked one wins
    # (recent first), listed in ranking order
    assert result.explanation == (4, 2)
    sizes = [len(s) for s in backend.log if s]
    assert sizes == sorted(sizes) and max(sizes) == 2  # stopped after size 2
    assert backend.log[:4] == [F({1}), F({2}), F({3}), F({4})]  # oldest removals first
    pairs = [s for s in backend.log if len(s) == 2]
    assert pairs == [F(c) for c in itertools.combinations([1, 2, 3, 4], 2)]


def test_exhaustive_budget_cuts_short_and_voids_the_claim() -> None:
    backend = HashedBackend(5.0, spread=0.1, seed=1)  # nothing flips
    ids = list(range(8))
    result = ExhaustiveExplainer(max_size=3, max_oracle_calls=20).explain(_oracle(backend, ids))
    assert result.cut_short and not result.is_counterfactual
    assert result.min_size_lower_bound == 2  # the 8 singles were done, the 28 pairs were not
    assert backend.calls <= 20 + 1  # + the final exact check of the (empty) answer (cached)
    timed = ExhaustiveExplainer(max_size=3, max_time_s=0.0).explain(_oracle(backend, ids))
    assert timed.cut_short and timed.min_size_lower_bound == 1


def test_an_exhaustive_search_cut_mid_size_records_the_share_of_that_size() -> None:
    backend = HashedBackend(5.0, spread=0.1, seed=1)  # nothing flips
    ids = list(range(8))
    cut = ExhaustiveExplainer(max_size=3, max_oracle_calls=20).explain(_oracle(backend, ids))
    # 20 calls: the 8 singles, then 12 of the 28 pairs (in time order) before the cap
    assert cut.cut_short and cut.min_size_lower_bound == 2
    assert cut.next_size_share == pytest.approx(12 / 28)
    # a cap hit exactly at the end of a size: that size is complete, none of the next done
    edge = ExhaustiveExplainer(max_size=3, max_oracle_calls=8).explain(_oracle(backend, ids))
    assert edge.cut_short and edge.min_size_lower_bound == 2 and edge.next_size_share == 0.0
    # completed: nothing to say (also when it finds nothing up to max_size)
    done = ExhaustiveExplainer(max_size=2).explain(_oracle(backend, ids))
    assert not done.cut_short and done.min_size_lower_bound == 3
    assert done.next_size_share is None
    # a search cut short that is no enumeration: no share either
    greedy = GreedyExplainer(max_oracle_calls=3).explain(_oracle(backend, ids))
    assert greedy.cut_short and greedy.next_size_share is None


def test_a_certification_cut_by_its_time_cap_records_the_share_of_its_last_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock that moves one second per set the backend evaluates makes the time cap
    deterministic: the search (every single) costs 12 s, certify gets 30 s more; its singles are
    cached (free), its first timed chunk takes 64 of the 66 pairs (76 s > 42 s): cut."""
    import types

    from cftgnn.explain import exact_search, post

    clock = [0.0]

    class Clocked(HashedBackend):
        def logit(self, removed: frozenset[int]) -> float:
            clock[0] += 1.0
            return super().logit(removed)

    fake = types.SimpleNamespace(perf_counter=lambda: clock[0])
    monkeypatch.setattr(exact_search, "time", fake)
    monkeypatch.setattr(post, "time", fake)
    ids = list(range(12))
    explainer = ExhaustiveExplainer(max_size=1, post=PostProcessing(certify=2,
                                                                     certify_max_time_s=30.0))
    result = explainer.explain(_oracle(Clocked(5.0, spread=0.1, seed=3), ids))
    assert result.cut_short and result.min_size_lower_bound == 2
    assert result.next_size_share == pytest.approx(64 / 66)
    clock[0] = 0.0
    enough = ExhaustiveExplainer(max_size=1, post=PostProcessing(
        certify=2, certify_max_time_s=1000.0)).explain(_oracle(Clocked(5.0, 0.1, 3), ids))
    assert not enough.cut_short and enough.min_size_lower_bound == 3
    assert enough.next_size_share is None


def test_a_share_is_only_for_a_search_cut_short() -> None:
    result = ExhaustiveExplainer(max_size=1).explain(
        _oracle(HashedBackend(5.0, spread=0.1), [1, 2]))
    with pytest.raises(ExplainerError, match="only for a search cut short"):
        dataclasses.replace(result, next_size_share=0.5)
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ExplainerError, match=r"in \[0, 1\]"):
            dataclasses.replace(result, cut_short=True, next_size_share=bad)


@pytest.mark.parametrize("kwargs", [{"max_size": 0}, {"max_size": -1}, {"max_size": 1.5},
                                    {"chunk_size": 0}, {"max_oracle_calls": -1},
                                    {"max_time_s": -1.0}, {"max_size": 1.5},
                                    {"prune": True}])
def test_exhaustive_rejects_bad_options(kwargs: dict[str, float]) -> None:
    with pytest.raises(ExplainerError):
        ExhaustiveExplainer(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("certify", [-1, 1.5, True])
def test_certify_must_be_a_non_negative_integer(certify: object) -> None:
    with pytest.raises(ExplainerError, match="certify"):
        PostProcessing(certify=certify)  # type: ignore[arg-type]


# ---------------------------------------------------------------- certificates
def _explainers(certify: int = 0, prune_: bool = False) -> dict[str, Callable[[], Explainer]]:
    post = PostProcessing(certify=certify, prune=prune_)
    return {
        "cftgnn": lambda: CFTGNNExplainer(RandomStrategy(1), post, it_max=25),
        "greedy": lambda: GreedyExplainer(RandomStrategy(1), post, sample_size=3),
        "exhaustive": lambda: ExhaustiveExplainer(RandomStrategy(1), post, max_size=2),
    }


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(0, 10_000), st.sampled_from(["exact", "approximate"]),
       st.integers(0, 3), st.booleans())
def test_certificates_never_claim_what_brute_force_disproves(
    n: int, seed: int, mode: str, certify: int, prune_: bool
) -> None:
    ids = list(range(n))
    backend = HashedBackend(-1.0, spread=0.8, seed=seed)
    true_min = _true_min(backend, ids)
    for name, make in _explainers(certify, prune_).items():
        result = make().explain(_oracle(backend, ids, mode))
        bound = result.min_size_lower_bound
        assert bound >= 1, name
        if true_min is None:
            assert not result.is_counterfactual and not result.certified_minimal
        else:
            assert bound <= true_min, name
            if result.certified_minimal:
                assert result.size == true_min, name
            if certify and true_min <= certify:  # certify finds the true minimum
                assert result.is_counterfactual and result.size == true_min, name
                assert result.certified_minimal, name
        if result.is_counterfactual:
            assert _flips(backend, F(result.explanation)), name


def test_certificate_counts_only_exact_evaluations() -> None:
    backend = AdditiveBackend(2.0, {1: 0.1, 2: 0.2, 3: 0.3})
    oracle = _oracle(backend, [1, 2, 3], mode="approximate")
    oracle.batch([F({1}), F({2}), F({3})])  # approximate: no certificate
    assert oracle.certificate() == 1
    oracle.exact_batch([F({1}), F({2})])
    assert oracle.certificate() == 1  # {3} not yet evaluated exactly
    oracle.exact_batch([F({3})])
    assert oracle.certificate() == 2
    oracle.exact_batch([F(c) for k in (2, 3) for c in itertools.combinations([1, 2, 3], k)])
    assert oracle.certificate() == 4  # no removable set at all flips


def test_certify_replaces_a_larger_answer() -> None:
    # greedy (l = 1, recent) walks 4, 3 before reaching a flip; {1} alone flips
    backend = AdditiveBackend(1.0, {1: 1.2, 2: 0.0, 3: 0.5, 4: 0.6})
    plain = GreedyExplainer(RecentStrategy(), sample_size=1).explain(_oracle(backend, [1, 2, 3,
                                                                                      4]))
    assert plain.is_counterfactual and plain.size > 1 and not plain.certified_minimal
    result = GreedyExplainer(RecentStrategy(), PostProcessing(certify=1), sample_size=1).explain(
        _oracle(backend, [1, 2, 3, 4]))
    assert result.explanation == (1,) and result.certify_replaced and result.certified_minimal
    assert result.size_before_prune == plain.size


# ---------------------------------------------------------------- pruning
@settings(max_examples=40, deadline=None)
@given(st.integers(2, 8), st.integers(0, 10_000))
def test_pruning_reaches_one_minimality(n: int, seed: int) -> None:
    ids = list(range(n))
    rng = np.random.default_rng(seed)
    weights = {e: float(rng.uniform(-0.2, 0.6)) for e in ids}
    groups = {F({0, n - 1}): float(rng.uniform(-1.0, 1.0))}
    backend = InteractionBackend(1.0, weights, groups)
    full = F(ids)
    if not _flips(backend, full):
        return
    pruned, logit = prune(_oracle(backend, ids), sorted(full))
    assert _flips(backend, F(pruned)) and logit == backend.logit(F(pruned))
    for e in pruned:
        assert not _flips(backend, F(pruned) - {e})  # 1-minimal


def test_prune_option_shrinks_greedy_answers() -> None:
    # greedy with recent takes 4, 3, 2 (each a little better) and then 1 flips: 4 events,
    # but {1, 4} alone flips
    backend = AdditiveBackend(1.0, {1: 0.7, 2: 0.05, 3: 0.05, 4: 0.35})
    ids = [1, 2, 3, 4]
    plain = GreedyExplainer(RecentStrategy(), sample_size=1).explain(_oracle(backend, ids))
    result = GreedyExplainer(RecentStrategy(), PostProcessing(prune=True), sample_size=1).explain(
        _oracle(backend, ids))
    assert plain.size == 4 and result.size_before_prune == 4
    assert F(result.explanation) == F({1, 4}) and result.is_counterfactual and result.prune


def test_prune_refuses_a_non_counterfactual() -> None:
    backend = AdditiveBackend(1.0, {1: 0.1})
    with pytest.raises(ExplainerError):
        prune(_oracle(backend, [1]), [1])


def test_search_by_size_reports_the_sizes_done() -> None:
    backend = AdditiveBackend(1.0, dict.fromkeys(range(5), 0.1))
    done = search_by_size(_oracle(backend, list(range(5))), list(range(5)), 3)
    assert done.explanation is None and done.sizes_done == 3 and not done.cut_short
    assert done.evaluated == 5 + 10 + 10


def test_no_removable_status() -> None:
    backend = AdditiveBackend(1.0, {1: 2.0})
    result = GreedyExplainer().explain(_oracle(backend, [1], removable=[]))
    assert result.status is ExplanationStatus.NO_REMOVABLE and not result.is_counterfactual
    assert result.min_size_lower_bound == 0 and backend.calls == 0


def test_certify_time_budget_cuts_short() -> None:
    backend = HashedBackend(5.0, spread=0.1, seed=2)  # nothing flips
    result = GreedyExplainer(post=PostProcessing(certify=3, certify_max_time_s=0.0)).explain(
        _oracle(backend, list(range(8)), mode="approximate"))
    assert result.cut_short and result.min_size_lower_bound == 1  # nothing exact was done
    with pytest.raises(ExplainerError):
        PostProcessing(certify=1, certify_max_time_s=-1.0)


def test_a_deadline_is_kept_within_about_one_small_chunk() -> None:
    import time

    class Slow(HashedBackend):
        def logit(self, removed: frozenset[int]) -> float:
            time.sleep(5e-4)
            return super().logit(removed)

    backend = Slow(9.0, spread=0.1)  # nothing flips; 2,080 sets would take over a second
    start = time.perf_counter()
    result = ExhaustiveExplainer(max_size=2, max_time_s=0.1).explain(
        _oracle(backend, list(range(64))))
    assert result.cut_short and time.perf_counter() - start < 0.9
    assert backend.calls < 2080


@pytest.mark.parametrize("flips", [False, True])
def test_a_size_completed_just_before_the_deadline_is_not_cut_short(
        flips: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline passes while the last chunk of a size is evaluated: that size is
    complete (its answer, or the bound it proves), not cut short."""
    from cftgnn.explain import exact_search

    clock = [0.0]

    class Ticking(AdditiveBackend):
        def logit(self, removed: frozenset[int]) -> float:
            clock[0] += 1.0  # one second per set evaluated
            return super().logit(removed)

    backend = Ticking(1.0, {1: 0.1, 2: 0.1, 3: 2.5 if flips else 0.1, 4: 0.1})
    monkeypatch.setattr(exact_search.time, "perf_counter", lambda: clock[0])
    done = search_by_size(_oracle(backend, [1, 2, 3, 4]), [1, 2, 3, 4], max_size=1,
                          deadline=3.5)  # passed after the 4th set: size 1's last
    assert not done.cut_short and done.sizes_done == 1 and done.evaluated == 4
    assert done.explanation == ((3,) if flips else None)
    # a deadline that passes with sets of the size left is cut short, as before
    clock[0] = 0.0
    cut = search_by_size(_oracle(backend, [1, 2, 3, 4]), [1, 2, 3, 4], max_size=2,
                         deadline=3.5)
    if not flips:
        assert cut.cut_short and cut.sizes_done == 1


# ---------------------------------------------------------------- ceiling fallback
def _interaction_only() -> InteractionBackend:
    # no single removal moves the logit (so no search improves on ∅), all four together flip
    return InteractionBackend(1.0, {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0},
                              {F({1, 2, 3, 4}): 1.5, F({1, 3}): 0.0})


@pytest.mark.parametrize("cls", [GreedyExplainer, BeamExplainer])
def test_ceiling_answers_every_removable_event_when_the_search_finds_nothing(
        cls: type[Explainer]) -> None:
    backend = _interaction_only()
    ids = [1, 2, 3, 4]
    plain = cls(RecentStrategy()).explain(_oracle(backend, ids))
    assert not plain.is_counterfactual
    result = cls(RecentStrategy(), PostProcessing(ceiling=True)).explain(_oracle(backend, ids))
    assert result.is_counterfactual and F(result.explanation) == F(ids)
    assert result.final_logit == backend.logit(F(ids)) and result.size_before_prune == 4
    pruned = cls(RecentStrategy(), PostProcessing(ceiling=True, prune=True)).explain(
        _oracle(backend, ids))
    assert pruned.is_counterfactual and pruned.size_before_prune == 4


def test_ceiling_is_not_used_when_the_search_found_one_or_the_ceiling_does_not_flip() -> None:
    found = AdditiveBackend(1.0, {1: 1.5, 2: 0.1})
    result = GreedyExplainer(RecentStrategy(), PostProcessing(ceiling=True)).explain(
        _oracle(found, [1, 2]))
    assert result.explanation == (1,) and result.size_before_prune == 1
    # nothing flips, the ceiling {1, 2} included: the search's own answer stands
    none = AdditiveBackend(1.0, {1: 0.2, 2: 0.3})
    oracle = _oracle(none, [1, 2])
    result = GreedyExplainer(RecentStrategy(), PostProcessing(ceiling=True)).explain(oracle)
    assert not result.is_counterfactual and result.explanation != (1, 2)


def test_ceiling_respects_max_size_and_protected_events() -> None:
    backend = _interaction_only()
    ids = [1, 2, 3, 4]
    capped = GreedyExplainer(RecentStrategy(), PostProcessing(ceiling=True)).explain(
        _oracle(backend, ids, max_size=3))
    assert not capped.is_counterfactual  # the ceiling needs 4 events
    protected = GreedyExplainer(RecentStrategy(), PostProcessing(ceiling=True)).explain(
        _oracle(backend, ids, removable=[1, 2, 3]))
    assert not protected.is_counterfactual and 4 not in protected.explanation


def test_ceiling_must_be_a_boolean() -> None:
    with pytest.raises(ExplainerError, match="ceiling"):
        PostProcessing(ceiling="yes")  # type: ignore[arg-type]
