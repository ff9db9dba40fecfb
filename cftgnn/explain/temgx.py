"""``explainer=temgx``: TemGX's training-free counterfactual explainer, as its code builds it.

TemGX (ICLR 2026) explains a link prediction ``i = (u, v, t_i)`` without training. Its
link-prediction code (``scripts/temgx.py`` of ``TemGX/link``, carried by the benchmark
repository ``juliawenkmann/time_to_explain`` under
``I_explainer_benchmark/submodules/explainer/TemGX/``) does, per explained event:

1. **Candidates** (``get_l_hop_temporal_neighbors``): the events of the ``l_hops = 2``
   temporal neighbourhood of ``{u, v}`` whose time lies in ``[t_i − W, t_i)``, the window
   ``W`` chosen from the whole stream (``window_rule``: ``min(86400, max(3600, 100 · median
   gap))`` on a stream in seconds, else 1000, after ``detect_time_scale``); more than
   ``candidate_cap = 200`` of them are cut to 200 by a random draw, and more than
   ``influence_cap = 100`` to the first 100 by its normalised influence (``influence_order``).
2. **Influence** (``ICMInfluenceCalculator``): for a candidate ``e`` an independent-cascade
   activation probability times a time decay,
   ``p(e) = σ(α·sim(e) − β·L(e) + γ·log(exp(−TRD(e) / trd_scale) + 1e−8)) ·
   exp(−λ'·(t_i − t_e))`` (``single_influence``), with ``L = 1`` when ``e`` shares a node
   with the explained event, else 2; ``sim`` and ``TRD`` from the node embeddings of the two
   events' sources (``(cos + 1) / 2`` and the Euclidean distance) where the model has them,
   else the constants ``0.8 / 0.3`` and ``0.3 / 1.5`` (shared node / not); ``λ'`` is ``λ``
   adapted to the time scale (``adapted_lambda``). A set's influence is
   ``1 − Π(1 − p(e))`` (``set_influence``).
3. **Select-Verify** (``select_explanatory_nodes_greedy``): the top ``max(3k, 20)`` of the
   candidates by normalised influence, then ``k = 5`` greedy picks of the largest set
   influence (``select``); one **verification** keeps only the picked events and calls the
   answer counterfactual when the probability moves by more than 0.01.

The answer is the ``k`` picked events. This module asks our exact oracle where TemGX asks its
wrapper's subgraph call: its verification removes every other removable event (``R \\ S``;
``TemGXExplainer``), so the answer is scored both ways, by TemGX's own question (keep-only, a
0.01 move; the ``temgx`` protocol, ``cftgnn.scoring.curves``) and by ours (does removing
``S`` flip the prediction: the result's ``is_counterfactual``). docs/explainers/temgx.md lists
every departure with its measured effect.

The normalisation TemGX sorts by (``normalize_icm_scores``) gives the candidate of the
*smallest* influence the largest rank (``n − rank``, rank 0 the smallest); both caps and the
pre-selection keep its order, so they keep the least influential candidates first. We follow
the code (``influence_order``) and say so in the page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from cftgnn.errors import ExplainerError
from cftgnn.explain.base import Explainer, SearchOutcome
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.params import BudgetParams, option
from cftgnn.oracle.oracle import Oracle

if TYPE_CHECKING:  # the stream is handed over by the oracle; no torch here
    from cftgnn.data.stream import EventStream
    from cftgnn.oracle.fingerprint import ModelFingerprint

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The fallback similarity of a candidate sharing / not sharing a node with the explained
#: event (``compute_enhanced_similarity`` without embeddings).
FALLBACK_SIMILARITY = (0.8, 0.3)
#: The fallback temporal resistance distance, shared node / not
#: (``compute_temporal_resistance_distance`` without embeddings).
FALLBACK_TRD = (0.3, 1.5)


class TimeScale(str, Enum):
    """TemGX's time scales (``detect_time_scale``), by the stream's median gap."""

    STEPS = "steps"
    SECONDS = "seconds"
    HOURS = "hours"
    DAYS = "days"


class Embeddings(str, Enum):
    """Where the node embeddings come from: the model's (``auto``, where it has them:
    ``ModelProbe.node_embeddings``) or TemGX's constants (``fallback``, always)."""

    AUTO = "auto"
    FALLBACK = "fallback"


@dataclass(frozen=True)
class TemGXParams(BudgetParams):
    """TemGX's options (``conf/explainer/temgx.yaml``); the defaults are its code's
    (``create_argument_parser`` of ``scripts/temgx.py``)."""

    k: int = option(5, "events picked by Select-Verify (its --sparsity)", low=1)
    l_hops: int = option(2, "hops of the temporal neighbourhood", low=1)
    candidate_cap: int = option(200, "candidates kept by the random draw", low=1)
    influence_cap: int = option(100, "candidates kept by normalised influence", low=1)
    preselect_min: int = option(20, "pre-selection: the top max(3k, this) candidates", low=1)
    time_window: float | None = option(None, "window W before t_i (null: TemGX's rule from "
                                             "the median gap)", low=0, low_open=True)
    time_scale: TimeScale | None = option(None, "steps | seconds | hours | days (null: "
                                                "detected from the median gap)")
    alpha: float = option(1.0, "weight of the embedding similarity (icm_alpha)")
    beta: float = option(0.1, "path-length penalty (icm_beta)")
    lambda_decay: float = option(0.01, "time decay before the time-scale adaptation "
                                       "(icm_lambda)", low=0)
    gamma: float = option(0.5, "weight of the TRD connectivity (icm_gamma)")
    trd_scale: float = option(1.0, "TRD scale of exp(-TRD / scale)", low=0, low_open=True)
    threshold: float = option(0.01, "verification: a probability move above it is "
                                    "counterfactual", low=0, high=1)
    embeddings: Embeddings = option(Embeddings.AUTO, "auto (the model's where it has them) | "
                                                     "fallback (TemGX's constants)")
    seed: int = option(0, "seed of the random cap (with the event id)", low=0)


# --------------------------------------------------------------------------- the stream


def detect_time_scale(t: npt.ArrayLike) -> TimeScale:
    """TemGX's ``detect_time_scale``: by the median gap ``g`` between sorted timestamps,
    ``steps`` (``g < 10``), ``seconds`` (``g < 3600``), ``hours`` (``g < 86400``), else
    ``days``; ``steps`` for fewer than two events."""
    gaps = np.diff(np.sort(np.asarray(t, dtype=np.float64).reshape(-1)))
    g = float(np.median(gaps)) if len(gaps) else 0.0
    if g < 10:
        return TimeScale.STEPS
    if g < 3600:
        return TimeScale.SECONDS
    if g < 86400:
        return TimeScale.HOURS
    return TimeScale.DAYS


def window_rule(t: npt.ArrayLike, scale: TimeScale) -> float:
    """TemGX's ``determine_time_window``: ``min(86400, max(3600, 100 · median gap))`` on a
    stream in seconds, else 1000 (in the stream's units, whatever they are)."""
    gaps = np.diff(np.sort(np.asarray(t, dtype=np.float64).reshape(-1)))
    g = float(np.median(gaps)) if len(gaps) else 0.0
    if scale is TimeScale.SECONDS:
        return float(min(86400.0, max(3600.0, g * 100.0)))
    return 1000.0


def adapted_lambda(base: float, scale: TimeScale) -> float:
    """TemGX's ``get_adaptive_lambda``: ``λ / 3600`` in seconds, ``λ`` in hours, ``24·λ``
    otherwise (steps and days alike, as its code has it)."""
    if scale is TimeScale.SECONDS:
        return base / 3600.0
    if scale is TimeScale.HOURS:
        return base
    return base * 24.0


class StreamIndex:
    """Each node's events, in stream order, for the temporal neighbourhood (TemGX's
    ``TemporalGraphIndex.node_to_edges``; a self-loop is listed once).

    Args:
        src: Source node per event, ``int [E]``.
        dst: Destination node per event.
        t: Timestamp per event, non-decreasing.
    """

    def __init__(self, src: npt.ArrayLike, dst: npt.ArrayLike, t: npt.ArrayLike) -> None:
        self.src = np.asarray(src, dtype=np.int64).reshape(-1)
        self.dst = np.asarray(dst, dtype=np.int64).reshape(-1)
        self.t = np.asarray(t, dtype=np.float64).reshape(-1)
        ids = np.arange(len(self.src), dtype=np.int64)
        other = self.src != self.dst
        node = np.concatenate([self.src, self.dst[other]])
        eid = np.concatenate([ids, ids[other]])
        order = np.lexsort((eid, node))
        self._eid = eid[order]
        self._t = self.t[self._eid]
        n_nodes = int(node.max()) + 1 if len(node) else 0
        self._start = np.searchsorted(node[order], np.arange(n_nodes + 1), side="left")

    def events_of(self, node: int, lo: float, hi: float) -> IntArray:
        """The events of ``node`` with ``lo <= t < hi``, in stream order."""
        if node + 1 >= len(self._start):
            return np.empty(0, dtype=np.int64)
        a, b = int(self._start[node]), int(self._start[node + 1])
        times = self._t[a:b]
        i, j = np.searchsorted(times, lo, side="left"), np.searchsorted(times, hi, side="left")
        return self._eid[a + i:a + j]

    def neighbourhood(self, event_id: int, l_hops: int, window: float) -> list[int]:
        """TemGX's ``get_l_hop_temporal_neighbors``: from ``{u, v}``, ``l_hops`` rounds of
        the events of the current nodes with ``t_i − W <= t < t_i`` (strictly earlier), not
        seen before, their other endpoints the next round's nodes; ascending ids."""
        t_i = float(self.t[event_id])
        current = {int(self.src[event_id]), int(self.dst[event_id])}
        seen: set[int] = set()
        for _ in range(l_hops):
            nxt: set[int] = set()
            for node in sorted(current):
                for e in self.events_of(node, t_i - window, t_i).tolist():
                    if e == event_id or e in seen:
                        continue
                    seen.add(e)
                    a, b = int(self.src[e]), int(self.dst[e])
                    nxt.add(b if a == node else a)
            current = nxt
            if not current:
                break
        return sorted(seen)


@dataclass(frozen=True)
class StreamSetup:
    """What TemGX derives from the whole stream once: its time scale, window, the adapted
    decay and the node index."""

    scale: TimeScale
    window: float
    lam: float
    index: StreamIndex


_SETUPS: dict[tuple[int, int, float | None, str | None, float], StreamSetup] = {}


def stream_setup(stream: EventStream, params: TemGXParams) -> StreamSetup:
    """The stream's ``StreamSetup`` under ``params`` (kept per stream object for the run)."""
    scale_opt = None if params.time_scale is None else params.time_scale.value
    key = (id(stream), stream.num_events, params.time_window, scale_opt, params.lambda_decay)
    found = _SETUPS.get(key)
    if found is not None:
        return found
    scale = params.time_scale or detect_time_scale(stream.t)
    window = params.time_window if params.time_window is not None else window_rule(stream.t,
                                                                                  scale)
    setup = StreamSetup(scale, float(window), adapted_lambda(params.lambda_decay, scale),
                        StreamIndex(stream.src, stream.dst, stream.t))
    if len(_SETUPS) > 8:
        _SETUPS.clear()
    _SETUPS[key] = setup
    return setup


# --------------------------------------------------------------------------- influence


def single_influence(shared: npt.ArrayLike, dt: npt.ArrayLike, lam: float,
                     similarity: npt.ArrayLike | None = None,
                     trd: npt.ArrayLike | None = None, alpha: float = 1.0, beta: float = 0.1,
                     gamma: float = 0.5, trd_scale: float = 1.0) -> FloatArray:
    """TemGX's single-event influence (``compute_single_edge_influence``), per candidate:

    ``p = σ(α·sim − β·L + γ·log(exp(−TRD / trd_scale) + 1e−8)) · exp(−λ'·Δt)``, ``L = 1``
    where the candidate shares a node with the explained event (``shared``), else 2;
    ``sim`` / ``TRD`` default to the fallback constants (``FALLBACK_SIMILARITY``,
    ``FALLBACK_TRD``).

    Args:
        shared: Whether each candidate shares a node with the explained event, ``bool [n]``.
        dt: ``t_i − t_e`` per candidate (> 0).
        lam: The adapted decay ``λ'`` (``adapted_lambda``).
        similarity: ``(cos + 1) / 2`` of the embeddings per candidate, or None (fallback).
        trd: The embedding distance per candidate, or None (fallback).

    Returns:
        ``float [n]`` in ``[0, 1]``.
    """
    sh = np.asarray(shared, dtype=bool).reshape(-1)
    sim = (np.where(sh, *FALLBACK_SIMILARITY) if similarity is None
           else np.asarray(similarity, dtype=np.float64).reshape(-1))
    dist = (np.where(sh, *FALLBACK_TRD) if trd is None
            else np.asarray(trd, dtype=np.float64).reshape(-1))
    length = np.where(sh, 1.0, 2.0)
    logit = alpha * sim - beta * length + gamma * np.log(np.exp(-dist / trd_scale) + 1e-8)
    decay = np.exp(-lam * np.asarray(dt, dtype=np.float64).reshape(-1))
    return np.asarray(1.0 / (1.0 + np.exp(-logit)) * decay, dtype=np.float64)


def set_influence(p: npt.ArrayLike) -> float:
    """A set's influence, ``1 − Π(1 − p_e)`` (``compute_edge_set_influence``); 0 when empty."""
    q = np.asarray(p, dtype=np.float64).reshape(-1)
    return float(1.0 - np.prod(1.0 - q)) if len(q) else 0.0


def embedding_terms(z_candidates: npt.ArrayLike, z_target: npt.ArrayLike
                    ) -> tuple[FloatArray, FloatArray]:
    """``(sim, TRD)`` per candidate from the embeddings of its source and of the explained
    event's source (``compute_enhanced_similarity``, ``compute_temporal_resistance_distance``):
    ``sim = (cos + 1) / 2`` with ``cos = z_e·z_i / (|z_e||z_i| + 1e−8)``, ``TRD = |z_e − z_i|``."""
    ze = np.asarray(z_candidates, dtype=np.float64)
    zi = np.asarray(z_target, dtype=np.float64).reshape(-1)
    cos = ze @ zi / (np.linalg.norm(ze, axis=1) * np.linalg.norm(zi) + 1e-8)
    return (cos + 1.0) / 2.0, np.linalg.norm(ze - zi[None, :], axis=1)


def influence_order(p: npt.ArrayLike) -> IntArray:
    """The order TemGX's caps and pre-selection read candidates in (``normalize_icm_scores``
    then a stable sort, largest first): each candidate's normalised score is
    ``(n − rank) / n`` with rank 0 the *smallest* influence, so the least influential comes
    first; all equal (standard deviation below 1e−10) or a single candidate: the given
    order. Ties keep the given order (a stable rank; the authors' ``np.argsort`` is not)."""
    q = np.asarray(p, dtype=np.float64).reshape(-1)
    n = len(q)
    if n <= 1 or float(np.std(q)) < 1e-10:
        return np.arange(n, dtype=np.int64)
    rank = np.argsort(np.argsort(q, kind="stable"), kind="stable")
    normalised = (n - rank) / n
    return np.asarray(np.argsort(-normalised, kind="stable"), dtype=np.int64)


def select(p: npt.ArrayLike, k: int, preselect_min: int = 20) -> list[int]:
    """Select-Verify's selection (``select_explanatory_nodes_greedy``), positions into
    ``p``: all of them when there are at most ``k``; else the first ``min(n, max(3k,
    preselect_min))`` in ``influence_order``, then ``k`` greedy picks, each the remaining
    one that makes the picked set's ``set_influence`` largest (the first such on ties)."""
    q = np.asarray(p, dtype=np.float64).reshape(-1)
    n = len(q)
    if n <= k:
        return list(range(n))
    pre = influence_order(q)[:min(n, max(3 * k, preselect_min))].tolist()
    picked: list[int] = []
    remaining = list(pre)
    for _ in range(min(k, len(pre))):
        best, best_score = None, -1.0
        for c in remaining:
            score = set_influence(q[picked + [c]])
            if score > best_score:
                best, best_score = c, score
        if best is None:
            break
        picked.append(best)
        remaining.remove(best)
    return picked


def sigmoid(x: float) -> float:
    """``1 / (1 + e^{−x})``, without overflow."""
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def verified(p_orig: float, keep: float, threshold: float = 0.01) -> bool:
    """TemGX's verification (``verify_counterfactual_property``): the probability with only
    the picked events kept moves by more than ``threshold``, ``|σ(p_orig) − σ(keep)| > τ``."""
    return abs(sigmoid(p_orig) - sigmoid(keep)) > threshold


# --------------------------------------------------------------------------- explainer


def stream_of(oracle: Oracle) -> EventStream:
    """The stream the oracle's event belongs to (``oracle.stream``, set by the replay
    engine; else the probe's model's).

    Raises:
        ExplainerError: An oracle without either (a toy oracle).
    """
    stream = getattr(oracle, "stream", None)
    if stream is None and oracle.probe is not None:
        stream = oracle.probe.model.stream
    if stream is None:
        raise ExplainerError("explainer=temgx reads the stream's times and endpoints; this "
                             "oracle has no stream (set oracle.stream)")
    return stream


class TemGXExplainer(Explainer):
    """TemGX: candidates, influence, Select-Verify (see the module docstring).

    Its answer is the picked set ``S`` (at most ``k`` events, at most the oracle's
    ``max_size``: its first picks); its ranking is ``S`` in the order picked, then the rest
    of its candidates (the random cap's, before the influence cap) in ``influence_order``, as
    the benchmark's adapter ranks them, then the other removable events, most recent first. The one
    exact call of the search is the verification, ``R \\ S`` (the run's ``keep_logit``
    reads it from the cache); the trace's one entry holds the candidate count, the time
    scale and window, where the embeddings came from and the verification's verdict.
    """

    name = "temgx"
    Params = TemGXParams
    params: TemGXParams
    budget_counts_exact = True

    def supports(self, fingerprint: ModelFingerprint | None = None,
                 protocols: Iterable[str] = ()) -> None:
        """Say once where the node embeddings come from (refuses no model)."""
        super().supports(fingerprint, protocols)
        if fingerprint is not None:
            print(f"note: explainer=temgx {embeddings_note(self.params, fingerprint.probe)}")

    def _search(self, oracle: Oracle, budget: BudgetMeter) -> SearchOutcome:
        p = self.params
        stream = stream_of(oracle)
        setup = stream_setup(stream, p)
        i = oracle.event_id
        removable = set(oracle.removable.tolist())
        pool = [e for e in setup.index.neighbourhood(i, p.l_hops, setup.window)
                if e in removable]
        if len(pool) > p.candidate_cap:
            rng = np.random.default_rng([int(p.seed), int(i)])
            pool = [int(e) for e in rng.choice(np.asarray(pool), p.candidate_cap,
                                               replace=False)]
        n_pool = len(pool)
        source = "fallback"
        influence = np.empty(0)
        if pool:
            influence, source = self._influence(oracle, stream, setup, pool)
        ranked_pool, ranked_influence = pool, influence  # the adapter ranks all of them
        if len(pool) > p.influence_cap:
            keep = influence_order(influence)[:p.influence_cap]
            pool = [pool[j] for j in keep]
            influence = influence[keep]
        picked = [pool[j] for j in select(influence, p.k, p.preselect_min)]
        picked = picked[:oracle.size_limit()]
        trace: dict[str, Any] = {"candidates": n_pool, "time_scale": setup.scale.value,
                                 "window": setup.window, "lambda": setup.lam,
                                 "embeddings": source, "verified": None}
        if picked and budget.proceed(0, cost=1):
            keep_logit = oracle.exact(frozenset(removable - set(picked)))
            trace["verified"] = verified(oracle.original_logit, keep_logit, p.threshold)
        ranking = self._ranking(oracle, picked, ranked_pool, ranked_influence)
        m = len(ranking)
        return SearchOutcome(explanation=tuple(picked), iterations=1, found=False,
                             trace=(trace,), ranking=ranking,
                             importance=tuple((m - j) / m for j in range(m)))

    def _influence(self, oracle: Oracle, stream: EventStream, setup: StreamSetup,
                   pool: Sequence[int]) -> tuple[FloatArray, str]:
        """Each candidate's ``single_influence`` and where its embeddings came from."""
        p = self.params
        i = oracle.event_id
        ev = np.asarray(pool, dtype=np.int64)
        u, v = int(stream.src[i]), int(stream.dst[i])
        src, dst = np.asarray(stream.src)[ev], np.asarray(stream.dst)[ev]
        shared = (src == u) | (src == v) | (dst == u) | (dst == v)
        dt = float(stream.t[i]) - np.asarray(stream.t, dtype=np.float64)[ev]
        sim = trd = None
        source = "fallback"
        probe = oracle.probe
        if p.embeddings is Embeddings.AUTO and probe is not None:
            nodes = np.concatenate([[u], src])
            z = np.asarray(probe.node_embeddings(nodes), dtype=np.float64)
            sim, trd = embedding_terms(z[1:], z[0])
            source = "model"
        return single_influence(shared, dt, setup.lam, sim, trd, p.alpha, p.beta, p.gamma,
                                p.trd_scale), source

    @staticmethod
    def _ranking(oracle: Oracle, picked: Sequence[int], pool: Sequence[int],
                 influence: FloatArray) -> tuple[int, ...]:
        chosen = set(picked)
        rest = [pool[j] for j in influence_order(influence).tolist() if pool[j] not in chosen]
        seen = chosen | set(rest)
        others = sorted((int(e) for e in oracle.removable if int(e) not in seen), reverse=True)
        return tuple(int(e) for e in (*picked, *rest, *others))


def embeddings_note(params: TemGXParams, probe: bool) -> str:
    """What a run of TemGX reads as node embeddings, in one line."""
    if params.embeddings is Embeddings.AUTO and probe:
        return ("reads node embeddings from the model (embed at the explained event's time, "
                "full history)")
    why = ("explainer.embeddings=fallback" if params.embeddings is Embeddings.FALLBACK
           else "the model has no node embeddings (no probe)")
    return (f"uses TemGX's fallback constants ({why}): similarity 0.8 / 0.3 and temporal "
            "resistance distance 0.3 / 1.5 for a candidate sharing / not sharing a node")


__all__ = ["FALLBACK_SIMILARITY", "FALLBACK_TRD", "Embeddings", "StreamIndex", "StreamSetup",
           "TemGXExplainer", "TemGXParams", "TimeScale", "adapted_lambda", "detect_time_scale",
           "embedding_terms", "embeddings_note", "influence_order", "select", "set_influence",
           "sigmoid", "single_influence", "stream_of", "stream_setup", "verified",
           "window_rule"]
