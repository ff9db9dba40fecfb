"""The events a trained explainer's training draws, and why a drawn one is left out.

Both trainers (``cftgnn.explain.training.pgexplainer``, ``.tempme``) draw their training
events from a share of the training split (``training_events``) and their validation events
from the validation split with one draw (``validation_events``), then keep those an
explainer can explain: a probe over a removable candidate, a nonzero logit
(``explained_probe``); the others are named with the reason (``skipped_summary``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from cftgnn.data.stream import EventStream
from cftgnn.explain.base import Explainer
from cftgnn.explain.result import ExplanationStatus
from cftgnn.models.protocol import SoftRemovalModel
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.oracle import Oracle
from cftgnn.oracle.probe import ModelProbe
from cftgnn.training.loop import Split


def training_events(stream: EventStream, split: Split, share: Any, n: int, seed: int,
                    epoch: int | None = None) -> npt.NDArray[np.int64]:
    """``n`` distinct event ids drawn from ``share`` of the training split ``[0, train_end)``,
    sorted (fewer when the range holds fewer); ``epoch`` given: the fresh draw of that epoch
    (seeded by ``(seed, epoch)``)."""
    lo, hi = int(share[0] * split.train_end), int(share[1] * split.train_end)
    pool = np.arange(max(lo, 1), hi, dtype=np.int64)
    rng = np.random.default_rng(seed if epoch is None else [seed, epoch])
    chosen = rng.choice(pool, size=min(n, len(pool)), replace=False)
    return np.sort(chosen)


def validation_events(split: Split, n: int, seed: int) -> npt.NDArray[np.int64]:
    """``n`` distinct event ids of the validation split ``[train_end, val_end)``, sorted
    (drawn once, seeded by ``[seed, 1 << 20]``; fewer when the split holds fewer).

    The one validation draw of both trainers. TempME drew its own before 2026-12-02 (seeded
    by ``seed + 1``, from ``[train_end, val_end)``): a TempME trained since draws other
    validation events than the committed ones' cards list (docs/explainers/tempme.md).
    """
    pool = np.arange(max(split.train_end, 1), split.val_end, dtype=np.int64)
    rng = np.random.default_rng([seed, 1 << 20])
    return np.sort(rng.choice(pool, size=min(n, len(pool)), replace=False))


def probe_or_reason(engine: ReplayEngine, event_id: int, k: int | None, m_max: int
                    ) -> tuple[ModelProbe, float] | str:
    """The probe of a training event and its original logit, or why the event cannot be
    explained (``explained_probe`` without the reason).

    Returns:
        ``(probe, logit)``, or the reason, one of ``SKIP_REASONS``' values (with ``k``).
    """
    model = engine.model
    if not isinstance(model, SoftRemovalModel):
        return SKIP_REASONS["soft_removal"]
    hops = int(model.num_layers) if k is None else int(k)
    cand = engine.index.candidates(int(event_id), hops, int(m_max))
    if len(cand) == 0:
        return SKIP_REASONS["no_candidate"].format(k=hops)
    start = engine.boundary(int(event_id))
    probe = ModelProbe(model, engine.base_state(start), start, int(event_id), cand.ids)
    p0 = probe.logit()
    return SKIP_REASONS["zero_logit"] if p0 == 0 else (probe, float(p0))


#: Why a drawn training or validation event is left out (``probe_or_reason``).
SKIP_REASONS = {
    "soft_removal": "the model offers no soft removal",
    # an event between two nodes that meet the stream for the first time has no history
    "no_candidate": "no candidate event (no earlier event within k={k} hops of its endpoints)",
    "zero_logit": "its logit is exactly 0 (no prediction to explain)",
}


def explained_probe(engine: ReplayEngine, event_id: int, k: int | None, m_max: int,
                    skipped: dict[int, str] | None = None) -> tuple[ModelProbe, float] | None:
    """The probe of a training event and its original logit, shared by the trained explainers
    (the PGExplainer's ``training_event``, TempME's ``tempme_event``).

    The candidates are the oracle's (``k``, ``m_max``; all removable); the probe starts from
    the engine's unperturbed state at the event's batch boundary and advances to the event.

    Args:
        engine: The replay engine.
        event_id: The event.
        k: Hop radius (None: the model's number of layers).
        m_max: Most candidates.
        skipped: Where an event that cannot be explained is noted, by id, with the reason.

    Returns:
        ``(probe, logit)``, or None when the event cannot be explained: a model without soft
        removal, no candidate, or a zero logit (``probe_or_reason`` says which).
    """
    found = probe_or_reason(engine, event_id, k, m_max)
    if isinstance(found, str):
        if skipped is not None:
            skipped[int(event_id)] = found
        return None
    return found


def oracle_skip_reason(oracle: Oracle | None, hops: int) -> str | None:
    """Why a (validation) oracle's event is not scored, as ``SKIP_REASONS`` says it, or None
    when it is (``hops``: the candidates' radius, for the message)."""
    if oracle is None or oracle.probe is None:
        return SKIP_REASONS["soft_removal"]
    status = Explainer.status(oracle)
    return {ExplanationStatus.ZERO_LOGIT: SKIP_REASONS["zero_logit"],
            ExplanationStatus.NO_CANDIDATES: SKIP_REASONS["no_candidate"].format(k=hops),
            ExplanationStatus.NO_REMOVABLE: "no removable candidate event"}.get(status)


def skipped_summary(what: str, drawn: int, skipped: dict[int, str]) -> str:
    """One line saying how many of the ``drawn`` events a training uses and why the others
    were left out (``skipped``: event id -> reason), e.g. ``training events: 1999 of 2000
    drawn used; 1 left out: event 26293, no candidate event (...)``."""
    counts: dict[str, list[int]] = {}
    for event, reason in sorted(skipped.items()):
        counts.setdefault(reason, []).append(event)
    parts = [f"event{'s' if len(ids) > 1 else ''} "
             f"{', '.join(map(str, ids[:5]))}{', ...' if len(ids) > 5 else ''}: {reason}"
             for reason, ids in counts.items()]
    return (f"{what}: {drawn - len(skipped)} of {drawn} drawn used; {len(skipped)} left out "
            f"({'; '.join(parts)})")


def skipped_records(skipped: dict[int, str]) -> list[dict[str, Any]]:
    """A card's record of drawn events left out (``skipped_events``,
    ``skipped_validation_events``): ``[{"event_id": ..., "reason": ...}]`` by id."""
    return [{"event_id": int(e), "reason": r} for e, r in sorted(skipped.items())]




__all__ = ["SKIP_REASONS", "explained_probe", "oracle_skip_reason", "probe_or_reason",
           "skipped_records", "skipped_summary", "training_events", "validation_events"]
