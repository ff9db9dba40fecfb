"""The one place a search's budget is enforced: [``BudgetMeter``][cftgnn.explain.BudgetMeter].

[``Explainer.explain``][cftgnn.explain.Explainer.explain] starts a meter from the
explainer's [``BudgetParams``][cftgnn.explain.BudgetParams] right before the search and hands it
to ``_search``; the search asks [``BudgetMeter.proceed``][cftgnn.explain.BudgetMeter.proceed] before
each iteration (with the oracle calls the iteration will cost at most) and stops when it says no. A
stop on the iteration cap ends the search as configured; a stop on oracle calls or seconds marks the
meter [``cut_short``][cftgnn.explain.BudgetMeter.cut_short], which ``explain`` puts on the result.

Oracle calls are the oracle's search-mode backend evaluations (``OracleStats.search_calls``)
made since the meter started (a strategy's preparation comes before, so it is not charged);
searches that call the exact backend directly (the exhaustive explainer) charge those instead
(``exact=True``).
"""

from __future__ import annotations

import math
import time

from cftgnn.explain.params import BudgetParams
from cftgnn.oracle.oracle import Oracle


class BudgetMeter:
    """A running search's budget: iterations, oracle calls and seconds.

    Args:
        budget: The caps (None: no cap).
        oracle: The oracle whose calls are counted.
        exact: Count exact backend evaluations instead of search-mode ones.
    """

    def __init__(self, budget: BudgetParams, oracle: Oracle, exact: bool = False) -> None:
        self.max_iterations = budget.iteration_cap
        self.max_oracle_calls = budget.max_oracle_calls
        self.deadline = (None if budget.max_time_s is None
                         else time.perf_counter() + budget.max_time_s)
        self.oracle = oracle
        self.exact = exact
        self._calls0 = self._calls()
        self.cut_short = False

    def _calls(self) -> int:
        stats = self.oracle.stats
        return stats.exact_calls if self.exact else stats.search_calls

    @property
    def calls_used(self) -> int:
        """Oracle calls charged so far."""
        return self._calls() - self._calls0

    def calls_left(self) -> float:
        """Oracle calls the search may still make (``inf`` without a cap)."""
        if self.max_oracle_calls is None:
            return math.inf
        return self.max_oracle_calls - self.calls_used

    def out_of_time(self) -> bool:
        """Whether the time cap has passed."""
        return self.deadline is not None and time.perf_counter() >= self.deadline

    def proceed(self, iterations_done: int, cost: float = 1) -> bool:
        """Whether the next iteration may run; a no for calls or time marks
        [``cut_short``][cftgnn.explain.BudgetMeter.cut_short].

        Args:
            iterations_done: Iterations the search has run.
            cost: Oracle calls the next iteration makes at most (``0``: not charged).
        """
        if self.max_iterations is not None and iterations_done >= self.max_iterations:
            return False
        if self.out_of_time() or cost > self.calls_left():
            self.cut_short = True
            return False
        return True

    def cut(self, cut_short: bool = True) -> None:
        """Record that a search run under this meter's caps (e.g. by
        [``search_by_size``][cftgnn.explain.search_by_size]) was cut short."""
        self.cut_short = self.cut_short or cut_short


__all__ = ["BudgetMeter"]
