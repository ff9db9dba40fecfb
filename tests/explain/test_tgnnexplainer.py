"""T-GNNExplainer: MCTS over kept coalitions finds the best coalition on toy oracles whose
answer is known, scores every expansion's children in one batched exact call, stops on the
budget, and ranks the best coalition first."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
import torch

from cftgnn.errors import ConfigError, ExplainerError
from cftgnn.explain import TGNNExplainer
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.pgexplainer import EdgeScorer, PGExplainer, save_scorer
from cftgnn.explain.tgnnexplainer import Explorer, fidelity, share_below
from cftgnn.oracle import Oracle
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.testing import (
    AdditiveBackend,
    HashedBackend,
    InteractionBackend,
    make_candidates,
    make_oracle,
)


def _explore(oracle: Oracle, **options: object) -> Explorer:
    explainer = TGNNExplainer(**options)
    return explainer.explore(oracle, BudgetMeter(explainer.params, oracle, exact=True))


def _best_by_brute_force(oracle: Oracle, ids: list[int], size: int) -> float:
    """The largest reward of any coalition of ``size`` kept events (a rollout's leaves)."""
    p0 = oracle.original_logit
    return max(fidelity(p0, oracle.exact(frozenset(ids) - frozenset(kept)))
               for kept in itertools.combinations(ids, size))


def test_fidelity_is_the_move_towards_the_original_side() -> None:
    assert fidelity(1.0, 1.5) == pytest.approx(0.5)
    assert fidelity(1.0, -0.5) == pytest.approx(-1.5)
    assert fidelity(-1.0, -2.0) == pytest.approx(1.0)
    assert fidelity(-1.0, 0.5) == pytest.approx(-1.5)


def test_share_below_gives_ties_equal_shares() -> None:
    assert share_below([0.3, 0.1, 0.3, 0.2]).tolist() == [0.5, 0.0, 0.5, 0.25]
    assert share_below([]).tolist() == []


def test_the_single_kept_event_that_preserves_the_prediction_most() -> None:
    """Additive toy: keeping only ``e`` leaves ``base − Σ_{f≠e} w_f``; the best single kept
    event is the heaviest, and the answer removes it first."""
    weights = {2: 0.1, 4: 0.3, 6: 0.9, 8: 0.2, 10: 0.4, 12: 0.05}
    oracle = make_oracle(make_candidates(sorted(weights)), AdditiveBackend(1.0, weights))
    explorer = _explore(oracle, min_atoms=1, navigator="none", expand_width=6)
    assert explorer.best() == frozenset({6})
    result = TGNNExplainer(min_atoms=1, navigator="none", expand_width=6).explain(oracle)
    assert result.ranking[0] == 6
    assert result.importance[0] >= 1.0 > result.importance[1]
    # removing 6 leaves 0.1 > 0; 6 then the most recent, 12 (0.05) leaves 0.05; then 10: flip
    assert result.explanation == (6, 12, 10) and result.is_counterfactual


@pytest.mark.parametrize("seed", range(5))
def test_finds_the_brute_force_best_coalition_when_the_tree_is_in_reach(seed: int) -> None:
    """With every child expanded and rollouts enough to score every coalition, the answer is
    the best coalition of ``min_atoms`` events (where rollouts end; a non-additive toy)."""
    ids = [1, 3, 5, 7, 9, 11]
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.8, spread=0.6, seed=seed))
    explorer = _explore(oracle, min_atoms=2, navigator="none", expand_width=6,
                        rollouts=2000)
    p0 = oracle.original_logit
    got = fidelity(p0, oracle.exact(frozenset(ids) - explorer.best()))
    assert len(explorer.best()) == 2
    assert got == pytest.approx(_best_by_brute_force(oracle, ids, 2))


@pytest.mark.parametrize("navigator", ["perturb_one", "none"])
def test_finds_a_planted_pair_that_matters_only_together(navigator: str) -> None:
    """Keeping 4 and 9 together keeps the prediction; keeping either alone loses it: the best
    pair is found among 12 candidates with the navigator's pruning (5 children per node)."""
    ids = list(range(1, 13))
    weights = {e: 0.05 for e in ids} | {4: 2.0, 9: 2.0}
    backend = InteractionBackend(1.3, weights, {frozenset({4, 9}): -2.0})
    oracle = make_oracle(make_candidates(ids), backend)
    explorer = _explore(oracle, min_atoms=2, navigator=navigator)
    assert explorer.best() == frozenset({4, 9})
    result = TGNNExplainer(min_atoms=2, navigator=navigator).explain(oracle)
    assert set(result.ranking[:2]) == {4, 9}
    assert result.is_counterfactual and result.explanation == result.ranking[:1]


class _BatchLog(HashedBackend):
    """A hashed toy that keeps each batched call's sets apart."""

    def __init__(self, *args: float) -> None:
        super().__init__(*args)
        self.batched: list[list[frozenset[int]]] = []

    def __call__(self, sets: Sequence[frozenset[int]]) -> npt.NDArray[np.float64]:
        self.batched.append(list(sets))
        return super().__call__(sets)


def test_every_expansion_s_children_are_one_batched_exact_call() -> None:
    """One rollout per wave: each batched call scores the children of one node of
    ``min_atoms + 1`` kept events (the leaves), each coalition once."""
    ids = list(range(1, 16))
    backend = _BatchLog(0.5, 0.5, 3)
    oracle = make_oracle(make_candidates(ids), backend)
    backend.batched.clear()  # the original logit
    explorer = _explore(oracle, min_atoms=3, navigator="none", expand_width=4, rollouts=60,
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
def test_a_wave_of_rollouts_is_one_batched_exact_call(wave: int) -> None:
    ids = list(range(1, 16))
    backend = HashedBackend(0.5, spread=0.5, seed=3)
    oracle = make_oracle(make_candidates(ids), backend)
    explorer = _explore(oracle, min_atoms=3, navigator="none", rollouts=100, wave=wave)
    assert explorer.rollouts == 100
    assert oracle.stats.exact_batches == explorer.batches <= 100 // wave
    assert len(set(backend.log)) == len(backend.log)  # every coalition scored once


def test_the_navigator_is_one_more_batched_call() -> None:
    ids = list(range(1, 10))
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=1))
    explorer = _explore(oracle, min_atoms=3, navigator="perturb_one", rollouts=20, wave=4)
    assert explorer.batches > 1
    assert oracle.stats.exact_batches == 1 + explorer.batches


def test_only_the_most_recent_candidates_are_searched() -> None:
    ids = list(range(1, 31))
    backend = HashedBackend(0.5, spread=0.5, seed=2)
    oracle = make_oracle(make_candidates(ids), backend)
    explorer = _explore(oracle, candidates=8, min_atoms=3, navigator="none", rollouts=30)
    assert explorer.candidates == frozenset(range(23, 31))
    assert all(s <= explorer.candidates for s in backend.log)
    result = TGNNExplainer(candidates=8, min_atoms=3, navigator="none",
                           rollouts=30).explain(oracle)
    assert sorted(result.ranking) == ids
    assert set(result.ranking[: len(explorer.best())]) == explorer.best()


def test_the_rollout_count_and_the_iteration_cap() -> None:
    ids = list(range(1, 13))
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=4))
    result = TGNNExplainer(rollouts=7, navigator="none").explain(oracle)
    assert result.iterations == 7 and not result.cut_short
    result = TGNNExplainer(rollouts=7, max_iterations=3, navigator="none").explain(oracle)
    assert result.iterations == 3 and not result.cut_short


@pytest.mark.parametrize("budget", [{"max_oracle_calls": 12}, {"max_time_s": 0.0}])
def test_the_budget_cuts_the_search_short(budget: dict[str, float]) -> None:
    ids = list(range(1, 21))
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=5))
    result = TGNNExplainer(navigator="none", **budget).explain(oracle)
    assert result.cut_short
    assert result.iterations < 500
    if "max_oracle_calls" in budget:  # every expansion asked first; the prefix scan too
        assert oracle.stats.exact_calls <= 12 + 1  # + the confirmation


def test_a_small_candidate_set_is_its_own_answer() -> None:
    """``|K| ≤ min_atoms``: no search; the ranking is the navigator's order."""
    weights = {1: 0.6, 2: 0.7, 3: 0.1}
    oracle = make_oracle(make_candidates([1, 2, 3]), AdditiveBackend(1.0, weights))
    result = TGNNExplainer(navigator="perturb_one").explain(oracle)
    assert result.iterations == 0
    assert result.ranking == (2, 1, 3) and result.explanation == (2, 1)


def test_attention_needs_a_probe_and_bad_navigators_are_refused() -> None:
    oracle = make_oracle(make_candidates([1, 2, 3]), AdditiveBackend(1.0, {1: 0.6}))
    with pytest.raises(ExplainerError, match="navigator=attention needs a model with attention"):
        TGNNExplainer(navigator="attention").explain(oracle)
    with pytest.raises(ExplainerError, match="navigator must be one of"):
        TGNNExplainer(navigator="gnnexplainer")


def _fingerprint(probe: bool) -> ModelFingerprint:
    return ModelFingerprint(dataset="toy", dataset_sha256="d" * 64, model="tgn",
                            weights="tgn_toy.pt", weights_sha256="w" * 64, checkpoint_dir=".",
                            probe=probe)


def test_check_run_refuses_what_the_navigator_cannot_read(tmp_path: Path) -> None:
    for navigator in ("attention", "pgexplainer"):
        with pytest.raises(ExplainerError, match="needs a model with attention"):
            TGNNExplainer(navigator=navigator,
                          checkpoint=str(tmp_path / "x.pt")).check_run(_fingerprint(False))
    with pytest.raises(ConfigError, match="no trained PGExplainer"):
        TGNNExplainer(checkpoint=str(tmp_path / "x.pt")).check_run(_fingerprint(True))
    TGNNExplainer(navigator="attention").check_run(_fingerprint(True))
    TGNNExplainer(navigator="none").check_run(_fingerprint(False))


class _Probe:
    """Attention and one feature per event of a toy oracle (the later, the larger)."""

    def __init__(self, removable: npt.NDArray[np.int64]) -> None:
        self.removable = removable

    def attention(self) -> npt.NDArray[np.float64]:
        return self.removable / self.removable.sum()

    def features(self) -> torch.Tensor:
        return torch.as_tensor(self.removable, dtype=torch.float32).reshape(-1, 1)


@pytest.mark.parametrize("navigator", ["attention", "pgexplainer"])
def test_the_probe_navigators_read_the_attention_and_the_trained_pgexplainer(
        navigator: str, tmp_path: Path) -> None:
    ids = list(range(1, 13))
    oracle = make_oracle(make_candidates(ids), HashedBackend(0.5, spread=0.5, seed=6))
    oracle.probe = _Probe(oracle.removable)  # type: ignore[assignment]
    torch.manual_seed(0)
    pt, _ = save_scorer(tmp_path / "pg.pt", EdgeScorer(1, hidden=8), {})
    want = (oracle.probe.attention() if navigator == "attention"
            else PGExplainer(checkpoint=str(pt)).scores(oracle))
    explorer = _explore(oracle, navigator=navigator, checkpoint=str(pt), rollouts=10)
    np.testing.assert_array_equal(explorer.scores, want)
    result = TGNNExplainer(navigator=navigator, checkpoint=str(pt), rollouts=10).explain(oracle)
    assert set(result.ranking[: len(explorer.best())]) == explorer.best()
