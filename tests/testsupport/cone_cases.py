"""A long, sparse stream whose far-back removals pruning retires early (quiet batches,
revived rows), for the tests that a shortcut of the cone replay leaves every logit bitwise
the same (``tests/replay/test_cone_shortcuts.py``, ``test_cone_small_paths.py``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.models import TGN
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.replay.tgn import TGNReplayOptions

Case = tuple[EventStream, TGN, list[npt.NDArray[np.int64]], list[npt.NDArray[np.int64]]]


def sparse_case(num_layers: int) -> Case:
    """``(stream, model, sets, batch)``: 12 sets of 1-3 and a batch of 64 sets of 1-6 of
    the last event's 24 candidates (as positions in its candidate list)."""
    stream = make_synthetic_stream(60, 2000, seed=3, feat_dim=1, p_tie=0.3)
    torch.manual_seed(0)
    model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8,
                embedding_dim=16, num_layers=num_layers, num_heads=2, num_neighbors=5,
                batch_size=20)
    rng = np.random.default_rng(num_layers)
    sets = [rng.choice(24, size=int(rng.integers(1, 4)), replace=False) for _ in range(12)]
    batch = [rng.choice(24, size=int(rng.integers(1, 7)), replace=False) for _ in range(64)]
    return stream, model, sets, batch


def exact_logits(stream: EventStream, model: TGN, sets: list[npt.NDArray[np.int64]],
                 batch: list[npt.NDArray[np.int64]]
                 ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The exact logits of ``sets`` one call each, and of ``batch`` in one call (the cone
    replay: no local replay), on a fresh engine."""
    engine = ReplayEngine(model, stream)
    engine.replay.options = TGNReplayOptions(local_max_events=0)  # type: ignore[attr-defined]
    replay = EventReplay(engine, stream.num_events - 1, m_max=24)
    cand = replay.candidates.ids
    singles = [frozenset(cand[list(s)].tolist()) for s in sets]
    many = [frozenset(cand[list(s)].tolist()) for s in batch]
    return np.concatenate([replay.exact([s]) for s in singles]), replay.exact(many)
