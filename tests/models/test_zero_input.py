"""TGAT's zero layer-0 input: one zero row serves every attention slot, with the same floats."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from testsupport.models import named_model

import cftgnn.models.layers as layers
from cftgnn.data import make_synthetic_stream
from cftgnn.oracle.engine import ReplayEngine


def _everything(engine: ReplayEngine, event_id: int) -> tuple:
    """Embeddings of every node, the probe's features, attention and soft logit, and exact
    logits of nested removal sets (the batched replay) of one event."""
    model = engine.model
    oracle = engine.oracle(event_id, None, 12, "exact")
    probe = oracle.probe
    assert probe is not None and len(oracle.removable) > 2
    w = torch.rand(len(oracle.removable), generator=torch.Generator().manual_seed(event_id))
    sets = [frozenset(oracle.removable[:j].tolist()) for j in range(1, len(oracle.removable))]
    nodes = torch.arange(model.num_nodes)
    with torch.no_grad():
        model.eval()
        z = model.embed(nodes, torch.full((len(nodes),), float(model.stream.t[event_id]),
                                          dtype=torch.float64))
    return (z, probe.features(), probe.attention(), probe.soft_logit(w).detach(),
            oracle.exact_batch(sets))


@pytest.mark.parametrize("name", ["tgat1", "tgat2"])
def test_sharing_the_zero_row_changes_no_float(name, monkeypatch):
    stream = make_synthetic_stream(25, 400, seed=7, feat_dim=2, p_tie=0.3)
    engine = ReplayEngine(named_model(stream, name), stream)
    real, used = layers._zero_rows_shared, []

    def spy(h: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = real(h, s)
        used.append(len(out[0]) < len(h))
        return out

    for event_id in (123, 261, 399):
        with monkeypatch.context() as m:
            m.setattr(layers, "_zero_rows_shared", spy)
            shared = _everything(engine, event_id)
        assert any(used)  # the zero rows were shared: the comparison below means something
        with monkeypatch.context() as m:  # every slot projects its own zero row
            m.setattr(layers, "_zero_rows_shared", lambda h, s: (h, s))
            full = _everything(engine, event_id)
        for a, b in zip(shared, full, strict=True):
            if isinstance(a, torch.Tensor):
                assert torch.equal(a, b)
            else:
                np.testing.assert_array_equal(a, b)


def test_only_an_all_zero_input_is_shared():
    rows = torch.zeros(4, 3)
    h, src = layers._zero_rows_shared(rows, torch.arange(4))
    assert h.shape == (1, 3) and src.tolist() == [0, 0, 0, 0]
    rows[2, 1] = 1e-30  # one nonzero entry: every row keeps its own projection
    h, src = layers._zero_rows_shared(rows, torch.arange(4))
    assert h is rows and src.tolist() == [0, 1, 2, 3]
