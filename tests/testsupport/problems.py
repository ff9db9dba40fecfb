"""Toy problems with known minimal counterfactuals and the strategies the search tests share."""

from __future__ import annotations

from collections.abc import Callable

from cftgnn.explain import (
    ClosestStrategy,
    OneBestStrategy,
    RandomStrategy,
    RecentStrategy,
    SelectionStrategy,
)
from cftgnn.testing import AdditiveBackend, InteractionBackend, ToyProblem, make_candidates

F = frozenset
IDS = [2, 4, 5, 7, 9, 11, 12, 15]
HOPS = [1, 0, 2, 1, 0, 1, 2, 0]


def _additive() -> ToyProblem:
    # min CF {4, 7} (1.6 + 1.5 > 3); {4, 15} has exact logit 0.2, an approximate-only flip.
    w = dict(zip(IDS, [0.4, 1.6, 0.2, 1.5, 0.3, 0.1, -0.5, 1.2], strict=True))
    return ToyProblem(make_candidates(IDS, HOPS), AdditiveBackend(3.0, w), shift=-0.3)


def _interaction() -> ToyProblem:
    # singles are weak; {5, 12} only matters together -> unique min CF {5, 12}
    w = dict.fromkeys(IDS, 0.2)
    return ToyProblem(make_candidates(IDS, HOPS),
                      InteractionBackend(3.0, w, {F({5, 12}): 3.0}), shift=-0.3)


def _negative() -> ToyProblem:
    # p_orig < 0: removals raise the logit; min CF of size 3 {2, 9, 11} (0.9 each, 2.7 > 2.5)
    w = dict(zip(IDS, [-0.9, 0.1, -0.2, 0.0, -0.9, -0.9, -0.3, 0.2], strict=True))
    return ToyProblem(make_candidates(IDS, HOPS), AdditiveBackend(-2.5, w), shift=0.2)


PROBLEMS: dict[str, Callable[[], ToyProblem]] = {
    "additive": _additive, "interaction": _interaction, "negative": _negative}

STRATEGIES: dict[str, Callable[[], SelectionStrategy]] = {
    "random": lambda: RandomStrategy(seed=3),
    "recent": RecentStrategy,
    "closest": ClosestStrategy,
    "one_best": OneBestStrategy,
}
