"""The simplest factual explainers: a random ranking (the floor) and perturb-one.

* [``RandomExplainer``][cftgnn.explain.RandomExplainer] (``explainer=random``): a random importance
  per removable event, seeded by ``(seed, event id)``, so a rerun ranks alike. Every results table
  shows it as the floor an explainer must beat.
* [``PerturbOneExplainer``][cftgnn.explain.PerturbOneExplainer] (``explainer=perturb_one``): the
  importance of event ``e`` is the exact shift of the logit towards a flip when ``e`` alone is
  removed, ``Δ(p_orig, f(G \\ {e}))`` (docs/design.md §2), all ``|R|`` single removals in one
  batched exact call (when the budget's oracle calls do not cover them, every score is 0 and the
  result is cut short).

Both are [``FactualExplainer``][cftgnn.explain.FactualExplainer]\\ s: their answer is the shortest
flipping prefix of the ranking.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.factual import FactualExplainer, FloatArray
from cftgnn.explain.params import BudgetParams, option
from cftgnn.oracle.oracle import Oracle, delta


@dataclass(frozen=True)
class RandomParams(BudgetParams):
    """The random ranking's options (``conf/explainer/random.yaml``)."""

    seed: int = option(0, "seed of the ranking (mixed with the event id)", low=0)


class RandomExplainer(FactualExplainer):
    """Ranks the removable events at random (the floor of every comparison)."""

    name = "random"
    Params = RandomParams
    params: RandomParams

    def _score(self, oracle: Oracle, budget: BudgetMeter) -> FloatArray:
        rng = np.random.default_rng([self.params.seed, max(0, oracle.event_id)])
        return rng.random(len(oracle.removable))


@dataclass(frozen=True)
class PerturbOneParams(BudgetParams):
    """Perturb-one has no options besides the budget (``conf/explainer/perturb_one.yaml``)."""


class PerturbOneExplainer(FactualExplainer):
    """Ranks each removable event by the exact logit shift of removing it alone."""

    name = "perturb_one"
    Params = PerturbOneParams
    params: PerturbOneParams

    def _score(self, oracle: Oracle, budget: BudgetMeter) -> FloatArray:
        return single_removal_shifts(oracle, budget)


def single_removal_shifts(oracle: Oracle, budget: BudgetMeter) -> FloatArray:
    """``Δ(p_orig, f(G \\ {e}))`` of every removable event, in one batched exact call.

    Args:
        oracle: The explained event's oracle.
        budget: Charged for the ``|R|`` exact calls; when it does not cover them, every
            score is 0 (ties: the recent first) and the meter marks the search cut short.

    Returns:
        ``float [|R|]``, aligned with ``oracle.removable``.
    """
    events = [frozenset((int(e),)) for e in oracle.removable]
    if not budget.proceed(0, cost=len(events)):
        return np.zeros(len(events), dtype=np.float64)
    logits = oracle.exact_batch(events)
    p0 = oracle.original_logit
    return np.array([delta(p0, float(p)) for p in logits], dtype=np.float64)


__all__ = ["PerturbOneExplainer", "PerturbOneParams", "RandomExplainer", "RandomParams",
           "single_removal_shifts"]
