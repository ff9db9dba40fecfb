"""What the oracle's scalar is: the explained logit, or the true destination's rank.

The oracle hands explainers one number per removal set, and everything downstream (the flip
test, Δ, certificates, pruning, constraints, records) reads only its sign and size
(docs/design.md §2). Two targets fill it:

* ``Target.LOGIT`` (the default): the explained event's logit ``f(G(t_i) \\ s, ε_i)``;
  a counterfactual flips its sign.
* ``Target.RANK``: the prediction as the Temporal Graph Benchmark scores it (Huang et al.,
  2023, ``tgb/linkproppred/evaluate.py``): the true destination ``v`` ranked among the
  event's negative destinations ``n_1..n_N`` by the logits of the pairs ``(u, ·, t_i)``,
  ``rank = 0.5 · (#{n_j > s} + #{n_j ≥ s}) + 1`` (the mean of the optimistic and the
  pessimistic rank; ``cftgnn.training.metrics.tgb_ranks``, the one definition training's
  MRR uses too), and hits@k iff ``rank ≤ k``. The oracle's scalar is then a *rank
  margin* ``q(s)`` whose sign is "in the top k" (``rank_margin``): a counterfactual is a
  set whose removal takes the true destination out of the top k (or, for an event whose
  true destination is not in the top k, into it: the same rule as a negative logit's).

One exact call scores the positive and every negative under P removal sets
(``EventReplay.pairs_logits``); ``RankScores`` turns those ``[P, 1 + N]`` logits into the
margins and keeps each exactly evaluated set's rank, which the records read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import numpy.typing as npt

from cftgnn.data.tgb_negatives import TGBNegatives
from cftgnn.errors import ConfigError, OracleError
from cftgnn.training.metrics import tgb_ranks

FloatArray = npt.NDArray[np.float64]

#: The rank margin of a positive tied with the k-th largest negative (``rank_margin``): the
#: tie is decided by TGB's rule, and the margin is this small value with that sign, so that
#: its sign is never 0 (a zero would be no prediction at all, docs/design.md §2).
TIE_MARGIN = 1e-9


class Target(str, Enum):
    """What the oracle's scalar is (``explain.py``'s ``target``)."""

    LOGIT = "logit"
    RANK = "rank"


def _check_k(k: int, num: int) -> None:
    """Refuse a top k outside ``[1, num]`` (``num`` negatives) with ``OracleError``."""
    if not 1 <= k <= num:
        raise OracleError(f"the rank target's k must be in [1, {num}] (the number of "
                          f"negatives), got {k}")


def rank_margin(pos: npt.ArrayLike, neg: npt.ArrayLike, k: int) -> FloatArray:
    """The rank target's scalar: positive iff the positive is in TGB's top k.

    ``q = s − n_(k)``, the positive's score minus the k-th largest negative score. Where
    ``s ≠ n_(k)`` its sign is hits@k: above the k-th negative at most k − 1 negatives are
    ``≥ s`` (rank ≤ k), below it at least k are ``> s`` (rank > k). Where ``s = n_(k)``
    TGB's rule decides (with ``a`` negatives above and ``c`` tied, rank ``= a + (c + 1)/2``,
    which may or may not be ≤ k) and ``q = ±TIE_MARGIN``. So ``sign(q)`` equals hits@k
    exactly and is never 0.

    Args:
        pos: Scores of the positives, ``[P]``.
        neg: Scores of their negatives, ``[P, N]``, ``1 ≤ k ≤ N``.
        k: The top k.

    Returns:
        ``float64 [P]``.

    Raises:
        OracleError: For ``k`` outside ``[1, N]``.
    """
    s = np.asarray(pos, dtype=np.float64).reshape(-1)
    n = np.asarray(neg, dtype=np.float64).reshape(len(s), -1)
    num = n.shape[1]
    _check_k(k, num)
    kth = np.partition(n, num - k, axis=1)[:, num - k]  # the k-th largest
    q = s - kth
    tie = q == 0
    if tie.any():
        q[tie] = np.where(tgb_ranks(s[tie], n[tie]) <= k, TIE_MARGIN, -TIE_MARGIN)
    return q


@dataclass(frozen=True)
class RankTarget:
    """The rank target of one explained event: its negatives and k.

    Attributes:
        negatives: The event's negative destinations, ``int64 [N]`` (TGB's, in the stream's
            node ids; repeats allowed, as TGB's lists hold them).
        k: The top k, ``1 ≤ k ≤ N``.
    """

    negatives: npt.NDArray[np.int64]
    k: int = 1

    def __post_init__(self) -> None:
        neg = np.asarray(self.negatives, dtype=np.int64).reshape(-1)
        if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)):
            raise OracleError(f"the rank target's k must be an integer, got {self.k!r}")
        _check_k(int(self.k), len(neg))
        object.__setattr__(self, "negatives", neg)
        object.__setattr__(self, "k", int(self.k))


@dataclass(frozen=True)
class RankTargets:
    """The rank target of the events of TGB's splits: their negatives and one k.

    Attributes:
        tables: The negatives of one or more splits (``TGBNegatives``, in the stream's
            ids; an event is looked up in the first table that holds it).
        k: The top k.
    """

    tables: tuple[TGBNegatives, ...]
    k: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"target_k must be an integer >= 1, got {self.k!r}")
        if not self.tables:
            raise ConfigError("target=rank needs the negatives of at least one split")

    def _table(self, event_id: int) -> TGBNegatives | None:
        return next((t for t in self.tables if event_id in t), None)

    def eligible(self) -> npt.NDArray[np.int64]:
        """The events with at least k negatives, ascending (what sampling draws from)."""
        ids = [t.event_ids[t.counts() >= self.k] for t in self.tables]
        return np.unique(np.concatenate(ids)).astype(np.int64)

    def check(self, event_ids: Iterable[int]) -> None:
        """Refuse, before any work, an event without negatives or a k above an event's
        number of negatives.

        Raises:
            ConfigError: Naming the first such event.
        """
        for e in (int(x) for x in event_ids):
            table = self._table(e)
            if table is None:
                spans = "; ".join(
                    f"{t.split}: events {int(t.event_ids[0])} to {int(t.event_ids[-1])}"
                    if t.num_events else f"{t.split}: none" for t in self.tables)
                raise ConfigError(f"target=rank: event {e} has no TGB negatives ({spans}); "
                                  "explain events of a split that has them")
            count = len(table.of(e))
            if self.k > count:
                raise ConfigError(f"target_k={self.k} is more than the {count} negatives of "
                                  f"event {e} ({table.source})")

    def of(self, event_id: int) -> RankTarget:
        """The rank target of one event (its negatives, ``k``).

        Raises:
            ConfigError: The event has no negatives.
        """
        table = self._table(int(event_id))
        if table is None:
            self.check([event_id])
        assert table is not None
        return RankTarget(table.of(int(event_id)), self.k)


#: Logits of P removal sets for D destinations, ``[P, D]`` (``EventReplay.pairs_logits``
#: with its destinations and history bound).
PairsFn = Callable[[Sequence[frozenset[int]]], npt.ArrayLike]


@dataclass
class RankScores:
    """The rank target's backends over one event's positive and negatives.

    ``exact(sets)`` and ``approximate(sets)`` are the oracle's backends: rank margins
    ``[P]`` (``rank_margin``) from one call of the exact (approximate) pairs function, the
    true destination's logit in column 0 and the negatives' after it. The exact backend
    keeps each set's rank (``rank``).

    Attributes:
        target: The negatives and k.
        exact_pairs: Exact ``[P, 1 + N]`` logits.
        approximate_pairs: Approximate ones, or None.
    """

    target: RankTarget
    exact_pairs: PairsFn
    approximate_pairs: PairsFn | None = None
    _ranks: dict[frozenset[int], float] = field(default_factory=dict, repr=False)

    @property
    def kind(self) -> Target:
        """``Target.RANK``."""
        return Target.RANK

    @property
    def k(self) -> int:
        """The top k."""
        return self.target.k

    @property
    def num_negatives(self) -> int:
        """N, the number of negatives."""
        return len(self.target.negatives)

    def _margins(self, fn: PairsFn, sets: Sequence[frozenset[int]],
                 keep: bool) -> FloatArray:
        logits = np.asarray(fn(sets), dtype=np.float64).reshape(len(sets), -1)
        pos, neg = logits[:, 0], logits[:, 1:]
        if keep:
            for s, r in zip(sets, tgb_ranks(pos, neg).tolist(), strict=True):
                self._ranks[s] = r
        return rank_margin(pos, neg, self.k)

    def exact(self, sets: Sequence[frozenset[int]]) -> FloatArray:
        """Exact rank margins ``[P]`` (their ranks kept)."""
        return self._margins(self.exact_pairs, sets, keep=True)

    def approximate(self, sets: Sequence[frozenset[int]]) -> FloatArray:
        """Approximate rank margins ``[P]``.

        Raises:
            OracleError: Built without an approximate pairs function.
        """
        if self.approximate_pairs is None:
            raise OracleError("this rank target has no approximate backend")
        return self._margins(self.approximate_pairs, sets, keep=False)

    def rank(self, removed: Iterable[int]) -> float:
        """TGB's rank of the true destination with ``removed`` taken out of history (exact;
        one exact call when the set was not evaluated exactly yet)."""
        key = frozenset(int(e) for e in removed)
        if key not in self._ranks:
            self.exact([key])
        return self._ranks[key]


__all__ = ["PairsFn", "RankScores", "RankTarget", "RankTargets", "TIE_MARGIN", "Target",
           "rank_margin"]
