"""T-GNNExplainer's navigators: an importance per removable event that orders the expansions.

A navigator scores every event of ``R`` (larger = more important to keep); the explorers drop
the least important candidates first (ties: the older first), and the explainer's ranking uses
the scores as its tie-breaker (``share_below``). The reference's navigators
(``tgnnexplainer/xgraph/method/navigators.py`` of the TMLR 2024 reproduction):

* ``PGNavigator`` (the paper's, ``navigator=pgexplainer`` here): the trained PGExplainer's MLP
  scores the candidates, the scores are **added to the attention scores** (before the
  softmax) of every attention slot reading a candidate, and the navigator's score of an event
  is the model's aggregated attention on it with those scores in place (``pg_navigator``,
  through the probe's ``attention(bias=...)``);
* ``MLPNavigator`` (the reproduction's, ``navigator=mlp`` here): the MLP's scores alone. The
  paper's navigator falls back to it on a model without attention (GraphMixer, DyGFormer),
  whose probe reports pooling shares.

Departure: the reference averages an event's attention over the slots that read it; the probe
sums them (as the attention baseline does, ``cftgnn.explain.attention``), so an event read by
more slots ranks higher here.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cftgnn.explain.attention import needs_probe
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.factual import FloatArray
from cftgnn.explain.pgexplainer import PGExplainer
from cftgnn.explain.ranking import single_removal_shifts
from cftgnn.explain.tgnnexplainer.params import Navigator
from cftgnn.oracle.oracle import Oracle

Coalition = frozenset[int]


def most_recent(removable: npt.ArrayLike, count: int) -> Coalition:
    """The candidates ``K``: the ``count`` most recent (largest) event ids of ``R``."""
    ids = np.sort(np.asarray(removable, dtype=np.int64).reshape(-1))[::-1]
    return frozenset(int(e) for e in ids[:count])


def pgexplainer_scores(oracle: Oracle, checkpoint: str) -> FloatArray:
    """The trained PGExplainer's scores of ``oracle.removable`` (the one place it is wired:
    [``PGExplainer.scores``][cftgnn.explain.PGExplainer.scores]).

    Args:
        oracle: The explained event's oracle (with a probe).
        checkpoint: The trained MLP: ``auto`` or a path (PGExplainer's ``checkpoint``).

    Raises:
        ExplainerError: The oracle has no probe.
        CftgnnError: No trained PGExplainer, or one of another model or stream.
    """
    return np.asarray(PGExplainer(checkpoint=checkpoint).scores(oracle),
                      dtype=np.float64).reshape(-1)


def pg_navigator(oracle: Oracle, checkpoint: str, candidates: Coalition) -> FloatArray:
    """The paper's PG navigator: the model's aggregated attention on each event of ``R`` with
    the PGExplainer's score of each candidate added to the attention scores of the slots that
    read it (0 for the other events of ``R``, as the reference leaves them); the scores alone
    where the model has no attention.

    Args:
        oracle: The explained event's oracle (with a probe).
        checkpoint: The trained MLP (``auto`` or a path).
        candidates: ``K``, the events the scores re-weight.

    Returns:
        ``float [|R|]``, aligned with ``oracle.removable``.
    """
    scores = pgexplainer_scores(oracle, checkpoint)
    probe = oracle.probe
    assert probe is not None  # PGExplainer.scores refused an oracle without one
    if not probe.has_attention:
        return scores
    inside = np.isin(np.asarray(oracle.removable, dtype=np.int64), sorted(candidates))
    bias = np.where(inside, scores, 0.0)
    return np.asarray(probe.attention(bias), dtype=np.float64).reshape(-1)


def navigator_scores(navigator: Navigator, oracle: Oracle, budget: BudgetMeter,
                     checkpoint: str = "auto",
                     candidates: Coalition | None = None) -> FloatArray:
    """The navigator's importance of each event of ``oracle.removable`` (larger = keep).

    Args:
        navigator: Which navigator.
        oracle: The explained event's oracle.
        budget: Charged for ``perturb_one``'s ``|R|`` exact calls (not covered: all zeros).
        checkpoint: The PGExplainer's trained MLP (``auto`` or a path).
        candidates: ``K``, the events ``pgexplainer`` re-weights (default: all of ``R``).

    Returns:
        ``float [|R|]``, aligned with ``oracle.removable``.

    Raises:
        ExplainerError: ``attention`` without a probe on the oracle, or ``pgexplainer`` /
            ``mlp`` unavailable.
    """
    m = len(oracle.removable)
    if navigator is Navigator.NONE:
        return np.zeros(m, dtype=np.float64)
    if navigator is Navigator.PERTURB_ONE:
        return single_removal_shifts(oracle, budget)
    if navigator is Navigator.ATTENTION:
        if oracle.probe is None:
            fp = oracle.fingerprint
            raise needs_probe("tgnnexplainer navigator=attention",
                              None if fp is None else fp.model)
        return np.asarray(oracle.probe.attention(), dtype=np.float64).reshape(m)
    if navigator is Navigator.MLP:
        return pgexplainer_scores(oracle, checkpoint)
    k = (frozenset(int(e) for e in oracle.removable) if candidates is None
         else candidates)
    return pg_navigator(oracle, checkpoint, k)


def share_below(scores: npt.ArrayLike) -> FloatArray:
    """``ν(e)``: the share of the events scored strictly lower than ``e``, in ``[0, 1)``.

    Args:
        scores: ``float [m]``.

    Returns:
        ``float [m]``; equal scores get equal shares.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(s) == 0:
        return np.zeros(0, dtype=np.float64)
    below = np.searchsorted(np.sort(s), s, side="left")
    return below.astype(np.float64) / len(s)


__all__ = ["most_recent", "navigator_scores", "pg_navigator", "pgexplainer_scores",
           "share_below"]
