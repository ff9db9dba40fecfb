"""Which events to explain: a seeded sample, split into correct and incorrect predictions.

Every event of a stream really happened, so the model's prediction for it is *correct* when
its logit is positive and *incorrect* otherwise. Sorting events into the two groups needs the
model's logit for every event in the sampled range; one streaming pass gives them in seconds
(``screen_logits``, the same scoring as the checkpoints' test AP). These *screening*
logits decide the groups and the ``|logit|`` threshold.

For TGAT the screening logit equals the oracle's ``p_orig`` exactly. For TGN it is the logit
from the memory at the start of the event's batch, whereas ``p_orig`` also applies the earlier
events of that batch (docs/design.md §2); the two agree in sign on about 98 % of UCI events. Records
keep both, so an analysis can regroup by the exact logit, and name which one the group follows
(``group_logit``: ``screen``). With ``history=batch_start`` the screening pass scores the
explained prediction itself (memory and neighbours of the completed batches only), so the
groups follow the explained logit (``group_logit``: ``explained``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd

from cftgnn.data.stream import EventStream
from cftgnn.errors import CftgnnError
from cftgnn.models.base import TemporalModel, eval_mode
from cftgnn.oracle.history import History
from cftgnn.runs.options import PredictionGroup
from cftgnn.training.loop import score_batches

if TYPE_CHECKING:
    from cftgnn.oracle.engine import ReplayEngine

_ADVANCE_BATCHES = 1024  # history batches per advance call of the screening pass


class SamplingError(CftgnnError):
    """The requested events cannot be sampled (empty range, ids outside the stream)."""


def event_range(stream: EventStream, share: Sequence[float]) -> tuple[int, int]:
    """Event ids ``[lo, hi)`` covered by a ``[start, end]`` share of the stream.

    Raises:
        SamplingError: If the shares are not ``0 <= start < end <= 1`` or the range is empty.
    """
    if len(share) != 2:
        raise SamplingError(f"sample.range must be [start, end], got {list(share)}")
    start, end = float(share[0]), float(share[1])
    if not 0.0 <= start < end <= 1.0:
        raise SamplingError(f"sample.range must satisfy 0 <= start < end <= 1, got {list(share)}")
    lo, hi = int(start * stream.num_events), int(end * stream.num_events)
    if lo >= hi:
        raise SamplingError(f"sample.range {list(share)} holds no event of {stream.name!r}")
    return lo, hi


def screen_logits(model: TemporalModel, stream: EventStream, lo: int, hi: int,
                  keep: npt.ArrayLike | None = None,
                  history: History | str = History.EVENT,
                  engine: ReplayEngine | None = None) -> npt.NDArray[np.float64]:
    """The model's logit of every event in ``[lo, hi)`` from one streaming pass, ``[hi - lo]``.

    The model is attached to ``stream`` (which resets it), advanced over the history before
    the batch holding ``lo`` and then scored batch by batch
    (``score_batches``); callers attach it again before other use.
    The pass keeps nothing but the answer: the logits are stored in the model's own
    precision (``float32``, 4 bytes per event of the range) as they stream by, and with
    ``keep`` only those of the events asked for.

    Args:
        model: The model.
        stream: The stream.
        lo: First event scored.
        hi: End of the range (exclusive).
        keep: Event ids in ``[lo, hi)``, ascending: return only their logits,
            ``[len(keep)]`` (None: every event's).
        history: ``batch_start``: score each event from the completed batches only, which
            is the explained prediction of that history (``cftgnn.oracle.history``);
            ``event``: neighbour sampling also sees the event's earlier batch mates.
        engine: The replay engine of ``model`` that will explain the sampled events, or
            None: the pass uses its index and, on the way to the range, offers it the
            unperturbed snapshots of its spacing (``SnapshotStore``, within its budget), so that the
            first explained event starts from the nearest of them instead of replaying the stream's
            prefix again.
    """
    if not 0 <= lo < hi <= stream.num_events:
        raise SamplingError(f"cannot screen events [{lo}, {hi}) of a stream of "
                            f"{stream.num_events} events")
    ids = None if keep is None else np.asarray(keep, dtype=np.int64).reshape(-1)
    out = np.empty(hi - lo if ids is None else len(ids), dtype=np.float32)
    model.attach(stream, index=None if engine is None else engine.index)
    start = lo - lo % model.batch_size
    chunk = _ADVANCE_BATCHES * model.batch_size
    store = None if engine is None else engine.snapshots
    with eval_mode(model):
        pos = 0
        while pos < start:  # in chunks: advance lists its batches up front
            nxt = min(pos + chunk, start)
            if store is not None:  # and where the engine's store may keep a state
                nxt = store.next_stop(pos, nxt)
            model.advance(pos, nxt)
            pos = nxt
            if store is not None and store.keeps(pos):
                store.offer(pos, model.snapshot)
        own = History(history) is History.EVENT
        for a, logits in score_batches(model, start, hi, own_batch_neighbors=own):
            b = a + len(logits)
            if ids is None:
                first = max(a, lo)
                out[first - lo:b - lo] = logits[first - a:]
            else:
                j0, j1 = np.searchsorted(ids, [a, b])
                out[j0:j1] = logits[ids[j0:j1] - a]
    return out.astype(np.float64)


def quota(prediction: PredictionGroup | str, n: int) -> list[tuple[PredictionGroup, int]]:
    """How many events of each group ``n`` events of ``prediction`` ask for."""
    prediction = PredictionGroup(prediction)
    if prediction is PredictionGroup.BOTH:
        return [(PredictionGroup.CORRECT, math.ceil(n / 2)),
                (PredictionGroup.INCORRECT, n // 2)]
    return [(prediction, n)]


def sample_events(
    logits: npt.ArrayLike,
    first_id: int,
    n: int,
    prediction: PredictionGroup | str = PredictionGroup.BOTH,
    min_abs_logit: float = 0.0,
    max_abs_logit: float | None = None,
    seed: int = 0,
    eligible: npt.NDArray[np.bool_] | None = None,
) -> pd.DataFrame:
    """A seeded sample of events, by group, from their screening logits.

    Args:
        logits: Screening logit of each event of the range, ``[R]``.
        first_id: Event id of ``logits[0]``.
        n: Number of events wanted (fewer when a group has too few events).
        prediction: Which predictions to sample (see
            [``PredictionGroup``][cftgnn.runs.PredictionGroup]).
        min_abs_logit: Keep events with ``|logit| >= min_abs_logit`` only.
        max_abs_logit: Keep events with ``|logit| <= max_abs_logit`` only (None = no bound).
        seed: Random seed; each group draws from its own generator.
        eligible: Which events of the range may be drawn, ``bool [R]`` (None: all; the
            rank target's: those with negatives).

    Returns:
        Columns ``event_id`` (ascending), ``group`` and ``screen_logit``.
    """
    values = np.asarray(logits, dtype=np.float64).reshape(-1)
    prediction = PredictionGroup(prediction)
    if n < 0:
        raise SamplingError(f"n_events must be >= 0, got {n}")
    ok = np.abs(values) >= min_abs_logit
    if max_abs_logit is not None:
        ok &= np.abs(values) <= max_abs_logit
    if eligible is not None:
        ok &= np.asarray(eligible, dtype=bool).reshape(-1)
    correct = values > 0
    picked: list[npt.NDArray[np.int64]] = []
    for g, (group, count) in enumerate(quota(prediction, n)):
        member = ok if group is PredictionGroup.ANY else ok & (
            correct if group is PredictionGroup.CORRECT else ~correct)
        pool = np.flatnonzero(member)
        rng = np.random.default_rng([seed, g])
        picked.append(rng.choice(pool, size=min(count, len(pool)), replace=False))
    pos = np.sort(np.concatenate(picked)) if picked else np.zeros(0, dtype=np.int64)
    return pd.DataFrame({
        "event_id": (pos + first_id).astype(np.int64),
        "group": np.where(correct[pos], PredictionGroup.CORRECT.value,
                          PredictionGroup.INCORRECT.value),
        "screen_logit": values[pos],
    })


def explicit_events(events: Sequence[int], stream: EventStream) -> npt.NDArray[np.int64]:
    """Validate a user-given list of event ids (sorted, unique).

    Raises:
        SamplingError: If an id is outside the stream.
    """
    ids = np.unique(np.asarray(list(events), dtype=np.int64))
    bad = ids[(ids < 0) | (ids >= stream.num_events)]
    if len(bad):
        raise SamplingError(f"event id {int(bad[0])} is outside the stream {stream.name!r} "
                            f"(ids 0..{stream.num_events - 1})")
    return ids


def plan_events(
    model: TemporalModel,
    stream: EventStream,
    n: int,
    share: Sequence[float] = (0.85, 1.0),
    prediction: PredictionGroup | str = PredictionGroup.BOTH,
    min_abs_logit: float = 0.0,
    max_abs_logit: float | None = None,
    seed: int = 0,
    events: Sequence[int] | None = None,
    history: History | str = History.EVENT,
    engine: ReplayEngine | None = None,
    eligible: npt.NDArray[np.int64] | None = None,
) -> pd.DataFrame:
    """The events a run explains: sampled (see [``sample_events``][cftgnn.runs.sample_events])
    or given explicitly.

    Args:
        model: The model (it is attached to ``stream`` for the screening pass).
        stream: The stream.
        n: Number of events to sample.
        share: ``[start, end]`` share of the stream to sample from.
        prediction: Which predictions to sample.
        min_abs_logit: Lower bound on ``|screening logit|``.
        max_abs_logit: Upper bound on ``|screening logit|`` (None = none).
        seed: Random seed.
        events: Explicit event ids; sampling options other than the ids are then ignored.
        history: The explained prediction's history (see ``screen_logits``).
        engine: The engine that will explain the events (see ``screen_logits``), or
            None.
        eligible: The only event ids sampling may draw (``target=rank``: the events with
            negatives; the screening pass then covers only their span), or None.

    Returns:
        Columns ``event_id`` (ascending), ``group`` and ``screen_logit``.
    """
    if events is not None:
        ids = explicit_events(events, stream)
        if len(ids) == 0:
            return sample_events(np.zeros(0), 0, 0)
        values = screen_logits(model, stream, int(ids[0]), int(ids[-1]) + 1, keep=ids,
                               history=history, engine=engine)
        return pd.DataFrame({
            "event_id": ids,
            "group": np.where(values > 0, PredictionGroup.CORRECT.value,
                              PredictionGroup.INCORRECT.value),
            "screen_logit": values,
        })
    lo, hi = event_range(stream, share)
    mask = None
    if eligible is not None:
        inside = np.asarray(eligible, dtype=np.int64)
        inside = inside[(inside >= lo) & (inside < hi)]
        if len(inside) == 0:
            return sample_events(np.zeros(0), 0, 0)
        lo, hi = int(inside[0]), int(inside[-1]) + 1  # screen only their span
        mask = np.zeros(hi - lo, dtype=bool)
        mask[inside - lo] = True
    logits = screen_logits(model, stream, lo, hi, history=history, engine=engine)
    return sample_events(logits, lo, n, prediction, min_abs_logit, max_abs_logit, seed, mask)


__all__ = [
    "PredictionGroup",
    "SamplingError",
    "event_range",
    "explicit_events",
    "plan_events",
    "quota",
    "sample_events",
    "screen_logits",
]
