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

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn
from torch_geometric.nn.models.tgn import IdentityMessage

from cftgnn.arrays import SMALL, distinct_rows
from cftgnn.data.stream import IntArray
from cftgnn.models.base import TemporalModel
from cftgnn.models.layers import LinkDecoder, TemporalAttentionEmbedding, make_time_encoder
from cftgnn.models.state import State

_GRU_CHUNK = 1024  # rows per GRU step: its [chunk, 6d] intermediates stay in cache
#: Rows per product of the other endpoints' memories on the CPU (``_linear_in_chunks``).
_PRODUCT_CHUNK = 1024


def other_endpoint(src: Any, dst: Any, ev: Any, node: Any) -> Any:
    """The endpoint of each event ``ev`` that is not ``node`` (``node`` for a self-loop).

    The one rule of who a message comes from; arrays or tensors (of the same kind) in, the
    same kind out, ``int64 [M]``.
    """
    s, d = src[ev], dst[ev]
    if isinstance(s, Tensor):
        return torch.where(s == node, d, s)
    return np.where(s == node, d, s)


def _in_order(index: IntArray, rows: int) -> bool:
    """Whether ``index`` is ``0, 1, ..., rows - 1``: gathering rows by it changes nothing."""
    if len(index) != rows:
        return False
    if rows <= SMALL:  # few: in Python (several times cheaper than a NumPy call)
        return bool(index.tolist() == list(range(rows)))
    return bool(np.array_equal(index, np.arange(rows)))


def _linear_in_chunks(x: Tensor, weight: Tensor) -> Tensor:
    """``F.linear(x, weight)`` (no bias), ``[R, out]``; on the CPU, for more than
    ``_PRODUCT_CHUNK`` rows, computed in nearly equal chunks of at most that many rows
    written into one result, so that each product's output stays in cache (the far-back
    tail's updates have tens of thousands of other endpoints).

    Bit for bit ``F.linear``'s: a row's product does not depend on the rows computed beside
    it, except in a product of 1 to 3 rows (MKL's small-matrix path; measured on this
    project's machine), which chunks of more than ``_PRODUCT_CHUNK / 2`` rows never are
    (a fixed chunk size would leave such a remainder; ``tests/replay/test_cone_small_paths.py``
    compares the bits).
    """
    rows = len(x)
    if rows <= _PRODUCT_CHUNK or x.device.type != "cpu":
        return F.linear(x, weight)
    parts = -(-rows // _PRODUCT_CHUNK)
    size = -(-rows // parts)
    out = x.new_empty((rows, weight.shape[0]))
    wt = weight.t()
    for lo in range(0, rows, size):
        torch.mm(x[lo:lo + size], wt, out=out[lo:lo + size])
    return out


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
    # over the batch's own nodes (distinct, ascending), not all N: the same nodes and
    # maxima as a scatter into an [N] table (integers: the order of the maxima is exact)
    touched, inv = torch.unique(nodes, sorted=True, return_inverse=True)
    last = torch.full((len(touched),), -1, dtype=torch.long, device=events.device)
    last.scatter_reduce_(0, inv, ev, reduce="amax")
    return touched, last


class TGN(TemporalModel):
    """Temporal Graph Network with GRU memory and graph-attention embedding.

    Soft removal (``predict_soft``) acts on the
    embedding attention only: memory has already absorbed every past event at full weight,
    so weight 0 is not the removal of the event (a soft memory would need a differentiable
    replay of the GRU over the whole history, which neither PGExplainer's nor
    T-GNNExplainer's reference implementation does; docs/design.md §8, "Soft removal").

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

    # ------------------------------------------- the memory's public interface (replay)
    def message_update(self, events: Tensor | IntArray, mem_self: Tensor, last_update: Tensor,
                       mem_other: Tensor) -> tuple[Tensor, Tensor]:
        """New memory of rows applying their pending events: TGN's message
        ``[self, other, edge features, time encoding]`` through the GRU cell.

        Args:
            events: Pending event of each row (stream positions), ``int64 [M]``.
            mem_self: The rows' memory, ``[M, d]``.
            last_update: Their last-update times, ``float64 [M]``.
            mem_other: Memory of each row's other endpoint, ``[M, d]``.

        Returns:
            ``(memory [M, d], t float64 [M])``: the new memory and last-update times.
        """
        evt = torch.as_tensor(events, device=mem_self.device)
        t = self._t[evt]  # float64
        dt = (t - last_update).to(mem_self.dtype)
        msg = self.message(mem_self, mem_other, self._feat[evt],
                           self.msg_time_enc(dt))  # [M, 2d + F + T]
        return self.gru(msg, mem_self), t

    @torch.no_grad()
    def message_update_shared(self, ev: IntArray, mem_self: Tensor,
                              lu_self: npt.NDArray[np.float64], mem_other: Tensor,
                              other_of: IntArray) -> Tensor:
        """New memory ``[M, d]`` of rows applying pending events ``ev``: TGN's message
        ``[self, other, edge features, time encoding]`` through its GRU cell, the batched
        form of ``message_update`` that the causal-cone replay uses.

        The GRU's input projection is split by message part: the other endpoint's memory is
        projected once per distinct row of ``mem_other`` and the edge features and time
        encoding once per distinct ``(event, last update)``, so that only the row's own memory
        (and the hidden projection) is multiplied per row. The gates are the GRU cell's
        (``r, z, n`` as in ``torch.nn.GRUCell``), evaluated in cache-sized chunks, their
        intermediates updated in place: an inference path, without gradients (training and
        the gradient-based explainers go through ``message_update``).

        Args:
            ev: Pending event of each row, ``int64 [M]``.
            mem_self: The rows' memory, ``[M, d]``.
            lu_self: Their last-update times, ``float64 [M]``.
            mem_other: Distinct memories of the other endpoints, ``[O, d]``.
            other_of: Row of ``mem_other`` of each row, ``int64 [M]``.
        """
        d, gru, dev = self.memory_dim, self.gru, mem_self.device
        b_ih, b_hh = gru.bias_ih, gru.bias_hh
        assert b_hh is not None and b_ih is not None
        # [6d, d]: input and hidden parts of the row; [3d, d] and [3d, F + T] of the input
        w_self, w_other, w_rest = self._gru_row_weights()
        first, rest_of = distinct_rows(np.stack([ev, lu_self.view(np.int64)], axis=1))
        dt = torch.as_tensor(self.stream.t[ev[first]] - lu_self[first], device=dev)
        rest = self.msg_time_enc(dt.to(mem_self.dtype))  # [T, T_dim]
        if self._feat.shape[1]:  # edge features first (none: the encoding as it is)
            rest = torch.cat([self._feat[torch.as_tensor(ev[first], device=dev)], rest], dim=-1)
        y_rest = F.linear(rest, w_rest, b_ih)  # [T, 3d]
        y_other = _linear_in_chunks(mem_other, w_other)  # [O, 3d]
        # each row's rows of both, unless they are the rows in order (a single call's few
        # rows mostly): adding a row gathered or the row itself gives the same sums
        o_t = r_t = None
        gather_o = not _in_order(other_of, len(y_other))
        gather_r = not _in_order(rest_of, len(y_rest))
        if gather_o and gather_r:  # one upload for both (docs/design.md, "Device crossings")
            o_t, r_t = torch.as_tensor(np.stack([other_of, rest_of]).astype(np.int64),
                                       device=dev)
        elif gather_o:
            o_t = torch.as_tensor(other_of.astype(np.int64), device=dev)
        elif gather_r:
            r_t = torch.as_tensor(rest_of.astype(np.int64), device=dev)
        out = torch.empty_like(mem_self) if len(ev) > _GRU_CHUNK else None
        for lo in range(0, len(ev), _GRU_CHUNK):
            hi = min(lo + _GRU_CHUNK, len(ev))
            h = mem_self[lo:hi]
            x = F.linear(h, w_self)  # [c, 6d]
            # the GRU cell's gates, the intermediates updated in place (fewer passes over
            # memory; the same operations on the same operands: sums and products commute
            # bit for bit, and 1 - z is (-z) + 1)
            gi = x[:, :3 * d] + (y_other[lo:hi] if o_t is None
                                 else y_other.index_select(0, o_t[lo:hi]))
            gi += y_rest[lo:hi] if r_t is None else y_rest.index_select(0, r_t[lo:hi])
            gh = x[:, 3 * d:]
            gh += b_hh  # x is this chunk's own
            r = torch.sigmoid_(gi[:, :d] + gh[:, :d])
            z = torch.sigmoid_(gi[:, d:2 * d] + gh[:, d:2 * d])
            n = torch.tanh_(r.mul_(gh[:, 2 * d:]).add_(gi[:, 2 * d:]))
            zh = z * h
            new = z.neg_().add_(1).mul_(n).add_(zh)
            if out is None:  # one chunk: its result is the whole
                return new
            out[lo:hi] = new
        assert out is not None
        return out

    def _gru_row_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """``[W_ih[:, :d]; W_hh]`` (``[6d, d]``), the GRU weights ``message_update_shared``
        multiplies each row's own memory by, and the views ``W_ih[:, d:2d]`` (the other
        endpoint's memory) and ``W_ih[:, 2d:]`` (edge features and time encoding). Made
        once (the update runs without gradients) and kept until a weight is replaced or
        changed (in place: its version counter; its data swapped, as ``Module.to`` does: its
        address):
        the causal-cone replay calls the update once per batch, and the copy cost as much as
        the small products of a single call's rows. The same values, so the same
        logits."""
        gru, d = self.gru, self.memory_dim
        w_ih, w_hh = gru.weight_ih, gru.weight_hh
        key = (w_ih._version, w_hh._version, w_ih.data_ptr(), w_hh.data_ptr())
        cached = getattr(self, "_row_weights", None)
        if cached is None or cached[0] is not w_ih or cached[1] is not w_hh or cached[2] != key:
            cached = (w_ih, w_hh, key,
                      (torch.cat([w_ih[:, :d], w_hh]), w_ih[:, d:2 * d], w_ih[:, 2 * d:]))
            self._row_weights = cached
        weights: tuple[Tensor, Tensor, Tensor] = cached[3]
        return weights

    def _pending_applied(self, state: State, inplace: bool = False,
                         out: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Memory and last-update times with the pending messages applied.

        Only the rows of nodes with a pending message are recomputed: messages are built from
        gathered rows ``memory[nodes]``, ``memory[other]`` and written back with
        ``index_copy``. Out of place by default (the state is unchanged and gradients flow
        during training); with ``inplace`` the state's own tensors are updated, which the
        no-grad replay uses to avoid copying the whole ``[N, d]`` memory every batch (the
        state's tensors are never shared with a snapshot: snapshot and restore clone).
        With ``out`` (``[N, d]``, not the state's), the memory is written into it instead
        of a new tensor (the same values).

        Returns:
            ``(memory [N, d], last_update [N])``.
        """
        nodes = state.pending_at()  # [M], ascending
        if len(nodes) == 0:
            return state.memory, state.last_update
        new, t = self._pending_rows(state, nodes)
        if inplace:
            state.memory.index_copy_(0, nodes, new)
            state.last_update.index_copy_(0, nodes, t)
            return state.memory, state.last_update
        memory = (state.memory.index_copy(0, nodes, new) if out is None
                  else torch.index_copy(state.memory, 0, nodes, new, out=out))
        last_update = state.last_update.index_copy(0, nodes, t)
        return memory, last_update

    def _pending_rows(self, state: State, nodes: Tensor) -> tuple[Tensor, Tensor]:
        """The memory and last-update time of ``nodes`` (``int64 [M]``, each with a pending
        message) after their pending messages, ``([M, d], float64 [M])``."""
        ev = state.pending[nodes]  # [M] stream positions
        other = other_endpoint(self._src, self._dst, ev, nodes)
        return self.message_update(ev, state.memory[nodes], state.last_update[nodes],
                                   state.memory[other])

    def is_idle(self, state: State) -> bool:
        return not len(state.pending_at())

    def apply_batch(self, state: State, events: Tensor) -> None:
        if torch.is_grad_enabled():
            memory, last_update = self._pending_applied(state)
            state.memory, state.last_update = memory.detach(), last_update
        else:
            self._pending_applied(state, inplace=True)
        # clear only the entries that are set (the batch's work follows its own nodes, not N;
        # an empty batch after an empty batch is free), and keep the new ones beside them
        state.pending[state.pending_at()] = -1
        state.pending_nodes = state.pending_at()[:0]
        if len(events):
            nodes, last = last_message_per_node(self._src, self._dst, events, self.num_nodes)
            state.pending[nodes] = last
            state.pending_nodes = nodes

    def node_input(self, state: State) -> Tensor:
        """Memory with the pending messages applied, ``[N, d]`` (the state is unchanged)."""
        return self._pending_applied(state)[0]

    def _input_rows(self, state: State) -> Callable[[Tensor], Tensor]:
        """``node_input``'s rows as ``embed`` reads them (``TemporalModel._input_rows``):
        without gradients, only the pending nodes' rows are computed (``[M, d]``, as
        ``node_input`` computes them) and each read gathers the memory and puts those rows
        in place, so scoring a stream batch by batch (the sampling pass) costs per batch in
        its nodes, not ``N·d`` (255 MB copied per batch at tgbl-coin's 638k nodes before).
        The same floats as ``node_input(state)[v]``."""
        if torch.is_grad_enabled():
            return super()._input_rows(state)
        mem, nodes = state.memory, state.pending_at()
        if not len(nodes):
            return lambda v: mem[v]
        new = self._pending_rows(state, nodes)[0]  # [M, d]
        top = len(nodes) - 1

        def rows(v: Tensor) -> Tensor:  # [..., d]; a selection, no mask indexing (no sync)
            at = torch.searchsorted(nodes, v).clamp_(max=top)
            return torch.where((nodes[at] == v).unsqueeze(-1), new[at], mem[v])

        return rows
