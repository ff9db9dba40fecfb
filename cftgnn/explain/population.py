"""Population searches over removal sets (NSGA-II, particle swarm): shared encoding and archive.

A population is a boolean matrix ``[P, n]`` over the removable events in the strategy's order
(column ``j`` is the ``j``-th ranked event). ``Archive`` evaluates a whole population in
one batched search-mode oracle call, confirms the sets the search mode calls counterfactual in
one batched exact call, and keeps every confirmed counterfactual with its exact logit, so a
search can hand back all of them (or their Pareto set) at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from cftgnn.oracle.oracle import Oracle, is_flip, margin

BoolMatrix = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

#: Constraint violation of a set that does not flip, on top of its distance to zero (so that
#: a logit of exactly 0, which is no flip, is still infeasible).
_NO_FLIP = 1e-9


@dataclass(frozen=True)
class Evaluation:
    """One population's values.

    Attributes:
        logit: Best-known logit per set (exact when computed), ``[P]``.
        is_cf: Confirmed counterfactual (exact flip), ``bool [P]``.
        violation: ``≤ 0`` for a counterfactual (minus its margin), else how far the logit
            stays on the original side (plus a hair), ``[P]``.
        margin: ``margin`` of ``logit``, ``[P]`` (negative when not flipped).
    """

    logit: FloatArray
    is_cf: npt.NDArray[np.bool_]
    violation: FloatArray
    margin: FloatArray


class Archive:
    """Evaluates populations through the oracle and keeps every counterfactual found.

    Args:
        oracle: Oracle of the explained event.
        columns: The events of a population's columns (removable or pinned), in the
            strategy's order.
    """

    def __init__(self, oracle: Oracle, columns: npt.NDArray[np.int64]) -> None:
        self.oracle = oracle
        self.columns = np.asarray(columns, dtype=np.int64)
        self.found: dict[frozenset[int], tuple[tuple[int, ...], float]] = {}
        self._closest: tuple[tuple[int, ...], float] = ((), np.inf)  # (set, violation)
        cand = np.asarray(oracle.candidates.ids, dtype=np.int64)
        # recency rank of each column among the candidates: 0 = the newest candidate
        newest_first = (len(cand) - 1 - np.searchsorted(cand, self.columns)).astype(np.float64)
        self._recency = newest_first / max(1, len(cand) - 1)

    def sets(self, x: BoolMatrix) -> list[tuple[int, ...]]:
        """The removal set of each row, events in column order."""
        return [tuple(self.columns[row].tolist()) for row in x]

    def evaluate(self, x: BoolMatrix) -> Evaluation:
        """Evaluate a population ``bool [P, n]``: one batched search-mode call, one batched
        exact call for the sets it calls counterfactual."""
        oracle = self.oracle
        p0 = oracle.original_logit
        sets = self.sets(x)
        keys = [frozenset(s) for s in sets]
        logit = oracle.batch(keys).copy()
        flips = np.flatnonzero(is_flip(p0, logit))
        is_cf = np.zeros(len(sets), dtype=bool)
        if len(flips):
            exact = oracle.exact_batch([keys[j] for j in flips])
            logit[flips] = exact
            is_cf[flips] = is_flip(p0, exact)
        marg = np.array([margin(p0, float(p)) for p in logit], dtype=np.float64)
        violation = np.where(is_cf, -marg, np.maximum(-marg, 0.0) + _NO_FLIP)
        for j in np.flatnonzero(is_cf).tolist():
            self.found.setdefault(keys[j], (sets[j], float(logit[j])))
        nonempty = np.flatnonzero(~is_cf & (x.sum(axis=1) > 0))
        if len(nonempty):
            j = int(nonempty[np.argmin(violation[nonempty])])
            if violation[j] < self._closest[1]:
                self._closest = (sets[j], float(violation[j]))
        return Evaluation(logit, is_cf, violation, marg)

    def objectives(self, x: BoolMatrix, ev: Evaluation, recency: bool) -> FloatArray:
        """Minimised objectives ``[P, k]``: size, −margin, consequence (when the oracle has
        it), mean recency rank (when asked)."""
        cols = [x.sum(axis=1).astype(np.float64), -ev.margin]
        if self.oracle.has_consequence:
            cols.append(self.oracle.consequence([frozenset(s) for s in self.sets(x)])
                        .astype(np.float64))
        if recency:
            n = np.maximum(x.sum(axis=1), 1)
            cols.append((x * self._recency[None, :]).sum(axis=1) / n)
        return np.column_stack(cols)

    def pareto(self, recency: bool = False,
               limit: int | None = None) -> list[tuple[tuple[int, ...], float]]:
        """The non-dominated counterfactuals found (objectives of ``objectives``), each
        ``(set, exact logit)``, smallest first, then by margin (largest first).

        Args:
            recency: Include the recency objective.
            limit: Leave out sets larger than this (the oracle's size limit by default).
        """
        top = self.oracle.size_limit() if limit is None else limit
        items = [v for v in self.found.values() if len(v[0]) <= top]
        if not items:
            return []
        index = {int(e): j for j, e in enumerate(self.columns.tolist())}
        x = np.zeros((len(items), len(self.columns)), dtype=bool)
        for row, (s, _) in enumerate(items):
            x[row, [index[e] for e in s]] = True
        logit = np.array([p for _, p in items])
        p0 = self.oracle.original_logit
        marg = np.array([margin(p0, float(p)) for p in logit])
        ev = Evaluation(logit, np.ones(len(items), dtype=bool), -marg, marg)
        keep = pareto_mask(self.objectives(x, ev, recency))
        front = [items[j] for j in np.flatnonzero(keep).tolist()]
        return sorted(front, key=lambda v: (len(v[0]), -margin(p0, v[1])))

    def smallest(self, count: int,
                 limit: int | None = None) -> list[tuple[tuple[int, ...], float]]:
        """Up to ``count`` counterfactuals found, smallest first, then by margin."""
        top = self.oracle.size_limit() if limit is None else limit
        p0 = self.oracle.original_logit
        items = [v for v in self.found.values() if len(v[0]) <= top]
        return sorted(items, key=lambda v: (len(v[0]), -margin(p0, v[1])))[:count]

    def closest(self) -> tuple[int, ...]:
        """The non-counterfactual set nearest a flip (the fallback answer), within the size
        limit when it was evaluated, else ``()``."""
        s = self._closest[0]
        return s if len(s) <= self.oracle.size_limit() else ()


def pareto_mask(objectives: FloatArray) -> npt.NDArray[np.bool_]:
    """Which rows of an objective matrix ``[N, k]`` (all minimised) no other row dominates,
    ``bool [N]`` (pymoo's non-dominated sorting; equal rows are all kept)."""
    mask = np.zeros(len(objectives), dtype=bool)
    if len(objectives):
        mask[NonDominatedSorting().do(objectives, only_non_dominated_front=True)] = True
    return mask


def initial_population(n: int, pop_size: int, limit: int, density: float,
                       rng: np.random.Generator) -> BoolMatrix:
    """A first population over ``n`` ranked events: singletons of the best-ranked events (up
    to three quarters of the population), the top-``k`` prefixes for ``k = 2, 3, …`` (up to
    an eighth, within ``limit``), then random sets removing each event with probability
    ``density`` (at least one event each). Rows are distinct while the space allows.

    Returns:
        ``bool [P, n]`` with ``P ≤ pop_size``.
    """
    rows: list[BoolMatrix] = []
    singles = min(n, max(1, (3 * pop_size) // 4))
    rows.append(np.eye(n, dtype=bool)[:singles])
    prefixes = max(0, min(limit, n, 1 + pop_size // 8) - 1)
    if prefixes:
        k = np.arange(2, 2 + prefixes)
        rows.append(np.arange(n)[None, :] < k[:, None])
    x = np.concatenate(rows)
    seen = {row.tobytes() for row in x}
    extra: list[BoolMatrix] = []
    attempts = 0
    while len(x) + len(extra) < pop_size and attempts < 20 * pop_size:
        attempts += 1
        row = rng.random(n) < density
        if not row.any():
            row[rng.integers(n)] = True
        if row.sum() > limit:
            row[rng.permutation(np.flatnonzero(row))[limit:]] = False
        key = row.tobytes()
        if key not in seen:
            seen.add(key)
            extra.append(row)
    return np.concatenate([x, np.array(extra, dtype=bool).reshape(-1, n)])[:pop_size]


__all__ = ["Archive", "Evaluation", "initial_population", "pareto_mask"]
