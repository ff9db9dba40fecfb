"""The metrics of the benchmark repository ``juliawenkmann/time_to_explain`` that the summary
did not report before, as pure functions (docs/metrics.md, "The benchmark's metrics").

Each is read from one file of ``I_explainer_benchmark/src/metrics/`` of that repository:

* **CHARR** (``cody.py``, ``_apply_harmonic_charr``): the harmonic mean of AUFSC+ and AUFSC−,
  ``(w+ + w−) / (w+ / A+ + w− / A−)`` with ``w± = ½``; its AUFSC− is the *sufficiency* area
  (keeping only the explanation preserves the label; higher is better), which is
  ``1 − aufsc_minus`` of ``cftgnn.scoring.metrics`` (there lower is better): ``charr``.
* **first-flip sparsity** and the flip success rate (``flip.py``,
  ``compute_flip_success_summary``): along an event's kept-share curve, the first share whose
  kept logit is on the other side of 0 than the original (``logit ≥ 0`` counts as positive);
  the success rate is the share of events with a flip, the first-flip sparsity the mean first
  share over those events, 1.0 when none flips: ``first_flip``.
* **monotonicity** (``_fidelity_extra_metrics.py``, ``MonotonicityMetric``): per event the
  Spearman correlation between the importance of each ranked event and its single-removal
  impact ``|p_orig − p_{−e}|`` (Pearson of ordinal ranks; NaN for fewer than two events or a
  constant side), mean over events: ``monotonicity``.
* **seed stability** (``_fidelity_extra_metrics.py``, ``SeedStabilityMetric``): the mean
  pairwise Jaccard overlap of answers. The benchmark jitters one run's scores (10 restarts,
  noise 0.05·std) and overlaps the jittered top-k; we rerun the explainer under other seeds
  and overlap its answers for the same event (an explainer without randomness scores 1):
  ``seed_stability``, ``seed_stability_of_runs``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from cftgnn.scoring.curves import FID_SHARES, Curves, curve_rows

FloatArray = npt.NDArray[np.float64]
_NAN = float("nan")


def charr(aufsc_plus: float, aufsc_minus: float, weight_plus: float = 0.5,
          weight_minus: float = 0.5) -> float:
    """CHARR: the weighted harmonic mean of AUFSC+ and the sufficiency area ``1 − AUFSC−``.

    ``CHARR = (w+ + w−) / (w+ / A+ + w− / (1 − A−))``, ``A±`` as ``aufsc_plus`` /
    ``aufsc_minus`` compute them (the benchmark's ``_apply_harmonic_charr`` over its
    ``cody_AUFSC_plus`` and ``cody_AUFSC_minus``, the latter the area of "same label keeping
    only the explanation"). NaN when either area is 0 or not finite. Higher is better.
    """
    plus, suff = float(aufsc_plus), 1.0 - float(aufsc_minus)
    if not (math.isfinite(plus) and math.isfinite(suff)) or plus == 0.0 or suff == 0.0:
        return _NAN
    denom = weight_plus / plus + weight_minus / suff
    return (weight_plus + weight_minus) / denom if denom != 0.0 else _NAN


def first_flip(original: npt.ArrayLike, kept: Curves,
               shares: Sequence[float] = FID_SHARES) -> tuple[float, float]:
    """``(flip_success_rate, first_flip_sparsity)`` over the events with a kept-share curve.

    An event flips at the first share ``s`` whose kept logit ``p_s`` has
    ``(p_s ≥ 0) ≠ (p_orig ≥ 0)`` (``flip.py``'s ``(keep >= 0) != base_label``). The success
    rate is the share of events that flip somewhere; the first-flip sparsity is the mean of
    their first share, 1.0 when no event flips (the benchmark's convention; lower is better).
    ``(NaN, NaN)`` without a curve.
    """
    p0, logits = curve_rows(original, kept, len(shares))
    if not len(p0):
        return _NAN, _NAN
    grid = np.asarray(shares, dtype=np.float64)
    flips = (logits >= 0) != (p0 >= 0)[:, None]
    hit = flips.any(axis=1)
    rate = float(hit.mean())
    first = grid[np.argmax(flips[hit], axis=1)] if hit.any() else np.empty(0)
    return rate, float(first.mean()) if len(first) else 1.0


def ordinal_ranks(values: npt.ArrayLike) -> FloatArray:
    """Ranks ``1..n`` by value, ties in the given order (a stable sort; the benchmark's
    ``_rank_values`` uses ``np.argsort``'s default, whose tie order is unspecified)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    ranks = np.empty(len(v), dtype=np.float64)
    ranks[np.argsort(v, kind="stable")] = np.arange(1, len(v) + 1, dtype=np.float64)
    return ranks


def spearman(importance: npt.ArrayLike, impact: npt.ArrayLike) -> float:
    """Pearson correlation of ``ordinal_ranks`` of both; NaN for fewer than two values or
    a side whose ranks do not vary (``MonotonicityMetric``)."""
    a, b = ordinal_ranks(importance), ordinal_ranks(impact)
    if len(a) != len(b):
        raise ValueError(f"{len(a)} importances but {len(b)} impacts")
    if len(a) < 2 or np.std(a) == 0.0 or np.std(b) == 0.0:
        return _NAN
    return float(np.corrcoef(a, b)[0, 1])


def monotonicity(original: npt.ArrayLike, importance: Sequence[Sequence[float] | None],
                 single: Sequence[Sequence[float] | None]) -> float:
    """The benchmark's monotonicity: per event ``spearman(importance, |p_orig − p_{−e}|)``
    over its ranked events (``single``: each ranked event's single-removal logit, in the
    ranking's order), mean over the events where it is defined; NaN when none is.
    Higher is better (more important events move the prediction more when removed)."""
    p0 = np.asarray(original, dtype=np.float64).reshape(-1)
    if not len(p0) == len(importance) == len(single):
        raise ValueError(f"{len(p0)}, {len(importance)} and {len(single)} rows: one per event")
    rhos = []
    for base, imp, one in zip(p0, importance, single, strict=True):
        s = np.asarray([] if one is None else one, dtype=np.float64).reshape(-1)
        w = np.asarray([] if imp is None else imp, dtype=np.float64).reshape(-1)
        if len(s) < 2 or len(w) != len(s) or math.isnan(base):
            continue
        rho = spearman(w, np.abs(base - s))
        if not math.isnan(rho):
            rhos.append(rho)
    return float(np.mean(rhos)) if rhos else _NAN


def jaccard(a: Sequence[int], b: Sequence[int]) -> float:
    """``|a ∩ b| / |a ∪ b|``; 1 for two empty sets."""
    sa, sb = set(int(x) for x in a), set(int(x) for x in b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 1.0


def seed_stability(answers: Sequence[Sequence[Sequence[int]]]) -> float:
    """Mean over events of the mean pairwise ``jaccard`` of one event's answers under the
    different seeds (``answers[i]``: event ``i``'s answer per seed); events with fewer than
    two answers are left out; NaN when none has two. Higher is better (1: every seed gives
    the same answer)."""
    per_event = []
    for sets in answers:
        pairs = [jaccard(a, b) for a, b in itertools.combinations(list(sets), 2)]
        if pairs:
            per_event.append(float(np.mean(pairs)))
    return float(np.mean(per_event)) if per_event else _NAN


def seed_stability_of_runs(runs: Mapping[Any, Any]) -> float:
    """``seed_stability`` of runs of one explainer under different seeds: ``runs`` maps a
    seed to that run's records (a frame with ``event_id``, ``status`` and ``explanation``);
    the events explained (``status == "ok"``) in at least two runs count."""
    by_event: dict[int, list[list[int]]] = {}
    for records in runs.values():
        ok = records[records["status"] == "ok"]
        for event, answer in zip(ok["event_id"], ok["explanation"], strict=True):
            by_event.setdefault(int(event), []).append([int(e) for e in answer])
    return seed_stability(list(by_event.values()))


__all__ = ["charr", "first_flip", "jaccard", "monotonicity", "ordinal_ranks",
           "seed_stability", "seed_stability_of_runs", "spearman"]
