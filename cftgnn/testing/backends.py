"""Toy logit backends with the [``LogitFn``][cftgnn.oracle.LogitFn] signature.

Every backend counts what it is asked (``calls``: sets evaluated, ``batches``: invocations,
``log``: the sets, in order), so tests can check caching and batching from the outside.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt


class ToyBackend(ABC):
    """Base of the toy backends: counts calls, maps each set through ``logit``."""

    def __init__(self) -> None:
        self.calls = 0
        self.batches = 0
        self.log: list[frozenset[int]] = []

    def __call__(self, sets: Sequence[frozenset[int]]) -> npt.NDArray[np.float64]:
        self.batches += 1
        self.calls += len(sets)
        self.log.extend(sets)
        return np.array([self.logit(frozenset(s)) for s in sets], dtype=np.float64)

    @abstractmethod
    def logit(self, removed: frozenset[int]) -> float:
        """Logit with the events in ``removed`` taken out."""


class AdditiveBackend(ToyBackend):
    """``logit(s) = base − Σ_{e ∈ s} w_e`` (events absent from ``weights`` weigh 0).

    Args:
        base: Logit of the unperturbed history.
        weights: Contribution of each event.
    """

    def __init__(self, base: float, weights: Mapping[int, float]) -> None:
        super().__init__()
        self.base = float(base)
        self.weights = {int(k): float(v) for k, v in weights.items()}

    def logit(self, removed: frozenset[int]) -> float:
        return self.base - sum(self.weights.get(e, 0.0) for e in removed)


class InteractionBackend(AdditiveBackend):
    """Additive plus interaction terms that count only when all their events are removed.

    ``logit(s) = base − Σ_{e ∈ s} w_e − Σ_{g ⊆ s} w_g`` over the groups ``g`` (e.g. pairs that
    matter only together).

    Args:
        base: Logit of the unperturbed history.
        weights: Per-event contributions.
        groups: Contribution of each group of events, removed together.
    """

    def __init__(
        self,
        base: float,
        weights: Mapping[int, float],
        groups: Mapping[frozenset[int], float],
    ) -> None:
        super().__init__(base, weights)
        self.groups = {frozenset(int(e) for e in g): float(v) for g, v in groups.items()}

    def logit(self, removed: frozenset[int]) -> float:
        extra = sum(v for g, v in self.groups.items() if g <= removed)
        return super().logit(removed) - extra


class ScriptedBackend(ToyBackend):
    """A lookup table from removal sets to logits; unscripted sets raise ``KeyError``.

    Args:
        table: Logit of each removal set the test expects to be evaluated.
    """

    def __init__(self, table: Mapping[frozenset[int], float]) -> None:
        super().__init__()
        self.table = {frozenset(int(e) for e in k): float(v) for k, v in table.items()}

    def logit(self, removed: frozenset[int]) -> float:
        if removed not in self.table:
            raise KeyError(f"scripted backend has no logit for {sorted(removed)}")
        return self.table[removed]


class ShiftedBackend(ToyBackend):
    """A toy *approximate* backend: another backend's logit plus a small deterministic offset.

    ``logit(s) = inner(s) + shift + noise · sin(Σ_e (7e + 1))`` for non-empty ``s`` (the empty
    set is returned unchanged). A ``shift`` towards the opposite sign makes sets just short of a
    flip look counterfactual, which the oracle's confirmation must reject.

    Args:
        inner: The exact toy backend.
        shift: Constant offset.
        noise: Amplitude of the set-dependent offset.
    """

    def __init__(self, inner: ToyBackend, shift: float = 0.0, noise: float = 0.0) -> None:
        super().__init__()
        self.inner = inner
        self.shift = float(shift)
        self.noise = float(noise)

    def logit(self, removed: frozenset[int]) -> float:
        p = self.inner.logit(removed)
        if not removed:
            return p
        return p + self.shift + self.noise * math.sin(sum(7.0 * e + 1.0 for e in removed))


class HashedBackend(ToyBackend):
    """A non-monotone toy: every removal set gets its own pseudo-random logit.

    ``logit(∅) = base``; any other set draws ``base + spread · N(0, 1)`` from a generator
    seeded by ``(seed, sorted set)``, so a set may flip while all its subsets and supersets
    do not: nothing about one set says anything about another (the oracle is not monotone,
    docs/design.md §7).

    Args:
        base: Logit of the unperturbed history.
        spread: Standard deviation of the logits of non-empty sets.
        seed: Seed of the table.
    """

    def __init__(self, base: float, spread: float = 1.0, seed: int = 0) -> None:
        super().__init__()
        self.base = float(base)
        self.spread = float(spread)
        self.seed = int(seed)

    def logit(self, removed: frozenset[int]) -> float:
        if not removed:
            return self.base
        rng = np.random.default_rng([self.seed, len(removed), *sorted(removed)])
        return self.base + self.spread * float(rng.standard_normal())


__all__ = [
    "AdditiveBackend",
    "HashedBackend",
    "InteractionBackend",
    "ScriptedBackend",
    "ShiftedBackend",
    "ToyBackend",
]


class AdditivePairsBackend:
    """Toy pair logits for the rank target (``cftgnn.oracle.target.RankScores``): the
    explained source's logit with each of D destinations is ``base_d − Σ_{e ∈ s} w_{e,d}``,
    ``[P, D]``; column 0 is the true destination, the rest its negatives. The TGB rank of
    any set is then known by hand.

    Args:
        base: Logits with nothing removed, ``[D]``.
        weights: Per removable event, its contribution to each destination's logit, ``[D]``
            (events absent weigh 0).
    """

    def __init__(self, base: Sequence[float], weights: Mapping[int, Sequence[float]]) -> None:
        self.base = np.asarray(base, dtype=np.float64)
        self.weights = {int(e): np.asarray(w, dtype=np.float64) for e, w in weights.items()}
        self.calls = 0
        self.batches = 0

    def __call__(self, sets: Sequence[frozenset[int]]) -> npt.NDArray[np.float64]:
        self.batches += 1
        self.calls += len(sets)
        out = np.tile(self.base, (len(sets), 1))
        for row, s in enumerate(sets):
            for e in s:
                if int(e) in self.weights:
                    out[row] -= self.weights[int(e)]
        return out
