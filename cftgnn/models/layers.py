"""Building blocks shared by TGN and TGAT: time encoding, temporal attention, link decoder."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn
from torch_geometric.nn import TransformerConv
from torch_geometric.nn.models.tgn import TimeEncoder
from torch_geometric.utils import softmax

# (nodes [M], before [M]) -> (nbr, eid, valid), each [M, n]; positions index the stream.
NeighborFn = Callable[[Tensor, Tensor], tuple[Tensor, Tensor, Tensor]]


def make_time_encoder(dim: int) -> TimeEncoder:
    """PyG's ``cos(w·Δt + b)`` time encoder with fixed geometric frequencies.

    PyG initialises ``w`` like any linear layer (``|w| ~ 1``), which turns the multi-day time
    gaps of UCI or Wikipedia (seconds) into noise; ``w_k = 10^{-9k/(d-1)}`` (TGAT's
    initialisation) spans periods from a second to decades. The frequencies are frozen (as in
    GraphMixer): trained, their gradients scale with ``Δt`` (up to 1e7 s), and Adam steps of
    ``lr`` on weights as small as 1e-9 scramble the slow frequencies within an epoch, which made
    training loss rise from the second epoch on.
    """
    enc = TimeEncoder(dim)
    with torch.no_grad():
        freq = 1.0 / 10 ** np.linspace(0, 9, dim, dtype=np.float32)
        enc.lin.weight.copy_(torch.from_numpy(freq).view(dim, 1))
        enc.lin.bias.zero_()
    enc.requires_grad_(False)
    return enc


class TemporalAttentionEmbedding(nn.Module):
    """``L`` layers of graph attention over each node's most recent neighbours.

    Layer ``l`` embeds node ``i`` at query time ``t`` with history before stream position
    ``p`` from its own layer ``l-1`` embedding and those of its ``n`` most recent neighbours
    ``j`` (linked by event ``e_j < p`` at time ``t_j``), each taken at ``(t_j, e_j)``, with edge
    attributes ``[cos-time(t - t_j), edge_feat(e_j)]``. Layer 0 is a node input given by the
    model (TGN: memory; TGAT: zeros). Attention is PyG's :class:`TransformerConv` on the
    bipartite graph neighbour slot → target.

    Args:
        in_dim: Size of the layer-0 node input.
        edge_dim: Edge feature size ``F`` (may be 0).
        time_dim: Time encoding size.
        out_dim: Embedding size (divisible by ``heads``).
        num_layers: Number of attention layers (1 or 2 in practice).
        heads: Attention heads.
        dropout: Attention dropout.
    """

    def __init__(self, in_dim: int, edge_dim: int, time_dim: int, out_dim: int,
                 num_layers: int, heads: int, dropout: float) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        if out_dim % heads:
            raise ValueError(f"out_dim {out_dim} is not divisible by heads {heads}")
        self.time_enc = make_time_encoder(time_dim)
        self.num_layers = num_layers
        self.convs = nn.ModuleList()
        for layer in range(num_layers):
            d_in = in_dim if layer == 0 else out_dim
            self.convs.append(TransformerConv((d_in, d_in), out_dim // heads, heads=heads,
                                              dropout=dropout, edge_dim=edge_dim + time_dim))

    def forward(self, node_input: Callable[[Tensor], Tensor], neighbors: NeighborFn,
                stream_t: Tensor, stream_feat: Tensor, nodes: Tensor, before: Tensor,
                t: Tensor) -> Tensor:
        """Embed ``nodes`` at times ``t`` with history before ``before``.

        Args:
            node_input: Layer-0 input, node ids ``[M]`` → ``[M, in_dim]``.
            neighbors: Neighbour sampler (see :data:`NeighborFn`).
            stream_t: Event times of the attached stream, ``float64 [E]``.
            stream_feat: Edge features of the attached stream, ``float32 [E, F]``.
            nodes: Node ids, ``int64 [B]``.
            before: Stream position bounding each node's history, ``int64 [B]``.
            t: Query times, ``float64 [B]``.

        Returns:
            ``float32 [B, out_dim]``.
        """
        return self._embed(node_input, neighbors, stream_t, stream_feat, nodes, before, t,
                           self.num_layers)

    def _embed(self, node_input: Callable[[Tensor], Tensor], neighbors: NeighborFn,
               stream_t: Tensor, stream_feat: Tensor, nodes: Tensor, before: Tensor, t: Tensor,
               layer: int) -> Tensor:
        if layer == 0:
            return node_input(nodes)
        # Embed each distinct (node, before, t) query once: bursts repeat nodes within a batch,
        # and sources recur in positive and negative pairs. Rows are independent, so this
        # changes no value.
        key = torch.stack([nodes.to(torch.float64), before.to(torch.float64), t], dim=1)
        uniq, inverse = torch.unique(key, dim=0, return_inverse=True)
        if len(uniq) < len(nodes):
            nodes, before, t = uniq[:, 0].long(), uniq[:, 1].long(), uniq[:, 2]
            return self._embed(node_input, neighbors, stream_t, stream_feat, nodes, before, t,
                               layer)[inverse]
        nbr, eid, valid = neighbors(nodes, before)  # each [B, n]
        rows, cols = valid.nonzero(as_tuple=True)
        nb_nodes, nb_eid = nbr[rows, cols], eid[rows, cols]  # [K]
        nb_t = stream_t[nb_eid]
        h_self = self._embed(node_input, neighbors, stream_t, stream_feat, nodes, before, t,
                             layer - 1)  # [B, d]
        h_nbr = self._embed(node_input, neighbors, stream_t, stream_feat, nb_nodes, nb_eid,
                            nb_t, layer - 1)  # [K, d]
        dt = (t[rows] - nb_t).to(h_self.dtype)  # Δt in float64 first, then float32
        slots = torch.arange(len(rows), device=nodes.device)
        return self.attend(layer, h_self, h_nbr, slots, rows, dt, stream_feat[nb_eid])

    def attend(self, layer: int, h_self: Tensor, h_src: Tensor, source: Tensor, target: Tensor,
               dt: Tensor, feat: Tensor, edge: Tensor | None = None) -> Tensor:
        """One attention layer: each target attends to its neighbour slots.

        A slot reads its layer ``l-1`` embedding from a table by index, so that slots
        sharing an embedding share its key and value projections (computed once per row).
        With ``edge``, slots read their edge attributes from a table too (``dt`` and
        ``feat`` then hold one row per distinct attribute), so that the edge projection is
        computed once per distinct ``(Δt, event)`` rather than once per slot; that path
        is for inference (no attention dropout).

        Args:
            layer: The layer computed, ``1..num_layers``.
            h_self: Layer ``l-1`` embeddings of the targets, ``[B, d]``.
            h_src: Layer ``l-1`` embeddings the slots read, ``[S, d]``.
            source: Row of ``h_src`` of each slot, ``int64 [K]``.
            target: Target of each slot, ``int64 [K]``.
            dt: Query time minus the slot's event time, ``float32 [K]`` (``[Q]`` with
                ``edge``).
            feat: Edge features of the slots' events, ``[K, F]`` (``[Q, F]`` with ``edge``).
            edge: Row of ``dt`` and ``feat`` of each slot, ``int64 [K]``, or None.

        Returns:
            Layer ``l`` embeddings of the targets, ``[B, out_dim]``.
        """
        edge_attr = torch.cat([self.time_enc(dt), feat], dim=-1)  # [K or Q, T + F]
        conv = self.convs[layer - 1]
        assert isinstance(conv, TransformerConv)
        if edge is None:
            out = conv((h_src, h_self), torch.stack([source, target]), edge_attr)
        else:
            if self.training and float(conv.dropout) > 0:
                raise RuntimeError("attention over shared edge rows has no dropout; call it "
                                   "in eval mode")
            out = _transformer_conv(conv, h_self, h_src, source, target, edge_attr, edge)
        return out.relu() if layer < self.num_layers else out


def _transformer_conv(conv: TransformerConv, h_self: Tensor, h_src: Tensor, source: Tensor,
                      target: Tensor, edge_attr: Tensor, edge: Tensor) -> Tensor:
    """``conv((h_src, h_self), [source, target], edge_attr[edge])`` without dropout, with the
    edge projection computed per row of ``edge_attr`` instead of per slot (PyG's
    :class:`TransformerConv` with ``concat``, root weight and no beta, as built above)."""
    heads, ch = conv.heads, conv.out_channels
    query = conv.lin_query(h_self).view(-1, heads, ch)  # [B, H, C]
    key = conv.lin_key(h_src).view(-1, heads, ch)  # [S, H, C]
    value = conv.lin_value(h_src).view(-1, heads, ch)
    e = conv.lin_edge(edge_attr).view(-1, heads, ch)  # [Q, H, C]
    e_k = e[edge]  # [K, H, C]
    alpha = (query[target] * (key[source] + e_k)).sum(dim=-1) / math.sqrt(ch)  # [K, H]
    alpha = softmax(alpha, target, num_nodes=len(h_self))
    msg = (value[source] + e_k) * alpha.unsqueeze(-1)  # [K, H, C]
    out = msg.new_zeros(len(h_self), heads, ch).index_add_(0, target, msg)
    return out.view(-1, heads * ch) + conv.lin_skip(h_self)


class LinkDecoder(nn.Module):
    """MLP scoring a (source, destination) embedding pair with a logit.

    Args:
        dim: Embedding size.
        hidden: Hidden size.
    """

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.lin_src = nn.Linear(dim, hidden)
        self.lin_dst = nn.Linear(dim, hidden)
        self.lin_out = nn.Linear(hidden, 1)

    def forward(self, z_src: Tensor, z_dst: Tensor) -> Tensor:
        """Logits ``[B]`` for embeddings ``[B, dim]`` of sources and destinations."""
        h = (self.lin_src(z_src) + self.lin_dst(z_dst)).relu()
        return self.lin_out(h).squeeze(-1)
