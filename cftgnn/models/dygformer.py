"""DyGFormer: a transformer over both endpoints' sequences of most recent interactions.

Yu et al., "Towards Better Dynamic Graph Learning: New Architecture and Unified Library"
(NeurIPS 2023), as implemented in DyGLib (``models/DyGFormer.py``), whose hyperparameters for
UCI and Wikipedia are this model's defaults (``conf/model/dygformer.yaml`` names them and
their source).

For a link ``(u, v, t)`` each endpoint's sequence is the node itself followed by its
``L − 1`` most recent interactions before the link, oldest first, then empty slots; a token
has four channels: the node's features, the interaction's edge features, the time encoding
of ``t − t_e`` (``Δt = 0`` for the node itself) and the **neighbour co-occurrence
encoding**: how often the token's node occurs in ``u``'s and in ``v``'s sequence, each count
through ``Linear(1, c) → ReLU → Linear(c, c)`` and summed. Empty slots have zero features,
zero time encoding and zero counts. The sequence is cut into patches of ``patch_size``
tokens, each channel projected to ``c`` dimensions, and the ``2·L/patch_size`` patches of
both endpoints go through pre-norm transformer layers together; each endpoint's embedding is
the output layer over the mean of its own patches. So ``u``'s embedding reads ``v``'s
sequence: the model embeds *pairs* (``DyGFormer.embed_pairs``).

Departures from DyGLib, each forced or without effect here:

* **Fixed sequence length.** DyGLib pads every sequence of a batch to the batch's longest
  (plus the node), so a link's score depends on which links share its batch; here every
  sequence has length ``L`` (``max_input_sequence_length``), which is what DyGLib uses
  whenever one node of the batch has ``L − 1`` earlier interactions (almost every batch of
  UCI and Wikipedia). A prediction is then a function of the link and its history alone,
  as exact replay needs.
* **Node channel.** The streams have no node features; DyGLib gives feature-less datasets
  all-zero ones, whose projection is its bias: the node channel is that learned vector
  (and so is the edge channel on a stream without edge features).
* **Time encoding.** Fixed frequencies (``make_time_encoder``, as
  every model here; DyGLib trains DyGFormer's).
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

#: One endpoint's window: ``(nbr, eid, valid)``, each ``[B, K]``, right-aligned as the index
#: returns them (oldest to newest, empty slots first).
Window = tuple[Tensor, Tensor, Tensor]


class _Bias(nn.Module):
    """The projection of an all-zero input: a learned vector (DyGLib's zero features)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.empty(dim).uniform_(-1.0, 1.0) / dim ** 0.5)

    def forward(self, x: Tensor) -> Tensor:
        """``[..., any] → [..., dim]``."""
        return self.bias.expand(*x.shape[:-1], len(self.bias))


def _projection(in_dim: int, out_dim: int) -> nn.Module:
    return nn.Linear(in_dim, out_dim) if in_dim > 0 else _Bias(out_dim)


class PairEncoder(nn.Module):
    """DyGFormer's encoder of a link's two endpoint sequences (see the module docstring).

    It also has the per-node interface of ``NeighborEmbedding``
    (the call embeds a node paired with itself; ``attend`` is not offered: DyGFormer's
    replay is pair-wise, ``cftgnn.replay.dygformer``).

    Args:
        edge_dim: Edge feature size ``F`` (may be 0).
        time_dim: Time encoding size ``T``.
        channel_dim: ``c``, each channel's size after projection.
        out_dim: Embedding size.
        seq_len: ``L``, the sequence length (the node and its ``L − 1`` most recent
            interactions).
        patch_size: Tokens per patch (divides ``L``).
        num_layers: Transformer layers.
        num_heads: Attention heads.
        dropout: Dropout of the transformer layers.
    """

    #: The hop radius: a link reads its endpoints' own interactions only.
    num_layers = 1

    def __init__(self, edge_dim: int, time_dim: int, channel_dim: int, out_dim: int,
                 seq_len: int, patch_size: int, num_layers: int, num_heads: int,
                 dropout: float) -> None:
        super().__init__()
        if seq_len < 2 or seq_len % patch_size:
            raise ValueError(f"max_input_sequence_length {seq_len} must be >= 2 and a "
                             f"multiple of patch_size {patch_size}")
        self.seq_len, self.patch_size = int(seq_len), int(patch_size)
        self.dropout = float(dropout)
        self.time_enc = make_time_encoder(time_dim)
        self.cooccurrence = nn.Sequential(nn.Linear(1, channel_dim), nn.ReLU(),
                                          nn.Linear(channel_dim, channel_dim))
        self.node_proj = _Bias(channel_dim)
        self.edge_proj = _projection(patch_size * edge_dim, channel_dim)
        self.time_proj = nn.Linear(patch_size * time_dim, channel_dim)
        self.cooc_proj = nn.Linear(patch_size * channel_dim, channel_dim)
        width = 4 * channel_dim
        self.transformers = nn.ModuleList(
            nn.TransformerEncoderLayer(width, num_heads, 4 * width, dropout, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(num_layers))
        self.output = nn.Linear(width, out_dim)

    def sequence(self, nodes: Tensor, window: Window) -> tuple[Tensor, Tensor]:
        """The node followed by its window's events, oldest first, then empty slots.

        Returns:
            ``(ids, eid)``, each ``int64 [B, L]``: the token's node (``-1`` for an empty
            slot) and its event (``-1`` for the node itself and empty slots).
        """
        nbr, eid, valid = window
        k = nbr.shape[1]
        count = valid.sum(dim=1, keepdim=True)  # [B, 1]
        j = torch.arange(self.seq_len - 1, device=nodes.device).unsqueeze(0)  # [1, L - 1]
        col = (k - count + j).clamp(0, max(k - 1, 0))  # the window's column of slot j + 1
        here = j < count  # [B, L - 1]
        ids_n = torch.where(here, nbr.gather(1, col), -1)
        eid_n = torch.where(here, eid.gather(1, col), -1)
        ids = torch.cat([nodes.unsqueeze(1), ids_n], dim=1)
        none = torch.full_like(nodes, -1).unsqueeze(1)
        return ids, torch.cat([none, eid_n], dim=1)

    def _counts(self, ids: Tensor, other: Tensor) -> Tensor:
        """How often each token's node occurs in its own and in the other sequence, ``[B, L, 2]``
        (0 for empty slots)."""
        own = ((ids.unsqueeze(2) == ids.unsqueeze(1)) & (ids.unsqueeze(1) >= 0)).sum(dim=2)
        cross = ((ids.unsqueeze(2) == other.unsqueeze(1)) & (other.unsqueeze(1) >= 0)).sum(dim=2)
        counts = torch.stack([own, cross], dim=2).to(torch.float32)
        return counts * (ids >= 0).unsqueeze(2)

    def _patches(self, x: Tensor) -> Tensor:
        """``[B, L, D] → [B, L / p, p·D]``: consecutive tokens side by side."""
        return x.reshape(x.shape[0], self.seq_len // self.patch_size, -1)

    def _tokens(self, t: Tensor, ids: Tensor, eid: Tensor, counts: Tensor, stream_t: Tensor,
                stream_feat: Tensor, weights: SlotWeights | None) -> Tensor:
        """One endpoint's patches after projection, ``[B, L / p, 4c]``."""
        real = eid >= 0  # [B, L]: the window's events
        e0 = eid.clamp(min=0)
        dt = torch.where(real, t.unsqueeze(1) - stream_t[e0], torch.zeros_like(stream_t[e0]))
        time = self.time_enc(dt.to(torch.float32).reshape(-1)).view(*ids.shape, -1)
        time = time * (ids >= 0).unsqueeze(2)  # empty slots: zero time encoding
        feat = stream_feat[e0] * real.unsqueeze(2)
        if weights is not None:  # soft removal: scale the event tokens' raw inputs
            w = torch.where(real, weights.on(e0.reshape(-1)).view(ids.shape).to(time.dtype),
                            torch.ones_like(time[..., 0]))
            time, feat = time * w.unsqueeze(2), feat * w.unsqueeze(2)
            counts = counts * w.unsqueeze(2)
        cooc = self.cooccurrence(counts.unsqueeze(3)).sum(dim=2)  # [B, L, c]
        channels = [self.node_proj(self._patches(time)), self.edge_proj(self._patches(feat)),
                    self.time_proj(self._patches(time)), self.cooc_proj(self._patches(cooc))]
        return torch.cat(channels, dim=2)

    def pair(self, src: Tensor, dst: Tensor, t: Tensor, src_window: Window, dst_window: Window,
             stream_t: Tensor, stream_feat: Tensor, weights: SlotWeights | None = None,
             log: AttentionLog | None = None) -> tuple[Tensor, Tensor]:
        """Embeddings of both endpoints of links given their windows.

        Args:
            src: Sources, ``int64 [B]``.
            dst: Destinations, ``int64 [B]``.
            t: Query times, ``float64 [B]``.
            src_window: The sources' windows (``Window``, ``K = L − 1``).
            dst_window: The destinations' windows.
            stream_t: Event times of the attached stream, ``float64 [E]``.
            stream_feat: Edge features of the attached stream, ``[E, F]``.
            weights: Soft removal: each event token's raw inputs (edge features, time
                encoding, co-occurrence counts) scaled by its event's weight, or None.
            log: Gets mass ``1/k`` on each of a sequence's ``k`` events, or None.

        Returns:
            ``([B, d], [B, d])``.

        Raises:
            RuntimeError: With ``weights`` or ``log`` in training mode with dropout.
        """
        if (weights is not None or log is not None) and self.training and self.dropout > 0:
            raise RuntimeError("soft removal has no dropout; call it in eval mode")
        ids_s, eid_s = self.sequence(src, src_window)
        ids_d, eid_d = self.sequence(dst, dst_window)
        if log is not None:
            for eid in (eid_s, eid_d):
                per = (eid >= 0).sum(dim=1, keepdim=True).clamp(min=1).expand_as(eid)
                log.add(eid[eid >= 0], 1.0 / per[eid >= 0].to(torch.float64))
        x = torch.cat([
            self._tokens(t, ids_s, eid_s, self._counts(ids_s, ids_d), stream_t, stream_feat,
                         weights),
            self._tokens(t, ids_d, eid_d, self._counts(ids_d, ids_s), stream_t, stream_feat,
                         weights)], dim=1)  # [B, 2L/p, 4c]
        x = self._encode(x)
        half = self.seq_len // self.patch_size
        return self.output(x[:, :half].mean(dim=1)), self.output(x[:, half:].mean(dim=1))

    def _encode(self, x: Tensor) -> Tensor:
        """The transformer layers, always on their plain (unfused) path.

        In eval mode, torch routes ``nn.TransformerEncoderLayer`` through a fused inference
        kernel (the "fast path"); on CUDA its logits part from the CPU's by up to 2.1e-5 where
        the plain path agrees within 9e-8 (H100, ``scripts/gpu/diagnose_precision.py``), so
        the fast path is turned off around the layers and restored after.
        """
        fast = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            for layer in self.transformers:
                x = layer(x)
        finally:
            torch.backends.mha.set_fastpath_enabled(fast)
        return x

    def forward(self, node_input: Callable[[Tensor], Tensor], neighbors: NeighborFn,
                stream_t: Tensor, stream_feat: Tensor, nodes: Tensor, before: Tensor,
                t: Tensor, weights: SlotWeights | None = None,
                log: AttentionLog | None = None) -> Tensor:
        """Per-node embeddings ``[B, d]``: each node paired with itself (the probe's node
        features; links are embedded as pairs, ``pair``)."""
        window = neighbors(nodes, before)
        return self.pair(nodes, nodes, t, window, window, stream_t, stream_feat, weights,
                         log)[0]

    def attend(self, layer: int, h_self: Tensor, h_src: Tensor, source: Tensor,
               target: Tensor, dt: Tensor, feat: Tensor, edge: Tensor | None = None
               ) -> Tensor:
        """Not offered: DyGFormer's endpoints read each other (``cftgnn.replay.dygformer``).

        Raises:
            NotImplementedError: Always.
        """
        raise NotImplementedError("DyGFormer embeds pairs; its replay is "
                                  "cftgnn.replay.dygformer")


class DyGFormer(MemorylessModel):
    """DyGFormer link predictor (no memory; see the module docstring).

    Args:
        num_nodes: Number of nodes ``N``.
        edge_dim: Edge feature size ``F``.
        time_dim: Time encoding size.
        channel_dim: Size of each of the four channels after projection.
        embedding_dim: Node embedding size.
        num_transformer_layers: Transformer layers.
        num_heads: Attention heads.
        max_input_sequence_length: ``L``: the node and its ``L − 1`` most recent
            interactions.
        patch_size: Tokens per patch.
        dropout: Transformer dropout.
        batch_size: History batch size ``B``.
    """

    def __init__(self, num_nodes: int, edge_dim: int, time_dim: int = 100,
                 channel_dim: int = 50, embedding_dim: int = 172,
                 num_transformer_layers: int = 2, num_heads: int = 2,
                 max_input_sequence_length: int = 32, patch_size: int = 1,
                 dropout: float = 0.1, batch_size: int = 200) -> None:
        super().__init__(num_nodes, edge_dim, batch_size, max_input_sequence_length - 1,
                         memory_dim=0)
        self.hparams = dict(num_nodes=num_nodes, edge_dim=edge_dim, time_dim=time_dim,
                            channel_dim=channel_dim, embedding_dim=embedding_dim,
                            num_transformer_layers=num_transformer_layers, num_heads=num_heads,
                            max_input_sequence_length=max_input_sequence_length,
                            patch_size=patch_size, dropout=dropout, batch_size=batch_size)
        self.num_layers = 1
        self.embedding = PairEncoder(edge_dim, time_dim, channel_dim, embedding_dim,
                                     max_input_sequence_length, patch_size,
                                     num_transformer_layers, num_heads, dropout)
        self.decoder = LinkDecoder(embedding_dim, embedding_dim)

    @property
    def encoder(self) -> PairEncoder:
        """The pair encoder (``embedding``, typed)."""
        enc = self.embedding
        assert isinstance(enc, PairEncoder)
        return enc

    def node_input(self, state: State) -> Tensor:
        """No node input: ``[N, 0]``."""
        return torch.zeros(self.num_nodes, 0, device=self.device)

    def embed_pairs(self, src: Tensor, dst: Tensor, t: Tensor, before: Tensor | None = None,
                    weights: SlotWeights | None = None, log: AttentionLog | None = None
                    ) -> tuple[Tensor, Tensor]:
        """Both endpoints' embeddings, each reading the other's sequence (see
        ``embed_pairs``)."""
        position = self._local(self.state.position)
        if before is None:
            before = torch.full_like(src, position)
        elif len(before) and int(before.min()) < position:
            raise ValueError(f"neighbour bounds must be >= the state position {position}")
        bound = int(before.max()) if len(before) else position
        neighbors = self._neighbor_fn(self.state, bound)
        return self.encoder.pair(src, dst, t, neighbors(src, before), neighbors(dst, before),
                                 self.event_times, self.edge_features, weights, log)

    def logits_of_windows(self, src: Tensor, dst: Tensor, t: Tensor, src_window: Window,
                          dst_window: Window) -> Tensor:
        """Logits ``[B]`` of links given their endpoints' windows (the replay's entry)."""
        z_src, z_dst = self.encoder.pair(src, dst, t, src_window, dst_window, self.event_times,
                                         self.edge_features)
        out: Tensor = self.decoder(z_src, z_dst)
        return out
