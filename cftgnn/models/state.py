"""The replayable state of a temporal model: plain tensors in a small dataclass.

A snapshot is a clone of this object; restoring one makes the model continue exactly as it
would have from that point (docs/design.md §5, "snapshots, not replays from zero").

Layout (``N`` nodes, ``d`` memory size, ``E`` events of the attached stream):

* ``position``: original event id up to which history was consumed (history = ids
  ``< position``). A position that is not a multiple of the batch size marks a *closed* state
  whose last batch was partial; it can be predicted from but not advanced further.
* ``removed``: ``bool [E]`` on the CPU, the events skipped so far (indexed by position in the
  attached stream). Neighbour sampling reads it, so removed events are invisible to every
  model input. A snapshot with nothing removed holds ``no_removals``, one ``False``
  broadcast to ``[E]`` (stride 0): an unperturbed snapshot then costs ``O(N·d)`` bytes,
  whatever the stream's length. Such a mask is read-only (writing into it raises); the live
  state of a model always holds a dense one (``State.clone`` without ``compact``).
* ``memory``: ``float32 [N, d]``, node memory with every batch but the last applied (``d = 0``
  for memory-less models).
* ``last_update``: ``float64 [N]``, time of the last message applied to each node.
* ``pending``: ``int64 [N]``, the stream position of each node's pending (not yet applied)
  last message, ``-1`` for none. Messages are kept as event ids because the raw message is the
  event itself; the message vector is computed from memory when it is applied.
* ``pending_nodes``: ``int64 [M]``, the nodes with ``pending >= 0``, ascending, kept beside
  ``pending`` so that a batch's work follows its own nodes instead of scanning ``N``; None
  when not known (found from ``pending`` on first use, ``State.pending_at``).

Batched masked replay can later add a leading perturbation dimension ``P`` to ``removed``,
``memory``, ``last_update`` and ``pending`` (``[P, E]``, ``[P, N, d]``, ...): every update in
``cftgnn.models.tgn`` works on gathered rows of ``memory`` and is written with index
operations that extend to a flattened ``[P * N, d]`` view.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


def no_removals(num_events: int) -> Tensor:
    """A read-only ``bool [num_events]`` of ``False`` that takes one byte (stride 0)."""
    return torch.zeros(1, dtype=torch.bool).expand(int(num_events))


@dataclass
class State:
    """Replayable model state (see the module docstring for the layout).

    Attributes:
        position: Original event id up to which history was consumed.
        removed: Skipped events, ``bool [E]`` (CPU).
        memory: Node memory, ``float32 [N, d]``.
        last_update: Time of each node's last applied message, ``float64 [N]``.
        pending: Stream position of each node's pending message or ``-1``, ``int64 [N]``.
        pending_nodes: The nodes with a pending message (``pending >= 0``), ascending,
            ``int64 [M]``, kept beside ``pending`` by whoever writes it (TGN's
            ``apply_batch``, the only writer) so that a batch's work does not scan all
            ``N`` nodes; None when not known (then it is found from ``pending``).
    """

    position: int
    removed: Tensor
    memory: Tensor
    last_update: Tensor
    pending: Tensor
    pending_nodes: Tensor | None = field(default=None, compare=False, repr=False)

    def pending_at(self) -> Tensor:
        """``pending_nodes``, found from ``pending`` (and kept) when not known,
        ``int64 [M]``."""
        if self.pending_nodes is None:
            self.pending_nodes = (self.pending >= 0).nonzero(as_tuple=True)[0]
        return self.pending_nodes

    @classmethod
    def empty(cls, num_events: int, num_nodes: int, memory_dim: int,
              device: torch.device | str = "cpu") -> State:
        """The state before any event: zero memory, nothing removed or pending."""
        return cls(
            position=0,
            removed=torch.zeros(num_events, dtype=torch.bool),
            memory=torch.zeros(num_nodes, memory_dim, device=device),
            last_update=torch.zeros(num_nodes, dtype=torch.float64, device=device),
            pending=torch.full((num_nodes,), -1, dtype=torch.long, device=device),
            pending_nodes=torch.zeros(0, dtype=torch.long, device=device),
        )

    def clone(self, compact: bool = False) -> State:
        """A deep copy (detached tensors), which is what a snapshot is.

        Args:
            compact: Store a mask without removals as ``no_removals`` (one byte instead
                of ``E``; read-only), as snapshots do. Without it the copy's mask is dense
                and writable, as a model's live state needs.
        """
        removed = self.removed
        if compact and (removed.stride(0) == 0 or not bool(removed.any())):
            removed = no_removals(removed.shape[0])
        else:  # dense and writable, also when copying a broadcast mask
            removed = removed.clone(memory_format=torch.contiguous_format)
        return State(
            position=self.position,
            removed=removed,
            memory=self.memory.detach().clone(),
            last_update=self.last_update.clone(),
            pending=self.pending.clone(),
            pending_nodes=None if self.pending_nodes is None else self.pending_nodes.clone(),
        )

    def equals(self, other: State, atol: float = 0.0) -> bool:
        """Whether two states are the same (memory compared to ``atol``)."""
        return (
            self.position == other.position
            and torch.equal(self.removed, other.removed)
            and torch.allclose(self.memory, other.memory, atol=atol, rtol=0.0)
            and torch.equal(self.last_update, other.last_update)
            and torch.equal(self.pending, other.pending)
        )
