"""What a checkpoint decides: its model's options and its stream's events.

``model.*`` overrides that disagree with a loaded checkpoint are refused, never recorded as
used; the scripts' load compares the stream's checksum (a renamed stream of the same events
is accepted, other events are refused naming both checksums)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from testsupport.planted import planted_stream

from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.models import TGN
from cftgnn.training.checkpoint import (
    CheckpointMismatchError,
    load_checkpoint,
    save_checkpoint,
    stream_checksum,
)
from cftgnn.training.resolve import check_overrides, resolve_model, used_model_config

TGN_CFG = {"_target_": "cftgnn.models.TGN", "memory_dim": 100, "time_dim": 100,
           "embedding_dim": 100, "num_layers": 1, "num_heads": 2, "num_neighbors": 10,
           "dropout": 0.1, "batch_size": 200}


@pytest.fixture()
def saved(tmp_path: Path) -> tuple[Path, EventStream]:
    stream = planted_stream(num_events=150, num_src=8, num_dst=8, feat_dim=3, seed=1)
    model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=8, time_dim=8, embedding_dim=8,
                num_neighbors=4, batch_size=16)
    pt, _ = save_checkpoint(model, stream, tmp_path / "tgn_planted.pt")
    return pt, stream


def test_an_override_the_checkpoint_decides_is_refused_and_defaults_are_not(saved):
    pt, stream = saved
    model, _ = resolve_model(TGN_CFG, stream, str(pt), pt.parent)  # defaults: not asked for
    assert model.batch_size == 16
    used = used_model_config(TGN_CFG, model)  # what run.json records
    assert used["batch_size"] == 16 and used["memory_dim"] == 8
    assert used.keys() == TGN_CFG.keys() and used["_target_"] == TGN_CFG["_target_"]
    with pytest.raises(ConfigError, match=r"model.batch_size=100 disagrees with checkpoint "
                                          r".*\(batch_size=16\)"):
        resolve_model({**TGN_CFG, "batch_size": 100}, stream, str(pt), pt.parent)
    check_overrides({**TGN_CFG, "batch_size": 16}, model.hparams, pt)  # agrees: fine


def test_a_renamed_stream_of_the_same_events_is_matched_by_checksum(saved):
    pt, stream = saved
    renamed = dataclasses.replace(stream, name="my_copy")
    with pytest.raises(CheckpointMismatchError, match="dataset.name=planted"):
        load_checkpoint(pt, renamed)  # no checksum compared: the name is all it has
    assert load_checkpoint(pt, renamed, check_checksum=True).num_nodes == stream.num_nodes


def test_other_events_under_the_same_name_are_refused_naming_both_checksums(saved):
    pt, stream = saved
    feat = np.array(stream.edge_feat, copy=True)
    feat[0] += 1.0
    other = dataclasses.replace(stream, edge_feat=feat)
    load_checkpoint(pt, other)  # the Python API compares name, nodes and features only
    with pytest.raises(CheckpointMismatchError) as err:
        load_checkpoint(pt, other, check_checksum=True)
    message = str(err.value)
    assert stream_checksum(stream)[:12] in message and stream_checksum(other)[:12] in message
    assert "write the checkpoint again" in message
    with pytest.raises(CheckpointMismatchError, match="checksum"):
        resolve_model(TGN_CFG, other, str(pt), pt.parent)  # the scripts' load compares it
