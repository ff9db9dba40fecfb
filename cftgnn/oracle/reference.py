"""The slow reference every oracle mode is tested and benchmarked against (``naive_logit``)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

from cftgnn.data.stream import EventStream
from cftgnn.models.base import eval_mode
from cftgnn.models.protocol import ReplayableModel
from cftgnn.oracle.history import History, history_end


def naive_logit(
    model: ReplayableModel, stream: EventStream, event_id: int, removed: Sequence[int] = (),
    history: History | str = History.EVENT, dst: int | None = None,
) -> float:
    """Reference: a fresh replay of the whole stream without ``removed``, then the prediction.

    This is the slow computation every oracle mode is tested (and benchmarked) against. It
    works on a copy of ``model``, so an engine using ``model`` is left as it was. With
    ``history=batch_start`` the replay stops at the start of the event's batch
    (``cftgnn.oracle.history``). With ``dst``, the prediction is of the event's source and
    time with that destination instead (a negative pair, ``EventReplay.pair_logits``).
    """
    sub, kept = stream.without(np.asarray(list(removed), dtype=np.int64))
    model = copy.deepcopy(model)
    with eval_mode(model):
        model.attach(sub, event_ids=kept)
        model.advance(0, history_end(event_id, model.batch_size, history))
        sl = slice(event_id, event_id + 1)
        target = (stream.dst[sl].copy() if dst is None
                  else np.asarray([int(dst)], dtype=stream.dst.dtype))
        logit = model.predict(stream.src[sl].copy(), target, stream.t[sl].copy())
    return float(logit[0])


__all__ = ["naive_logit"]
