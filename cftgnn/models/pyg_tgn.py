"""A TGN built from PyG's modules, as in PyG's ``examples/tgn.py``, behind the state verbs.

The model is PyG's ``TGNMemory`` (``IdentityMessage``,
``LastAggregator``), a ``LastNeighborLoader``, one
``TransformerConv`` attention layer (``GraphAttentionEmbedding``)
and a two-layer ``LinkPredictor``, with the parameter names of PyG's example, so the
``state_dict`` of a researcher's ``memory``, ``gnn`` and ``link_pred`` loads as it is
(``PyGTGN.from_modules``, ``cftgnn.training.checkpoint.save_pyg_tgn``).

Semantics are those of the example's evaluation loop (``memory.eval()``): history is fed in
batches of ``B`` events by original id (``kept_batches``); after
each batch ``memory.update_state`` applies its messages at once and the loader inserts its
events; a prediction reads memory and the ``num_neighbors`` last neighbours of the consumed
history. History that ends mid-batch is fed as a final partial batch, so the explained event
sees every event before it. PyG's training-mode memory (messages kept pending until a node
reappears) and the flush on ``memory.eval()`` are never used: the memory always runs in
evaluation mode, whatever the wrapper's mode.

Differences from ``cftgnn.models.TGN`` that prevent converting weights into it: the
attention's time input is ``last_update(neighbour) - t(edge)`` with the memory's trainable
time encoder (``cftgnn.models.TGN``: ``t(query) - t(edge)`` with frozen frequencies); the
query time is not read at all; ``LastAggregator`` picks a node's last message by timestamp
(ties by scatter order), TGN by event id. The explainers therefore reach this model through
the generic per-set replay (``cftgnn.replay.generic``).

On CUDA, PyG's loader sorts a batch's events by node with an unstable sort and writes them
with indexed stores that may collide: left as they are, the logits there parted from the
CPU's by up to 8.5e-2 on the test stream (an H100, ``scripts/gpu/diagnose_pyg_tgn.py``; a
stable sort alone left 8.5e-3, deterministic algorithms alone 2.6e-5). The wrapper runs
PyG's modules there with both (``_as_on_the_cpu``), which gives the CPU's logits within
7.2e-7.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn
from torch_geometric.nn import TGNMemory, TransformerConv
from torch_geometric.nn.models.tgn import (
    IdentityMessage,
    LastAggregator,
    LastNeighborLoader,
    TimeEncoder,
)

from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import EventStream
from cftgnn.models.protocol import (
    ModelStateError,
    as_removed_mask,
    attached,
    check_advance,
    kept_batches,
)

MessageStore = dict[int, tuple[Tensor, Tensor, Tensor, Tensor]]


def _stable_sort(self: Tensor, *args: Any, **kwargs: Any) -> Any:
    return torch.sort(self, *args, **{**kwargs, "stable": True})


@contextmanager
def _as_on_the_cpu(device: torch.device) -> Iterator[None]:
    """Within it, on CUDA, ``Tensor.sort`` is stable and torch's deterministic algorithms are
    on (warnings only, silenced), so that PyG's loader and memory order a batch's events as
    they do on the CPU (see the module docstring); elsewhere nothing changes. Both are
    restored on leaving."""
    if device.type != "cuda":
        yield
        return
    sort = torch.Tensor.sort
    was, warn_only = (torch.are_deterministic_algorithms_enabled(),
                      torch.is_deterministic_algorithms_warn_only_enabled())
    torch.Tensor.sort = _stable_sort  # type: ignore[method-assign,assignment]
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with warnings.catch_warnings():  # an op without a deterministic kernel says so
            warnings.simplefilter("ignore", UserWarning)
            yield
    finally:
        torch.Tensor.sort = sort  # type: ignore[method-assign]
        torch.use_deterministic_algorithms(was, warn_only=warn_only)


class GraphAttentionEmbedding(nn.Module):
    """One attention layer over the last neighbours (PyG's TGN example).

    Args:
        in_channels: Memory size.
        out_channels: Embedding size (two heads of half of it).
        msg_dim: Edge feature size ``F``.
        time_enc: The memory's time encoder (shared, as in the example).
    """

    def __init__(self, in_channels: int, out_channels: int, msg_dim: int,
                 time_enc: TimeEncoder) -> None:
        super().__init__()
        self.time_enc = time_enc
        self.conv = TransformerConv(in_channels, out_channels // 2, heads=2, dropout=0.1,
                                    edge_dim=msg_dim + time_enc.out_channels)

    def forward(self, x: Tensor, last_update: Tensor, edge_index: Tensor, t: Tensor,
                msg: Tensor) -> Tensor:
        """Embeddings ``[M, out]`` of ``M`` nodes from their memory ``x [M, d]``.

        Args:
            x: Memory of the nodes, ``[M, d]``.
            last_update: Their last memory update time, ``int64 [M]``.
            edge_index: Neighbour slot ``j`` → node ``i`` (local ids), ``[2, K]``.
            t: Time of each slot's event, ``int64 [K]``.
            msg: Edge features of each slot's event, ``[K, F]``.
        """
        rel_t = last_update[edge_index[0]] - t  # [K]
        edge_attr = torch.cat([self.time_enc(rel_t.to(x.dtype)), msg], dim=-1)
        out: Tensor = self.conv(x, edge_index, edge_attr)
        return out


class LinkPredictor(nn.Module):
    """``lin_final(relu(lin_src(z_src) + lin_dst(z_dst)))`` (PyG's TGN example).

    Args:
        in_channels: Embedding size.
    """

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.lin_src = nn.Linear(in_channels, in_channels)
        self.lin_dst = nn.Linear(in_channels, in_channels)
        self.lin_final = nn.Linear(in_channels, 1)

    def forward(self, z_src: Tensor, z_dst: Tensor) -> Tensor:
        """Logits ``[B, 1]`` of embeddings ``[B, d]``."""
        out: Tensor = self.lin_final((self.lin_src(z_src) + self.lin_dst(z_dst)).relu())
        return out


@dataclass
class PyGTGNState:
    """A snapshot of ``PyGTGN``: PyG's memory, message stores and neighbour table.

    Attributes:
        position: Original event id up to which history was consumed.
        memory: ``TGNMemory.memory``, ``float32 [N, d]``.
        last_update: ``TGNMemory.last_update``, ``int64 [N]``.
        msg_s_store: ``TGNMemory.msg_s_store`` (its entries are never changed in place, so
            a shallow copy is a copy).
        msg_d_store: ``TGNMemory.msg_d_store``.
        neighbors: ``LastNeighborLoader.neighbors``, ``int64 [N, n]``.
        e_id: ``LastNeighborLoader.e_id``, ``int64 [N, n]`` (loader ids, ``-1`` empty).
        inserted: Stream position of each loader id, ``int64 [cur_e_id]``.
    """

    position: int
    memory: Tensor
    last_update: Tensor
    msg_s_store: MessageStore
    msg_d_store: MessageStore
    neighbors: Tensor
    e_id: Tensor
    inserted: Tensor

    def clone(self) -> PyGTGNState:
        """A deep copy of the tensors (the store entries are shared, see above)."""
        return PyGTGNState(self.position, self.memory.clone(), self.last_update.clone(),
                           dict(self.msg_s_store), dict(self.msg_d_store),
                           self.neighbors.clone(), self.e_id.clone(), self.inserted.clone())


class PyGTGN(nn.Module):
    """PyG's TGN (memory, last-neighbour loader, attention, link predictor) with state verbs.

    Build it fresh from hyperparameters (Hydra ``model=pyg_tgn``), or wrap trained modules with
    ``from_modules``. Implements ``ReplayableModel``.

    Args:
        num_nodes: ``N``.
        edge_dim: Edge feature size ``F`` of the streams; the raw message size is
            ``max(F, 1)`` (PyG's ``TGNMemory`` needs at least one column: a stream without
            features gets one zero column).
        memory_dim: Memory size.
        time_dim: Time encoding size.
        embedding_dim: Embedding size.
        num_neighbors: Neighbours kept per node by the loader (``size``).
        batch_size: History batch size ``B``.
    """

    def __init__(self, num_nodes: int, edge_dim: int, memory_dim: int = 100,
                 time_dim: int = 100, embedding_dim: int = 100, num_neighbors: int = 10,
                 batch_size: int = 200) -> None:
        super().__init__()
        if batch_size < 1 or num_neighbors < 1:
            raise ValueError("batch_size and num_neighbors must be >= 1")
        self.hparams: dict[str, Any] = dict(
            num_nodes=num_nodes, edge_dim=edge_dim, memory_dim=memory_dim, time_dim=time_dim,
            embedding_dim=embedding_dim, num_neighbors=num_neighbors, batch_size=batch_size)
        self.num_nodes, self.edge_dim = int(num_nodes), int(edge_dim)
        self.num_neighbors, self.batch_size = int(num_neighbors), int(batch_size)
        self.num_layers = 1
        msg_dim = max(self.edge_dim, 1)
        self.memory = TGNMemory(num_nodes, msg_dim, memory_dim, time_dim,
                                message_module=IdentityMessage(msg_dim, memory_dim, time_dim),
                                aggregator_module=LastAggregator())
        self.gnn: nn.Module = GraphAttentionEmbedding(memory_dim, embedding_dim, msg_dim,
                                                      self.memory.time_enc)
        self.link_pred: nn.Module = LinkPredictor(embedding_dim)
        self.loader = LastNeighborLoader(self.num_nodes, self.num_neighbors)
        self._stream: EventStream | None = None
        self._ids = np.zeros(0, dtype=np.int64)
        self._src = self._dst = self._t = self._inserted = torch.zeros(0, dtype=torch.long)
        self._feat = torch.zeros(0, msg_dim)
        self._position = 0
        self.train(self.training)

    @classmethod
    def from_modules(cls, memory: TGNMemory, gnn: nn.Module, link_pred: nn.Module,
                     num_neighbors: int = 10, batch_size: int = 200,
                     edge_dim: int | None = None) -> PyGTGN:
        """Wrap the modules of a TGN trained as in PyG's example.

        Args:
            memory: The ``TGNMemory``.
            gnn: The embedding, called as ``gnn(x, last_update, edge_index, t, msg)``.
            link_pred: The predictor, called as ``link_pred(z_src, z_dst)``.
            num_neighbors: The ``LastNeighborLoader``'s ``size``.
            batch_size: The batch size the history is fed in.
            edge_dim: The stream's feature size (default: the memory's raw message size;
                0 for a stream without features whose model was trained on one zero column).
        """
        emb = getattr(getattr(link_pred, "lin_src", None), "in_features", memory.memory_dim)
        model = cls(memory.num_nodes, memory.raw_msg_dim if edge_dim is None else edge_dim,
                    memory.memory_dim, memory.time_dim, int(emb), num_neighbors, batch_size)
        model.memory, model.gnn, model.link_pred = memory, gnn, link_pred
        return model.to(memory.device).train(model.training)

    def config(self) -> dict[str, Any]:
        """The Hydra config that rebuilds this model (``_target_`` plus hyperparameters)."""
        return {"_target_": "cftgnn.models.pyg_tgn.PyGTGN", **self.hparams}

    @property
    def device(self) -> torch.device:
        """Device of the parameters."""
        return self.memory.device

    def train(self, mode: bool = True) -> PyGTGN:
        """Set the mode of the embedding and predictor; the memory stays in evaluation mode
        (``TGNMemory.train(False)`` would flush its messages into the live state)."""
        self.training = mode
        for module in self.children():
            if module is self.memory:
                nn.Module.train(module, False)
            else:
                module.train(mode)
        return self

    # ------------------------------------------------------------------ setup
    def attach(self, stream: EventStream, event_ids: npt.ArrayLike | None = None,
               index: TemporalIndex | None = None) -> None:
        """Bind to ``stream`` (original ids ``event_ids``, default ``0..E-1``) and reset.

        Raises:
            ModelStateError: On another node count or feature size, non-integer timestamps
                (PyG's memory keeps times as integers) or ids that are not ascending.
        """
        if stream.num_nodes != self.num_nodes or stream.feat_dim != self.edge_dim:
            raise ModelStateError(
                f"model expects {self.num_nodes} nodes and {self.edge_dim} edge features, "
                f"stream {stream.name!r} has {stream.num_nodes} and {stream.feat_dim}")
        t = np.asarray(stream.t)
        if not np.array_equal(t, np.round(t)):
            raise ModelStateError(f"stream {stream.name!r} has non-integer timestamps; PyG's "
                                  "TGNMemory stores times as integers (scale them first)")
        ids = (np.arange(stream.num_events, dtype=np.int64) if event_ids is None
               else np.asarray(event_ids, dtype=np.int64))
        if len(ids) != stream.num_events or (len(ids) > 1 and np.any(np.diff(ids) <= 0)):
            raise ModelStateError("event_ids must be strictly ascending, one per event")
        dev = self.device
        self._stream, self._ids = stream, ids
        self._src = torch.tensor(np.array(stream.src), device=dev)
        self._dst = torch.tensor(np.array(stream.dst), device=dev)
        self._t = torch.tensor(t.astype(np.int64), device=dev)
        feat = np.zeros((stream.num_events, max(self.edge_dim, 1)), dtype=np.float32)
        feat[:, : self.edge_dim] = stream.edge_feat
        self._feat = torch.from_numpy(feat).to(dev)
        self.loader = LastNeighborLoader(self.num_nodes, self.num_neighbors, device=dev)
        self._inserted = torch.zeros(stream.num_events, dtype=torch.long, device=dev)
        self.reset()

    @property
    def has_memory(self) -> bool:
        """Always: PyG's TGN keeps node memory."""
        return True

    @property
    def stream(self) -> EventStream:
        """The attached stream."""
        return attached(self._stream)

    # ------------------------------------------------------------- state verbs
    @property
    def position(self) -> int:
        """Original event id up to which history has been consumed."""
        return self._position

    def reset(self) -> None:
        """Empty memory, message stores and neighbour table; position 0."""
        _ = self.stream
        self.memory.reset_state()
        self.loader.reset_state()
        self._position = 0

    def snapshot(self) -> PyGTGNState:
        """A copy of the current state."""
        mem, loader = self.memory, self.loader
        return PyGTGNState(self._position, mem.memory.clone(), mem.last_update.clone(),
                           dict(mem.msg_s_store), dict(mem.msg_d_store),
                           loader.neighbors.clone(), loader.e_id.clone(),
                           self._inserted[: loader.cur_e_id].clone())

    def restore(self, state: PyGTGNState) -> None:
        """Continue from ``state`` (copied, so it can be restored again)."""
        _ = self.stream
        mem, loader = self.memory, self.loader
        mem.memory.copy_(state.memory)
        mem.last_update.copy_(state.last_update)
        mem.msg_s_store, mem.msg_d_store = dict(state.msg_s_store), dict(state.msg_d_store)
        loader.neighbors.copy_(state.neighbors)
        loader.e_id.copy_(state.e_id)
        loader.cur_e_id = len(state.inserted)
        self._inserted[: len(state.inserted)] = state.inserted
        self._position = state.position

    def _local(self, event_id: int) -> int:
        return int(np.searchsorted(self._ids, event_id, side="left"))

    def advance(self, start_id: int, end_id: int,
                removed_mask: npt.ArrayLike | Tensor | None = None) -> None:
        """Consume the kept events with original ids in ``[start_id, end_id)``, batch by batch
        (``memory.update_state``, then the loader's ``insert``).

        Raises:
            ModelStateError: See ``check_advance``.
        """
        if not check_advance(self._position, start_id, end_id, self.batch_size):
            return
        mask = as_removed_mask(removed_mask, self.stream.num_events)
        lo, hi = self._local(start_id), self._local(end_id)
        with torch.no_grad(), _as_on_the_cpu(self.device):
            for _, group in kept_batches(self._ids, lo, hi, mask, self.batch_size):
                ev = torch.as_tensor(group, device=self.device)  # [K] stream positions
                src, dst = self._src[ev], self._dst[ev]
                self.memory.update_state(src, dst, self._t[ev], self._feat[ev])
                first = self.loader.cur_e_id
                self._inserted[first : first + len(ev)] = ev
                self.loader.insert(src, dst)
        self._position = end_id

    def predict(self, src: npt.ArrayLike | Tensor, dst: npt.ArrayLike | Tensor,
                t: npt.ArrayLike | Tensor, before: npt.ArrayLike | Tensor | None = None
                ) -> Tensor:
        """Logits of the links ``(src, dst)`` from memory and the consumed history.

        As in PyG's example, neither the query time ``t`` nor ``before`` is read: neighbours
        are the loader's, i.e. the last ``num_neighbors`` events of the consumed batches
        (a batch predicted before it is consumed does not see its own earlier events).

        Returns:
            ``float32 [B]``.
        """
        dev = self.device
        s, d = (x.to(dev, torch.long).reshape(-1) if isinstance(x, Tensor)
                else torch.tensor(np.asarray(x), dtype=torch.long, device=dev).reshape(-1)
                for x in (src, dst))
        if len(s) != len(d):
            raise ValueError(f"src and dst differ in length: {len(s)}, {len(d)}")
        nodes = torch.cat([s, d])
        if len(nodes) == 0:
            return torch.zeros(0, device=dev)
        if int(nodes.min()) < 0 or int(nodes.max()) >= self.num_nodes:
            raise ValueError(f"node ids must be in [0, {self.num_nodes})")
        with _as_on_the_cpu(dev):
            n_id, edge_index, e_id = self.loader(nodes.unique())  # n_id sorted, loader ids
            ev = self._inserted[e_id]  # stream positions of the neighbour events
            x, last_update = self.memory(n_id)
            z = self.gnn(x, last_update, edge_index, self._t[ev], self._feat[ev])  # [M, d]
        rows_s, rows_d = torch.searchsorted(n_id, s), torch.searchsorted(n_id, d)
        out: Tensor = self.link_pred(z[rows_s], z[rows_d])
        return out.reshape(-1)


__all__ = ["GraphAttentionEmbedding", "LinkPredictor", "PyGTGN", "PyGTGNState"]
