"""Which history an explained event's prediction reads: the ``history=`` option
(docs/design.md §2, "History of the explained event").

* ``event`` (the default, the seed's reference): every event before the explained one. The
  explained event's own batch is applied up to the event as a final partial batch.
* ``batch_start``: what a batch evaluation loop predicts (PyG's ``examples/tgn.py``): only
  the batches completed before the explained event's batch reach the model; the events of
  its own batch are neither history nor candidates. The history ends at the batch boundary
  ``h = ⌊i / B⌋·B``.

Only models with memory have a batch-start prediction that differs from the event's; a
memory-less model (TGAT) reads every earlier event through neighbour sampling in its own
evaluation loop too, so ``batch_start`` is refused for it (``check_history``).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from cftgnn.errors import ConfigError


class History(str, Enum):
    """The history of an explained event (see the module docstring)."""

    EVENT = "event"
    BATCH_START = "batch_start"


def history_end(event_id: int, batch_size: int, history: History | str) -> int:
    """Where the history of ``event_id`` ends (exclusive): the event itself for ``event``,
    the start of its batch for ``batch_start``."""
    if History(history) is History.EVENT:
        return int(event_id)
    return (int(event_id) // int(batch_size)) * int(batch_size)


def check_history(history: History | str, has_memory: bool, model: str = "this model") -> History:
    """``history`` as a ``History``, refused where it does not apply.

    Raises:
        ConfigError: For an unknown value, or ``batch_start`` for a model without memory.
    """
    try:
        chosen = History(history)
    except ValueError:
        raise ConfigError(f"history must be one of {', '.join(h.value for h in History)}, "
                          f"got {history!r}") from None
    if chosen is History.BATCH_START and not has_memory:
        raise ConfigError(f"history=batch_start applies to models with memory; {model} has "
                          "none and reads every earlier event in its own evaluation loop too "
                          "(use history=event)")
    return chosen


def record_history_end(record: Mapping[str, Any] | Any, batch_size: int | None) -> int | None:
    """Where the history of a recorded explanation ended, for rebuilding its candidates:
    None for ``history=event`` (and records older than the ``history`` column), the start of
    the event's batch for ``batch_start``.

    Args:
        record: An explanation record (``event_id``, ``history``): a mapping or a pandas
            row.
        batch_size: The run's model batch size (its ``run.json``).

    Raises:
        ConfigError: A ``batch_start`` record without the run's batch size.
    """
    if record.get("history") != History.BATCH_START.value:
        return None
    if batch_size is None:
        raise ConfigError(f"event {int(record['event_id'])} was explained with "
                          "history=batch_start; its candidates need the run's model batch size "
                          "(model.config.batch_size in run.json)")
    return history_end(int(record["event_id"]), batch_size, History.BATCH_START)


__all__ = ["History", "check_history", "history_end", "record_history_end"]
