"""What T-GNNExplainer's two explorers share: the coalitions met, their batched scoring, the
answer and the scored-coalition list."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.factual import FloatArray
from cftgnn.explain.tgnnexplainer.navigators import Coalition, most_recent
from cftgnn.explain.tgnnexplainer.params import TGNNExplainerParams
from cftgnn.oracle.oracle import Oracle, delta

#: A scored coalition as the result keeps it: the kept candidates (ascending) and the reward.
ScoredCoalition = tuple[tuple[int, ...], float]


def fidelity(p_orig: float, p: float) -> float:
    """T-GNNExplainer's reward: how far ``p`` moved towards the original prediction's side.

    ``p − p_orig`` if ``p_orig ≥ 0``, else ``p_orig − p`` (0: unchanged; larger: kept better):
    the opposite of the oracle's ``Δ`` (the move towards a flip).
    """
    return -delta(p_orig, p)


@dataclass(eq=False)
class Node:
    """A coalition of kept candidates in the search tree (a DAG: coalitions are merged, as the
    reference's ``state_map`` merges them)."""

    coalition: Coalition
    order: int  # when it was created (ties of the answer: the first)
    reward: float | None = None  # None: not scored yet
    visits: int = 0  # N
    value: float = 0.0  # W
    pending: int = 0  # narrowed: rollouts of the running wave through this node
    children: list[Node] | None = None  # None: not expanded (narrowed)
    priors: list[float] = field(default_factory=list)  # narrowed: the children's priors
    drop: list[int] | None = None  # published: the node's events, least important first

    def q(self) -> float:
        """``Q = W / N`` (0 before a visit)."""
        return self.value / self.visits if self.visits else 0.0


class Explorer(ABC):
    """One explanation's search over coalitions of kept candidates.

    Args:
        oracle: The explained event's oracle.
        params: The options.
        navigator: The navigator's scores, ``float [|R|]`` aligned with ``oracle.removable``.
        budget: The explainer's budget meter.
    """

    def __init__(self, oracle: Oracle, params: TGNNExplainerParams, navigator: FloatArray,
                 budget: BudgetMeter) -> None:
        self.oracle = oracle
        self.params = params
        self.budget = budget
        #: The navigator's scores, aligned with ``oracle.removable``.
        self.scores = navigator
        removable = np.asarray(oracle.removable, dtype=np.int64)
        score = dict(zip((int(e) for e in removable), navigator.tolist(), strict=True))
        #: The navigator's score of each event of ``R``.
        self.navigator = score
        #: ``K``, the candidates the search keeps or drops (the rest of ``R`` stays).
        self.candidates: Coalition = most_recent(removable, params.candidates)
        #: Removal order: the least important first; ties: the older first.
        self.order = sorted(self.candidates, key=lambda e: (score[e], e))
        #: Every coalition met, by coalition.
        self.nodes: dict[Coalition, Node] = {}
        #: Nodes still to expand (narrowed: above ``min_atoms``; published: not complete).
        self.open = 0
        #: Rollouts run (and backed up).
        self.rollouts = 0
        #: Batched exact calls the scoring made (calls the oracle's cache answered whole
        #: are not counted).
        self.batches = 0
        #: Whether the budget stopped the search.
        self.stopped = False
        self._unscored: dict[Coalition, Node] = {}  # coalitions to score in the next call
        self.root = self._add(self.candidates)
        self.root.reward = 0.0  # nothing removed: the original logit

    def _opens(self, coalition: Coalition) -> bool:
        """Whether a new node of ``coalition`` is one more to expand."""
        return len(coalition) > 0

    def _add(self, coalition: Coalition) -> Node:
        node = Node(coalition, len(self.nodes))
        self.nodes[coalition] = node
        self.open += self._opens(coalition)
        return node

    def _score(self) -> None:
        """The coalitions waiting for a reward, in one batched exact call (the oracle's cache
        answers those it has seen)."""
        if not self._unscored:
            return
        nodes = list(self._unscored.values())
        self._unscored = {}
        calls = self.oracle.stats.exact_batches
        logits = self.oracle.exact_batch([self.candidates - n.coalition for n in nodes])
        self.batches += self.oracle.stats.exact_batches - calls
        p0 = self.oracle.original_logit
        for n, p in zip(nodes, logits.tolist(), strict=True):
            n.reward = fidelity(p0, float(p))

    @abstractmethod
    def run(self) -> None:
        """The rollouts, until their count, the budget or the tree ends."""

    def best(self) -> Coalition:
        """The answer: the best-rewarded scored coalition of at most ``min_atoms`` events
        (ties: the smaller, then the first created); when none is scored, the smallest
        scored ones (``K`` when the search never ran)."""
        scored = [n for n in self.nodes.values() if n.reward is not None]
        small = [n for n in scored if len(n.coalition) <= self.params.min_atoms]
        if not small:
            least = min(len(n.coalition) for n in scored)
            small = [n for n in scored if len(n.coalition) == least]
        return max(small, key=lambda n: (n.reward, -len(n.coalition), -n.order)).coalition

    def coalitions(self) -> tuple[ScoredCoalition, ...]:
        """Every scored coalition, ``(kept candidates ascending, reward)``, in the order the
        search created them (``K`` first, reward 0): what the authors' evaluator
        (``EvaluatorMCTSTG``) reads, the result's ``coalitions``."""
        return tuple((tuple(sorted(n.coalition)), float(n.reward))
                     for n in self.nodes.values() if n.reward is not None)


__all__ = ["Explorer", "Node", "ScoredCoalition", "fidelity"]
