"""Binary particle swarm over removal sets: several counterfactuals per event (seed 004).

Each particle is a bit string over the candidate events in the strategy's order; a bit is
set when the event is removed. User constraints are **immutable positions** (seed 004's
immutable attributes): the bits of protected candidates are pinned to 0 and never move, and
``max_size`` makes larger sets infeasible. The swarm minimises

    ``f(s) = |s| / n  +  [s does not flip] · (1 + d(s) / |p_orig|)``,

size plus a flip penalty (``n`` the mutable positions, ``d`` how far the logit stays on the
original side), so every counterfactual beats every non-counterfactual and smaller beats
larger. Every iteration evaluates the whole swarm in one batched oracle call
(:class:`~cftgnn.explain.population.Archive`, counterfactuals confirmed exactly).

The update is Kennedy and Eberhart's binary PSO with a local-best ring topology (each
particle follows the best of itself and its two ring neighbours, which keeps the swarm
spread over several counterfactuals): velocities ``v ← r + w (v − r) + c1 u1 (pbest − x) +
c2 u2 (lbest − x)``, clipped to ``±v_max``, and each bit is set with probability
``sigmoid(v)``. One change to the textbook rule: velocities relax towards ``r =
logit(density)`` instead of 0, so a bit no best position holds is set with probability
``density`` rather than ½ (removal sets are sparse). The first positions are the singletons
and prefixes of :func:`~cftgnn.explain.population.initial_population`. A particle whose new
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
import time
from typing import Any

import numpy as np

from cftgnn.errors import ExplainerError
from cftgnn.explain.base import Explainer, SearchOutcome, call_budget, time_budget
from cftgnn.explain.population import Archive, initial_population
from cftgnn.explain.strategies import SelectionStrategy
from cftgnn.oracle.contract import Oracle


class PSOExplainer(Explainer):
    """Binary particle swarm with a ring topology; several counterfactuals per event.

    Args:
        strategy: Orders the candidates (the first positions' singletons and prefixes).
        n_particles: Swarm size (sets per batched oracle call).
        iterations: Iterations after the first positions.
        inertia: ``w``.
        cognitive: ``c1``, pull towards the particle's own best.
        social: ``c2``, pull towards the best of its ring neighbourhood.
        v_max: Velocity clip (a bit's probability stays in ``[σ(−v_max), σ(v_max)]``).
        density: Probability that a bit no best position holds is set (and the share of
            removed events in the first random positions).
        n_counterfactuals: Counterfactuals handed back (the smallest distinct ones).
        seed: Seed of the swarm's generator (runs with one seed are reproducible).
        max_oracle_calls: Optional cap on search-mode evaluations (``cut_short``).
        max_time_s: Optional cap on the search's seconds, checked between iterations.
        **post: ``prune``, ``certify``, ``certify_max_time_s``, ``ceiling`` (see
            :class:`Explainer`).

    Raises:
        ExplainerError: On a swarm below 3 particles, negative iterations, coefficients out of
            range or negative budgets.
    """

    name = "pso"
    several = True

    def __init__(
        self,
        strategy: SelectionStrategy | None = None,
        n_particles: int = 64,
        iterations: int = 30,
        inertia: float = 0.7,
        cognitive: float = 1.5,
        social: float = 1.5,
        v_max: float = 4.0,
        density: float = 0.03,
        n_counterfactuals: int = 5,
        seed: int = 0,
        max_oracle_calls: int | None = None,
        max_time_s: float | None = None,
        **post: Any,
    ) -> None:
        super().__init__(strategy, **post)
        for name, value, low in (("n_particles", n_particles, 3), ("iterations", iterations, 0),
                                 ("n_counterfactuals", n_counterfactuals, 1)):
            if isinstance(value, bool) or int(value) != value or value < low:
                raise ExplainerError(f"{name} must be an integer >= {low}, got {value!r}")
        if not 0 <= inertia < 1:
            raise ExplainerError(f"inertia must be in [0, 1), got {inertia}")
        if cognitive < 0 or social < 0:
            raise ExplainerError(f"cognitive and social must be >= 0, got {cognitive}, {social}")
        if not v_max > 0:
            raise ExplainerError(f"v_max must be > 0, got {v_max}")
        if not 0 < density < 1:
            raise ExplainerError(f"density must be in (0, 1), got {density}")
        self.n_particles = int(n_particles)
        self.iterations = int(iterations)
        self.inertia = float(inertia)
        self.cognitive = float(cognitive)
        self.social = float(social)
        self.v_max = float(v_max)
        self.density = float(density)
        self.n_counterfactuals = int(n_counterfactuals)
        self.seed = int(seed)
        self.max_oracle_calls = call_budget(max_oracle_calls)
        self.max_time_s = time_budget(max_time_s)

    def _search(self, oracle: Oracle) -> SearchOutcome:
        deadline = None if self.max_time_s is None else time.perf_counter() + self.max_time_s
        rng = np.random.default_rng(self.seed)
        ranked = self.strategy.rank(np.asarray(oracle.candidates.ids, dtype=np.int64))
        mutable = np.isin(ranked, oracle.removable)  # protected candidates: pinned to 0
        cols = np.flatnonzero(mutable)
        archive = Archive(oracle, ranked)
        n, p = len(ranked), self.n_particles
        limit = oracle.size_limit()
        scale = abs(oracle.original_logit)

        def cost(x: np.ndarray) -> np.ndarray:
            ev = archive.evaluate(x)
            size = x.sum(axis=1)
            feasible = ev.is_cf & (size <= limit)
            miss = 1.0 + np.maximum(ev.violation, 0.0) / scale + np.maximum(size - limit, 0)
            return np.asarray(size / len(cols) + np.where(feasible, 0.0, miss))

        x = np.zeros((p, n), dtype=bool)
        first = initial_population(len(cols), p, limit, self.density, rng)
        x[: len(first), cols] = first
        if len(first) < p:  # a tiny space: the rest start as random copies
            x[len(first):] = x[rng.integers(len(first), size=p - len(first))]
        rest = math.log(self.density / (1.0 - self.density))
        v = np.where(x, self.v_max / 2, rest)
        calls0 = oracle.stats.search_calls  # the budget counts the first positions too
        f = cost(x)
        pbest, pbest_f = x.copy(), f.copy()
        ring = (np.arange(p)[:, None] + np.array([-1, 0, 1])[None, :]) % p
        done = 0
        cut_short = False
        for _ in range(self.iterations):
            if (deadline is not None and time.perf_counter() >= deadline) or (
                    self.max_oracle_calls is not None
                    and oracle.stats.search_calls - calls0 + p > self.max_oracle_calls):
                cut_short = True
                break
            best_nb = ring[np.arange(p), np.argmin(pbest_f[ring], axis=1)]
            lbest = pbest[best_nb]
            u1, u2 = rng.random((p, n)), rng.random((p, n))
            xf = x.astype(np.float64)
            v = (rest + self.inertia * (v - rest) + self.cognitive * u1 * (pbest - xf)
                 + self.social * u2 * (lbest - xf))
            v = np.clip(v, -self.v_max, self.v_max)
            x = rng.random((p, n)) < 1.0 / (1.0 + np.exp(-v))
            x[:, ~mutable] = False
            self._turbulence(x, cols, archive, rng)
            f = cost(x)
            better = f < pbest_f
            pbest[better], pbest_f[better] = x[better], f[better]
            done += 1
        found = archive.smallest(self.n_counterfactuals)
        if not found:
            return SearchOutcome(explanation=archive.closest(), iterations=done, found=False,
                                 cut_short=cut_short)
        (answer, _), *others = found
        return SearchOutcome(explanation=answer, iterations=done, found=True,
                             cut_short=cut_short, alternatives=tuple(others))


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


__all__ = ["PSOExplainer"]
