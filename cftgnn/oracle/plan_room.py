"""Whether an explained event's plans fit the memory budget: a refusal before any work.

The replay engine's budget holds its unperturbed snapshots, its cursor and the explained
event's plans together (``cftgnn.oracle.snapshots``). Snapshots can be dropped to make room
(``SnapshotStore.make_room``); the cursor and the plans cannot. A plan grows with its
history's span, the events from the base state (the batch boundary at or before the oldest
candidate) to the explained event: TGN's recorded trajectory holds about 0.34 KB per history
event (0.44 before its index's ``int32`` arrays; on a sparse 2M-event stream), of which only
the memory rows are capped (``TGNReplay.record_bytes``), so on a long
stream whose candidates reach far back (tgbl-coin's size: spans of up to 19M events) one
event's plans alone can pass any budget (before this check nothing but the machine stopped
them).

So, before anything is replayed, each event's plans are bounded from above
(``BudgetedReplay.plan_nbytes``: the exact plan over the whole span and the approximate one
over the events it keeps; with the rank target, its pairs plans in their place, and the
logit's plan, made only if an exact logit is asked for, not counted) and compared with what
the budget leaves them once every snapshot is dropped: the budget less the cursor, or
``MIN_PLANS_BUDGET_GB`` where that is more (a budget below one snapshot still explains short
histories, as before). An event that cannot fit refuses the run in one ``ConfigError``
naming the event, its span, the bytes and the budget, and what to change.
``ReplayEngine.expect`` checks every announced event (so ``explain.py`` refuses before its
first event), ``EventReplay`` the one it is built for.
Replays without ``plan_nbytes`` (TGAT's, GraphMixer's, DyGFormer's windows, whose plans do
not grow with the span) are not checked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from cftgnn.errors import ConfigError
from cftgnn.oracle.history import History, history_end
from cftgnn.replay.plans import BudgetedReplay

#: The least room an event's plans get, GiB, whatever the budget: a budget below it (one
#: that keeps only the cursor) does not refuse events whose plans need less than this.
MIN_PLANS_BUDGET_GB = 0.25


def plans_room(budget: int | None, cursor_nbytes: int) -> int | None:
    """Bytes an event's plans may take with every snapshot dropped: the budget less the
    cursor, at least ``MIN_PLANS_BUDGET_GB`` (None: no budget, no bound)."""
    if budget is None:
        return None
    return max(int(budget) - int(cursor_nbytes), int(MIN_PLANS_BUDGET_GB * 2**30))


def event_plans_nbytes(replay: BudgetedReplay, base: Any, start: int, end: int,
                       approx_kept: int, removable: int) -> int:
    """An upper bound of the bytes of one event's plans held at once: the exact plan of
    ``[start, end)`` and the approximate one, which keeps ``approx_kept`` of its events
    (``EventReplay._account_plans`` holds both)."""
    exact = replay.plan_nbytes(base, start, end, removable=removable)
    return exact + replay.plan_nbytes(base, start, end, kept=approx_kept, removable=removable)


def check_plans_fit(engine: Any, base: Any, event_id: int, start: int, eps_min: int,
                    num_candidates: int, end: int | None = None) -> None:
    """Refuse an event whose plans cannot fit the engine's budget (see the module
    docstring), before any replay.

    Args:
        engine: The ``ReplayEngine`` (its replay and snapshots: the budget, the cursor).
        base: A state of the model's shapes (the engine's cursor serves).
        event_id: The explained event.
        start: Its base state's position (a batch boundary at or before ``eps_min``).
        eps_min: Its oldest candidate (the history's end when it has none).
        num_candidates: Its candidates (the removable events).
        end: Where its history ends (``history_end``; default ``event_id``).

    Raises:
        ConfigError: One line: the event, its span, the bytes needed, the room the budget
            leaves, and what to change.
    """
    replay = engine.replay
    store = engine.snapshots
    room = plans_room(store.budget, store.cursor_nbytes)
    if room is None or not isinstance(replay, BudgetedReplay):
        return
    stop = int(event_id) if end is None else int(end)
    kept = max(0, int(eps_min) - int(start)) + int(num_candidates)
    need = event_plans_nbytes(replay, base, start, event_id, kept,
                              max(1, int(num_candidates)))
    if need <= room:
        return
    gib = 2**30
    # the bound covers the span to the event; a history that ends earlier (``history=
    # batch_start``) is named beside it
    ends = "" if stop == int(event_id) else f"; its history ends at {stop:,}"
    over = math.ceil((need + store.cursor_nbytes) / gib * 100) / 100
    raise ConfigError(
        f"event {int(event_id)}'s replay plans need up to {need / gib:.3g} GiB (a history "
        f"of {int(event_id) - int(start):,} events, from {int(start):,}, where its oldest "
        f"candidate's batch starts, to the event{ends}), more than the {room / gib:.3g} GiB that "
        f"memory_budget_gb={store.budget / gib:.4g} leaves them with every snapshot dropped "
        f"(the cursor holds {store.cursor_nbytes / gib:.3g} GiB): set memory_budget_gb to at "
        f"least {over:g}, or shorten how far back candidates reach (a smaller m_max "
        f"or k), or explain other events (no history cut-off exists)")


def announced_bases(engine: Any, base: Any, event_ids: Sequence[int], k: int, m_max: int,
                    history: History) -> list[int]:
    """The base state's position of each event ``ReplayEngine.expect`` announces, in order,
    each event's plans checked first (``check_plans_fit``; ``base``: a state of the model's
    shapes, the engine's cursor).

    Raises:
        ConfigError: For the first event whose plans cannot fit, before any replay.
    """
    bases = []
    for event_id in map(int, event_ids):
        end = history_end(event_id, engine.batch_size, history)
        until = None if history is History.EVENT else end
        cand = engine.index.candidates(event_id, k, m_max, until)
        eps = end if cand.oldest is None else int(cand.oldest)
        bases.append(engine.boundary(eps))
        check_plans_fit(engine, base, event_id, bases[-1], eps, len(cand.ids), end)
    return bases


__all__ = ["MIN_PLANS_BUDGET_GB", "announced_bases", "check_plans_fit", "event_plans_nbytes",
           "plans_room"]
