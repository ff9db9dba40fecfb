"""The published explorer (``search=published``, the default): T-GNNExplainer's MCTS as its
authors' code runs it (``MCTS.mcts_rollout`` in ``tgnnexplainer/xgraph/method/subgraphx_tg.py``
of the TMLR 2024 reproduction, m-krastev/fact8-temporal-graph), over coalitions of kept
candidates ``K``:

* **expansion**: a visit to a coalition ``C`` that has fewer children than events adds **one**
  child, ``C \\ {e}`` for the least important event ``e`` of ``C`` (by the navigator; ties: the
  older first) whose child it does not have yet; after ``|C|`` visits ``C`` has every child.
  A coalition reached before by another order is the same node;
* **scoring**: every child of every expanded node is scored (its reward, the fidelity of the
  exact logit with only the child kept);
* **selection** (UCT without a prior): the child maximising ``Q + c_puct · sqrt(n) / (1 + N)``,
  ``n`` the sum of the children's ``N``, ``Q = W / N`` (0 before a visit); ties: the first
  child added (the reference's set order is arbitrary);
* **rollout**: from ``K``, expand and select down to the **empty** coalition; the value backed
  up along the path (``N += 1``, ``W += v``) is the reward of the coalition where it ends, the
  empty one (the reference's backup: ``mcts_rollout`` returns ``tree_node.P`` there);
* **answer**: the scored coalition of at most ``min_atoms`` events with the largest reward
  (the reference's ``find_best_node_result``; ties here: the smaller, then the first
  created).

**Batched, not sequential.** Selection reads ``N`` and ``W`` only, and every backed-up value
is the empty coalition's reward, so the tree a search grows depends on that one reward and the
navigator, never on the other rewards. The empty coalition is scored first (one exact call);
then the rollouts of a *wave* (``wave`` of them) grow the tree, and every coalition they
created is scored in one batched exact call: the same tree and the same rewards as the
reference's one model call per coalition (about 3,000 per event, 43–65 s), in
``⌈rollouts / wave⌉ + 1`` calls. The search ends early when every coalition of ``K`` exists
(only for small ``K``; more rollouts would change no reward).

Budget: every new coalition is asked for (``max_oracle_calls``: the exact calls of the
scoring); a refused one ends the search, the rollout it belonged to not backed up, and the
coalitions created so far are scored. ``max_time_s`` is checked before each rollout.
"""

from __future__ import annotations

import math

from cftgnn.explain.tgnnexplainer.explorer import Explorer, Node, fidelity
from cftgnn.explain.tgnnexplainer.navigators import Coalition


class PublishedExplorer(Explorer):
    """The published MCTS (see the module docstring)."""

    #: The empty coalition's reward, the value every rollout backs up (None: not scored).
    empty_reward: float | None = None
    _pending = 0  # new coalitions waiting for the next batched call that the cache lacks

    def _add(self, coalition: Coalition) -> Node:
        node = super()._add(coalition)
        node.children = []
        return node

    def _child(self, node: Node) -> Node | None:
        """Add ``node``'s next child (the least important event not dropped yet); None when
        the budget cannot score a new coalition."""
        kids = node.children
        assert kids is not None
        if node.drop is None:
            node.drop = [e for e in self.order if e in node.coalition]
        coalition = node.coalition - {node.drop[len(kids)]}
        child = self.nodes.get(coalition)
        if child is None:
            new = self.oracle.cached_exact(self.candidates - coalition) is None
            if new and not self.budget.proceed(self.rollouts, cost=self._pending + 1):
                self.stopped = True
                return None
            self._pending += new
            child = self._add(coalition)
            self._unscored[coalition] = child
        kids.append(child)
        if len(kids) == len(node.coalition):
            self.open -= 1
        return child

    def _select(self, node: Node) -> Node:
        """The child maximising ``Q + c_puct · sqrt(n) / (1 + N)`` (ties: the first)."""
        kids = node.children
        assert kids
        explore = self.params.c_puct * math.sqrt(sum(k.visits for k in kids))
        best, top = kids[0], -math.inf
        for k in kids:
            u = (k.value / k.visits if k.visits else 0.0) + explore / (1 + k.visits)
            if u > top:
                best, top = k, u
        return best

    def rollout(self) -> bool:
        """One rollout from ``K`` to the empty coalition, backed up; False when the budget
        stopped it (nothing backed up)."""
        value = self.empty_reward
        assert value is not None
        path: list[Node] = []
        node = self.root
        while node.coalition:
            kids = node.children
            assert kids is not None
            if len(kids) < len(node.coalition) and self._child(node) is None:
                return False
            node = self._select(node)
            path.append(node)
        for n in path:
            n.visits += 1
            n.value += value
        return True

    def _score(self) -> None:
        super()._score()
        self._pending = 0

    def _score_empty(self) -> bool:
        """The empty coalition's reward, first (one exact call); False when the budget or
        the iteration cap allows no rollout."""
        if not self.budget.proceed(0, cost=1):
            return False
        calls = self.oracle.stats.exact_batches
        p = float(self.oracle.exact_batch([self.candidates])[0])
        self.batches += self.oracle.stats.exact_batches - calls
        self.empty_reward = fidelity(self.oracle.original_logit, p)
        return True

    def run(self) -> None:
        """Waves of rollouts, each wave's new coalitions scored in one batched call, until the
        count, the budget or (every coalition of ``K`` created) the tree ends."""
        if not self._score_empty():
            return
        while True:
            done = 0
            while done < self.params.wave and self.open > 0 and not self.stopped:
                if not self.budget.proceed(self.rollouts, cost=0) or not self.rollout():
                    break
                self.rollouts += 1
                done += 1
            self._score()
            if done < self.params.wave or self.open == 0 or self.stopped:
                return


__all__ = ["PublishedExplorer"]
