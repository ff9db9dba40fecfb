"""Selection strategies δ (seed §"Node Selection Strategies", docs/design.md §3.8).

A strategy ranks candidate events, best first. Both searches use that one method:

* **CF-TGNN** — when several children of a node tie on the selection score (always the case
  for unexpanded siblings, which all have score 0 and one selection), each child adds exactly
  one event to its parent's set; the strategy ranks those *added events* and the child whose
  event ranks first is selected. The ranking is by the added event alone; the parent does not
  matter (a random strategy draws a fresh order on each call).
* **Greedy** — the ``l`` highest-ranked events of ``C \\ X`` form the sample.

Before a search, the explainer calls
[``SelectionStrategy.prepare``][cftgnn.explain.SelectionStrategy.prepare] with the oracle of the
explained event; strategies that need the candidates' hops or single-removal logits read them there.
Strategies are small classes picked by Hydra ``_target_`` (``conf/strategy/*.yaml``). Each
declares its options as a [``Params``][cftgnn.explain.Params] of its own (``Params``, which
the constructor applies), so ``explain.py`` refuses a bad ``strategy.*`` option before torch
loads (``cftgnn.explain.params.check_strategy_options``); this module loads no torch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from cftgnn.data.index import Candidates
from cftgnn.errors import ExplainerError
from cftgnn.explain.params import Params, option
from cftgnn.oracle.oracle import Oracle, delta

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class StrategyParams(Params):
    """Base of a strategy's option declaration (no options)."""


@dataclass(frozen=True)
class RecentStrategyParams(StrategyParams):
    """``RecentStrategy`` takes no options."""


@dataclass(frozen=True)
class ClosestStrategyParams(StrategyParams):
    """``ClosestStrategy`` takes no options."""


@dataclass(frozen=True)
class OneBestStrategyParams(StrategyParams):
    """``OneBestStrategy`` takes no options."""


@dataclass(frozen=True)
class RandomStrategyParams(StrategyParams):
    """``RandomStrategy``'s options.

    Attributes:
        seed: Base seed of the random orders.
    """

    seed: int = option(0, "base seed of the random orders (one stream per explained event)",
                       low=0)


class SelectionStrategy(ABC):
    """Ranks candidate events; subclasses implement
    [``rank``][cftgnn.explain.SelectionStrategy.rank].

    Args:
        **options: The strategy's options, checked by its ``Params`` (none by default).
    """

    #: Short name written into records (the file name of its config in ``conf/strategy``).
    name: str = "strategy"
    #: The declaration of the strategy's options. ``explain.py`` checks the ``strategy.*``
    #: options early by the ``Params`` a class declares in its own body; a subclass that
    #: declares none (one of the user's, with arguments of its own) is left to its
    #: constructor.
    Params: ClassVar[type[StrategyParams]] = StrategyParams

    def __init__(self, **options: Any) -> None:
        self.params = self.Params.from_options(options)
        self._candidates: Candidates | None = None

    def prepare(self, oracle: Oracle) -> None:
        """Bind the strategy to one explained event (called once before each search).

        Args:
            oracle: The oracle of the explained event.
        """
        self._candidates = oracle.candidates

    @abstractmethod
    def rank(self, events: npt.ArrayLike) -> IntArray:
        """Order candidate events best first.

        Args:
            events: Distinct candidate event ids, ``int [K]``.

        Returns:
            The same ids reordered, best first, ``int64 [K]``.
        """

    def best(self, events: npt.ArrayLike) -> int:
        """The first event of [``rank``][cftgnn.explain.SelectionStrategy.rank]."""
        ranked = self.rank(events)
        if len(ranked) == 0:
            raise ExplainerError("cannot pick from an empty set of events")
        return int(ranked[0])

    # ------------------------------------------------------------------ helpers
    def _positions(self, events: IntArray) -> IntArray:
        """Positions of ``events`` in the bound candidates' (ascending) id array."""
        cand = self._candidates
        if cand is None:
            raise ExplainerError(f"{type(self).__name__}.prepare(oracle) must be called first")
        pos = np.searchsorted(cand.ids, events)
        ok = (pos < len(cand.ids)) & (cand.ids[np.minimum(pos, len(cand.ids) - 1)] == events)
        if len(cand.ids) == 0 or not np.all(ok):
            raise ExplainerError(f"events {events.tolist()} are not all candidates")
        return pos

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _as_ids(events: npt.ArrayLike) -> IntArray:
    return np.asarray(events, dtype=np.int64).reshape(-1)


class RandomStrategy(SelectionStrategy):
    """Uniformly random order (the seed's baseline strategy).

    The generator is re-seeded in [``prepare``][cftgnn.explain.RandomStrategy.prepare] from
    ``(seed, event_id)``, so each explained event gets its own reproducible stream of random orders.

    Args:
        seed: Base seed.
        **options: Refused (``RandomStrategyParams`` declares ``seed`` only).
    """

    name = "random"
    Params = RandomStrategyParams
    params: RandomStrategyParams

    def __init__(self, seed: int = 0, **options: Any) -> None:
        super().__init__(seed=seed, **options)
        self.seed: int = self.params.seed
        self._rng = np.random.default_rng(self.seed)

    def prepare(self, oracle: Oracle) -> None:
        super().prepare(oracle)
        self._rng = np.random.default_rng([self.seed, max(0, oracle.event_id)])

    def rank(self, events: npt.ArrayLike) -> IntArray:
        return self._rng.permutation(_as_ids(events))

    def __repr__(self) -> str:
        return f"RandomStrategy(seed={self.seed})"


class RecentStrategy(SelectionStrategy):
    """Most recent event first (larger id = more recent)."""

    name = "recent"
    Params = RecentStrategyParams

    def rank(self, events: npt.ArrayLike) -> IntArray:
        return np.sort(_as_ids(events))[::-1].copy()


class ClosestStrategy(SelectionStrategy):
    """Smallest hop distance to the explained event first; ties by recency."""

    name = "closest"
    Params = ClosestStrategyParams

    def rank(self, events: npt.ArrayLike) -> IntArray:
        ids = _as_ids(events)
        if len(ids) == 0:
            return ids
        pos = self._positions(ids)
        assert self._candidates is not None  # checked by _positions
        hops = self._candidates.hops[pos]
        order = np.lexsort((-ids, hops))  # primary: hop ascending; secondary: id descending
        return ids[order]


class OneBestStrategy(SelectionStrategy):
    """Rank by the raw Δ of each single-event removal, largest first; ties by recency.

    [``prepare``][cftgnn.explain.OneBestStrategy.prepare] evaluates the single removals of all
    removable candidates (``|R|``, which is ``|C|`` without constraints) in one batched search-mode
    oracle call; these evaluations count as oracle calls and land in the oracle's cache (so the
    search's later visits of ``{ε}`` are cache hits). Protected candidates rank last.
    """

    name = "one_best"
    Params = OneBestStrategyParams

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._delta: npt.NDArray[np.float64] | None = None

    def prepare(self, oracle: Oracle) -> None:
        super().prepare(oracle)
        ids = oracle.candidates.ids
        removable = np.isin(ids, oracle.removable)
        logits = oracle.batch([frozenset((int(e),)) for e in ids[removable]])
        p0 = oracle.original_logit
        self._delta = np.full(len(ids), -np.inf, dtype=np.float64)
        self._delta[removable] = [delta(p0, float(p)) for p in logits]

    @property
    def deltas(self) -> npt.NDArray[np.float64] | None:
        """Δ of each single removal, aligned with the candidates' ids (after prepare)."""
        return self._delta

    def rank(self, events: npt.ArrayLike) -> IntArray:
        ids = _as_ids(events)
        if len(ids) == 0:
            return ids
        if self._delta is None:
            raise ExplainerError("OneBestStrategy.prepare(oracle) must be called first")
        d = self._delta[self._positions(ids)]
        order = np.lexsort((-ids, -d))  # primary: Δ descending; secondary: id descending
        return ids[order]


__all__ = [
    "ClosestStrategyParams",
    "ClosestStrategy",
    "OneBestStrategyParams",
    "OneBestStrategy",
    "RandomStrategyParams",
    "RandomStrategy",
    "RecentStrategyParams",
    "RecentStrategy",
    "SelectionStrategy",
    "StrategyParams",
]
