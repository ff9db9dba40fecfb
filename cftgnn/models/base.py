"""One interface for every temporal link-prediction model (TGN, TGAT, ...).

A model is *attached* to an event stream and replays its history in fixed batches. Batch ``b``
holds the events with original ids in ``[b·B, (b+1)·B)`` (docs/design.md §2); removing an event
deletes it from its batch and shifts nothing. ``advance(start, end, removed_mask)`` consumes the
events with ids in ``[start, end)`` batch by batch; when ``end`` is not a batch boundary the
events ``[⌊end/B⌋·B, end)`` form a final partial batch, after which the state is *closed*: it
can be predicted from, snapshotted and restored, but not advanced (restore a snapshot taken at
a batch boundary to continue).

Inside a batch the model first applies the messages left pending by the previous batch, then
stores this batch's messages as pending (TGN's ordering, so that training on a batch sees only
earlier batches). ``predict`` applies the pending messages on the fly, without storing them,
so it always predicts from the whole history.

Streams with deleted events keep their original ids (``stream.without`` returns them); pass
them as ``event_ids`` to ``TemporalModel.attach`` and the same batches are formed, so
"replay without ``s``" and "replay with ``s`` masked" are the same computation.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn

from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import EventStream, IntArray
from cftgnn.models.layers import (
    AttentionLog,
    LinkDecoder,
    NeighborEmbedding,
    NeighborFn,
    SlotWeights,
    TemporalAttentionEmbedding,
)
from cftgnn.models.neighbors import recent_kept_neighbors
from cftgnn.models.protocol import (
    BoolArray,
    ModelStateError,
    ReplayableModel,
    as_removed_mask,
    attached,
    check_advance,
    kept_batches,
)
from cftgnn.models.state import State


def _to_tensor(x: npt.ArrayLike | Tensor, dtype: torch.dtype, dev: torch.device) -> Tensor:
    """A 1-D tensor of ``x``; arrays are copied, so read-only stream arrays are fine."""
    if isinstance(x, Tensor):
        return x.to(device=dev, dtype=dtype).reshape(-1)
    return torch.from_numpy(np.array(x)).to(device=dev, dtype=dtype).reshape(-1)


@contextmanager
def eval_mode(model: ReplayableModel | torch.nn.Module) -> Iterator[None]:
    """Put ``model`` in eval mode (no dropout) and no-grad, restoring its mode afterwards."""
    was_training = model.training
    if was_training:  # train()/eval() walk every submodule: skip them when there is no change
        model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        if was_training:
            model.train()


def stream_tensor(array: npt.NDArray[Any], device: torch.device) -> Tensor:
    """One of a stream's arrays as a tensor on ``device``: on the CPU the stream's own
    memory (no copy: on a stream of tgbl-flight's 67M events with 16 features the copies
    of ``src``, ``dst``, ``t`` and the features took 5.5 GiB), elsewhere a copy there.

    The stream's arrays are read-only and the models only read these tensors (torch has no
    read-only tensors, hence the warning it gives, silenced here).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable", category=UserWarning)
        shared = torch.from_numpy(array)
    return shared if device.type == "cpu" else shared.to(device)


class TemporalModel(nn.Module, ABC):
    """Base class of the temporal models: state verbs, masked replay, batched prediction.

    Subclasses build ``self.embedding`` (a ``NeighborEmbedding``: TGN and TGAT a
    ``TemporalAttentionEmbedding``, GraphMixer its link encoder)
    and ``self.decoder`` (a ``LinkDecoder``), set ``self.num_layers`` and implement
    ``apply_batch`` and ``node_input``.

    Args:
        num_nodes: Number of nodes ``N`` of the streams this model runs on.
        edge_dim: Edge feature size ``F`` of those streams.
        batch_size: History batch size ``B`` (sets the batch boundaries).
        num_neighbors: Most recent neighbours attended to per node and layer.
        memory_dim: Size of the node memory (0 for memory-less models).
    """

    embedding: NeighborEmbedding
    decoder: LinkDecoder
    #: Attention layers (the default hop radius of the candidates).
    num_layers: int

    def __init__(self, num_nodes: int, edge_dim: int, batch_size: int, num_neighbors: int,
                 memory_dim: int) -> None:
        super().__init__()
        if batch_size < 1 or num_neighbors < 1:
            raise ValueError("batch_size and num_neighbors must be >= 1")
        self.num_nodes = int(num_nodes)
        self.edge_dim = int(edge_dim)
        self.batch_size = int(batch_size)
        self.num_neighbors = int(num_neighbors)
        self.memory_dim = int(memory_dim)
        self.hparams: dict[str, Any] = {}
        self._stream: EventStream | None = None
        self._index: TemporalIndex | None = None
        self._ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._src = self._dst = torch.zeros(0, dtype=torch.long)
        self._t = torch.zeros(0, dtype=torch.float64)
        self._feat = torch.zeros(0, self.edge_dim)
        self._state: State | None = None

    # ------------------------------------------------------------------ setup
    @property
    def has_memory(self) -> bool:
        """Whether the model keeps node memory (``memory_dim > 0``; TGAT has none)."""
        return self.memory_dim > 0

    @property
    def device(self) -> torch.device:
        """Device of the parameters (the stream tensors are moved there on attach)."""
        return next(self.parameters()).device

    def config(self) -> dict[str, Any]:
        """The Hydra config that rebuilds this model (``_target_`` plus hyperparameters)."""
        cls = type(self)
        return {"_target_": f"{cls.__module__}.{cls.__qualname__}", **self.hparams}

    def attach(self, stream: EventStream, event_ids: npt.ArrayLike | None = None,
               index: TemporalIndex | None = None) -> None:
        """Bind the model to a stream and reset its state.

        Call after moving the model to its device.

        Args:
            stream: The stream whose history the model replays.
            event_ids: Original id of each event, ``int64 [E]`` ascending (defaults to
                ``0..E-1``); pass the ids returned by ``stream.without`` for a reduced stream.
            index: A prebuilt index of ``stream`` (built here when omitted).

        Raises:
            ModelStateError: If the stream's node count or feature size differs from the
                model's, or the ids are not ascending.
        """
        if stream.num_nodes != self.num_nodes or stream.feat_dim != self.edge_dim:
            raise ModelStateError(
                f"model expects {self.num_nodes} nodes and {self.edge_dim} edge features, "
                f"stream {stream.name!r} has {stream.num_nodes} and {stream.feat_dim}")
        ids = (np.arange(stream.num_events, dtype=np.int64) if event_ids is None
               else np.asarray(event_ids, dtype=np.int64))
        if len(ids) != stream.num_events or (len(ids) > 1 and np.any(np.diff(ids) <= 0)):
            raise ModelStateError("event_ids must be strictly ascending, one per event")
        dev = self.device
        self._stream = stream
        self._index = index if index is not None else TemporalIndex(stream)
        self._ids = ids
        self._src, self._dst, self._t, self._feat = (
            stream_tensor(a, dev) for a in (stream.src, stream.dst, stream.t, stream.edge_feat))
        self.reset()

    @property
    def stream(self) -> EventStream:
        """The attached stream."""
        return attached(self._stream)

    @property
    def index(self) -> TemporalIndex:
        """The index of the attached stream (neighbour sampling reads it)."""
        return attached(self._index)

    @property
    def event_ids(self) -> npt.NDArray[np.int64]:
        """Original id of every attached event, ``int64 [E]`` (ascending)."""
        return self._ids

    @property
    def event_times(self) -> Tensor:
        """Timestamps of the attached events on the model's device, ``float64 [E]``."""
        return self._t

    @property
    def edge_features(self) -> Tensor:
        """Edge features of the attached events on the model's device, ``[E, F]``."""
        return self._feat

    @property
    def endpoints(self) -> tuple[Tensor, Tensor]:
        """Source and destination of every attached event on the model's device,
        ``int64 [E]`` each."""
        return self._src, self._dst

    # ------------------------------------------------------------- state verbs
    @property
    def state(self) -> State:
        """The live state (not a copy; use ``snapshot`` for one)."""
        return attached(self._state)

    @property
    def position(self) -> int:
        """Original event id up to which history has been consumed."""
        return self.state.position

    def reset(self) -> None:
        """Forget all history: empty memory, nothing removed, position 0."""
        self._state = State.empty(self.stream.num_events, self.num_nodes, self.memory_dim,
                                  self.device)

    def snapshot(self) -> State:
        """A copy of the current state; with nothing removed its mask is one byte, so an
        unperturbed snapshot costs ``O(N·d)`` whatever the stream's length."""
        return self.state.clone(compact=True)

    def restore(self, state: State) -> None:
        """Continue from ``state`` (copied, so the snapshot can be restored again)."""
        if state.removed.shape[0] != self.stream.num_events:
            raise ModelStateError("snapshot was taken on a stream of another length")
        self._state = state.clone()

    def _local(self, event_id: int) -> int:
        """Number of attached events with original id ``< event_id``."""
        return int(np.searchsorted(self._ids, event_id, side="left"))

    def advance(self, start_id: int, end_id: int,
                removed_mask: npt.ArrayLike | Tensor | None = None) -> None:
        """Consume the history events with original ids in ``[start_id, end_id)``.

        Args:
            start_id: Must equal ``position``.
            end_id: End of the range (exclusive); a non-boundary end closes the state.
            removed_mask: ``bool [E]`` over the attached stream's events; events with ``True``
                inside the range are skipped (entries outside the range are ignored).

        Raises:
            ModelStateError: If ``start_id`` is not the current position, or the state is
                closed by a partial batch and ``end_id > start_id``.
        """
        st = self.state
        if not check_advance(st.position, start_id, end_id, self.batch_size):
            return
        mask = as_removed_mask(removed_mask, self.stream.num_events)
        with torch.no_grad():
            dev = self.device
            lo, hi = self._local(start_id), self._local(end_id)
            if mask is not None:
                st.removed[lo:hi] = torch.from_numpy(mask[lo:hi].copy())
            for events in self.history_steps(start_id, end_id, mask, self.is_idle(st)):
                self.apply_batch(st, torch.as_tensor(events, device=dev))
            st.position = end_id

    def history_steps(self, start_id: int, end_id: int, mask: BoolArray | None = None,
                      idle: bool = False) -> list[IntArray]:
        """The batches ``advance(start_id, end_id, mask)`` applies, in order (the one rule).

        The kept events are grouped by ``kept_batches``. Batches
        without kept events matter only right after a non-empty one (they apply its pending
        messages): one empty batch is inserted after a gap and one trails the last kept
        batch when the range goes on, unless the state is ``idle`` (on an idle state an empty
        batch changes nothing and is skipped, which makes sparse masked replays, the
        approximate oracle's, cost per kept batch).

        Args:
            start_id: First original id (a batch boundary, the state's position).
            end_id: End of the range (exclusive).
            mask: Removed events, ``bool [E]``, or None.
            idle: Whether the state at ``start_id`` is idle (``is_idle``).

        Returns:
            Stream positions of each step's kept events, ``int64 [K]`` (``K = 0`` for an empty
            batch).
        """
        batch = self.batch_size
        lo, hi = self._local(start_id), self._local(end_id)
        empty = np.zeros(0, dtype=np.int64)
        steps: list[IntArray] = []
        b = start_id // batch  # first batch not processed yet
        for gb, group in kept_batches(self._ids, lo, hi, mask, batch):
            if gb > b and not idle:
                steps.append(empty)
            steps.append(group)
            idle = False
            b = gb + 1
        if b <= (end_id - 1) // batch and not idle:  # the final, possibly partial, batch
            steps.append(empty)
        return steps

    def is_idle(self, state: State) -> bool:
        """Whether applying an empty batch to ``state`` would leave it unchanged.

        After an empty batch has been applied the state is idle by definition; subclasses say
        whether a given state already is (the default, False, is always safe).
        """
        return False

    @abstractmethod
    def apply_batch(self, state: State, events: Tensor) -> None:
        """Update ``state`` in place with one batch of kept events (stream positions ``[K]``)."""

    @abstractmethod
    def node_input(self, state: State) -> Tensor:
        """Layer-0 node input for every node, ``[N, in_dim]``, for the current history."""

    def _input_rows(self, state: State) -> Callable[[Tensor], Tensor]:
        """``node_input``'s rows as ``embed`` reads them: ``rows(v)`` is
        ``node_input(state)[v]`` (``v``: node ids of any shape, ``[..., in_dim]`` out), read
        only during the call, so that a model may compute fewer rows than ``N`` (TGN)."""
        node_input = self.node_input(state)  # [N, in_dim]
        return lambda v: node_input[v]

    # --------------------------------------------------------------- prediction
    def _neighbor_fn(self, state: State, position: int) -> NeighborFn:
        index = self._index
        assert index is not None
        removed = state.removed.numpy()
        num_removed = int(removed[:position].sum())
        n, dev = self.num_neighbors, self.device

        def neighbors(nodes: Tensor, before: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            nbr, eid, valid = recent_kept_neighbors(
                index, nodes.cpu().numpy(), before.cpu().numpy(), n, removed, num_removed)
            return (torch.from_numpy(nbr).to(dev), torch.from_numpy(eid).to(dev),
                    torch.from_numpy(valid).to(dev))

        return neighbors

    def embed(self, nodes: Tensor, t: Tensor, before: Tensor | None = None,
              weights: SlotWeights | None = None, log: AttentionLog | None = None) -> Tensor:
        """Embeddings ``[B, d]`` of ``nodes`` (``int64 [B]``) at times ``t`` (``[B]``).

        Args:
            nodes: Node ids, ``int64 [B]``.
            t: Query times, ``[B]``.
            before: Per-query bound (stream position) of the events neighbour sampling may
                see, ``int64 [B]``, each ``>=`` the state's position; default: the position.
                Training passes each event's own position, so an event attends to earlier
                events of its own batch, as it does when it is explained (its history is
                every event before it); memory still holds only the consumed batches.
            weights: Soft removal of events (stream positions; see ``predict_soft``).
            log: Collects the attention on listed events (see ``attention_by_event``).
        """
        st = self.state
        position = self._local(st.position)
        node_input = self._input_rows(st)  # rows of [N, in_dim]
        if before is None:
            before = torch.full_like(nodes, position)
        elif len(before) and int(before.min()) < position:
            raise ValueError(f"neighbour bounds must be >= the state position {position}")
        bound = int(before.max()) if len(before) else position
        return self.embedding(node_input, self._neighbor_fn(st, bound), self._t,
                              self._feat, nodes, before, t, weights, log)

    def predict(self, src: npt.ArrayLike | Tensor, dst: npt.ArrayLike | Tensor,
                t: npt.ArrayLike | Tensor, before: npt.ArrayLike | Tensor | None = None
                ) -> Tensor:
        """Logits of the links ``(src, dst, t)`` given the current history.

        Does not change the state. Gradients flow when called outside ``torch.no_grad``.

        Args:
            src: Source nodes, ``int [B]``.
            dst: Destination nodes, ``int [B]``.
            t: Query times, ``float [B]`` (normally ``>=`` the last history event's time).
            before: Optional per-query neighbour bound (stream position, ``>=`` the state's
                position), ``int [B]``; see ``embed``.

        Returns:
            ``float32 [B]`` logits.
        """
        return self._links(src, dst, t, before)

    def _links(self, src: npt.ArrayLike | Tensor, dst: npt.ArrayLike | Tensor,
               t: npt.ArrayLike | Tensor, before: npt.ArrayLike | Tensor | None = None,
               weights: SlotWeights | None = None, log: AttentionLog | None = None) -> Tensor:
        """Logits ``[B]`` of links, optionally with soft removal or an attention log."""
        dev = self.device
        src_t = _to_tensor(src, torch.long, dev)
        dst_t = _to_tensor(dst, torch.long, dev)
        tt = _to_tensor(t, torch.float64, dev)
        if not len(src_t) == len(dst_t) == len(tt):
            raise ValueError(f"src, dst, t differ in length: {len(src_t)}, {len(dst_t)}, "
                             f"{len(tt)}")
        nodes = torch.cat([src_t, dst_t])
        if len(nodes) and (int(nodes.min()) < 0 or int(nodes.max()) >= self.num_nodes):
            raise ValueError(f"node ids must be in [0, {self.num_nodes})")
        bounds = None
        if before is not None:
            bounds = torch.as_tensor(before, dtype=torch.long, device=dev).reshape(-1)
            if len(bounds) != len(src_t):
                raise ValueError(f"before has {len(bounds)} entries for {len(src_t)} queries")
        z_src, z_dst = self.embed_pairs(src_t, dst_t, tt, bounds, weights, log)
        return self.decoder(z_src, z_dst)

    def embed_pairs(self, src: Tensor, dst: Tensor, t: Tensor, before: Tensor | None = None,
                    weights: SlotWeights | None = None, log: AttentionLog | None = None
                    ) -> tuple[Tensor, Tensor]:
        """Embeddings ``([B, d], [B, d])`` of the two endpoints of links ``(src, dst, t)``.

        Each endpoint is embedded on its own (``embed``); a model whose endpoint
        embeddings read each other (DyGFormer) overrides this.

        Args:
            src: Sources, ``int64 [B]``.
            dst: Destinations, ``int64 [B]``.
            t: Query times, ``float64 [B]``.
            before: Per-link neighbour bound (stream position), ``int64 [B]``, or None.
            weights: Soft removal of events (see ``predict_soft``).
            log: Collects the attention on listed events (see ``attention_by_event``).
        """
        bounds = None if before is None else torch.cat([before, before])
        z = self.embed(torch.cat([src, dst]), torch.cat([t, t]), bounds, weights, log)
        return z[: len(src)], z[len(src):]

    # ------------------------------------------------------------ soft removal
    def _positions(self, event_ids: npt.ArrayLike | Tensor) -> Tensor:
        """Stream positions of attached events given by original id, ``int64 [m]``.

        Raises:
            ValueError: If an id is not an attached event.
        """
        attached(self._stream)
        ids = (event_ids.detach().cpu().numpy() if isinstance(event_ids, Tensor)
               else np.asarray(event_ids)).astype(np.int64).reshape(-1)
        pos = np.searchsorted(self._ids, ids)
        bad = (pos >= len(self._ids)) | (self._ids[np.minimum(pos, len(self._ids) - 1)] != ids)
        if len(ids) and bad.any():
            raise ValueError(f"events {ids[bad][:5].tolist()} are not events of the attached "
                             "stream")
        return torch.from_numpy(pos.astype(np.int64)).to(self.device)

    def predict_soft(self, src: npt.ArrayLike | Tensor, dst: npt.ArrayLike | Tensor,
                     t: npt.ArrayLike | Tensor, event_ids: npt.ArrayLike | Tensor,
                     weights: Tensor) -> Tensor:
        """Logits of links with the attention slots of ``event_ids`` weighted (soft removal).

        Every attention slot that reads a listed event, at every layer, has its attention
        scaled by the event's weight and renormalised per target
        (``weighted_softmax``); other slots have weight 1. Weight 1
        for every event gives ``predict``'s logit (to float rounding: the same
        arithmetic, computed step by step). Weight 0 computes a slot as if absent, which
        equals removing the event from history only where removal changes nothing else
        (docs/design.md §8, "Soft removal"): for TGAT, when no neighbour window holding the
        event is full (a removal lets an older neighbour into the ``n`` most recent, a zero
        weight does not); for TGN never in general, since memory has absorbed every past
        event at full weight (the weights act on the embedding attention only).

        Does not change the state. Gradients flow to ``weights`` when called outside
        ``torch.no_grad``; call it in eval mode (there is no attention dropout).

        Args:
            src: Source nodes, ``int [B]``.
            dst: Destination nodes, ``int [B]``.
            t: Query times, ``float [B]``.
            event_ids: Original ids of the weighted events, distinct, ``int64 [m]``.
            weights: Their weights in ``[0, 1]``, ``float [m]``.

        Returns:
            ``float32 [B]`` logits.

        Raises:
            ValueError: On a length mismatch, a repeated or unknown event, or a weight
                outside ``[0, 1]``.
        """
        w = torch.as_tensor(weights, device=self.device).reshape(-1)
        if len(w) and (bool((w.detach() < 0).any()) or bool((w.detach() > 1).any())):
            raise ValueError("soft-removal weights must lie in [0, 1]")
        return self._links(src, dst, t, weights=SlotWeights(self._positions(event_ids), w))

    @property
    def has_attention(self) -> bool:
        """Whether the embedding is attention over neighbour slots (TGN, TGAT: a
        ``TemporalAttentionEmbedding``), so that ``attention_by_event`` reads attention
        probabilities and its ``bias`` re-weights them; GraphMixer and DyGFormer report
        their pooling shares instead and take no bias."""
        return isinstance(self.embedding, TemporalAttentionEmbedding)

    def attention_by_event(self, src: npt.ArrayLike | Tensor, dst: npt.ArrayLike | Tensor,
                           t: npt.ArrayLike | Tensor, event_ids: npt.ArrayLike | Tensor,
                           bias: Tensor | None = None) -> Tensor:
        """The model's aggregated attention on each listed event for the queries.

        The sum over layers, targets and slots of the attention probability (averaged over
        heads) of the slots that read the event, each target counted as often as it occurs
        in the queries' computation trees (``AttentionLog``); 0
        for an event no slot reads. Every target with at least one slot spreads a mass of 1
        (to within the softmax's ``1e-16``) over its slots. No gradients; call it in eval
        mode.

        With ``bias``, ``b_e`` is added to the attention score (before the softmax) of every
        slot that reads event ``e``, at every layer, and the attention read is the one that
        results (T-GNNExplainer's PG navigator: the reference adds its PGExplainer's scores
        there, ``candidate_weights_dict``). It is computed as the slot weight ``exp(b_e)``
        of soft removal (``weighted_softmax``: ``w·exp(a)`` is ``exp(a + log w)``), with
        ``b_e`` clipped to ``[-80, 80]`` so that the weight stays a finite ``float32``.

        Args:
            src: Source nodes, ``int [B]``.
            dst: Destination nodes, ``int [B]``.
            t: Query times, ``float [B]``.
            event_ids: Original ids of the events, distinct, ``int64 [m]``.
            bias: Additive attention-score bias per listed event, ``float [m]`` (0: none),
                or None.

        Returns:
            ``float64 [m]``.

        Raises:
            ValueError: A ``bias`` of another length, or one on a model without attention
                (``has_attention``).
        """
        positions = self._positions(event_ids)
        log = AttentionLog(positions)
        weights = None
        if bias is not None:
            if not self.has_attention:
                raise ValueError(f"{type(self).__name__} has no attention to bias")
            b = torch.as_tensor(bias, dtype=torch.float32, device=self.device).reshape(-1)
            weights = SlotWeights(positions, b.clamp(-80.0, 80.0).exp())
        with torch.no_grad():
            self._links(src, dst, t, weights=weights, log=log)
        return log.mass

    def encode_time(self, dt: Tensor) -> Tensor:
        """The attention's time encoding of time gaps ``dt`` (``float [M]``), ``[M, T]``."""
        return self.embedding.time_enc(dt.to(torch.float32))


class MemorylessModel(TemporalModel):
    """A model without memory (TGAT, GraphMixer, DyGFormer): its state is the history position
    and the removal mask, and every embedding reads its windows from the index at prediction
    time, so applying a batch changes nothing and every state is idle. Their replay is
    ``cftgnn.replay.plans.MemorylessReplay``."""

    def is_idle(self, state: State) -> bool:
        return True

    def apply_batch(self, state: State, events: Tensor) -> None:
        """Nothing to update: history is read from the index at prediction time."""
