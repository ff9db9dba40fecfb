"""The protocol a temporal model implements to be explained, and the one batching rule.

Any link predictor that replays a stream's history can be explained once it has the state
verbs of ``ReplayableModel``; it need not derive from
``TemporalModel`` (PyG's TGN adapter, ``cftgnn.models.pyg_tgn``,
does not). Such a model gets the exact oracle by masked replay through its own verbs
(``GenericReplay``): one replay of ``[b0, i)`` per removal set,
where ``b0`` is the batch boundary at or before the oldest candidate. A model that can evaluate
many removal sets at once either implements ``BatchedReplay`` itself
or has a replay registered for its class (``cftgnn.replay.registry.register_replay``; TGN's
and TGAT's live in ``cftgnn.replay``).

The verbs, for a model attached to a stream of ``E`` events with original ids ``ids``:

* ``attach(stream, event_ids=None, index=None)``: bind to a stream (``event_ids``, ascending,
  are the original ids of a stream with events deleted) and reset.
* ``reset()``: forget all history (position 0).
* ``snapshot() -> S``: an opaque copy of the state; ``restore(S)`` continues from it, any
  number of times (restore copies: later advances never change the snapshot).
* ``advance(start, end, removed_mask=None)``: consume the events with original ids in
  ``[start, end)`` in the batches of ``kept_batches``, skipping those with ``True`` in
  ``removed_mask`` (``bool [E]``); ``start`` must be the current position and a batch
  boundary, and an ``end`` that is not one closes the state (``check_advance``).
* ``predict(src, dst, t, before=None) -> float32 [B]``: logits of links given the history
  consumed so far; never changes the state. ``before`` (stream positions, one per query, each
  at or after the position) lets a training-style pass bound neighbour sampling per query; a
  model may ignore it (the screening pass of ``explain.py`` uses it).
* ``batch_size``; ``train``/``eval``/``training`` as on ``torch.nn.Module`` (the oracle
  runs in eval mode under ``torch.no_grad``).

What the oracle needs to know about a model is declared, never guessed:

* ``num_layers``: message-passing layers; the default hop radius of the candidates.
* ``num_neighbors``: most recent neighbours a prediction reads per node and layer.
* ``has_memory``: whether the model keeps node memory. With memory, a removal reaches every
  later event of its endpoints (the memory cone); without, only the predictions that sample it
  as a neighbour (``cftgnn.replay.consequence``).

Exactness needs one more property, which the generic path relies on: replaying the stream with
``s`` masked equals replaying the stream from which ``s`` was deleted, with the same original
ids. ``kept_batches`` gives that by grouping kept events by original id.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import EventStream, IntArray
from cftgnn.errors import CftgnnError

BoolArray = npt.NDArray[np.bool_]


class ModelStateError(CftgnnError, RuntimeError):
    """A state verb was called out of order (not attached, wrong start, closed state)."""


_T = TypeVar("_T")


def attached(value: _T | None) -> _T:
    """``value`` (something set by ``attach``), or the not-attached error when it is None.

    Raises:
        ModelStateError: When the model is not attached to a stream.
    """
    if value is None:
        raise ModelStateError("model is not attached to a stream; call attach(stream)")
    return value


@runtime_checkable
class ReplayableModel(Protocol):
    """The state verbs every explained model has (see the module docstring)."""

    batch_size: int
    training: bool

    @property
    def num_layers(self) -> int:
        """Message-passing layers (the default hop radius of the candidates)."""

    @property
    def num_neighbors(self) -> int:
        """Most recent neighbours a prediction reads per node and layer."""

    @property
    def has_memory(self) -> bool:
        """Whether the model keeps node memory (a removal then reaches its endpoints'
        later events)."""

    @property
    def stream(self) -> EventStream:
        """The attached stream."""

    def attach(self, stream: EventStream, event_ids: npt.ArrayLike | None = None,
               index: TemporalIndex | None = None) -> None:
        """Bind the model to ``stream`` and reset it."""

    def reset(self) -> None:
        """Forget all history."""

    def snapshot(self) -> Any:
        """A copy of the current state."""

    def restore(self, state: Any) -> None:
        """Continue from a snapshot (copied)."""

    def advance(self, start_id: int, end_id: int,
                removed_mask: npt.ArrayLike | Tensor | None = None) -> None:
        """Consume the kept events with original ids in ``[start_id, end_id)``."""

    def predict(self, src: npt.ArrayLike | Tensor, dst: npt.ArrayLike | Tensor,
                t: npt.ArrayLike | Tensor, before: npt.ArrayLike | Tensor | None = None
                ) -> Tensor:
        """Logits ``float32 [B]`` of the links ``(src, dst, t)``; the state is unchanged."""

    def train(self, mode: bool = True) -> Any:
        """Training mode on or off (``torch.nn.Module.train``)."""

    def eval(self) -> Any:
        """Evaluation mode (``torch.nn.Module.eval``)."""


@runtime_checkable
class SoftRemovalModel(Protocol):
    """A model that sees a weight in ``[0, 1]`` per history event differentiably (soft
    removal; docs/design.md §8, "Soft removal"), for explainers trained by gradient.

    Explainers reach it only through the oracle's probe (``cftgnn.oracle.probe``).
    TGN, TGAT, GraphMixer and DyGFormer implement it (``TemporalModel``); PyG's TGN adapter
    does not (``offers_soft_removal`` reads it off a class). Every method predicts from the
    current history and leaves the state unchanged.

    Declared apart from ``ReplayableModel`` (see ``ProbedModel`` for both), so that
    ``isinstance`` reads nothing that needs an attached stream: on Python 3.11 it evaluates
    every member, and ``stream`` raises on a model not attached yet.
    """

    def predict_soft(self, src: npt.ArrayLike | Tensor, dst: npt.ArrayLike | Tensor,
                     t: npt.ArrayLike | Tensor, event_ids: npt.ArrayLike | Tensor,
                     weights: Tensor) -> Tensor:
        """Logits ``float32 [B]`` with the attention slots reading ``event_ids``
        (``int64 [m]``) weighted by ``weights`` (``float [m]``); differentiable in the
        weights. Weight 1 everywhere gives ``predict``'s logits."""

    def attention_by_event(self, src: npt.ArrayLike | Tensor, dst: npt.ArrayLike | Tensor,
                           t: npt.ArrayLike | Tensor, event_ids: npt.ArrayLike | Tensor,
                           bias: Tensor | None = None) -> Tensor:
        """Aggregated attention on each event (over layers, targets and slots, averaged
        over heads), ``float64 [m]``; 0 for an event no slot reads. ``bias`` (``float [m]``,
        only where ``has_attention``) is added to the attention scores of the slots
        reading each event first."""

    @property
    def has_attention(self) -> bool:
        """Whether ``attention_by_event`` reads attention probabilities (TGN, TGAT) rather
        than pooling shares (GraphMixer, DyGFormer), and so takes a ``bias``."""

    @property
    def device(self) -> torch.device:
        """The device of the model's parameters (and of its inputs)."""

    def embed(self, nodes: Tensor, t: Tensor, before: Tensor | None = None) -> Tensor:
        """Node embeddings ``[B, d]`` of ``nodes`` (``int64 [B]``) at times ``t``."""

    def encode_time(self, dt: Tensor) -> Tensor:
        """The model's time encoding of gaps ``dt`` (``float [M]``), ``[M, T]``."""


class ProbedModel(ReplayableModel, SoftRemovalModel, Protocol):
    """A replayable model with soft removal: what the oracle's probe reads."""


def offers_soft_removal(cls: type) -> bool:
    """Whether instances of the model class ``cls`` are ``SoftRemovalModel``s (the oracle
    gives them a probe), read off the class: every member of the protocol is there.
    ``issubclass`` refuses a protocol with properties, and ``isinstance`` needs a model."""
    members = {n for n in vars(SoftRemovalModel) if not n.startswith("_")}
    return all(hasattr(cls, n) for n in members)


def check_advance(position: int, start_id: int, end_id: int, batch_size: int) -> bool:
    """The preconditions of ``advance(start_id, end_id)`` on a state at ``position``.

    Returns:
        Whether there is anything to consume (``end_id > start_id``).

    Raises:
        ModelStateError: If ``start_id`` is not the position, the range is reversed, or the
            state was closed by a partial batch and is advanced further.
    """
    if start_id != position:
        raise ModelStateError(f"advance starts at {start_id}, but the state is at {position}")
    if end_id < start_id:
        raise ModelStateError(f"advance end {end_id} is before its start {start_id}")
    if end_id == start_id:
        return False
    if start_id % batch_size:
        raise ModelStateError(
            f"state at {start_id} ended with a partial batch and cannot be advanced; "
            "restore a snapshot taken at a batch boundary")
    return True


def as_removed_mask(removed_mask: npt.ArrayLike | Tensor | None,
                    num_events: int) -> BoolArray | None:
    """``removed_mask`` as a numpy ``bool [num_events]`` (None stays None).

    Raises:
        ModelStateError: On another shape.
    """
    if removed_mask is None:
        return None
    mask = (removed_mask.detach().cpu().numpy() if isinstance(removed_mask, Tensor)
            else np.asarray(removed_mask)).astype(bool, copy=False)
    if mask.shape != (num_events,):
        raise ModelStateError(f"removed_mask must have shape ({num_events},), got "
                              f"{mask.shape}")
    return mask


def kept_batches(ids: IntArray, lo: int, hi: int, mask: BoolArray | None,
                 batch_size: int) -> list[tuple[int, IntArray]]:
    """The kept events of stream positions ``[lo, hi)``, grouped into history batches.

    Batch ``b`` holds the events with original ids in ``[b·B, (b+1)·B)`` (docs/design.md §2):
    removing an event deletes it from its batch and shifts nothing else. Batches left empty by
    the mask are not listed.

    Args:
        ids: Original id of each attached event, ascending, ``int64 [E]``.
        lo: First stream position.
        hi: End stream position (exclusive).
        mask: Removed events, ``bool [E]``, or None.
        batch_size: ``B``.

    Returns:
        ``(b, positions)`` per non-empty batch, ascending; positions are ``int64 [K]``.
    """
    pos = np.arange(lo, hi, dtype=np.int64)
    if mask is not None:
        pos = pos[~mask[lo:hi]]
    if len(pos) == 0:
        return []
    batch_of = ids[pos] // batch_size
    cuts = np.flatnonzero(np.diff(batch_of)) + 1
    return [(int(ids[g[0]] // batch_size), g) for g in np.split(pos, cuts)]


__all__ = ["BoolArray", "ModelStateError", "ProbedModel", "ReplayableModel", "SoftRemovalModel",
           "as_removed_mask", "attached", "check_advance", "kept_batches",
           "offers_soft_removal"]
