"""TGN's time per history batch at many nodes, before and after its per-batch work followed
the batch's own nodes (``python scripts/benchmark_node_count.py``).

Before (``LegacyTGN``, the code of ``e086de5`` kept here to time it and to compare bits),
every batch paid for all ``N`` nodes: the pending nodes found by ``nonzero`` over an
``N``-long mask, the last message per node by a scatter into an ``[N]`` table, the pending
entries cleared by a mask over ``N``, and each scored batch wrote the whole ``[N, d]`` node
input (``index_copy`` into a buffer) to read a few hundred rows of it. After (``TGN``), the
state keeps its pending nodes (``State.pending_nodes``), the last messages are taken over
the batch's own endpoints, and scoring computes only the pending rows and puts them in place
in the rows it reads (``TGN._input_rows``): the same floats (``tests/models/
test_node_count.py`` compares the logits bit for bit).

Measured per history batch: ``advance`` (the replay's step) and scoring (predict the
batch's events, then advance: the sampling pass's step), on a stream of random pairs over
``N`` nodes, one torch thread, the fastest of ``repeats`` timings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from cftgnn.data.stream import EventStream
from cftgnn.models.base import eval_mode
from cftgnn.models.state import State
from cftgnn.models.tgn import TGN, other_endpoint


def legacy_last_message_per_node(src: Tensor, dst: Tensor, events: Tensor,
                                 num_nodes: int) -> tuple[Tensor, Tensor]:
    """``last_message_per_node`` as it was: a scatter into an ``[N]`` table and a
    ``nonzero`` over it (``O(N)`` per batch)."""
    nodes = torch.cat([src[events], dst[events]])
    ev = torch.cat([events, events])
    last = torch.full((num_nodes,), -1, dtype=torch.long, device=events.device)
    last.scatter_reduce_(0, nodes, ev, reduce="amax")
    touched = (last >= 0).nonzero(as_tuple=True)[0]
    return touched, last[touched]


class LegacyTGN(TGN):
    """TGN with the per-batch steps of ``e086de5`` (each ``O(N)``); the same weights and
    arguments as ``TGN``. It keeps ``State.pending_nodes`` unknown (None), as that code did
    not have it."""

    def _pending_applied(self, state: State, inplace: bool = False,
                         out: Tensor | None = None) -> tuple[Tensor, Tensor]:
        nodes = (state.pending >= 0).nonzero(as_tuple=True)[0]
        if len(nodes) == 0:
            return state.memory, state.last_update
        ev = state.pending[nodes]
        other = other_endpoint(self._src, self._dst, ev, nodes)
        new, t = self.message_update(ev, state.memory[nodes], state.last_update[nodes],
                                     state.memory[other])
        if inplace:
            state.memory.index_copy_(0, nodes, new)
            state.last_update.index_copy_(0, nodes, t)
            return state.memory, state.last_update
        memory = (state.memory.index_copy(0, nodes, new) if out is None
                  else torch.index_copy(state.memory, 0, nodes, new, out=out))
        return memory, state.last_update.index_copy(0, nodes, t)

    def is_idle(self, state: State) -> bool:
        return not bool((state.pending >= 0).any())

    def apply_batch(self, state: State, events: Tensor) -> None:
        if torch.is_grad_enabled():
            memory, last_update = self._pending_applied(state)
            state.memory, state.last_update = memory.detach(), last_update
        else:
            self._pending_applied(state, inplace=True)
        state.pending[state.pending >= 0] = -1
        if len(events):
            nodes, last = legacy_last_message_per_node(self._src, self._dst, events,
                                                       self.num_nodes)
            state.pending[nodes] = last
        state.pending_nodes = None

    def _input_rows(self, state: State) -> Callable[[Tensor], Tensor]:
        if torch.is_grad_enabled():
            return super()._input_rows(state)
        mem = state.memory
        buf = getattr(self, "_input_buffer", None)
        if buf is None or buf.shape != mem.shape or buf.dtype != mem.dtype:
            buf = self._input_buffer = torch.empty_like(mem)
        node_input = self._pending_applied(state, out=buf)[0]
        return lambda v: node_input[v]


def random_pairs(num_nodes: int, num_events: int, seed: int = 0) -> EventStream:
    """A stream of ``num_events`` uniformly random pairs over ``num_nodes`` nodes, one event
    per second, no features."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_events)
    dst = (src + rng.integers(1, num_nodes, num_events)) % num_nodes
    return EventStream(src=src.astype(np.int64), dst=dst.astype(np.int64),
                       t=np.arange(num_events, dtype=np.float64),
                       edge_feat=np.zeros((num_events, 0), dtype=np.float32),
                       labels=np.zeros(num_events, dtype=np.int64), num_nodes=num_nodes,
                       name="random_pairs")


def make_tgn(cls: type[TGN], stream: EventStream, batch_size: int) -> TGN:
    """A fresh TGN (or ``LegacyTGN``) of ``conf/model/tgn.yaml``'s sizes, seeded, attached."""
    torch.manual_seed(0)
    model = cls(stream.num_nodes, stream.feat_dim, memory_dim=100, time_dim=100,
                embedding_dim=100, num_layers=1, num_heads=2, num_neighbors=10,
                batch_size=batch_size)
    model.attach(stream)
    return model


def _advance_s(model: TGN, lo: int, hi: int) -> float:
    model.reset()
    model.advance(0, lo)
    start = time.perf_counter()
    model.advance(lo, hi)
    return time.perf_counter() - start


def _score_s(model: TGN, lo: int, hi: int) -> float:
    model.reset()
    model.advance(0, lo)
    stream, batch = model.stream, model.batch_size
    start = time.perf_counter()
    for a in range(lo, hi, batch):
        b = min(a + batch, hi)
        model.predict(stream.src[a:b], stream.dst[a:b], stream.t[a:b], np.arange(a, b))
        model.advance(a, b)
    return time.perf_counter() - start


@dataclass(frozen=True)
class Row:
    """Milliseconds per history batch of one node count, before and after."""

    num_nodes: int
    advance_before: float
    advance_after: float
    score_before: float
    score_after: float


def measure(node_counts: Sequence[int], num_events: int = 60_000, warm: int = 2_000,
            batch_size: int = 200, repeats: int = 3) -> list[Row]:
    """Time ``advance`` and scoring per batch over ``[warm, num_events)`` on random pairs
    for each node count, ``LegacyTGN`` and ``TGN`` interleaved, the fastest of ``repeats``."""
    torch.set_num_threads(1)
    rows = []
    for n in node_counts:
        stream = random_pairs(int(n), num_events)
        models = {cls: make_tgn(cls, stream, batch_size) for cls in (LegacyTGN, TGN)}
        batches = -(-(num_events - warm) // batch_size)
        best: dict[tuple[str, type[TGN]], float] = {}
        with eval_mode(models[TGN]), eval_mode(models[LegacyTGN]), torch.no_grad():
            for _ in range(repeats):
                for cls, model in models.items():
                    for what, fn in (("advance", _advance_s), ("score", _score_s)):
                        took = fn(model, warm, num_events) / batches * 1e3
                        best[what, cls] = min(best.get((what, cls), took), took)
        rows.append(Row(int(n), best["advance", LegacyTGN], best["advance", TGN],
                        best["score", LegacyTGN], best["score", TGN]))
    return rows


def table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table."""
    lines = ["| nodes | advance, before | advance, after | scoring, before | scoring, after |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r.num_nodes:,} | {r.advance_before:.2f} ms | {r.advance_after:.2f} ms"
                     f" | {r.score_before:.2f} ms | {r.score_after:.2f} ms |")
    return "\n".join(lines)


__all__ = ["LegacyTGN", "Row", "legacy_last_message_per_node", "make_tgn", "measure",
           "random_pairs", "table"]
