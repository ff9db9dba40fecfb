"""TGN's per-batch work follows the batch's nodes, not all N: the same bits as the code that
scanned every node (``LegacyTGN``, kept in ``cftgnn.benchmarks.node_count``)."""

from __future__ import annotations

import numpy as np
import torch

from cftgnn.benchmarks.node_count import (
    LegacyTGN,
    legacy_last_message_per_node,
    make_tgn,
    random_pairs,
)
from cftgnn.models import TGN
from cftgnn.models.base import eval_mode
from cftgnn.models.tgn import last_message_per_node


def test_last_message_per_node_is_the_scatter_over_all_nodes():
    rng = np.random.default_rng(1)
    src = torch.as_tensor(rng.integers(0, 50, 400))
    dst = torch.as_tensor(rng.integers(0, 50, 400))
    for events in (torch.arange(0), torch.arange(10, 30), torch.as_tensor([3, 3, 7, 399])):
        got = last_message_per_node(src, dst, events, 50)
        want = legacy_last_message_per_node(src, dst, events, 50)
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


def _scores(cls: type[TGN], stream, mask=None) -> tuple[list, torch.Tensor]:  # noqa: ANN001
    model = make_tgn(cls, stream, batch_size=50)
    out = []
    with eval_mode(model), torch.no_grad():
        for a in range(0, stream.num_events, 50):
            b = a + 50
            out.append(model.predict(stream.src[a:b], stream.dst[a:b], stream.t[a:b],
                                     np.arange(a, b)))
            model.advance(a, b, mask)
        # a masked replay from a snapshot, and the node input the recordings read
        snap = model.snapshot()
        model.restore(snap)
        out.append(model.node_input(model.state))
        out.append(model.predict(stream.src[:40], stream.dst[:40],
                                 np.full(40, stream.t[-1]), None))
    return out, model.state.memory.clone()


def test_scoring_and_advance_give_the_same_bits_on_a_stream_with_many_nodes():
    stream = random_pairs(20_000, 3_000, seed=2)  # most nodes never pending
    mask = np.zeros(stream.num_events, dtype=bool)
    mask[::7] = True  # removed events: batches with fewer kept events, some idle nodes
    for m in (None, mask):
        new, mem_new = _scores(TGN, stream, m)
        old, mem_old = _scores(LegacyTGN, stream, m)
        assert len(new) == len(old)
        for a, b in zip(new, old, strict=True):
            assert torch.equal(a, b)  # bit for bit
        assert torch.equal(mem_new, mem_old)


def test_the_state_keeps_its_pending_nodes_beside_pending():
    stream = random_pairs(1_000, 600, seed=3)
    model = make_tgn(TGN, stream, batch_size=50)
    with eval_mode(model), torch.no_grad():
        for a in range(0, 600, 50):
            model.advance(a, a + 50)
            st = model.state
            want = (st.pending >= 0).nonzero(as_tuple=True)[0]
            assert torch.equal(st.pending_nodes, want)
            snap = model.snapshot()
            assert torch.equal(snap.pending_nodes, want)
            snap.pending_nodes = None  # unknown (an older snapshot): found from pending
            assert torch.equal(snap.pending_at(), want)
