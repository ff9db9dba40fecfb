"""Which replay evaluates a model's removal sets: models register their own fast replay.

A batched replay declares the model class it serves where it is defined::

    @register_replay(TGN)
    class TGNReplay: ...

and ``replay_for`` finds it by walking the model's class hierarchy (a subclass gets its
base's replay unless it registers its own). A model with no registered replay that implements
``BatchedReplay`` itself is called that way
(``NativeReplay``); any other model gets the generic one masked
replay per set (``GenericReplay``). The oracle asks only
``replay_for``; it knows no model class.

The built-in replays (``cftgnn.replay.tgn``, ``cftgnn.replay.tgat``) register when
``cftgnn.replay`` is imported, which importing this module always does first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from cftgnn.models.protocol import ReplayableModel
from cftgnn.replay.generic import GenericReplay, NativeReplay
from cftgnn.replay.plans import BatchedReplay, ModelReplay

_REPLAYS: dict[type, Callable[[Any], ModelReplay]] = {}

_R = TypeVar("_R", bound=Callable[..., ModelReplay])


def register_replay(model_cls: type) -> Callable[[_R], _R]:
    """Class decorator: the decorated replay (called with the model) serves ``model_cls``
    and its subclasses.

    Args:
        model_cls: The model class the replay is exact for.

    Raises:
        ValueError: If ``model_cls`` already has a replay (one replay per class).
    """
    def register(make: _R) -> _R:
        if model_cls in _REPLAYS and _REPLAYS[model_cls] is not make:
            raise ValueError(f"{model_cls.__qualname__} already has a replay: "
                             f"{_REPLAYS[model_cls]!r}")
        _REPLAYS[model_cls] = make
        return make
    return register


def registered_replay(model_cls: type) -> Callable[[Any], ModelReplay] | None:
    """The replay registered for ``model_cls`` or its nearest base class, or None."""
    for cls in model_cls.__mro__:
        if cls in _REPLAYS:
            return _REPLAYS[cls]
    return None


def replay_for(model: ReplayableModel) -> ModelReplay:
    """The fastest exact replay of ``model``: the one registered for its class, its own
    ``BatchedReplay``, else the generic one replay per set."""
    make = registered_replay(type(model))
    if make is not None:
        return make(model)
    if isinstance(model, BatchedReplay):
        return NativeReplay(model)
    return GenericReplay(model)


__all__ = ["register_replay", "registered_replay", "replay_for"]
