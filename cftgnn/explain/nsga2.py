"""Multi-objective genetic search for a diverse set of counterfactuals (seed 003, NSGA-II).

A removal set is a bit string over the removable events ``R``. NSGA-II (pymoo's
implementation) evolves a population of them against

(a) **size** ``|s|``,
(b) **margin** of the flip (how far past zero the logit moves, ``margin``; maximised),
(c) **consequence**: how many later history events the removal changes
    ([``Oracle.consequence``][cftgnn.oracle.Oracle.consequence]; the TGN memory cone, TGAT's sampled
    neighbourhoods; left out when the oracle has no such measure), and optionally
(d) **recency**: the mean rank of the removed events from the newest candidate (0 = newest),

with "is counterfactual" as a constraint: a set that does not flip violates it by how far its
logit stays on the original side, so the infeasible part of the population is pulled towards
a flip as greedy's Δ pulls, and ``max_size`` is a second constraint. Each generation's
offspring go to the oracle in **one** batched search-mode call (sets the search mode calls
counterfactual are then confirmed in one batched exact call; in exact mode that is a cache
hit). Margins are read off the exact logit.

The first population holds every singleton of ``R`` (in the strategy's order, as far as the
population size allows), the strategy's top-``k`` prefixes, and random sparse sets. When
``R`` has at most ``pop_size`` non-empty subsets, all of them are evaluated in one batch
instead, and the answer is exact.

The result is the **Pareto set** of every confirmed counterfactual evaluated during the run
(non-dominated on the objectives above, each set once); the answer is its smallest member
(ties: the largest margin), so it fits the common result type, and the others are the
result's ``counterfactuals``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.problem import Problem
from pymoo.operators.crossover.hux import HalfUniformCrossover
from pymoo.operators.mutation.bitflip import BitflipMutation

from cftgnn.errors import ExplainerError
from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.params import BudgetParams, option
from cftgnn.explain.population import Archive, initial_population
from cftgnn.oracle.oracle import Oracle

BoolMatrix = npt.NDArray[np.bool_]


class _RemovalProblem(Problem):
    """pymoo's view of the search: bit strings over ``R`` -> objectives and constraints."""

    def __init__(self, archive: Archive, limit: int, recency: bool) -> None:
        self.archive = archive
        self.limit = limit
        self.recency = recency
        n_obj = 2 + int(archive.oracle.has_consequence) + int(recency)
        super().__init__(n_var=len(archive.columns), n_obj=n_obj, n_ieq_constr=2, xl=0, xu=1,
                         vtype=bool)

    def _evaluate(self, x: BoolMatrix, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        x = np.asarray(x, dtype=bool)
        ev = self.archive.evaluate(x)
        size = x.sum(axis=1).astype(np.float64)
        out["F"] = self.archive.objectives(x, ev, self.recency)
        out["G"] = np.column_stack([ev.violation, size - self.limit])


@dataclass(frozen=True)
class NSGA2Params(BudgetParams):
    """NSGA-II's parameters (``conf/explainer/nsga2.yaml``).

    ``max_iterations`` counts the generations after the first population (default 30); the
    run stops before a generation whose ``pop_size`` sets would exceed ``max_oracle_calls``,
    or once ``max_time_s`` has passed (checked between generations). At least one of the
    three caps must be set.
    """

    max_iterations: int | None = option(30, "generations after the first population", low=0)
    pop_size: int = option(64, "sets per generation (one batched oracle call each)", low=4)
    recency: bool = option(False, "add objective (d): mean recency rank of the removed events")
    mutation_rate: float | None = option(None, "per-bit flip probability (null: 1 / |R|)",
                                         low=0, high=1, low_open=True)
    init_density: float = option(0.05, "share of events removed by the first population's "
                                       "random sets", low=0, high=1, low_open=True)
    seed: int = option(0, "seed of pymoo's generator")

    def __post_init__(self) -> None:
        super().__post_init__()
        require_a_cap(self)


def require_a_cap(params: BudgetParams) -> None:
    """A population search needs a cap to stop at.

    Raises:
        ExplainerError: When ``max_iterations``, ``max_oracle_calls`` and ``max_time_s`` are
            all null.
    """
    if (params.max_iterations is None and params.max_oracle_calls is None
            and params.max_time_s is None):
        raise ExplainerError("max_iterations, max_oracle_calls and max_time_s are all null: "
                             "set at least one of them")


class NSGA2Explainer(Explainer):
    """NSGA-II over removal sets: a Pareto set of counterfactuals (size, margin, consequence).

    Args:
        strategy: Orders the singletons and prefixes of the first population.
        post: The steps after the search.
        **options: [``NSGA2Params``][cftgnn.explain.NSGA2Params] (``pop_size``, ``recency``, ...)
            and the budget keys.
    """

    name = "nsga2"
    several = True
    Params = NSGA2Params
    params: NSGA2Params

    def largest_call(self, removable: int) -> int:
        """A generation of ``pop_size`` sets (``Explainer.largest_call``)."""
        return max(self.params.pop_size, super().largest_call(removable))

    def _search(self, oracle: Oracle, budget: BudgetMeter) -> SearchOutcome:
        p = self.params
        ranked = self.strategy.rank(oracle.removable)
        archive = Archive(oracle, ranked)
        limit = oracle.size_limit()
        n = len(ranked)
        if 2 ** n - 1 <= p.pop_size:  # every subset in one batch: the exact Pareto set
            every = (np.arange(1, 2 ** n)[:, None] >> np.arange(n)[None, :]) & 1
            x = every.astype(bool)
            archive.evaluate(x[x.sum(axis=1) <= limit])
            return self._outcome(archive, generations=0)
        rng = np.random.default_rng(p.seed)
        problem = _RemovalProblem(archive, limit, p.recency)
        algorithm = NSGA2(
            pop_size=p.pop_size,
            sampling=initial_population(n, p.pop_size, limit, p.init_density, rng),
            crossover=HalfUniformCrossover(),
            mutation=BitflipMutation(prob=1.0, prob_var=p.mutation_rate or 1.0 / n),
            eliminate_duplicates=True,
        )
        cap = budget.max_iterations
        algorithm.setup(problem, seed=p.seed,
                        termination=("n_gen", (sys.maxsize if cap is None else cap) + 1),
                        verbose=False)
        done = 0  # the first population, then generations
        while algorithm.has_next():
            if done and not budget.proceed(done - 1, cost=p.pop_size):
                break
            algorithm.next()
            done += 1
        return self._outcome(archive, generations=max(0, done - 1))

    def _outcome(self, archive: Archive, generations: int) -> SearchOutcome:
        front = archive.pareto(self.params.recency)
        if not front:
            best = archive.closest()
            return SearchOutcome(explanation=best, iterations=generations, found=False)
        (answer, _), *others = front
        return SearchOutcome(explanation=answer, iterations=generations, found=True,
                             alternatives=tuple(others))


__all__ = ["NSGA2Explainer", "NSGA2Params", "require_a_cap"]
