"""Models register their own replay; the oracle asks ``replay_for`` and guesses nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from torch import Tensor

from cftgnn.data.synthetic import make_synthetic_stream
from cftgnn.models import TGAT, TGN, PyGTGN
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.replay.generic import GenericReplay, NativeReplay
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.registry import register_replay, registered_replay, replay_for
from cftgnn.replay.tgat import TGATReplay
from cftgnn.replay.tgn import TGNReplay

SMALL = dict(time_dim=4, embedding_dim=4, num_neighbors=3, batch_size=10)


def tgn(**kw: Any) -> TGN:
    return TGN(12, 2, memory_dim=4, **SMALL, **kw)


def tgat(cls: type[TGAT] = TGAT) -> TGAT:
    return cls(12, 2, node_dim=4, num_layers=1, **SMALL)


def test_built_in_models_get_their_registered_replay():
    assert type(replay_for(tgn())) is TGNReplay
    assert type(replay_for(tgat())) is TGATReplay
    pyg = PyGTGN(12, 2, memory_dim=4, time_dim=4, embedding_dim=4, num_neighbors=3,
                 batch_size=10)
    assert type(replay_for(pyg)) is GenericReplay


def test_a_subclass_gets_its_bases_replay_unless_it_registers_its_own():
    class PlainTGAT(TGAT):
        pass

    class OwnTGAT(TGAT):
        pass

    @register_replay(OwnTGAT)
    class OwnReplay(GenericReplay):
        pass

    assert type(replay_for(tgat(PlainTGAT))) is TGATReplay
    assert type(replay_for(tgat(OwnTGAT))) is OwnReplay
    assert registered_replay(OwnTGAT) is OwnReplay and registered_replay(object) is None


def test_a_class_has_one_replay():
    class Once(TGAT):
        pass

    register_replay(Once)(GenericReplay)
    register_replay(Once)(GenericReplay)  # the same replay again is harmless
    with pytest.raises(ValueError, match="already has a replay"):
        register_replay(Once)(NativeReplay)


def test_a_model_with_its_own_batched_replay_is_called_that_way():
    class Batched:
        def replay_plan(self, base: Any, end: int, removed_mask: Any = None,
                        removable: Any = None) -> Any:
            return ("plan", end)

        def masked_logits(self, plan: Any, sets: RemovalSets) -> Tensor:
            raise AssertionError("not called here")

    class Plain:
        pass

    replay = replay_for(Batched())  # type: ignore[arg-type]
    assert isinstance(replay, NativeReplay)
    assert replay.plan(None, 0, 7).plan == ("plan", 7)
    assert type(replay_for(Plain())) is GenericReplay  # type: ignore[arg-type]


def test_the_engine_uses_the_registered_replay_and_the_declared_capabilities():
    stream = make_synthetic_stream(num_nodes=12, num_events=60, feat_dim=2, seed=0)

    class Counted(TGN):
        pass

    calls: list[int] = []

    @register_replay(Counted)
    class CountedReplay(GenericReplay):
        def plan(self, base: Any, start: int, end: int, removed_mask: Any = None,
                 removable: Any = None) -> Any:
            calls.append(end)
            return super().plan(base, start, end, removed_mask, removable)

    model = Counted(12, 2, memory_dim=4, num_layers=2, **SMALL)
    engine = ReplayEngine(model, stream)
    assert isinstance(engine.replay, CountedReplay)
    replay = EventReplay(engine, 45)
    assert calls == [45]  # the exact plan; the approximate one on its first call
    replay.exact([frozenset()])
    assert calls == [45]
    replay.approximate([frozenset(), frozenset(replay.candidates.ids[:1].tolist())])
    replay.approximate([frozenset()])
    assert calls == [45, 45]  # made once
    # the default hop radius is the model's declared num_layers
    two_hops = engine.index.candidates(45, 2, 64).ids
    assert np.array_equal(replay.candidates.ids, two_hops)
    assert len(engine.index.candidates(45, 1, 64).ids) < len(two_hops)
    assert model.has_memory and not tgat().has_memory and tgat().num_layers == 1
