"""Building blocks shared by TGN and TGAT: time encoding, temporal attention, link decoder."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import numpy as np
import torch
from torch import Tensor, nn
from torch_geometric.nn import TransformerConv
from torch_geometric.nn.models.tgn import TimeEncoder
from torch_geometric.utils import scatter, softmax

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


def _match(positions: Tensor, eid: Tensor) -> tuple[Tensor, Tensor]:
    """Row of each ``eid`` in the ascending ``positions`` (``int64 [K]``, clamped) and
    whether it is there (``bool [K]``)."""
    if len(positions) == 0:
        zero = torch.zeros_like(eid)
        return zero, torch.zeros_like(eid, dtype=torch.bool)
    row = torch.searchsorted(positions, eid).clamp_(max=len(positions) - 1)
    return row, positions[row] == eid


def _ascending(positions: Tensor) -> tuple[Tensor, Tensor]:
    """``positions`` (``int64 [m]``) sorted, and the permutation that sorts them.

    Raises:
        ValueError: If a position is listed twice.
    """
    order = torch.argsort(positions)
    pos = positions[order]
    if len(pos) > 1 and bool((pos[1:] == pos[:-1]).any()):
        raise ValueError("an event is listed twice")
    return pos, order


class SlotWeights:
    """Soft removal: a weight on every attention slot that reads one of the listed events.

    Slots reading an unlisted event have weight 1 (docs/design.md §8, "Soft removal").

    Args:
        positions: Stream positions of the weighted events, distinct, ``int64 [m]``.
        weights: Their weights in ``[0, 1]``, ``float [m]`` (gradients flow through them).

    Raises:
        ValueError: On a length mismatch or an event listed twice.
    """

    def __init__(self, positions: Tensor, weights: Tensor) -> None:
        if positions.shape != weights.shape or positions.dim() != 1:
            raise ValueError(f"one weight per event: {tuple(weights.shape)} weights for "
                             f"{tuple(positions.shape)} events")
        self.positions, order = _ascending(positions)
        self.weights = weights[order]

    def on(self, eid: Tensor) -> Tensor:
        """The weight of slots reading events ``eid`` (``int64 [K]``), ``float [K]``."""
        row, hit = _match(self.positions, eid)
        if len(self.positions) == 0:
            return torch.ones(len(eid), dtype=self.weights.dtype, device=eid.device)
        return torch.where(hit, self.weights[row], torch.ones_like(self.weights[row]))


class AttentionLog:
    """Attention mass on listed events, summed over layers, targets and slots.

    Each slot adds its attention probability (averaged over heads) times the number of times
    its target occurs in the prediction's computation tree (a target embedded once for
    several identical queries counts once per query), so the mass does not depend on how
    the computation shares rows.

    Args:
        positions: Stream positions of the events to log, distinct, ``int64 [m]``.
    """

    def __init__(self, positions: Tensor) -> None:
        self.positions, self._order = _ascending(positions)
        self._mass = torch.zeros(len(positions), dtype=torch.float64, device=positions.device)

    def add(self, eid: Tensor, mass: Tensor) -> None:
        """Add ``mass`` (``float [K]``) to the events ``eid`` (``int64 [K]``) that are listed."""
        row, hit = _match(self.positions, eid)
        self._mass.index_add_(0, row[hit], mass[hit].detach().to(torch.float64))

    @property
    def mass(self) -> Tensor:
        """The mass of each event in the order given, ``float64 [m]``."""
        out = torch.empty_like(self._mass)
        out[self._order] = self._mass
        return out


def weighted_softmax(alpha: Tensor, target: Tensor, num_targets: int,
                     weight: Tensor) -> Tensor:
    """PyG's sparse softmax with a weight per slot (soft removal).

    ``alpha'_k = w_k·exp(a_k − m) / (Σ_j w_j·exp(a_j − m) + 1e-16)`` over the slots ``j`` of
    ``k``'s target, where PyG's ``torch_geometric.utils.softmax`` computes
    ``exp(a_k − m) / (Σ_j exp(a_j − m) + 1e-16)``. The shift ``m`` (detached, as in PyG) is the
    maximum over the target's slots of positive weight: with every weight 1 it is PyG's
    maximum and the result is PyG's bit for bit (``x·1.0 = x``); a slot of weight 0 then adds
    exactly 0 to the sum and nothing to the shift, so it is computed as if it were absent,
    and a target whose slots all have weight 0 gets zero attention, like a target without
    neighbours. The exponent is capped at 80 so that a weight-0 slot far above the shift
    never makes ``0·inf``.

    Args:
        alpha: Attention scores, ``[K, H]``.
        target: Target of each slot, ``int64 [K]``.
        num_targets: Number of targets ``B``.
        weight: Weight of each slot in ``[0, 1]``, ``[K]``.

    Returns:
        Attention probabilities, ``[K, H]``.
    """
    live = (weight > 0).unsqueeze(-1)  # [K, 1]
    shift = scatter(alpha.detach().masked_fill(~live, -math.inf), target, 0,
                    dim_size=num_targets, reduce="max")  # [B, H]
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    out = (alpha - shift.index_select(0, target)).clamp(max=80.0).exp()
    out = out * weight.to(alpha.dtype).unsqueeze(-1)
    out_sum = scatter(out, target, 0, dim_size=num_targets, reduce="sum") + 1e-16
    return out / out_sum.index_select(0, target)


class NeighborEmbedding(Protocol):
    """What ``TemporalModel`` and the batched replay
    (``cftgnn.replay.batched``) read of a model's embedding: the layers (the hop radius),
    the time encoding, the call that embeds queries through a neighbour sampler, and
    ``attend``, one layer over neighbour slots given one by one.
    ``TemporalAttentionEmbedding`` (TGN, TGAT) and GraphMixer's link encoder
    (``cftgnn.models.graphmixer.MixerLinkEncoder``) have it."""

    num_layers: int
    time_enc: TimeEncoder

    def __call__(self, node_input: Callable[[Tensor], Tensor], neighbors: NeighborFn,
                 stream_t: Tensor, stream_feat: Tensor, nodes: Tensor, before: Tensor,
                 t: Tensor, weights: SlotWeights | None = None,
                 log: AttentionLog | None = None) -> Tensor:
        """Embeddings ``[B, d]`` of ``nodes`` at times ``t`` with history before ``before``."""

    def attend(self, layer: int, h_self: Tensor, h_src: Tensor, source: Tensor, target: Tensor,
               dt: Tensor, feat: Tensor, edge: Tensor | None = None) -> Tensor:
        """Layer ``layer`` of the targets from their slots (see
        ``TemporalAttentionEmbedding.attend``), ``[B, d]``."""


class TemporalAttentionEmbedding(nn.Module):
    """``L`` layers of graph attention over each node's most recent neighbours.

    Layer ``l`` embeds node ``i`` at query time ``t`` with history before stream position
    ``p`` from its own layer ``l-1`` embedding and those of its ``n`` most recent neighbours
    ``j`` (linked by event ``e_j < p`` at time ``t_j``), each taken at ``(t_j, e_j)``, with edge
    attributes ``[cos-time(t - t_j), edge_feat(e_j)]``. Layer 0 is a node input given by the
    model (TGN: memory; TGAT: zeros). Attention is PyG's ``TransformerConv`` on the
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
                t: Tensor, weights: SlotWeights | None = None,
                log: AttentionLog | None = None) -> Tensor:
        """Embed ``nodes`` at times ``t`` with history before ``before``.

        With ``weights`` or ``log`` every layer attends through ``attend_soft``
        (explicit query, key and value, no attention dropout): ``weights`` scale the
        attention of every slot, at every layer, that reads a listed event
        (``weighted_softmax``), and ``log`` collects the attention on listed events.
        Without both, the path is the plain one (``attend``).

        Args:
            node_input: Layer-0 input, node ids ``[M]`` → ``[M, in_dim]``.
            neighbors: Neighbour sampler (see ``NeighborFn``).
            stream_t: Event times of the attached stream, ``float64 [E]``.
            stream_feat: Edge features of the attached stream, ``float32 [E, F]``.
            nodes: Node ids, ``int64 [B]``.
            before: Stream position bounding each node's history, ``int64 [B]``.
            t: Query times, ``float64 [B]``.
            weights: Soft removal of events (stream positions), or None.
            log: Where to add the attention on listed events, or None.

        Returns:
            ``float32 [B, out_dim]``.

        Raises:
            RuntimeError: With ``weights`` or ``log`` in training mode with dropout.
        """
        soft = weights is not None or log is not None
        if soft and self.training and any(float(c.dropout) > 0 for c in self.convs
                                          if isinstance(c, TransformerConv)):
            raise RuntimeError("soft attention has no dropout; call it in eval mode")
        count = (torch.ones(len(nodes), dtype=torch.float64, device=nodes.device)
                 if log is not None else None)
        return self._embed(node_input, neighbors, stream_t, stream_feat, nodes, before, t,
                           self.num_layers, weights if soft else None, log, count, soft)

    def _embed(self, node_input: Callable[[Tensor], Tensor], neighbors: NeighborFn,
               stream_t: Tensor, stream_feat: Tensor, nodes: Tensor, before: Tensor, t: Tensor,
               layer: int, weights: SlotWeights | None = None, log: AttentionLog | None = None,
               count: Tensor | None = None, soft: bool = False) -> Tensor:
        """``count`` (``float64 [B]``, with ``log``): how often each query occurs in the
        computation tree."""
        if layer == 0:
            return node_input(nodes)
        # Embed each distinct (node, before, t) query once: bursts repeat nodes within a batch,
        # and sources recur in positive and negative pairs. Rows are independent, so this
        # changes no value.
        key = torch.stack([nodes.to(torch.float64), before.to(torch.float64), t], dim=1)
        uniq, inverse = _sorted_distinct_rows(key)
        if len(uniq) < len(nodes):
            nodes, before, t = uniq[:, 0].long(), uniq[:, 1].long(), uniq[:, 2]
            if count is not None:  # a shared row stands for every query it replaces
                count = count.new_zeros(len(uniq)).index_add_(0, inverse, count)
            return self._embed(node_input, neighbors, stream_t, stream_feat, nodes, before, t,
                               layer, weights, log, count, soft)[inverse]
        nbr, eid, valid = neighbors(nodes, before)  # each [B, n]
        rows, cols = valid.nonzero(as_tuple=True)
        nb_nodes, nb_eid = nbr[rows, cols], eid[rows, cols]  # [K]
        nb_t = stream_t[nb_eid]
        nb_count = None if count is None else count[rows]  # [K]
        h_self = self._embed(node_input, neighbors, stream_t, stream_feat, nodes, before, t,
                             layer - 1, weights, log, count, soft)  # [B, d]
        h_nbr = self._embed(node_input, neighbors, stream_t, stream_feat, nb_nodes, nb_eid,
                            nb_t, layer - 1, weights, log, nb_count, soft)  # [K, d]
        dt = (t[rows] - nb_t).to(h_self.dtype)  # Δt in float64 first, then float32
        if not soft:
            h_nbr, slots = _zero_rows_shared(h_nbr, torch.arange(len(rows), device=nodes.device))
            return self.attend(layer, h_self, h_nbr, slots, rows, dt, stream_feat[nb_eid])
        w = None if weights is None else weights.on(nb_eid)  # [K]
        out, alpha = self.attend_soft(layer, h_self, h_nbr, rows, dt, stream_feat[nb_eid], w)
        if log is not None and nb_count is not None:
            log.add(nb_eid, alpha * nb_count)
        return out

    def attend_soft(self, layer: int, h_self: Tensor, h_src: Tensor, target: Tensor,
                    dt: Tensor, feat: Tensor, weight: Tensor | None = None
                    ) -> tuple[Tensor, Tensor]:
        """One attention layer with a weight per slot (soft removal), without dropout.

        PyG's ``TransformerConv`` (``concat``, root weight, no beta, as built here)
        computed step by step as ``TransformerConv.forward`` does, with
        ``weighted_softmax`` in place of PyG's softmax when ``weight`` is given.

        Args:
            layer: The layer computed, ``1..num_layers``.
            h_self: Layer ``l-1`` embeddings of the targets, ``[B, d]``.
            h_src: Layer ``l-1`` embedding of each slot, ``[K, d]``.
            target: Target of each slot, ``int64 [K]``.
            dt: Query time minus the slot's event time, ``float32 [K]``.
            feat: Edge features of the slots' events, ``[K, F]``.
            weight: Weight of each slot in ``[0, 1]``, ``[K]``, or None (all 1).

        Returns:
            ``(out [B, out_dim], alpha [K])``: the layer ``l`` embeddings of the targets and
            each slot's attention probability averaged over heads.
        """
        conv = self.convs[layer - 1]
        assert isinstance(conv, TransformerConv)
        heads, ch = conv.heads, conv.out_channels
        edge_attr = torch.cat([self.time_enc(dt), feat], dim=-1)  # [K, T + F]
        query = conv.lin_query(h_self).view(-1, heads, ch)  # [B, H, C]
        h_src, _ = _zero_rows_shared(h_src, target)  # [K or 1, d]: broadcast below
        key = conv.lin_key(h_src).view(-1, heads, ch)  # [K or 1, H, C]
        value = conv.lin_value(h_src).view(-1, heads, ch)
        e = conv.lin_edge(edge_attr).view(-1, heads, ch)  # [K, H, C]
        score = (query[target] * (key + e)).sum(dim=-1) / math.sqrt(ch)  # [K, H]
        if weight is None:
            alpha = softmax(score, target, num_nodes=len(h_self))
        else:
            alpha = weighted_softmax(score, target, len(h_self), weight)
        msg = (value + e) * alpha.unsqueeze(-1)  # [K, H, C]
        out = msg.new_zeros(len(h_self), heads, ch).index_add_(0, target, msg)
        out = out.view(-1, heads * ch) + conv.lin_skip(h_self)
        return (out.relu() if layer < self.num_layers else out), alpha.mean(dim=-1)

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


def _sorted_distinct_rows(key: Tensor) -> tuple[Tensor, Tensor]:
    """``torch.unique(key, dim=0, return_inverse=True)`` of a ``float64 [M, 3]`` key: the
    distinct rows in lexicographic order and each row's index among them. On the CPU by a
    NumPy lexsort (the same rows in the same order, about ten times faster on the few
    hundred rows of an embedding's layer); elsewhere torch's own."""
    if key.device.type != "cpu" or len(key) == 0:
        return torch.unique(key, dim=0, return_inverse=True)
    k = key.numpy()
    order = np.lexsort(k.T[::-1])  # first column first
    ordered = k[order]
    new = np.ones(len(k), dtype=bool)
    new[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    inverse = np.empty(len(k), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return torch.from_numpy(ordered[new]), torch.from_numpy(inverse)


def _zero_rows_shared(h_src: Tensor, source: Tensor) -> tuple[Tensor, Tensor]:
    """``(h_src, source)``, or, when every row of ``h_src`` is zero (TGAT's layer-0 input,
    zeros for every node), its first row alone and every slot reading it: the key and value
    projections of a zero row are their biases whatever the weights (``0·w`` sums to ``±0``
    and ``b + ±0 = b``), so one row gives every slot the same floats without the ``[K, d]``
    matrix products (about half of a two-layer TGAT embedding's arithmetic)."""
    if len(h_src) > 1 and not bool(h_src.any()):
        return h_src[:1], torch.zeros_like(source)
    return h_src, source


def _transformer_conv(conv: TransformerConv, h_self: Tensor, h_src: Tensor, source: Tensor,
                      target: Tensor, edge_attr: Tensor, edge: Tensor) -> Tensor:
    """``conv((h_src, h_self), [source, target], edge_attr[edge])`` without dropout, with the
    edge projection computed per row of ``edge_attr`` instead of per slot (PyG's
    ``TransformerConv`` with ``concat``, root weight and no beta, as built above)."""
    heads, ch = conv.heads, conv.out_channels
    h_src, source = _zero_rows_shared(h_src, source)
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

    def grid(self, z_src: Tensor, z_dst: Tensor, chunk: int = 1 << 22) -> Tensor:
        """Logits ``[S, T]`` of every pair of ``z_src [S, dim]`` and ``z_dst [T, dim]``:
        ``forward``'s arithmetic with each row projected once, the pairs' hidden layer
        broadcast in chunks of at most ``chunk`` values (a source against D
        destinations, for each of P removal sets)."""
        a, b = self.lin_src(z_src), self.lin_dst(z_dst)  # [S, H], [T, H]
        w, c = self.lin_out.weight[0], self.lin_out.bias[0]  # [H], []
        step = max(1, chunk // max(1, b.numel()))
        out = [(a[lo:lo + step, None, :] + b[None]).relu_() @ w + c
               for lo in range(0, len(a), step)]
        return torch.cat(out) if out else a.new_zeros(0, len(b))
