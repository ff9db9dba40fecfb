"""Multi-objective genetic search for a diverse set of counterfactuals (seed 003, NSGA-II).

A removal set is a bit string over the removable events ``R``. NSGA-II (pymoo's
implementation) evolves a population of them against

(a) **size** ``|s|``,
(b) **margin** of the flip (how far past zero the logit moves, :func:`margin`; maximised),
(c) **consequence**: how many later history events the removal changes
    (:meth:`Oracle.consequence`; the TGN memory cone, TGAT's sampled neighbourhoods; left out
    when the oracle has no such measure), and optionally
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

import time
from typing import Any

import numpy as np
import numpy.typing as npt
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.problem import Problem
from pymoo.operators.crossover.hux import HalfUniformCrossover
from pymoo.operators.mutation.bitflip import BitflipMutation

from cftgnn.errors import ExplainerError
from cftgnn.explain.base import Explainer, SearchOutcome, call_budget, time_budget
from cftgnn.explain.population import Archive, initial_population
from cftgnn.explain.strategies import SelectionStrategy
from cftgnn.oracle.contract import Oracle

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


class NSGA2Explainer(Explainer):
    """NSGA-II over removal sets: a Pareto set of counterfactuals (size, margin, consequence).

    Args:
        strategy: Orders the singletons and prefixes of the first population.
        pop_size: Sets per generation (one batched oracle call each).
        generations: Generations after the first population.
        recency: Add the recency objective (d).
        mutation_rate: Per-bit flip probability of the mutation (default ``1 / |R|``).
        init_density: Share of removed events in the first population's random sets.
        seed: Seed of pymoo's random generator (runs with one seed are reproducible).
        max_oracle_calls: Optional cap on search-mode evaluations; the run stops before a
            generation that would exceed it (``cut_short``).
        max_time_s: Optional cap on the search's seconds, checked between generations.
        **post: ``prune``, ``certify``, ``certify_max_time_s``, ``ceiling`` (see
            :class:`Explainer`).

    Raises:
        ExplainerError: On a population below 4, negative generations, rates outside
            ``(0, 1]`` or negative budgets.
    """

    name = "nsga2"
    several = True

    def __init__(
        self,
        strategy: SelectionStrategy | None = None,
        pop_size: int = 64,
        generations: int = 30,
        recency: bool = False,
        mutation_rate: float | None = None,
        init_density: float = 0.05,
        seed: int = 0,
        max_oracle_calls: int | None = None,
        max_time_s: float | None = None,
        **post: Any,
    ) -> None:
        super().__init__(strategy, **post)
        if isinstance(pop_size, bool) or int(pop_size) != pop_size or pop_size < 4:
            raise ExplainerError(f"pop_size must be an integer >= 4, got {pop_size!r}")
        if isinstance(generations, bool) or int(generations) != generations or generations < 0:
            raise ExplainerError(f"generations must be an integer >= 0, got {generations!r}")
        if mutation_rate is not None and not 0 < mutation_rate <= 1:
            raise ExplainerError(f"mutation_rate must be in (0, 1], got {mutation_rate}")
        if not 0 < init_density <= 1:
            raise ExplainerError(f"init_density must be in (0, 1], got {init_density}")
        if not isinstance(recency, bool):
            raise ExplainerError(f"recency must be true or false, got {recency!r}")
        self.pop_size = int(pop_size)
        self.generations = int(generations)
        self.recency = recency
        self.mutation_rate = None if mutation_rate is None else float(mutation_rate)
        self.init_density = float(init_density)
        self.seed = int(seed)
        self.max_oracle_calls = call_budget(max_oracle_calls)
        self.max_time_s = time_budget(max_time_s)

    def _search(self, oracle: Oracle) -> SearchOutcome:
        deadline = None if self.max_time_s is None else time.perf_counter() + self.max_time_s
        ranked = self.strategy.rank(oracle.removable)
        archive = Archive(oracle, ranked)
        limit = oracle.size_limit()
        n = len(ranked)
        if 2 ** n - 1 <= self.pop_size:  # every subset in one batch: the exact Pareto set
            every = (np.arange(1, 2 ** n)[:, None] >> np.arange(n)[None, :]) & 1
            x = every.astype(bool)
            archive.evaluate(x[x.sum(axis=1) <= limit])
            return self._outcome(archive, generations=0, cut_short=False)
        rng = np.random.default_rng(self.seed)
        problem = _RemovalProblem(archive, limit, self.recency)
        algorithm = NSGA2(
            pop_size=self.pop_size,
            sampling=initial_population(n, self.pop_size, limit, self.init_density, rng),
            crossover=HalfUniformCrossover(),
            mutation=BitflipMutation(prob=1.0, prob_var=self.mutation_rate or 1.0 / n),
            eliminate_duplicates=True,
        )
        algorithm.setup(problem, seed=self.seed, termination=("n_gen", self.generations + 1),
                        verbose=False)
        calls0 = oracle.stats.search_calls
        done = 0
        cut_short = False
        while algorithm.has_next():
            if done and self._over_budget(oracle, calls0, deadline):
                cut_short = True
                break
            algorithm.next()
            done += 1
        return self._outcome(archive, generations=max(0, done - 1), cut_short=cut_short)

    def _over_budget(self, oracle: Oracle, calls0: int, deadline: float | None) -> bool:
        if deadline is not None and time.perf_counter() >= deadline:
            return True
        if self.max_oracle_calls is None:
            return False
        return oracle.stats.search_calls - calls0 + self.pop_size > self.max_oracle_calls

    def _outcome(self, archive: Archive, generations: int, cut_short: bool) -> SearchOutcome:
        front = archive.pareto(self.recency)
        if not front:
            best = archive.closest()
            return SearchOutcome(explanation=best, iterations=generations, found=False,
                                 cut_short=cut_short)
        (answer, _), *others = front
        return SearchOutcome(explanation=answer, iterations=generations, found=True,
                             cut_short=cut_short, alternatives=tuple(others))


__all__ = ["NSGA2Explainer"]
