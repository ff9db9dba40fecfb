"""The cone replay's shortcuts for work that cannot change anything leave
every logit bitwise as it was: skipping a batch once every effect died out
(``cftgnn.replay.tgn.cone._quiet``), and comparing few rows with the recording in one pass
(``cftgnn.replay.tgn.compare.ONE_PASS_ROWS``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from testsupport.cone_cases import exact_logits, sparse_case

from cftgnn.data import make_synthetic_stream
from cftgnn.models import TGN
from cftgnn.replay.tgn import compare, cone


@pytest.mark.parametrize("num_layers", [1, 2])
def test_shortcuts_leave_every_logit_bitwise_the_same(monkeypatch, num_layers):
    # long and sparse: far-back removals whose effects pruning retires early
    stream, model, sets, batch = sparse_case(num_layers)
    quiet = cone._quiet
    skipped = []

    def counted(*args):
        out = quiet(*args)
        skipped.append(out)
        return out

    monkeypatch.setattr(cone, "_quiet", counted)
    fast = exact_logits(stream, model, sets, batch)
    # with one layer, batches were skipped: the comparison below covers that shortcut (two
    # layers read more states, whose effects outlive this stream; they check the other one)
    assert any(skipped) or num_layers == 2
    monkeypatch.setattr(cone, "_quiet", lambda *args: False)
    monkeypatch.setattr(compare, "ONE_PASS_ROWS", 0)
    slow = exact_logits(stream, model, sets, batch)
    for got, want in zip(fast, slow, strict=True):
        assert np.array_equal(got, want)  # bitwise, not within a tolerance


def test_cached_gru_weights_follow_every_change_of_the_weights():
    stream = make_synthetic_stream(20, 200, seed=1, feat_dim=2)
    torch.manual_seed(0)
    model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=8, time_dim=4, embedding_dim=8,
                num_layers=1, num_heads=1, num_neighbors=3, batch_size=20)
    model.attach(stream)
    rng = np.random.default_rng(0)
    ev = rng.integers(50, 60, 30)
    lu = stream.t[ev] - rng.integers(0, 3, 30)
    mem_self, mem_other, of = torch.randn(30, 8), torch.randn(5, 8), rng.integers(0, 5, 30)

    def update() -> torch.Tensor:
        return model.message_update_shared(ev, mem_self, lu, mem_other, of)

    with torch.no_grad():
        first = update()
        assert torch.equal(update(), first)  # from the cache: the same bits
        model.gru.weight_hh.mul_(0.5)  # in place
        halved = update()
        model.gru.weight_ih.data = model.gru.weight_ih.data * 2  # data swapped, as .to does
        doubled = update()
    with torch.enable_grad():  # an inference path: no gradients even where they are on
        again = update()
        assert torch.equal(again, doubled) and not again.requires_grad
    assert not torch.equal(halved, first) and not torch.equal(doubled, halved)
    fresh = TGN(stream.num_nodes, stream.feat_dim, memory_dim=8, time_dim=4, embedding_dim=8,
                num_layers=1, num_heads=1, num_neighbors=3, batch_size=20)
    fresh.load_state_dict(model.state_dict())
    fresh.attach(stream)
    with torch.no_grad():  # a model that never cached computes the same bits
        assert torch.equal(fresh.message_update_shared(ev, mem_self, lu, mem_other, of), doubled)
