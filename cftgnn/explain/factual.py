"""Factual explainers: a score per removable event, and the shortest flipping prefix.

A factual explainer (attention, perturb-one, PGExplainer, T-GNNExplainer, random) answers
"how important is each past event to this prediction?" with an importance per removable event
``R``. [``FactualExplainer``][cftgnn.explain.FactualExplainer] turns that into the same result every
counterfactual explainer gives (docs/design.md §8):

* the **ranking**: ``R`` by importance, largest first (ties: the more recent event first), kept
  in the record with the importances (every curve metric is computed from it);
* the **counterfactual answer**: the shortest prefix ``{e_1, …, e_j}`` of the ranking whose
  removal flips the prediction, found with every prefix up to the oracle's ``max_size`` in one
  batched exact call (none flips: the answer is empty and not a counterfactual).

A subclass implements ``FactualExplainer._score`` only; the base class does the rest (and
[``Explainer``][cftgnn.explain.Explainer] the confirmation, post-processing and packaging).
The budget's oracle calls count exact evaluations (the prefixes and any exact scoring).
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import numpy.typing as npt

from cftgnn.errors import ExplainerError
from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.budget import BudgetMeter
from cftgnn.oracle.oracle import Oracle, is_flip

FloatArray = npt.NDArray[np.float64]


def rank_by_importance(events: npt.ArrayLike, importance: npt.ArrayLike
                       ) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Events ordered by importance, largest first; ties: the larger (more recent) id first.

    Args:
        events: Distinct event ids, ``int [m]``.
        importance: Their importances, ``float [m]`` (finite).

    Returns:
        ``(ranking, importance)`` as tuples, importance non-increasing.

    Raises:
        ExplainerError: On lengths that differ or a non-finite importance.
    """
    ids = np.asarray(events, dtype=np.int64).reshape(-1)
    score = np.asarray(importance, dtype=np.float64).reshape(-1)
    if len(ids) != len(score):
        raise ExplainerError(f"{len(ids)} events but {len(score)} importances")
    if not np.all(np.isfinite(score)):
        raise ExplainerError("importances must be finite")
    order = np.lexsort((-ids, -score))  # primary: importance descending; then id descending
    return (tuple(int(e) for e in ids[order]), tuple(float(x) for x in score[order]))


def shortest_flipping_prefix(p_orig: float, prefix_logits: npt.ArrayLike) -> int:
    """Length of the shortest prefix whose logit flips ``p_orig``, or 0 when none does.

    Args:
        p_orig: The original logit.
        prefix_logits: ``[n]``: entry ``j`` is the logit with the first ``j + 1`` events of a
            ranking removed.

    Returns:
        ``j + 1`` for the first flipping entry ``j``; 0 when no entry flips.
    """
    flips = is_flip(p_orig, np.asarray(prefix_logits, dtype=np.float64).reshape(-1))
    hit = np.flatnonzero(flips)
    return int(hit[0]) + 1 if len(hit) else 0


class FactualExplainer(Explainer):
    """Base class of the explainers that score events (see the module docstring).

    Subclasses set ``name`` and ``Params`` and implement ``_score``.
    """

    budget_counts_exact = True

    def largest_call(self, removable: int) -> int:
        """The ranking's prefixes: one call of up to ``removable`` sets
        (``Explainer.largest_call``)."""
        return max(removable, super().largest_call(removable))

    def _search(self, oracle: Oracle, budget: BudgetMeter) -> SearchOutcome:
        return self.ranked_outcome(oracle, *self.rank(oracle, budget), budget)

    def ranked_outcome(self, oracle: Oracle, ranking: tuple[int, ...],
                       importance: tuple[float, ...], budget: BudgetMeter) -> SearchOutcome:
        """The search's outcome from a ranking: its shortest flipping prefix
        ([``flipping_prefix``][cftgnn.explain.FactualExplainer.flipping_prefix]) as the
        answer, the ranking and importance kept."""
        j = self.flipping_prefix(oracle, ranking, budget)
        if j is None:
            return SearchOutcome(explanation=(), iterations=0, found=False, ranking=ranking,
                                 importance=importance)
        return SearchOutcome(explanation=ranking[:j], iterations=1, found=j > 0,
                             ranking=ranking, importance=importance)

    def rank(self, oracle: Oracle, budget: BudgetMeter
             ) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """The explainer's own work: ``_score``, then ``rank_by_importance``
        (``scripts/benchmark_explainers.py`` times it apart from
        [``flipping_prefix``][cftgnn.explain.FactualExplainer.flipping_prefix]).

        Returns:
            ``(ranking, importance)`` of the removable events.
        """
        scores = np.asarray(self._score(oracle, budget), dtype=np.float64).reshape(-1)
        return rank_by_importance(oracle.removable, scores)

    @staticmethod
    def flipping_prefix(oracle: Oracle, ranking: tuple[int, ...], budget: BudgetMeter
                        ) -> int | None:
        """The length of the shortest prefix of ``ranking`` whose removal flips the
        prediction (0: none up to the oracle's ``max_size`` does), with every such prefix in
        one batched exact call; None when there is none to try or the budget refuses it."""
        n = min(len(ranking), oracle.size_limit())
        if n == 0 or not budget.proceed(0, cost=n):
            return None
        prefixes = [frozenset(ranking[: j + 1]) for j in range(n)]
        return shortest_flipping_prefix(oracle.original_logit, oracle.exact_batch(prefixes))

    @abstractmethod
    def _score(self, oracle: Oracle, budget: BudgetMeter) -> FloatArray:
        """The importance of each removable event, aligned with ``oracle.removable``.

        Args:
            oracle: Oracle of the explained event (``p_orig != 0``, ``|R| > 0``); the
                strategy is prepared.
            budget: The explainer's budget meter (ask it before costly scoring steps).

        Returns:
            ``float [|R|]``, larger = more important to the prediction.
        """


__all__ = ["FactualExplainer", "rank_by_importance", "shortest_flipping_prefix"]
