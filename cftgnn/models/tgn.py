"""TGN: node memory (GRU updater, identity message, last-message aggregation) plus attention.

Rossi et al., "Temporal Graph Networks for Deep Learning on Dynamic Graphs" (2020). Memory is
updated once per history batch from the messages the previous batch left pending; the node
embedding is graph attention over memory and the most recent neighbours.

PyG's ``TGNMemory`` keeps its message store in Python dicts and aggregates with
``LastAggregator`` (``scatter_argmax`` over timestamps, whose choice among equal timestamps
depends on scatter order). Neither can be snapshotted as plain tensors or replayed with a
removal mask, so the memory update is written here on top of PyG's ``IdentityMessage`` and
``TimeEncoder`` and torch's ``GRUCell``; "last" is decided by event id, which is exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn
from torch_geometric.nn.models.tgn import IdentityMessage

from cftgnn.models.base import TemporalModel
from cftgnn.models.batched import batched_logits
from cftgnn.models.cone import Trajectory, cone_replay, record_trajectory
from cftgnn.models.layers import LinkDecoder, TemporalAttentionEmbedding, make_time_encoder
from cftgnn.models.local import LocalPlan, local_plan, local_replay
from cftgnn.models.masks import RemovalSets
from cftgnn.models.state import State


def last_message_per_node(src: Tensor, dst: Tensor, events: Tensor,
                          num_nodes: int) -> tuple[Tensor, Tensor]:
    """Last-message aggregation: for each node touched by ``events``, its latest event.

    Args:
        src: Source of every stream event, ``int64 [E]``.
        dst: Destination of every stream event, ``int64 [E]``.
        events: Stream positions of one batch's kept events, ``int64 [K]``.
        num_nodes: ``N``.

    Returns:
        ``(nodes, last)``: the touched nodes ``[M]`` (ascending) and the position of the latest
        event (largest id) each took part in, ``[M]``.
    """
    nodes = torch.cat([src[events], dst[events]])  # [2K]
    ev = torch.cat([events, events])
    last = torch.full((num_nodes,), -1, dtype=torch.long, device=events.device)
    last.scatter_reduce_(0, nodes, ev, reduce="amax")
    touched = (last >= 0).nonzero(as_tuple=True)[0]
    return touched, last[touched]


class TGN(TemporalModel):
    """Temporal Graph Network with GRU memory and graph-attention embedding.

    Args:
        num_nodes: Number of nodes ``N``.
        edge_dim: Edge feature size ``F``.
        memory_dim: Node memory size.
        time_dim: Time encoding size.
        embedding_dim: Node embedding size.
        num_layers: Attention layers (1 or 2).
        num_heads: Attention heads.
        num_neighbors: Most recent neighbours per node.
        dropout: Attention dropout.
        batch_size: History batch size ``B``.
    """

    def __init__(self, num_nodes: int, edge_dim: int, memory_dim: int = 100,
                 time_dim: int = 100, embedding_dim: int = 100, num_layers: int = 1,
                 num_heads: int = 2, num_neighbors: int = 10, dropout: float = 0.1,
                 batch_size: int = 200) -> None:
        super().__init__(num_nodes, edge_dim, batch_size, num_neighbors, memory_dim)
        self.hparams = dict(num_nodes=num_nodes, edge_dim=edge_dim, memory_dim=memory_dim,
                            time_dim=time_dim, embedding_dim=embedding_dim,
                            num_layers=num_layers, num_heads=num_heads,
                            num_neighbors=num_neighbors, dropout=dropout,
                            batch_size=batch_size)
        self.num_layers = num_layers
        self.msg_time_enc = make_time_encoder(time_dim)
        self.message = IdentityMessage(edge_dim, memory_dim, time_dim)
        self.gru = nn.GRUCell(self.message.out_channels, memory_dim)
        self.embedding = TemporalAttentionEmbedding(memory_dim, edge_dim, time_dim,
                                                    embedding_dim, num_layers, num_heads,
                                                    dropout)
        self.decoder = LinkDecoder(embedding_dim, embedding_dim)

    def _pending_applied(self, state: State, inplace: bool = False) -> tuple[Tensor, Tensor]:
        """Memory and last-update times with the pending messages applied.

        Only the rows of nodes with a pending message are recomputed: messages are built from
        gathered rows ``memory[nodes]``, ``memory[other]`` and written back with
        ``index_copy``. Out of place by default (the state is unchanged and gradients flow
        during training); with ``inplace`` the state's own tensors are updated, which the
        no-grad replay uses to avoid copying the whole ``[N, d]`` memory every batch (the
        state's tensors are never shared with a snapshot: snapshot and restore clone).

        Returns:
            ``(memory [N, d], last_update [N])``.
        """
        nodes = (state.pending >= 0).nonzero(as_tuple=True)[0]  # [M]
        if len(nodes) == 0:
            return state.memory, state.last_update
        ev = state.pending[nodes]  # [M] stream positions
        src, dst = self._src[ev], self._dst[ev]
        other = torch.where(src == nodes, dst, src)
        t = self._t[ev]  # float64
        dt = (t - state.last_update[nodes]).to(state.memory.dtype)
        msg = self.message(state.memory[nodes], state.memory[other], self._feat[ev],
                           self.msg_time_enc(dt))  # [M, 2d + F + T]
        new = self.gru(msg, state.memory[nodes])  # [M, d]
        if inplace:
            state.memory.index_copy_(0, nodes, new)
            state.last_update.index_copy_(0, nodes, t)
            return state.memory, state.last_update
        memory = state.memory.index_copy(0, nodes, new)
        last_update = state.last_update.index_copy(0, nodes, t)
        return memory, last_update

    def _idle(self, state: State) -> bool:
        return not bool((state.pending >= 0).any())

    def _apply_batch(self, state: State, events: Tensor) -> None:
        if torch.is_grad_enabled():
            memory, last_update = self._pending_applied(state)
            state.memory, state.last_update = memory.detach(), last_update
        else:
            self._pending_applied(state, inplace=True)
        # Clear only the entries that are set (an empty batch after an empty batch is free).
        state.pending[state.pending >= 0] = -1
        if len(events):
            nodes, last = last_message_per_node(self._src, self._dst, events, self.num_nodes)
            state.pending[nodes] = last

    #: Masked histories (the approximate oracle's) of at most this many kept events are
    #: replayed on their touched nodes (:mod:`cftgnn.models.local`). Everything else uses the
    #: causal cone, which recomputes only what a removal reaches and so stays cheap for large
    #: P on long, dense histories.
    local_max_events = 512
    #: The local replay restarts every set at the earliest step any of them touches and
    #: recomputes all touched nodes, so its cost grows with P; it is used for at most this many
    #: sets per call, and larger batches of a short history go through the causal cone too
    #: (``python scripts/benchmark_oracle.py``: a batch of 64 approximate sets costs about 4-5
    #: single calls that way, against 22-27 with the local replay).
    local_max_sets = 1
    #: Calls with more sets than this are evaluated in passes of at most this many: rows of
    #: the cone replay and embedding tables grow with P, and past a few thousand sets
    #: larger passes share little more and run slower (all 43,744 sets of up to three of
    #: 64 candidates of a Wikipedia event: 4.4 s in passes of 4096, 10.3 s in one pass).
    max_sets_per_pass = 4096

    def replay_plan(self, base: State, end: int,
                    removed: npt.NDArray[np.bool_] | None = None,
                    removable: npt.NDArray[np.int64] | None = None) -> Any:
        """A short masked history's :class:`LocalPlan`, else the recorded trajectory of
        ``[base.position, end)`` under ``removed`` (see :mod:`cftgnn.models.cone`), with the
        dependency sets of the ``removable`` events."""
        plan = None
        if removed is not None:
            plan = local_plan(self, base, end, removed, self.local_max_events)
        if plan is None:
            return record_trajectory(self, base, end, removed, removable)
        # batches of more sets than local_max_sets go through the cone replay of the same
        # history: record it now, as per-event setup, rather than in the first such call
        plan.trajectory = record_trajectory(self, base, end, plan.removed, removable)
        return plan

    def masked_logits(self, plan: Any, removed: RemovalSets) -> Tensor:
        """All P sets at once (in passes of at most :attr:`max_sets_per_pass`): local or
        causal-cone replay, then one embedding pass over their distinct embeddings
        (:func:`cftgnn.models.batched.batched_logits`)."""
        step = max(1, self.max_sets_per_pass)
        if removed.num_sets > step:
            return torch.cat([self.masked_logits(plan, removed.select(slice(lo, lo + step)))
                              for lo in range(0, removed.num_sets, step)])
        if isinstance(plan, LocalPlan) and removed.num_sets > self.local_max_sets:
            plan = plan.trajectory
        shared: npt.NDArray[np.bool_] | None
        if isinstance(plan, LocalPlan):
            inputs = local_replay(self, plan, removed)
            end, shared = plan.end, plan.removed
        else:
            traj: Trajectory = plan
            inputs = cone_replay(self, traj, removed)
            end, shared = traj.end, traj.removed
        return batched_logits(self, removed, shared, end, inputs)

    def _node_input(self, state: State) -> Tensor:
        return self._pending_applied(state)[0]
