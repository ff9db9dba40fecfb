"""T-GNNExplainer on toy oracles whose coalition values are known.

The published explorer (the default) adds one child per visit until every child exists,
selects by ``Q + c_puct·√n/(1+N)`` without a prior, backs up the empty coalition's reward and
scores every coalition it creates, in batched exact calls; on six events it scores exactly
the 64 coalitions a brute force lists. The narrowed explorer (``search=narrowed``) is the
project's earlier search, reproduced. Both keep every scored coalition in the result."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from cftgnn.cli import friendly_errors
from cftgnn.errors import ConfigError, ExplainerError
from cftgnn.explain import TGNNExplainer
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.pgexplainer import EdgeScorer, PGExplainer, save_scorer
from cftgnn.explain.tgnnexplainer import (
    Explorer,
    NarrowedExplorer,
    Node,
    PublishedExplorer,
    fidelity,
    share_below,
)
from cftgnn.oracle import Oracle
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.testing import (
    AdditiveBackend,
    HashedBackend,
    InteractionBackend,
    make_candidates,
    make_oracle,
)

CONF = Path(__file__).resolve().parents[2] / "conf"


def _explore(oracle: Oracle, **options: object) -> Explorer:
    explainer = TGNNExplainer(**options)
    return explainer.explore(oracle, BudgetMeter(explainer.params, oracle, exact=True))


def _narrowed(oracle: Oracle, **options: object) -> NarrowedExplorer:
    explorer = _explore(oracle, search="narrowed", **options)
    assert isinstance(explorer, NarrowedExplorer)
    return explorer


def _published(oracle: Oracle, **options: object) -> PublishedExplorer:
    explorer = _explore(oracle, **options)
    assert isinstance(explorer, PublishedExplorer)
    return explorer


def _brute_force(backend: HashedBackend, p0: float, ids: list[int]
                 ) -> dict[tuple[int, ...], float]:
    """Every coalition of kept ``ids`` and its reward, straight from the backend."""
    return {kept: fidelity(p0, float(backend([frozenset(ids) - frozenset(kept)])[0]))
            for size in range(len(ids) + 1)
            for kept in itertools.combinations(sorted(ids), size)}


class _BatchLog(HashedBackend):
    """A hashed toy that keeps each batched call's sets apart."""

    def __init__(self, *args: float) -> None:
        super().__init__(*args)
        self.batched: list[list[frozenset[int]]] = []

    def __call__(self, sets: Sequence[frozenset[int]]) -> npt.NDArray[np.float64]:
        self.batched.append(list(sets))
        return super().__call__(sets)


def test_fidelity_is_the_move_towards_the_original_side() -> None:
    assert fidelity(1.0, 1.5) == pytest.approx(0.5)
    assert fidelity(1.0, -0.5) == pytest.approx(-1.5)
    assert fidelity(-1.0, -2.0) == pytest.approx(1.0)
    assert fidelity(-1.0, 0.5) == pytest.approx(-1.5)


def test_share_below_gives_ties_equal_shares() -> None:
    assert share_below([0.3, 0.1, 0.3, 0.2]).tolist() == [0.5, 0.0, 0.5, 0.25]
    assert share_below([]).tolist() == []


# ----------------------------------------------------------------- the published explorer

def test_the_default_is_the_published_explorer_with_the_paper_s_navigator() -> None:
    params = TGNNExplainer().params
    assert params.search.value == "published" and params.navigator.value == "pgexplainer"
    assert (params.rollouts, params.c_puct, params.min_atoms, params.candidates) == (
        500, 5.0, 6, 20)


@pytest.mark.parametrize("visits", [1, 3, 6])
def test_full_expansion_adds_one_child_per_visit_until_every_child_exists(visits: int
                                                                          ) -> None:
    """The root's ``j``-th visit adds the child dropping its ``j``-th least important event
    (perturb-one's order here); after ``|K|`` visits it has all ``|K|`` children, and every
    child of every node is scored."""
    weights = {2: 0.1, 4: 0.3, 6: 0.9, 8: 0.2, 10: 0.4, 12: 0.05}
    oracle = make_oracle(make_candidates(sorted(weights)), AdditiveBackend(1.0, weights))
    explorer = _published(oracle, navigator="perturb_one", rollouts=visits)
    least_first = sorted(weights, key=weights.get)  # removing a heavier event moves more
    assert explorer.order == least_first
    kids = explorer.root.children
    assert kids is not None
    assert [frozenset(weights) - k.coalition for k in kids] == [
        frozenset({e}) for e in least_first[:visits]]
    assert all(n.reward is not None for n in explorer.nodes.values())  # every one scored


def test_a_node_gets_every_child_after_as_many_visits_as_events() -> None:
    ids = [1, 3, 5, 7, 9, 11]
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.8, spread=0.6, seed=0))
    explorer = _published(oracle, navigator="none", rollouts=40)
    for node in explorer.nodes.values():
        kids = node.children
        assert kids is not None
        # visited (or the root, visited every rollout): one child per visit, at most |C|
        visits = explorer.rollouts if node is explorer.root else node.visits
        assert len(kids) == min(visits, len(node.coalition)) or not node.coalition
        assert all(len(k.coalition) == len(node.coalition) - 1 and k.coalition < node.coalition
                   for k in kids)
        assert len({k.coalition for k in kids}) == len(kids)


@pytest.mark.parametrize("seed", range(4))
def test_the_scored_coalitions_equal_a_brute_force_list_on_six_events(seed: int) -> None:
    """Enough rollouts create every coalition of six events: the result keeps all 64, each
    with the reward a brute force computes from the backend, ``K`` first (reward 0)."""
    ids = [1, 3, 5, 7, 9, 11]
    backend = HashedBackend(0.8, spread=0.6, seed=seed)
    oracle = make_oracle(make_candidates(ids), backend)
    result = TGNNExplainer(navigator="none", rollouts=2000).explain(oracle)
    assert result.coalitions is not None
    want = _brute_force(HashedBackend(0.8, spread=0.6, seed=seed), oracle.original_logit, ids)
    got = dict(result.coalitions)
    assert len(got) == len(result.coalitions) == 2 ** 6
    assert got.keys() == want.keys()
    for kept, reward in want.items():
        assert got[kept] == pytest.approx(reward, abs=1e-12)
    assert result.coalitions[0] == (tuple(ids), 0.0)
    assert 6 < result.iterations < 2000  # ends once every coalition exists
    # the answer, first in the ranking: the best of all 64 (min_atoms = 6 = |K|)
    best = max(want, key=lambda k: (want[k], -len(k)))
    assert set(result.ranking[: len(best)]) == set(best)


@pytest.mark.parametrize("min_atoms", [1, 2, 3])
def test_the_answer_is_the_brute_force_best_coalition_of_at_most_min_atoms(min_atoms: int
                                                                            ) -> None:
    ids = [1, 3, 5, 7, 9, 11]
    backend = HashedBackend(0.8, spread=0.6, seed=7)
    oracle = make_oracle(make_candidates(ids), backend)
    explorer = _published(oracle, navigator="none", min_atoms=min_atoms)
    want = _brute_force(HashedBackend(0.8, spread=0.6, seed=7), oracle.original_logit, ids)
    small = {k: r for k, r in want.items() if len(k) <= min_atoms}
    assert explorer.best() == frozenset(max(small, key=lambda k: (small[k], -len(k))))


def _node(visits: int, value: float, order: int) -> Node:
    node = Node(frozenset({order}), order, reward=0.0, visits=visits, value=value)
    node.children = []
    return node


@pytest.mark.parametrize("seed", range(6))
def test_selection_is_uct_without_a_prior(seed: int) -> None:
    """The chosen child maximises ``Q + c_puct·√n/(1+N)``, whatever the navigator says
    (a prior would weight each child's exploration term by its navigator score)."""
    rng = np.random.default_rng(seed)
    c_puct = float(rng.uniform(0.1, 5.0))
    parent = Node(frozenset(range(1, 9)), 99)
    parent.children = [_node(int(n), float(w), j) for j, (n, w) in enumerate(zip(
        rng.integers(0, 5, 6), rng.normal(0, 2, 6), strict=True))]
    n = sum(k.visits for k in parent.children)
    score = [k.q() + c_puct * math.sqrt(n) / (1 + k.visits) for k in parent.children]
    for navigator in ("none", "perturb_one"):
        oracle = make_oracle(make_candidates(list(range(1, 9))),
                             HashedBackend(0.5, spread=0.5, seed=seed))
        explorer = _published(oracle, navigator=navigator, c_puct=c_puct, rollouts=0)
        assert explorer._select(parent).order == int(np.argmax(score))  # noqa: SLF001


def test_the_first_visit_of_a_node_takes_its_first_child() -> None:
    """With no visits below, every child scores 0: the first (the least important dropped)."""
    weights = {2: 0.1, 4: 0.3, 6: 0.9}
    oracle = make_oracle(make_candidates(sorted(weights)), AdditiveBackend(1.0, weights))
    explorer = _published(oracle, navigator="perturb_one", rollouts=1)
    path = [n for n in explorer.nodes.values() if n.visits]
    assert [frozenset(weights) - n.coalition for n in path] == [
        frozenset({2}), frozenset({2, 4}), frozenset({2, 4, 6})]


def test_rollouts_reach_the_empty_coalition_and_back_up_its_reward() -> None:
    ids = list(range(1, 11))
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=3))
    explorer = _published(oracle, navigator="none", rollouts=50)
    empty = explorer.nodes[frozenset()]
    assert explorer.empty_reward == empty.reward == pytest.approx(
        fidelity(oracle.original_logit, oracle.exact(frozenset(ids))))
    assert empty.visits == explorer.rollouts == 50
    root_kids = explorer.root.children
    assert root_kids is not None and sum(k.visits for k in root_kids) == 50
    for node in explorer.nodes.values():  # W = N · (the empty coalition's reward)
        assert node.value == pytest.approx(node.visits * empty.reward)


def test_the_coalitions_of_a_wave_are_one_batched_exact_call() -> None:
    """The empty coalition first, then one call per wave; no coalition is scored twice, and
    500 rollouts over 20 candidates score about 3,000 coalitions (the reference's count)."""
    ids = list(range(1, 31))
    backend = _BatchLog(0.5, 0.5, 3)
    oracle = make_oracle(make_candidates(ids), backend)
    backend.batched.clear()  # the original logit
    explorer = _published(oracle, navigator="none", wave=50)
    assert explorer.rollouts == 500
    assert explorer.batches == len(backend.batched) == 1 + 500 // 50
    assert backend.batched[0] == [frozenset(range(11, 31))]  # K removed: the empty coalition
    assert len(set(backend.log)) == len(backend.log)  # every coalition once
    assert len(backend.log) == len(explorer.nodes)  # p_orig (= K kept), ∅ first, the rest
    assert 2000 < len(explorer.nodes) < 500 * 20
    result = TGNNExplainer(navigator="none", wave=50).explain(
        make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=3)))
    assert result.coalitions is not None and len(result.coalitions) == len(explorer.nodes)


def test_the_wave_changes_the_calls_not_the_search() -> None:
    """Selection reads only the empty coalition's reward: one rollout per call or 100 give
    the same tree, rewards and answer."""
    ids = list(range(1, 16))
    runs = []
    for wave in (1, 100):
        oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=4))
        explorer = _published(oracle, navigator="perturb_one", rollouts=100, wave=wave)
        runs.append((explorer.coalitions(), explorer.best(), explorer.batches))
    assert runs[0][:2] == runs[1][:2]
    assert runs[0][2] > 50 and runs[1][2] == 2


def test_a_small_candidate_set_is_searched_too() -> None:
    """``|K| ≤ min_atoms``: the published explorer still searches; every coalition of
    three events is scored and the best kept one leads the ranking."""
    weights = {1: 0.6, 2: 0.7, 3: -0.3}  # removing 3 raises the logit: keep {1, 2}
    oracle = make_oracle(make_candidates([1, 2, 3]), AdditiveBackend(1.0, weights))
    result = TGNNExplainer(navigator="none").explain(oracle)
    assert result.coalitions is not None and len(result.coalitions) == 8
    assert set(result.ranking[:2]) == {1, 2}


@pytest.mark.parametrize("search", ["published", "narrowed"])
def test_only_the_most_recent_candidates_are_searched(search: str) -> None:
    ids = list(range(1, 31))
    backend = HashedBackend(0.5, spread=0.5, seed=2)
    oracle = make_oracle(make_candidates(ids), backend)
    explorer = _explore(oracle, search=search, candidates=8, min_atoms=3, navigator="none",
                        rollouts=30)
    assert explorer.candidates == frozenset(range(23, 31))
    assert all(s <= explorer.candidates for s in backend.log)
    result = TGNNExplainer(search=search, candidates=8, min_atoms=3, navigator="none",
                           rollouts=30).explain(oracle)
    assert sorted(result.ranking) == ids
    assert set(result.ranking[: len(explorer.best())]) == explorer.best()
    assert result.coalitions == explorer.coalitions()
    assert all(set(kept) <= explorer.candidates for kept, _ in result.coalitions)


@pytest.mark.parametrize("search", ["published", "narrowed"])
def test_the_rollout_count_and_the_iteration_cap(search: str) -> None:
    ids = list(range(1, 13))
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=4))
    result = TGNNExplainer(search=search, rollouts=7, navigator="none").explain(oracle)
    assert result.iterations == 7 and not result.cut_short
    result = TGNNExplainer(search=search, rollouts=7, max_iterations=3,
                           navigator="none").explain(oracle)
    assert result.iterations == 3 and not result.cut_short


@pytest.mark.parametrize("search", ["published", "narrowed"])
@pytest.mark.parametrize("budget", [{"max_oracle_calls": 12}, {"max_time_s": 0.0}])
def test_the_budget_cuts_the_search_short(search: str, budget: dict[str, float]) -> None:
    ids = list(range(1, 21))
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=5))
    result = TGNNExplainer(search=search, navigator="none", **budget).explain(oracle)
    assert result.cut_short
    assert result.iterations < 500
    if "max_oracle_calls" in budget:  # every coalition asked first; the prefix scan too
        assert oracle.stats.exact_calls <= 12 + 1  # + the confirmation
        assert result.coalitions is not None and len(result.coalitions) <= 12


# ------------------------------------------------------------------ the narrowed explorer

def test_narrowed_the_single_kept_event_that_preserves_the_prediction_most() -> None:
    """Additive toy: keeping only ``e`` leaves ``base − Σ_{f≠e} w_f``; the best single kept
    event is the heaviest, and the answer removes it first."""
    weights = {2: 0.1, 4: 0.3, 6: 0.9, 8: 0.2, 10: 0.4, 12: 0.05}
    oracle = make_oracle(make_candidates(sorted(weights)), AdditiveBackend(1.0, weights))
    explorer = _narrowed(oracle, min_atoms=1, navigator="none", expand_width=6)
    assert explorer.best() == frozenset({6})
    result = TGNNExplainer(search="narrowed", min_atoms=1, navigator="none",
                           expand_width=6).explain(oracle)
    assert result.ranking[0] == 6
    assert result.importance[0] >= 1.0 > result.importance[1]
    # removing 6 leaves 0.1 > 0; 6 then the most recent, 12 (0.05) leaves 0.05; then 10: flip
    assert result.explanation == (6, 12, 10) and result.is_counterfactual


@pytest.mark.parametrize("seed", range(3))
def test_narrowed_finds_the_brute_force_best_leaf_when_the_tree_is_in_reach(seed: int
                                                                            ) -> None:
    ids = [1, 3, 5, 7, 9, 11]
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.8, spread=0.6, seed=seed))
    explorer = _narrowed(oracle, min_atoms=2, navigator="none", expand_width=6,
                         rollouts=2000)
    want = _brute_force(HashedBackend(0.8, spread=0.6, seed=seed), oracle.original_logit, ids)
    assert len(explorer.best()) == 2
    assert want[tuple(sorted(explorer.best()))] == pytest.approx(
        max(r for k, r in want.items() if len(k) == 2))
    # its scored coalitions: K and the leaves of two events, each with its reward
    scored = explorer.coalitions()
    assert scored[0] == (tuple(ids), 0.0)
    assert {len(k) for k, _ in scored[1:]} == {2}
    assert all(r == pytest.approx(want[k]) for k, r in scored)


@pytest.mark.parametrize("navigator", ["perturb_one", "none"])
def test_narrowed_finds_a_planted_pair_that_matters_only_together(navigator: str) -> None:
    """Keeping 4 and 9 together keeps the prediction; keeping either alone loses it: the best
    pair is found among 12 candidates with the navigator's pruning (5 children per node)."""
    ids = list(range(1, 13))
    weights = {e: 0.05 for e in ids} | {4: 2.0, 9: 2.0}
    backend = InteractionBackend(1.3, weights, {frozenset({4, 9}): -2.0})
    oracle = make_oracle(make_candidates(ids), backend)
    explorer = _narrowed(oracle, min_atoms=2, navigator=navigator)
    assert explorer.best() == frozenset({4, 9})
    result = TGNNExplainer(search="narrowed", min_atoms=2, navigator=navigator).explain(oracle)
    assert set(result.ranking[:2]) == {4, 9}
    assert result.is_counterfactual and result.explanation == result.ranking[:1]


def test_narrowed_scores_every_expansion_s_children_in_one_batched_exact_call() -> None:
    """One rollout per wave: each batched call scores the children of one node of
    ``min_atoms + 1`` kept events (the leaves), each coalition once."""
    ids = list(range(1, 16))
    backend = _BatchLog(0.5, 0.5, 3)
    oracle = make_oracle(make_candidates(ids), backend)
    backend.batched.clear()  # the original logit
    explorer = _narrowed(oracle, min_atoms=3, navigator="none", expand_width=4, rollouts=60,
                         wave=1)
    assert explorer.batches > 10
    assert oracle.stats.exact_batches == explorer.batches == len(backend.batched)
    assert explorer.batches <= explorer.expansions <= explorer.rollouts
    k = frozenset(ids)
    for batch in backend.batched:
        kept = [k - s for s in batch]
        assert all(len(c) == 3 for c in kept)  # siblings: one parent of 4 events
        assert len(frozenset().union(*kept)) <= 4
    assert len(set(backend.log)) == len(backend.log)


@pytest.mark.parametrize("wave", [5, 25])
def test_narrowed_scores_a_wave_of_rollouts_in_one_batched_exact_call(wave: int) -> None:
    ids = list(range(1, 16))
    backend = HashedBackend(0.5, spread=0.5, seed=3)
    oracle = make_oracle(make_candidates(ids), backend)
    explorer = _narrowed(oracle, min_atoms=3, navigator="none", rollouts=100, wave=wave)
    assert explorer.rollouts == 100
    assert oracle.stats.exact_batches == explorer.batches <= 100 // wave
    assert len(set(backend.log)) == len(backend.log)  # every coalition scored once


def test_the_navigator_is_one_more_batched_call() -> None:
    ids = list(range(1, 10))
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=1))
    explorer = _narrowed(oracle, min_atoms=3, navigator="perturb_one", rollouts=20, wave=4)
    assert explorer.batches > 1
    assert oracle.stats.exact_batches == 1 + explorer.batches


def test_narrowed_a_small_candidate_set_is_its_own_answer() -> None:
    """``|K| ≤ min_atoms``: no search; the ranking is the navigator's order."""
    weights = {1: 0.6, 2: 0.7, 3: 0.1}
    oracle = make_oracle(make_candidates([1, 2, 3]), AdditiveBackend(1.0, weights))
    result = TGNNExplainer(search="narrowed", navigator="perturb_one").explain(oracle)
    assert result.iterations == 0
    assert result.ranking == (2, 1, 3) and result.explanation == (2, 1)
    assert result.coalitions == (((1, 2, 3), 0.0),)


# (navigator, options) -> (best, rollouts, scored coalitions, ranking head, exact calls) of
# the narrowed explorer before the published one became the default (commit 3252bf2), on
# 25 events of HashedBackend(0.5, spread=0.5, seed=0)
BEFORE = [
    ("none", {}, ([7, 8, 15, 21, 24, 25], 500, 815, [25, 24, 21, 15, 8, 7], 839)),
    ("perturb_one", {}, ([6, 7, 8, 12, 23, 25], 500, 739, [25, 12, 6, 7, 23, 8], 787)),
    ("none", {"min_atoms": 3, "expand_width": 4, "rollouts": 60, "wave": 1},
     ([9, 10, 24], 60, 103, [24, 10, 9, 25, 23, 22], 126)),
    ("perturb_one", {"candidates": 8, "min_atoms": 2, "rollouts": 200, "c_puct": 1.0},
     ([18, 23], 200, 29, [18, 23, 25, 12, 9, 6], 77)),
    ("perturb_one", {"max_oracle_calls": 30}, ([7, 9, 12, 13, 20, 25], 1, 6,
                                               [25, 12, 9, 7, 20, 13], 30)),
]


@pytest.mark.parametrize(("navigator", "options", "before"), BEFORE)
def test_narrowed_reproduces_the_earlier_default_explorer(
        navigator: str, options: dict[str, float], before: tuple[object, ...]) -> None:
    ids = list(range(1, 26))
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=0))
    explorer = _narrowed(oracle, navigator=navigator, **options)
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=0))
    result = TGNNExplainer(search="narrowed", navigator=navigator, **options).explain(oracle)
    got = (sorted(explorer.best()), explorer.rollouts, len(explorer.coalitions()),
           list(result.ranking[:6]), result.exact_calls)
    assert got == before


# --------------------------------------------------------------------------- navigators

def test_attention_needs_a_probe_and_bad_navigators_are_refused() -> None:
    oracle = make_oracle(make_candidates([1, 2, 3]), AdditiveBackend(1.0, {1: 0.6}))
    with pytest.raises(ExplainerError, match="navigator=attention needs a model with a probe"):
        TGNNExplainer(navigator="attention").explain(oracle)
    with pytest.raises(ExplainerError, match="navigator must be one of"):
        TGNNExplainer(navigator="gnnexplainer")


@pytest.mark.parametrize(("option", "words"), [
    ("search=bogus", "search must be one of published | narrowed, got 'bogus'"),
    ("navigator=pg", "navigator must be one of pgexplainer | mlp | attention | perturb_one | "
                     "none, got 'pg'"),
    ("wave=0", "wave must be an integer >= 1, got 0"),
    ("search=null", "search must be set (not null)"),
    ("expand_width=1.5", "expand_width must be an integer >= 1, got 1.5"),
])
def test_a_bad_option_is_one_error_line_and_exit_2(option: str, words: str, capsys) -> None:
    """What ``explain.py`` does with ``explainer.<option>``: the config composes, and
    instantiating the explainer ends in one ``error:`` line, exit status 2."""
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=["explainer=tgnnexplainer", f"explainer.{option}"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc, friendly_errors():
        instantiate(cfg.explainer)
    assert exc.value.code == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err == [f"error: {words}"]


def _fingerprint(probe: bool) -> ModelFingerprint:
    return ModelFingerprint(dataset="toy", dataset_sha256="d" * 64, model="tgn",
                            weights="tgn_toy.pt", weights_sha256="w" * 64, checkpoint_dir=".",
                            probe=probe)


def test_supports_refuses_what_the_navigator_cannot_read(tmp_path: Path) -> None:
    for navigator in ("attention", "pgexplainer", "mlp"):
        with pytest.raises(ExplainerError, match="needs a model with a probe"):
            TGNNExplainer(navigator=navigator,
                          checkpoint=str(tmp_path / "x.pt")).supports(_fingerprint(False))
    for navigator in ("pgexplainer", "mlp"):
        with pytest.raises(ConfigError, match="no trained PGExplainer"):
            TGNNExplainer(navigator=navigator,
                          checkpoint=str(tmp_path / "x.pt")).supports(_fingerprint(True))
    TGNNExplainer(navigator="attention").supports(_fingerprint(True))
    TGNNExplainer(navigator="none").supports(_fingerprint(False))


class _Probe:
    """Attention and one feature per event of a toy oracle (the later, the larger); with
    attention, a bias adds ``bias`` to each event's attention (a stand-in the navigator's
    wiring is checked against; the model's arithmetic has its own test)."""

    def __init__(self, removable: npt.NDArray[np.int64], has_attention: bool = True) -> None:
        self.removable = removable
        self.has_attention = has_attention
        self.biases: list[npt.NDArray[np.float64]] = []

    def attention(self, bias: npt.ArrayLike | None = None) -> npt.NDArray[np.float64]:
        base = self.removable / self.removable.sum()
        if bias is None:
            return base
        self.biases.append(np.asarray(bias, dtype=np.float64))
        return base + self.biases[-1]

    def features(self) -> torch.Tensor:
        return torch.as_tensor(self.removable, dtype=torch.float32).reshape(-1, 1)


@pytest.mark.parametrize("search", ["published", "narrowed"])
@pytest.mark.parametrize("navigator", ["attention", "mlp", "pgexplainer"])
def test_the_probe_navigators(navigator: str, search: str, tmp_path: Path) -> None:
    """``attention`` reads the probe; ``mlp`` the trained PGExplainer's scores; ``pgexplainer``
    (the paper's) the attention with those scores as the bias of the candidates ``K`` (0 for
    the rest of ``R``)."""
    ids = list(range(1, 31))
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=6))
    probe = _Probe(oracle.removable)
    oracle.probe = probe  # type: ignore[assignment]
    torch.manual_seed(0)
    pt, _ = save_scorer(tmp_path / "pg.pt", EdgeScorer(1, hidden=8), {})
    mlp = PGExplainer(checkpoint=str(pt)).scores(oracle)
    in_k = np.asarray(oracle.removable) > 10  # the 20 most recent
    want = {"attention": probe.attention(), "mlp": mlp,
            "pgexplainer": probe.attention() + np.where(in_k, mlp, 0.0)}[navigator]
    explorer = _explore(oracle, search=search, navigator=navigator, checkpoint=str(pt),
                        rollouts=10)
    np.testing.assert_allclose(explorer.scores, want)
    if navigator == "pgexplainer":
        np.testing.assert_array_equal(probe.biases[-1], np.where(in_k, mlp, 0.0))
    result = TGNNExplainer(search=search, navigator=navigator, checkpoint=str(pt),
                           rollouts=10).explain(oracle)
    assert set(result.ranking[: len(explorer.best())]) == explorer.best()


def test_the_paper_s_navigator_is_the_mlp_s_scores_without_attention(tmp_path: Path) -> None:
    ids = list(range(1, 13))
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=6))
    probe = _Probe(oracle.removable, has_attention=False)
    oracle.probe = probe  # type: ignore[assignment]
    torch.manual_seed(0)
    pt, _ = save_scorer(tmp_path / "pg.pt", EdgeScorer(1, hidden=8), {})
    explorer = _explore(oracle, navigator="pgexplainer", checkpoint=str(pt), rollouts=5)
    np.testing.assert_array_equal(explorer.scores, PGExplainer(checkpoint=str(pt)).scores(oracle))
    assert probe.biases == []
