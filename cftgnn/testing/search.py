"""Helpers for search tests: candidate sets, oracles over toy backends, brute force, scripts."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from cftgnn.data.index import M_MAX, Candidates
from cftgnn.explain.strategies import SelectionStrategy
from cftgnn.oracle.oracle import LogitFn, Oracle, OracleMode, is_flip
from cftgnn.testing.backends import ShiftedBackend, ToyBackend


def make_candidates(
    ids: Sequence[int],
    hops: Sequence[int] | None = None,
    event_id: int | None = None,
    k: int = 2,
    m_max: int = M_MAX,
) -> Candidates:
    """Build a [``Candidates``][cftgnn.data.Candidates] by hand (ids are sorted ascending together
    with hops).

    Args:
        ids: Candidate event ids.
        hops: Hop distance per id (default 0 for all).
        event_id: Explained event (default ``max(ids) + 1``, or 0 without candidates).
        k: Hop radius recorded in the result.
        m_max: Cap recorded in the result.
    """
    ids_a = np.asarray(ids, dtype=np.int64).reshape(-1)
    hops_a = (np.zeros_like(ids_a) if hops is None
              else np.asarray(hops, dtype=np.int64).reshape(-1))
    if hops_a.shape != ids_a.shape:
        raise ValueError(f"{len(hops_a)} hops for {len(ids_a)} ids")
    if len(np.unique(ids_a)) != len(ids_a):
        raise ValueError(f"candidate ids must be distinct: {ids_a.tolist()}")
    order = np.argsort(ids_a, kind="stable")
    ev = event_id if event_id is not None else (int(ids_a.max()) + 1 if len(ids_a) else 0)
    return Candidates(event_id=ev, ids=ids_a[order], hops=hops_a[order], k=k, m_max=m_max)


def make_oracle(
    candidates: Candidates,
    exact: LogitFn,
    approximate: LogitFn | None = None,
    mode: OracleMode | str = OracleMode.EXACT,
) -> Oracle:
    """An oracle whose original logit is ``exact([∅])`` (evaluated outside the counters)."""
    p0 = float(np.asarray(exact([frozenset()]), dtype=np.float64)[0])
    return Oracle(candidates, p0, exact=exact, approximate=approximate, mode=mode)


def brute_force_minimal(
    logit_fn: LogitFn, ids: Sequence[int], p_orig: float, max_size: int | None = None
) -> list[frozenset[int]]:
    """All minimum-size counterfactual removal sets, by enumerating subsets by size.

    Args:
        logit_fn: Exact backend.
        ids: Candidate ids.
        p_orig: Original logit.
        max_size: Largest size to try (default ``len(ids)``).

    Returns:
        Every counterfactual set of the smallest size that has one (empty if none exists).
    """
    ids_l = [int(e) for e in ids]
    top = len(ids_l) if max_size is None else max_size
    for size in range(1, top + 1):
        sets = [frozenset(c) for c in itertools.combinations(ids_l, size)]
        logits = np.asarray(logit_fn(sets), dtype=np.float64)
        found = [s for s, p in zip(sets, logits, strict=True) if is_flip(p_orig, float(p))]
        if found:
            return found
    return []


class ToyProblem:
    """A toy explained event with its minimal counterfactuals found by brute force.

    Args:
        candidates: Candidate events.
        exact: Exact toy backend (its counters are reset after the brute force).
        shift: Offset of the toy approximation (``ShiftedBackend``), towards a flip.
        noise: Set-dependent noise amplitude of the toy approximation.

    Attributes:
        p_orig: Original logit ``exact(∅)``.
        minimal: All minimum-size counterfactual sets (empty if none exists).
    """

    def __init__(self, candidates: Candidates, exact: ToyBackend, shift: float = 0.0,
                 noise: float = 0.05) -> None:
        self.candidates = candidates
        self.exact = exact
        self.shift = shift
        self.noise = noise
        self.p_orig = exact.logit(frozenset())
        self.minimal = brute_force_minimal(exact, list(candidates.ids), self.p_orig)
        exact.calls = exact.batches = 0
        exact.log.clear()

    def oracle(self, mode: OracleMode | str = OracleMode.EXACT) -> Oracle:
        """A fresh oracle (own cache and counters) over the shared exact backend."""
        approx = ShiftedBackend(self.exact, shift=self.shift, noise=self.noise)
        return Oracle(self.candidates, self.p_orig, exact=self.exact, approximate=approx,
                      mode=mode)


class ScriptedStrategy(SelectionStrategy):
    """A strategy that plays back fixed preference lists, one per call to ``rank``.

    Call ``j`` orders the requested events by their position in ``script[j]`` (events missing
    from it go last, most recent first); after the script runs out, it ranks by recency. Used to
    replay the seed's worked example, whose tie-breaks no fixed event ranking can produce.

    Args:
        script: Preference lists, best first.
    """

    def __init__(self, script: Sequence[Sequence[int]]) -> None:
        super().__init__()
        self.script = [list(map(int, s)) for s in script]
        self.calls: list[list[int]] = []  # the (sorted) events of each rank() call

    def prepare(self, oracle: Oracle) -> None:
        super().prepare(oracle)
        self.calls = []

    def rank(self, events: npt.ArrayLike) -> npt.NDArray[np.int64]:
        ids = np.asarray(events, dtype=np.int64).reshape(-1)
        j = len(self.calls)
        self.calls.append(sorted(int(e) for e in ids))
        pref = self.script[j] if j < len(self.script) else []
        pos = {e: i for i, e in enumerate(pref)}
        key = [(pos.get(int(e), len(pref)), -int(e)) for e in ids]
        return ids[sorted(range(len(ids)), key=lambda i: key[i])]


__all__ = [
    "ScriptedStrategy",
    "ToyProblem",
    "brute_force_minimal",
    "make_candidates",
    "make_oracle",
]
