"""Binary particle swarm over removal sets: several counterfactuals per event (seed 004).

Each particle is a bit string over the candidate events in the strategy's order; a bit is
set when the event is removed. User constraints are **immutable positions** (seed 004's
immutable attributes): the bits of protected candidates are pinned to 0 and never move, and
``max_size`` makes larger sets infeasible. The swarm minimises

    ``f(s) = |s| / n  +  [s does not flip] · (1 + d(s) / |p_orig|)``,

size plus a flip penalty (``n`` the mutable positions, ``d`` how far the logit stays on the
original side), so every counterfactual beats every non-counterfactual and smaller beats
larger. Every iteration evaluates the whole swarm in one batched oracle call
(``Archive``, counterfactuals confirmed exactly).

The update is Kennedy and Eberhart's binary PSO with a local-best ring topology (each
particle follows the best of itself and its two ring neighbours, which keeps the swarm
spread over several counterfactuals): velocities ``v ← r + w (v − r) + c1 u1 (pbest − x) +
c2 u2 (lbest − x)``, clipped to ``±v_max``, and each bit is set with probability
``sigmoid(v)``. One change to the textbook rule: velocities relax towards ``r =
logit(density)`` instead of 0, so a bit no best position holds is set with probability
``density`` rather than ½ (removal sets are sparse). The first positions are the singletons
and prefixes of ``initial_population``. A particle whose new
position repeats another's or a set already evaluated gets one random bit flipped
(turbulence), so that every iteration evaluates new sets.

Library: pyswarms 1.3.0 (``pyswarms.discrete.BinaryPSO``) installs and runs with the
project's numpy, but it draws from numpy's global random state (seeding it means changing the
process-wide generator), writes a ``report.log`` into the working directory as soon as it is
imported, cannot pin positions, and has had no release since 2021; so this is a
short vectorised implementation instead.

The result holds the ``n_counterfactuals`` smallest distinct counterfactuals the swarm met
(ties: the largest margin); the first is the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.nsga2 import require_a_cap
from cftgnn.explain.params import BudgetParams, option
from cftgnn.explain.population import Archive, initial_population
from cftgnn.oracle.oracle import Oracle


@dataclass(frozen=True)
class PSOParams(BudgetParams):
    """The swarm's parameters (``conf/explainer/pso.yaml``).

    ``max_iterations`` counts the iterations after the first positions (default 30); the run
    stops before an iteration whose ``n_particles`` sets would exceed ``max_oracle_calls``
    (the first positions count), or once ``max_time_s`` has passed (checked between
    iterations). At least one of the three caps must be set.
    """

    max_iterations: int | None = option(30, "iterations after the first positions", low=0)
    n_particles: int = option(64, "swarm size (sets per batched oracle call)", low=3)
    inertia: float = option(0.7, "w", low=0, high=1, high_open=True)
    cognitive: float = option(1.5, "c1, pull towards the particle's own best", low=0)
    social: float = option(1.5, "c2, pull towards the best of its ring neighbourhood", low=0)
    v_max: float = option(4.0, "velocity clip", low=0, low_open=True)
    density: float = option(0.03, "probability of setting a bit no best position holds",
                            low=0, high=1, low_open=True, high_open=True)
    n_counterfactuals: int = option(5, "counterfactuals handed back (the smallest distinct "
                                       "ones)", low=1)
    seed: int = option(0, "seed of the swarm's generator")

    def __post_init__(self) -> None:
        super().__post_init__()
        require_a_cap(self)


class PSOExplainer(Explainer):
    """Binary particle swarm with a ring topology; several counterfactuals per event.

    Args:
        strategy: Orders the candidates (the first positions' singletons and prefixes).
        post: The steps after the search.
        **options: [``PSOParams``][cftgnn.explain.PSOParams] (``n_particles``, ``inertia``, ...) and
            the budget keys.
    """

    name = "pso"
    several = True
    Params = PSOParams
    params: PSOParams

    def largest_call(self, removable: int) -> int:
        """The swarm, ``n_particles`` sets (``Explainer.largest_call``)."""
        return max(self.params.n_particles, super().largest_call(removable))

    def _search(self, oracle: Oracle, budget: BudgetMeter) -> SearchOutcome:
        prm = self.params
        rng = np.random.default_rng(prm.seed)
        ranked = self.strategy.rank(np.asarray(oracle.candidates.ids, dtype=np.int64))
        mutable = np.isin(ranked, oracle.removable)  # protected candidates: pinned to 0
        cols = np.flatnonzero(mutable)
        archive = Archive(oracle, ranked)
        n, p = len(ranked), prm.n_particles
        limit = oracle.size_limit()
        scale = abs(oracle.original_logit)

        def cost(x: np.ndarray) -> np.ndarray:
            ev = archive.evaluate(x)
            size = x.sum(axis=1)
            feasible = ev.is_cf & (size <= limit)
            miss = 1.0 + np.maximum(ev.violation, 0.0) / scale + np.maximum(size - limit, 0)
            return np.asarray(size / len(cols) + np.where(feasible, 0.0, miss))

        x = np.zeros((p, n), dtype=bool)
        first = initial_population(len(cols), p, limit, prm.density, rng)
        x[: len(first), cols] = first
        if len(first) < p:  # a tiny space: the rest start as random copies
            x[len(first):] = x[rng.integers(len(first), size=p - len(first))]
        rest = math.log(prm.density / (1.0 - prm.density))
        v = np.where(x, prm.v_max / 2, rest)
        f = cost(x)  # the budget counts the first positions too
        pbest, pbest_f = x.copy(), f.copy()
        ring = (np.arange(p)[:, None] + np.array([-1, 0, 1])[None, :]) % p
        done = 0
        while budget.proceed(done, cost=p):
            best_nb = ring[np.arange(p), np.argmin(pbest_f[ring], axis=1)]
            lbest = pbest[best_nb]
            u1, u2 = rng.random((p, n)), rng.random((p, n))
            xf = x.astype(np.float64)
            v = (rest + prm.inertia * (v - rest) + prm.cognitive * u1 * (pbest - xf)
                 + prm.social * u2 * (lbest - xf))
            v = np.clip(v, -prm.v_max, prm.v_max)
            x = rng.random((p, n)) < 1.0 / (1.0 + np.exp(-v))
            x[:, ~mutable] = False
            self._turbulence(x, cols, archive, rng)
            f = cost(x)
            better = f < pbest_f
            pbest[better], pbest_f[better] = x[better], f[better]
            done += 1
        found = archive.smallest(prm.n_counterfactuals)
        if not found:
            return SearchOutcome(explanation=archive.closest(), iterations=done, found=False)
        (answer, _), *others = found
        return SearchOutcome(explanation=answer, iterations=done, found=True,
                             alternatives=tuple(others))


    @staticmethod
    def _turbulence(x: np.ndarray, cols: np.ndarray, archive: Archive,
                    rng: np.random.Generator) -> None:
        """Flip one random mutable bit of each particle whose set repeats another particle's
        or one already evaluated (a collapsed swarm would otherwise re-evaluate the same
        few sets; seed 004 keeps its particles apart with a diversity term instead)."""
        seen: set[bytes] = set()
        for row in range(len(x)):
            for _ in range(len(cols)):
                key = x[row].tobytes()
                fresh = key not in seen and archive.oracle.cached_search(
                    archive.sets(x[row : row + 1])[0]) is None
                if fresh:
                    break
                j = cols[rng.integers(len(cols))]
                x[row, j] = not x[row, j]
            seen.add(x[row].tobytes())


__all__ = ["PSOExplainer", "PSOParams"]
