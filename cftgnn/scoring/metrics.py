"""Metrics for counterfactual explanations of temporal link predictions, as pure functions.

One module although over 500 lines: it is a flat catalogue of short pure functions, looked up
by metric name, that share private argument checks (``_flags``, ``_same_length``,
``_logits``); split by topic, those checks would have to become public API.

An explanation run yields one record per explained event: the original logit ``p0`` (full
history), the logit with the explanation set ``s`` removed (``final_logit``), the logit with
only ``s`` kept inside the candidate window ``C`` (``keep_logit``), ``|s|``, ``|C|``, oracle
counters and timings. A *flip* is a sign change of the logit, ``p0 * p < 0``; a logit of
exactly 0 is not a flip.

Metrics and their direction:

* ``fidelity_plus`` (fid+, higher is better): share of events whose prediction flips when the
  explanation is removed (necessity).
* ``fidelity_minus`` (fid−, lower is better): share of events whose prediction flips when only
  the explanation is kept (the explanation is not sufficient).
* ``characterization_score`` (higher is better): weighted harmonic mean of fid+ and 1 − fid−.
* ``sparsity`` ``|s| / |C|`` (lower is better, i.e. smaller explanations).
* ``aufsc_plus`` (higher is better) and ``aufsc_minus`` (lower is better): areas under the
  fidelity–sparsity curves, which reward flipping with small explanations.
* for explainers that hand back several counterfactuals per event: ``jaccard_diversity``
  (higher is more diverse), ``size_range``, and ``pareto_hypervolume`` of the size–margin
  front (higher is better); the count is the length of the list.
* ``size_stats`` (smaller is better), ``runtime_percentiles`` (lower is better),
  ``cache_hit_rate`` (higher is cheaper), ``approximation_agreement`` (higher is better: the
  approximate oracle's flip decisions match the exact one).

Fidelity and the characterization score follow GraphFramEx (Amara et al., 2022,
arXiv:2206.09677) with hard labels (the sign of the logit). Aggregating a table of records
into one row per group is ``cftgnn.scoring.summaries``.

All functions take array-likes (numpy, pandas, lists), do no I/O and keep no state. Rates over
an empty input are NaN; mismatched lengths raise ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import torch
from pymoo.indicators.hv import HV

from cftgnn.oracle.oracle import is_flip

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


_NAN = float("nan")


# --------------------------------------------------------------------------- array helpers


def as_floats(x: npt.ArrayLike | Sequence[float | None], name: str) -> FloatArray:
    """``x`` as a flat float64 array (``None`` becomes NaN).

    Raises:
        ValueError: Naming ``name`` when ``x`` is not numeric.
    """
    try:
        return np.asarray(x, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric: {err}") from err


def _flags(x: npt.ArrayLike, name: str) -> BoolArray:
    """``x`` as a flat bool array; numeric input must be 0/1 (NaN is rejected)."""
    arr = np.asarray(x).reshape(-1)
    if arr.dtype == np.bool_:
        return arr
    if arr.size == 0:
        return np.zeros(0, dtype=np.bool_)
    vals = as_floats(arr, name)
    if not np.all((vals == 0.0) | (vals == 1.0)):
        raise ValueError(f"{name} must be boolean (0/1 values, no NaN)")
    return vals == 1.0


def _same_length(**arrays: np.ndarray) -> None:
    """Raise ``ValueError`` unless all arrays have the same length."""
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{name}={n}" for name, n in lengths.items())
        raise ValueError(f"length mismatch: {detail}")


def _logits(
    original: npt.ArrayLike, other: npt.ArrayLike, other_name: str
) -> tuple[FloatArray, FloatArray]:
    """Both logit arrays, checked for equal length and NaN."""
    p0 = as_floats(original, "original")
    p = as_floats(other, other_name)
    _same_length(original=p0, **{other_name: p})
    if np.isnan(p0).any() or np.isnan(p).any():
        raise ValueError(f"logits must not be NaN (original or {other_name})")
    return p0, p


def _checked_sparsity(
    flags: npt.ArrayLike, sparsity_: npt.ArrayLike, name: str
) -> tuple[BoolArray, FloatArray]:
    """Flags and sparsities of equal length, the sparsities finite and in ``[0, 1]``."""
    f = _flags(flags, name)
    s = as_floats(sparsity_, "sparsity")
    _same_length(**{name: f, "sparsity": s})
    if not np.all((s >= 0.0) & (s <= 1.0)):
        raise ValueError("sparsity must lie in [0, 1] (no NaN)")
    return f, s


def mean_or_nan(x: np.ndarray) -> float:
    """Mean of ``x``, NaN when empty (no warning)."""
    return float(np.mean(x)) if len(x) else _NAN


# --------------------------------------------------------------------------- fidelity


def flip_mask(original: npt.ArrayLike, other: npt.ArrayLike) -> BoolArray:
    """Whether each prediction flips: ``p0_i * p_i < 0``.

    A logit of exactly 0 is on neither side, so it is not a flip.

    Args:
        original: Original logits ``p0``, ``[N]``.
        other: Logits after a perturbation, ``[N]``.

    Returns:
        Boolean array ``[N]``.

    Raises:
        ValueError: Lengths differ or a logit is NaN.
    """
    p0, p = _logits(original, other, "other")
    return is_flip(p0, p)


def fidelity_plus(original: npt.ArrayLike, final: npt.ArrayLike) -> float:
    """Fidelity+ (necessity): share of events whose prediction flips when ``s`` is removed.

    ``fid+ = (1/N) Σ_i 1[p0_i · p_i^{G∖s} < 0]``, GraphFramEx's fid+ with hard labels
    (Amara et al., 2022, arXiv:2206.09677), the label being the sign of the logit. Higher is
    better. Equal to the counterfactual success rate.

    Args:
        original: Original logits ``p0``, ``[N]``.
        final: Logits with the explanation removed, ``[N]``.

    Returns:
        fid+ in ``[0, 1]``; NaN when ``N = 0``.

    Raises:
        ValueError: Lengths differ or a logit is NaN.
    """
    p0, p = _logits(original, final, "final")
    return mean_or_nan(is_flip(p0, p))


def fidelity_minus(original: npt.ArrayLike, keep: npt.ArrayLike) -> float:
    """Fidelity− (sufficiency): share of events that flip when only ``s`` is kept.

    ``fid− = (1/N) Σ_i 1[p0_i · p_i^{s} < 0]`` where ``p^{s}`` is the logit with every candidate
    event except the explanation removed (GraphFramEx fid− with hard labels, Amara et al., 2022,
    arXiv:2206.09677). Lower is better: a sufficient explanation alone keeps the prediction.

    Args:
        original: Original logits ``p0``, ``[N]``.
        keep: Logits with only the explanation kept inside the candidate window, ``[N]``.

    Returns:
        fid− in ``[0, 1]``; NaN when ``N = 0``.

    Raises:
        ValueError: Lengths differ or a logit is NaN.
    """
    p0, p = _logits(original, keep, "keep")
    return mean_or_nan(is_flip(p0, p))


def characterization_score(
    fid_plus: float,
    fid_minus: float,
    pos_weight: float = 0.5,
    neg_weight: float = 0.5,
) -> float:
    """Characterization score: weighted harmonic mean of fid+ and ``1 − fid−``.

    ``charact = (w+ + w−) / (w+ / fid+ + w− / (1 − fid−))`` (GraphFramEx, Amara et al., 2022,
    arXiv:2206.09677). Higher is better. Computed with
    ``torch_geometric.explain.metric.characterization_score`` after normalizing the weights
    to sum to 1 (which leaves the score unchanged). The score is 0 when a positively weighted
    component is 0 (``fid+ = 0`` or ``fid− = 1``), the limit of the formula; a zero weight drops
    its component (``w+ = 0`` gives ``1 − fid−``, ``w− = 0`` gives ``fid+``).

    Args:
        fid_plus: fid+ in ``[0, 1]`` (NaN propagates).
        fid_minus: fid− in ``[0, 1]`` (NaN propagates).
        pos_weight: Weight ``w+ ≥ 0`` of fid+.
        neg_weight: Weight ``w− ≥ 0`` of ``1 − fid−``.

    Returns:
        The score in ``[0, 1]``; NaN when an input is NaN.

    Raises:
        ValueError: A weight is negative or not finite, the weights sum to 0, or a fidelity is
            outside ``[0, 1]``.
    """
    wp, wn = float(pos_weight), float(neg_weight)
    if not (math.isfinite(wp) and math.isfinite(wn)) or wp < 0.0 or wn < 0.0:
        raise ValueError(f"weights must be finite and non-negative (got {wp} and {wn})")
    if wp + wn <= 0.0:
        raise ValueError(f"weights must sum to a positive number (got {wp} and {wn})")
    fp, fm = float(fid_plus), float(fid_minus)
    for name, value in (("fid_plus", fp), ("fid_minus", fm)):
        if not math.isnan(value) and not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1] (got {value})")
    if math.isnan(fp) or math.isnan(fm):
        return _NAN
    if (wp > 0.0 and fp == 0.0) or (wn > 0.0 and fm == 1.0):
        return 0.0
    if wp == 0.0:
        return 1.0 - fm
    if wn == 0.0:
        return fp
    import cftgnn._compat  # noqa: F401  (torch_geometric, quietly; only this score needs it)
    # isort: split
    from torch_geometric.explain.metric import characterization_score

    a = wp / (wp + wn)
    score = characterization_score(
        torch.tensor(fp, dtype=torch.float64),
        torch.tensor(fm, dtype=torch.float64),
        pos_weight=a,
        neg_weight=1.0 - a,
    )
    return float(score)


# --------------------------------------------------------------------------- sparsity


def sparsity(size: npt.ArrayLike, num_candidates: npt.ArrayLike) -> FloatArray:
    """Relative explanation size ``|s| / |C|`` per event, 0 where ``|C| = 0``.

    Lower is better (smaller explanations).

    Args:
        size: Explanation sizes ``|s|``, ``[N]``.
        num_candidates: Candidate-set sizes ``|C|``, ``[N]``.

    Returns:
        Float array ``[N]``.

    Raises:
        ValueError: Lengths differ, or a size is negative or NaN.
    """
    s = as_floats(size, "size")
    c = as_floats(num_candidates, "num_candidates")
    _same_length(size=s, num_candidates=c)
    if np.isnan(s).any() or np.isnan(c).any() or (s < 0).any() or (c < 0).any():
        raise ValueError("size and num_candidates must be non-negative numbers")
    out = np.zeros(len(s), dtype=np.float64)
    pos = c > 0
    out[pos] = s[pos] / c[pos]
    return out


def fidelity_sparsity_curve(
    flags: npt.ArrayLike, sparsity: npt.ArrayLike, grid: npt.ArrayLike
) -> FloatArray:
    """The cumulative curve ``F(x) = (1/N) Σ_i 1[flag_i ∧ sparsity_i ≤ x]`` on a grid.

    With ``flag_i`` = "flipped when ``s`` is removed" this is the fidelity+–sparsity curve
    ``F+(x)``: the fid+ reached when only explanations of sparsity at most ``x`` count, so
    ``F+(1) = fid+``. With ``flag_i`` = "sufficient", ``1 − F(x)`` is the fidelity−–sparsity
    curve ``F−(x)``. See ``aufsc_plus`` and ``aufsc_minus``.

    Args:
        flags: Boolean per event, ``[N]``.
        sparsity: ``|s| / |C|`` per event in ``[0, 1]``, ``[N]``.
        grid: Points ``x`` at which to evaluate, ``[G]``.

    Returns:
        ``F`` on the grid, ``[G]``; all NaN when ``N = 0``.

    Raises:
        ValueError: Lengths differ, or a sparsity is outside ``[0, 1]``.
    """
    f, s = _checked_sparsity(flags, sparsity, "flags")
    x = as_floats(grid, "grid")
    if len(f) == 0:
        return np.full(len(x), _NAN)
    flagged = np.sort(s[f])
    return np.searchsorted(flagged, x, side="right").astype(np.float64) / len(f)


def aufsc_plus(is_cf: npt.ArrayLike, sparsity: npt.ArrayLike) -> float:
    """Area under the fidelity+–sparsity curve.

    ``AUFSC+ = ∫_0^1 F+(x) dx`` with ``F+(x) = (1/N) Σ_i 1[cf_i ∧ sparsity_i ≤ x]``; since
    ``∫_0^1 1[s_i ≤ x] dx = 1 − s_i``, ``AUFSC+ = (1/N) Σ_i cf_i (1 − sparsity_i)``. Higher is
    better: counterfactuals found with small explanations. Combines GraphFramEx fidelity
    (Amara et al., 2022, arXiv:2206.09677) with the fidelity-vs-sparsity curves used to compare
    explainers (e.g. Yuan et al., 2022, "Explainability in Graph Neural Networks: A Taxonomic
    Survey", TPAMI).

    Args:
        is_cf: Whether removing the explanation flips the prediction, ``[N]``.
        sparsity: ``|s| / |C|`` in ``[0, 1]``, ``[N]``.

    Returns:
        AUFSC+ in ``[0, fid+]``; NaN when ``N = 0``.

    Raises:
        ValueError: Lengths differ, or a sparsity is outside ``[0, 1]``.
    """
    f, s = _checked_sparsity(is_cf, sparsity, "is_cf")
    return mean_or_nan(f * (1.0 - s))


def aufsc_minus(is_sufficient: npt.ArrayLike, sparsity: npt.ArrayLike) -> float:
    """Area under the fidelity−–sparsity curve.

    ``AUFSC− = ∫_0^1 F−(x) dx`` with ``F−(x) = 1 − (1/N) Σ_i 1[suff_i ∧ sparsity_i ≤ x]`` and
    ``suff_i = ¬(p0_i · p_i^{s} < 0)`` (keeping only ``s`` preserves the prediction); closed form
    ``AUFSC− = 1 − (1/N) Σ_i suff_i (1 − sparsity_i)``. ``F−(1) = fid−``. Lower is better:
    small explanations that alone keep the prediction. Fidelity as in GraphFramEx (Amara et
    al., 2022, arXiv:2206.09677).

    Args:
        is_sufficient: Whether keeping only the explanation preserves the prediction, ``[N]``.
        sparsity: ``|s| / |C|`` in ``[0, 1]``, ``[N]``.

    Returns:
        AUFSC− in ``[fid−, 1]``; NaN when ``N = 0``.

    Raises:
        ValueError: Lengths differ, or a sparsity is outside ``[0, 1]``.
    """
    f, s = _checked_sparsity(is_sufficient, sparsity, "is_sufficient")
    return 1.0 - mean_or_nan(f * (1.0 - s)) if len(f) else _NAN


# --------------------------------------------------------------------------- cost and size


def size_stats(size: npt.ArrayLike, is_cf: npt.ArrayLike) -> dict[str, float]:
    """Sizes ``|s|`` of the counterfactuals found, and the mean size over all events.

    Args:
        size: Explanation sizes, ``[N]``.
        is_cf: Whether each explanation is a counterfactual, ``[N]``.

    Returns:
        ``{"count", "mean", "median", "min", "max"}`` over counterfactuals (statistics NaN when
        there is none) and ``"mean_all"`` over all events (NaN when ``N = 0``).

    Raises:
        ValueError: Lengths differ.
    """
    s = as_floats(size, "size")
    f = _flags(is_cf, "is_cf")
    _same_length(size=s, is_cf=f)
    cf = s[f]
    found = len(cf) > 0
    return {
        "count": float(len(cf)),
        "mean": float(np.mean(cf)) if found else _NAN,
        "median": float(np.median(cf)) if found else _NAN,
        "min": float(np.min(cf)) if found else _NAN,
        "max": float(np.max(cf)) if found else _NAN,
        "mean_all": mean_or_nan(s),
    }


def runtime_percentiles(
    time_s: npt.ArrayLike, q: Sequence[float] = (50, 90, 99)
) -> dict[str, float]:
    """Percentiles and mean of the per-event time (lower is better).

    Percentiles use numpy's linear interpolation; NaN times are ignored.

    Args:
        time_s: Seconds per event, ``[N]``.
        q: Percentiles in ``[0, 100]``.

    Returns:
        ``{"p50": ..., "p90": ..., "p99": ..., "mean": ...}`` (keys ``f"p{q:g}"``); NaN values
        when no time is given.

    Raises:
        ValueError: A percentile is outside ``[0, 100]``.
    """
    t = as_floats(time_s, "time_s")
    t = t[~np.isnan(t)]
    qs = [float(v) for v in q]
    if any(not 0.0 <= v <= 100.0 for v in qs):
        raise ValueError(f"percentiles must lie in [0, 100] (got {qs})")
    out = {f"p{v:g}": float(np.percentile(t, v)) if len(t) else _NAN for v in qs}
    out["mean"] = mean_or_nan(t)
    return out


def cache_hit_rate(cache_hits: npt.ArrayLike, oracle_calls: npt.ArrayLike) -> float:
    """Share of oracle requests answered from the cache.

    ``rate = Σ hits / (Σ hits + Σ calls)``, ``calls`` being the requests the model evaluated.
    Higher means cheaper.

    Args:
        cache_hits: Cache hits per event, ``[N]``.
        oracle_calls: Model evaluations per event, ``[N]``.

    Returns:
        The rate in ``[0, 1]``; NaN when both sums are 0.

    Raises:
        ValueError: Lengths differ.
    """
    h = as_floats(cache_hits, "cache_hits")
    c = as_floats(oracle_calls, "oracle_calls")
    _same_length(cache_hits=h, oracle_calls=c)
    hits, calls = float(np.nansum(h)), float(np.nansum(c))
    total = hits + calls
    return hits / total if total > 0 else _NAN


def approximation_agreement(
    agreement: npt.ArrayLike | Sequence[float | None], agreement_n: npt.ArrayLike
) -> float:
    """Pooled agreement of the approximate and exact flip decisions.

    ``agreement = Σ_i a_i n_i / Σ_i n_i`` over events with ``n_i > 0`` (and ``a_i`` not NaN),
    ``n_i`` being the number of sets evaluated both ways and ``a_i`` the share that agreed.
    Higher is better.

    Args:
        agreement: Per-event agreement in ``[0, 1]`` (None/NaN when not measured), ``[N]``.
        agreement_n: Per-event number of compared sets, ``[N]``.

    Returns:
        The pooled agreement; NaN when no set was compared.

    Raises:
        ValueError: Lengths differ.
    """
    a = as_floats(agreement, "agreement")
    n = as_floats(agreement_n, "agreement_n")
    _same_length(agreement=a, agreement_n=n)
    use = (n > 0) & ~np.isnan(a)
    total = float(n[use].sum())
    return float((a[use] * n[use]).sum()) / total if total > 0 else _NAN


# --------------------------------------------------------------- several counterfactuals


def jaccard_diversity(sets: Sequence[Sequence[int]]) -> float:
    """Mean pairwise Jaccard distance ``1 − |a ∩ b| / |a ∪ b|`` of one event's counterfactuals.

    Higher is more diverse: 0 when all share the same events, 1 when no two share one.

    Args:
        sets: The event's counterfactual removal sets (non-empty).

    Returns:
        The mean over all pairs; NaN with fewer than two sets.

    Raises:
        ValueError: A set is empty.
    """
    sets_f = [frozenset(int(e) for e in s) for s in sets]
    if any(not s for s in sets_f):
        raise ValueError("counterfactual sets must not be empty")
    if len(sets_f) < 2:
        return _NAN
    dist = [1.0 - len(a & b) / len(a | b)
            for i, a in enumerate(sets_f) for b in sets_f[i + 1 :]]
    return float(np.mean(dist))


def size_range(sets: Sequence[Sequence[int]]) -> tuple[float, float]:
    """Smallest and largest size among one event's counterfactuals (NaN, NaN when none)."""
    sizes = [len(s) for s in sets]
    return (float(min(sizes)), float(max(sizes))) if sizes else (_NAN, _NAN)


def pareto_hypervolume(sizes: npt.ArrayLike, margins: npt.ArrayLike, num_removable: int,
                       original_logit: float) -> float:
    """Hypervolume of one event's counterfactuals in the size–margin plane (higher is better).

    Each counterfactual is the point ``(|s| / |R|, margin / |p_orig|)``; the hypervolume is the
    area they dominate (smaller size, larger margin) above the reference point ``(1, 0)``
    (every removable event removed, no margin), computed by pymoo's ``HV`` indicator. It
    grows with smaller and stronger counterfactuals and with how well they cover the trade-off
    between the two. Points without a positive margin or with ``|s| ≥ |R|`` add nothing.

    Args:
        sizes: Counterfactual sizes, ``[K]``.
        margins: Their margins ([``margin``][cftgnn.oracle.margin]), ``[K]``.
        num_removable: ``|R|``.
        original_logit: ``p_orig`` (not 0).

    Returns:
        The area; 0 for no counterfactual.

    Raises:
        ValueError: Lengths differ, ``num_removable < 1`` or ``original_logit == 0``.
    """
    s = as_floats(sizes, "sizes")
    m = as_floats(margins, "margins")
    _same_length(sizes=s, margins=m)
    if num_removable < 1:
        raise ValueError(f"num_removable must be >= 1, got {num_removable}")
    if original_logit == 0:
        raise ValueError("the hypervolume needs a non-zero original logit")
    use = (m > 0) & (s < num_removable)
    if not use.any():
        return 0.0
    points = np.column_stack([s[use] / num_removable, -m[use] / abs(original_logit)])
    return float(HV(ref_point=np.array([1.0, 0.0]))(points))


__all__ = [
    "FloatArray",
    "as_floats",
    "mean_or_nan",
    "aufsc_minus",
    "aufsc_plus",
    "approximation_agreement",
    "cache_hit_rate",
    "characterization_score",
    "fidelity_minus",
    "fidelity_plus",
    "jaccard_diversity",
    "pareto_hypervolume",
    "size_range",
    "fidelity_sparsity_curve",
    "flip_mask",
    "runtime_percentiles",
    "size_stats",
    "sparsity",
]
