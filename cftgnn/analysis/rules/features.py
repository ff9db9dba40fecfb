"""Features of the candidates of explained events, and the seeded split into halves.

Step 1 of the regional rules (see ``cftgnn.analysis.rules``): every removable candidate
of every explained record is described by ``FEATURES`` and labelled by whether it is in
the record's counterfactual explanation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from cftgnn.data.index import Candidates, TemporalIndex
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.explain.result import explained
from cftgnn.oracle.constraints import Constraints
from cftgnn.oracle.history import record_history_end

#: The features of a candidate event ``e`` of an explained event ``ε_i = (u, v, t_i)``.
FEATURES: dict[str, str] = {
    "hop": "hop distance of e from {u, v} (0: e touches u or v)",
    "same_pair": "1 if e links u and v (either direction)",
    "touches_src": "1 if e touches the explained source u",
    "touches_dst": "1 if e touches the explained destination v",
    "recency_rank": "rank of e among the candidates by recency (0 = newest)",
    "pair_rank": "rank of e among the candidates between its own two nodes (0 = newest)",
    "time_gap": "t_i - t_e, in the stream's time unit (seconds for UCI and Wikipedia)",
    "min_degree": "events the less active endpoint of e took part in before ε_i",
    "max_degree": "events the more active endpoint of e took part in before ε_i",
    "correct": "1 if the explained prediction is correct (the record's group)",
}
FEATURE_NAMES: tuple[str, ...] = tuple(FEATURES)
#: Features that take the values 0 and 1 only.
BINARY = frozenset({"same_pair", "touches_src", "touches_dst", "correct"})
#: Features measured in time (rendered with a unit).
DURATION = frozenset({"time_gap"})


def candidate_features(stream: EventStream, index: TemporalIndex,
                       candidates: Candidates) -> pd.DataFrame:
    """The interpretable features of each candidate of one explained event.

    Args:
        stream: The event stream.
        index: Its temporal index (for endpoint degrees).
        candidates: The candidates of the explained event ``i`` (ids oldest first, hops).

    Returns:
        One row per candidate, in the candidates' order: ``event_id`` (``i``),
        ``candidate`` (the candidate's id) and every feature of ``FEATURES`` except
        ``correct`` (a property of the record, not of the stream).
    """
    i = int(candidates.event_id)
    ids = np.asarray(candidates.ids, dtype=np.int64)
    m = len(ids)
    u, v = int(stream.src[i]), int(stream.dst[i])
    src, dst = stream.src[ids], stream.dst[ids]
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    # rank among the candidates between the same two nodes: count later ones of the pair
    pair_rank = np.zeros(m, dtype=np.int64)
    seen: dict[tuple[int, int], int] = {}
    for n in range(m - 1, -1, -1):  # newest first
        key = (int(lo[n]), int(hi[n]))
        pair_rank[n] = seen.get(key, 0)
        seen[key] = pair_rank[n] + 1
    deg_src = index.degree_before(src, i) if m else np.zeros(0, dtype=np.int64)
    deg_dst = index.degree_before(dst, i) if m else np.zeros(0, dtype=np.int64)
    return pd.DataFrame({
        "event_id": np.full(m, i, dtype=np.int64),
        "candidate": ids,
        "hop": np.asarray(candidates.hops, dtype=np.int64),
        "same_pair": (((src == u) & (dst == v)) | ((src == v) & (dst == u))).astype(np.int64),
        "touches_src": ((src == u) | (dst == u)).astype(np.int64),
        "touches_dst": ((src == v) | (dst == v)).astype(np.int64),
        "recency_rank": np.arange(m - 1, -1, -1, dtype=np.int64),
        "pair_rank": pair_rank,
        "time_gap": float(stream.t[i]) - np.asarray(stream.t[ids], dtype=np.float64),
        "min_degree": np.minimum(deg_src, deg_dst).astype(np.int64),
        "max_degree": np.maximum(deg_src, deg_dst).astype(np.int64),
    })


def _correct(record: Mapping[str, Any]) -> int:
    """1 for a correct prediction: the record's group, else the sign of its logit (every
    event happened, so a positive logit is a correct prediction)."""
    group = record.get("group")
    if group in ("correct", "incorrect"):
        return int(group == "correct")
    return int(float(record["original_logit"]) > 0)


def record_features(stream: EventStream, index: TemporalIndex, record: Mapping[str, Any],
                    k: int, m_max: int, constraints: Constraints,
                    batch_size: int | None = None) -> pd.DataFrame:
    """``candidate_features`` of one explained record, with ``correct``, ``removable``
    (not protected by the run's constraints) and ``label`` (in the explanation, and the
    explanation flips the prediction).

    ``batch_size`` (the run's model batch size) places the candidates of a record explained
    with ``history=batch_start`` before the event's batch.

    Raises:
        ConfigError: The stream's candidates of the event (``k``, ``m_max``) are not the
            record's ``candidate_ids`` (another stream or other settings than the run's).
    """
    event_id = int(record["event_id"])
    cands = index.candidates(event_id, k, m_max, record_history_end(record, batch_size))
    recorded = np.sort(np.asarray(record["candidate_ids"], dtype=np.int64))
    if not np.array_equal(recorded, cands.ids):
        raise ConfigError(f"the candidates of event {event_id} in this stream (k={k}, "
                          f"m_max={m_max}) are not the record's; is it the run's stream?")
    table = candidate_features(stream, index, cands)
    table["correct"] = _correct(record)
    table["removable"] = np.isin(cands.ids, constraints.removable(cands, stream))
    removed = (np.asarray(record["explanation"], dtype=np.int64)
               if bool(record["is_counterfactual"]) else np.zeros(0, dtype=np.int64))
    table["label"] = np.isin(cands.ids, removed)
    return table


def feature_table(stream: EventStream, records: pd.DataFrame, k: int, m_max: int,
                  constraints: Constraints, index: TemporalIndex | None = None,
                  batch_size: int | None = None) -> pd.DataFrame:
    """``record_features`` of every explained record (status ``ok``), stacked.

    Records of several runs may explain the same event: each contributes its rows (with its
    own labels).
    """
    index = index if index is not None else TemporalIndex(stream)
    rows = records[explained(records["status"])] if "status" in records else records
    parts = [record_features(stream, index, {str(c): v for c, v in r.items()}, k, m_max,
                             constraints, batch_size) for r in rows.to_dict("records")]
    if not parts:
        columns = ["event_id", "candidate", *FEATURE_NAMES, "removable", "label"]
        return pd.DataFrame({c: pd.Series(dtype=np.float64) for c in columns})
    return pd.concat(parts, ignore_index=True)


def split_events(event_ids: Iterable[int], seed: int = 0
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Split distinct events into a training half and a held-out half, seeded.

    Returns:
        ``(train, held_out)``, each sorted; the training half has ``ceil(n / 2)`` events.
    """
    ids = np.unique(np.asarray(list(event_ids), dtype=np.int64))
    order = np.random.default_rng(seed).permutation(len(ids))
    cut = (len(ids) + 1) // 2
    return np.sort(ids[order[:cut]]), np.sort(ids[order[cut:]])
