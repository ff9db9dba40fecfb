"""GraphMixer: an MLP-Mixer over each endpoint's most recent interactions, without memory.

Cong et al., "Do We Really Need Complicated Model Architectures for Temporal Networks?"
(ICLR 2023), as implemented in DyGLib (``models/GraphMixer.py``, Yu et al., NeurIPS 2023), whose
hyperparameters for UCI and Wikipedia are this model's defaults (``conf/model/graphmixer.yaml``
names them and their source).

* **Link encoder.** A node's window is its ``K`` most recent interactions before the query
  (right-aligned, oldest to newest, as the index returns them). Token ``j`` is
  ``[edge_feat(e_j) ‖ cos-time(t − t_j)]`` with the fixed time encoding of
  ``make_time_encoder`` (GraphMixer's, not trained); empty slots are
  zero tokens (DyGLib pads with zero features and zeroes their time encoding). A linear
  projection to ``C`` channels, ``L`` MLP-Mixer blocks (token mixing, then channel mixing, each
  a pre-norm two-layer GELU MLP with a residual), the mean over the ``K`` tokens and an output
  layer give the node's embedding.
* **Node encoder.** GraphMixer adds the mean node features of the 1-hop neighbours within the
  last ``time_gap`` (2000) interactions. The streams here have no node features, and DyGLib
  gives feature-less datasets all-zero node features, so that term is the zero vector there
  too (the output layer reads ``[link ‖ 0]``, i.e. only the link encoder plus a bias); it is
  therefore left out, and with it any dependence on the 2000-interaction window: a removal
  changes only the ``K``-windows that hold it.
* **Link decoder.** ``LinkDecoder`` (DyGLib's ``MergeLayer``: one
  hidden ReLU layer over the two embeddings).

Without memory the model's state is the history position and the removal mask (like TGAT),
and one embedding is a function of the query time and the events of its window, which is what
the batched replay (``cftgnn.replay.graphmixer``) computes once per distinct window.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from cftgnn.models.base import MemorylessModel
from cftgnn.models.layers import (
    AttentionLog,
    LinkDecoder,
    NeighborFn,
    SlotWeights,
    make_time_encoder,
)
from cftgnn.models.state import State


def _feed_forward(dim: int, expansion: float, dropout: float) -> nn.Sequential:
    """DyGLib's ``FeedForwardNet``: ``dim → ⌊expansion·dim⌋ → dim`` with GELU and dropout."""
    hidden = int(expansion * dim)
    return nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(hidden, dim), nn.Dropout(dropout))


class MixerBlock(nn.Module):
    """One MLP-Mixer block: token mixing, then channel mixing, each pre-norm with a residual.

    Args:
        num_tokens: Tokens per window ``K``.
        channels: Channels ``C``.
        token_expansion: Hidden size of the token MLP over ``K``.
        channel_expansion: Hidden size of the channel MLP over ``C``.
        dropout: Dropout inside both MLPs.
    """

    def __init__(self, num_tokens: int, channels: int, token_expansion: float,
                 channel_expansion: float, dropout: float) -> None:
        super().__init__()
        self.token_norm = nn.LayerNorm(num_tokens)
        self.token_mlp = _feed_forward(num_tokens, token_expansion, dropout)
        self.channel_norm = nn.LayerNorm(channels)
        self.channel_mlp = _feed_forward(channels, channel_expansion, dropout)

    def forward(self, x: Tensor) -> Tensor:
        """``[B, K, C] → [B, K, C]``."""
        h = self.token_mlp(self.token_norm(x.transpose(1, 2))).transpose(1, 2)  # mix tokens
        x = x + h
        return x + self.channel_mlp(self.channel_norm(x))  # mix channels


class MixerLinkEncoder(nn.Module):
    """GraphMixer's link encoder over each query's window of ``K`` most recent interactions.

    It has the interface of ``TemporalAttentionEmbedding`` that
    ``TemporalModel`` and the batched replay read
    (``NeighborEmbedding``): one "layer" (the hop radius; the
    mixer blocks all work on that one window), the call with a neighbour sampler, and
    ``attend`` over a window given slot by slot.

    Args:
        edge_dim: Edge feature size ``F`` (may be 0).
        time_dim: Time encoding size ``T``.
        channels: Mixer channels ``C`` (DyGLib: the edge feature size, 172 after its padding).
        out_dim: Embedding size.
        num_tokens: Window length ``K`` (the model's ``num_neighbors``).
        num_blocks: MLP-Mixer blocks.
        token_expansion: Token-MLP expansion factor.
        channel_expansion: Channel-MLP expansion factor.
        dropout: Dropout in the mixer MLPs.
    """

    #: The hop radius: an embedding reads its node's own window only.
    num_layers = 1

    def __init__(self, edge_dim: int, time_dim: int, channels: int, out_dim: int,
                 num_tokens: int, num_blocks: int, token_expansion: float,
                 channel_expansion: float, dropout: float) -> None:
        super().__init__()
        self.num_tokens = int(num_tokens)
        self.dropout = float(dropout)
        self.time_enc = make_time_encoder(time_dim)
        self.projection = nn.Linear(edge_dim + time_dim, channels)
        self.blocks = nn.ModuleList(
            MixerBlock(num_tokens, channels, token_expansion, channel_expansion, dropout)
            for _ in range(num_blocks))
        self.output = nn.Linear(channels, out_dim)

    def encode(self, tokens: Tensor) -> Tensor:
        """Embeddings ``[B, out_dim]`` of windows of raw tokens ``[B, K, F + T]``."""
        h = self.projection(tokens)  # [B, K, C]
        for block in self.blocks:
            h = block(h)
        return self.output(h.mean(dim=1))

    def windows(self, num_targets: int, target: Tensor, column: Tensor, dt: Tensor,
                feat: Tensor, weight: Tensor | None = None) -> Tensor:
        """Embeddings ``[B, out_dim]`` of windows given slot by slot.

        Args:
            num_targets: Windows ``B``.
            target: Window of each slot, ``int64 [S]``.
            column: Column of each slot in its window, ``int64 [S]`` (``< K``).
            dt: Query time minus the slot's event time, ``float32 [S]``.
            feat: Edge features of the slots' events, ``[S, F]``.
            weight: Soft removal, a factor per slot on its raw token, ``[S]``, or None.
        """
        vals = torch.cat([feat, self.time_enc(dt)], dim=-1)  # [S, F + T], DyGLib's order
        if weight is not None:
            vals = vals * weight.to(vals.dtype).unsqueeze(-1)
        tokens = vals.new_zeros(num_targets, self.num_tokens, vals.shape[-1])
        tokens = tokens.index_put((target, column), vals)  # empty slots stay zero tokens
        return self.encode(tokens)

    def forward(self, node_input: Callable[[Tensor], Tensor], neighbors: NeighborFn,
                stream_t: Tensor, stream_feat: Tensor, nodes: Tensor, before: Tensor,
                t: Tensor, weights: SlotWeights | None = None,
                log: AttentionLog | None = None) -> Tensor:
        """Embed ``nodes`` at times ``t`` from their windows before ``before``.

        ``node_input`` is not read (there is no node encoder; see the module docstring).
        With ``weights`` each slot's raw token is multiplied by its event's weight: weight 1
        is the plain embedding bit for bit, weight 0 turns the slot into an empty one (a zero
        token in place; a hard removal instead moves the older events one column on and lets
        one more in, so the two agree only for the oldest event of a window that is not
        full). With
        ``log``, each of a window's ``k`` events gets mass ``1/k``: GraphMixer has no
        attention, and its mean pooling treats the tokens of a window alike.

        Args:
            node_input: Unused (the model has no node input).
            neighbors: Neighbour sampler (see ``NeighborFn``).
            stream_t: Event times of the attached stream, ``float64 [E]``.
            stream_feat: Edge features of the attached stream, ``float32 [E, F]``.
            nodes: Node ids, ``int64 [B]``.
            before: Stream position bounding each node's history, ``int64 [B]``.
            t: Query times, ``float64 [B]``.
            weights: Soft removal of events (stream positions), or None.
            log: Where to add each window's uniform mass on listed events, or None.

        Returns:
            ``float32 [B, out_dim]``.

        Raises:
            RuntimeError: With ``weights`` or ``log`` in training mode with dropout.
        """
        if (weights is not None or log is not None) and self.training and self.dropout > 0:
            raise RuntimeError("soft removal has no dropout; call it in eval mode")
        if log is None and len(nodes) > 1:
            # one window per distinct (node, before, t): a source recurs in the positive and
            # negative pairs of a training batch; rows are independent, so no value changes
            key = torch.stack([nodes.to(torch.float64), before.to(torch.float64), t], dim=1)
            uniq, inverse = torch.unique(key, dim=0, return_inverse=True)
            if len(uniq) < len(nodes):
                return self(node_input, neighbors, stream_t, stream_feat, uniq[:, 0].long(),
                            uniq[:, 1].long(), uniq[:, 2], weights)[inverse]
        _, eid, valid = neighbors(nodes, before)  # each [B, K]
        rows, cols = valid.nonzero(as_tuple=True)
        slot_eid = eid[rows, cols]  # [S]
        dt = (t[rows] - stream_t[slot_eid]).to(torch.float32)  # Δt in float64 first
        if log is not None:
            per_window = valid.sum(dim=1).clamp(min=1).to(torch.float64)  # [B]
            log.add(slot_eid, 1.0 / per_window[rows])
        weight = None if weights is None else weights.on(slot_eid)
        return self.windows(len(nodes), rows, cols, dt, stream_feat[slot_eid], weight)

    def attend(self, layer: int, h_self: Tensor, h_src: Tensor, source: Tensor,
               target: Tensor, dt: Tensor, feat: Tensor, edge: Tensor | None = None
               ) -> Tensor:
        """The windows of targets given as slots, as the batched replay hands them over.

        The slots of each target come in window order (oldest first) and fill the right end
        of its window (the index's right alignment), so a slot's column is ``K`` minus the
        number of its target's slots from it onwards. ``h_src`` and ``source`` (the layer-0
        identities of the neighbours) are not read: the embedding is a function of the
        query time and the window's events only.

        Args:
            layer: 1 (the only layer).
            h_self: Layer-0 rows of the targets, ``[B, 0]`` (only their number is read).
            h_src: Unused.
            source: Unused.
            target: Target of each slot, ``int64 [S]``.
            dt: Query time minus the slot's event time, ``float32 [S]`` (``[Q]`` with
                ``edge``).
            feat: Edge features of the slots' events, ``[S, F]`` (``[Q, F]`` with ``edge``).
            edge: Row of ``dt`` and ``feat`` of each slot, ``int64 [S]``, or None.

        Returns:
            ``[B, out_dim]``.
        """
        if self.training and self.dropout > 0:
            raise RuntimeError("the batched window pass has no dropout; call it in eval mode")
        num_targets = len(h_self)
        if edge is not None:
            dt, feat = dt[edge], feat[edge]
        order = torch.sort(target, stable=True).indices  # slots grouped by target, in order
        counts = torch.bincount(target, minlength=num_targets)  # [B]
        starts = torch.cumsum(counts, 0) - counts
        rank = torch.empty_like(target)
        rank[order] = torch.arange(len(target), device=target.device) - starts[target[order]]
        column = self.num_tokens - counts[target] + rank
        return self.windows(num_targets, target, column, dt, feat)


class GraphMixer(MemorylessModel):
    """GraphMixer link predictor (no memory; see the module docstring).

    Soft removal (``predict_soft``) scales the raw
    token of every window slot that reads an event: weight 0 empties the slot in place, which
    equals removing the event only where it is the oldest event of windows that are not full
    (a removal moves the older events one column on, the mixer's token MLP tells columns
    apart, and a full window lets one more event in; docs/design.md §8, "Soft removal").
    ``attention_by_event`` reports the uniform ``1/k``
    pooling weight of each of a window's ``k`` slots (GraphMixer has no attention).

    Args:
        num_nodes: Number of nodes ``N``.
        edge_dim: Edge feature size ``F``.
        time_dim: Time encoding size.
        channels: Mixer channels.
        embedding_dim: Node embedding size.
        num_mixer_layers: MLP-Mixer blocks.
        token_expansion: Token-MLP expansion factor.
        channel_expansion: Channel-MLP expansion factor.
        num_neighbors: Window length ``K`` (most recent interactions per node).
        dropout: Dropout in the mixer MLPs.
        batch_size: History batch size ``B``.
    """

    def __init__(self, num_nodes: int, edge_dim: int, time_dim: int = 100, channels: int = 172,
                 embedding_dim: int = 172, num_mixer_layers: int = 2,
                 token_expansion: float = 0.5, channel_expansion: float = 4.0,
                 num_neighbors: int = 20, dropout: float = 0.4, batch_size: int = 200) -> None:
        super().__init__(num_nodes, edge_dim, batch_size, num_neighbors, memory_dim=0)
        self.hparams = dict(num_nodes=num_nodes, edge_dim=edge_dim, time_dim=time_dim,
                            channels=channels, embedding_dim=embedding_dim,
                            num_mixer_layers=num_mixer_layers, token_expansion=token_expansion,
                            channel_expansion=channel_expansion, num_neighbors=num_neighbors,
                            dropout=dropout, batch_size=batch_size)
        self.num_layers = 1
        self.embedding = MixerLinkEncoder(edge_dim, time_dim, channels, embedding_dim,
                                          num_neighbors, num_mixer_layers, token_expansion,
                                          channel_expansion, dropout)
        self.decoder = LinkDecoder(embedding_dim, embedding_dim)

    def node_input(self, state: State) -> Tensor:
        """No node input: ``[N, 0]``."""
        return torch.zeros(self.num_nodes, 0, device=self.device)
