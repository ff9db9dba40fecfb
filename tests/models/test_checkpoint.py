"""Checkpoint save/load round trip, refusal of mismatched streams, committed checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate

from cftgnn.data.stream import EventStream
from cftgnn.errors import CftgnnError
from cftgnn.models.checkpoint import (
    CheckpointMismatchError,
    load_checkpoint,
    save_checkpoint,
    stream_checksum,
)
from cftgnn.models.testing import planted_stream
from cftgnn.models.training import Split, evaluate_test
from tests.models.conftest import ModelFactory

ROOT = Path(__file__).resolve().parents[2]


def test_save_load_round_trip(factory: ModelFactory, stream: EventStream,
                              tmp_path: Path) -> None:
    model = factory(stream)
    pt, js = save_checkpoint(model, stream, tmp_path / "m_planted.pt", {"note": "x"})
    assert json.loads(js.read_text())["note"] == "x"
    assert set(torch.load(pt, weights_only=True)) == {"state_dict", "config", "dataset"}
    loaded = load_checkpoint(pt, stream)
    assert type(loaded) is type(model) and loaded.config() == model.config()
    for m in (model, loaded):
        m.advance(0, 100)
    q = (stream.src[100:110], stream.dst[100:110], stream.t[100:110])
    with torch.no_grad():
        assert torch.equal(model.predict(*q), loaded.predict(*q))


@pytest.mark.parametrize("change", ["name", "nodes", "features"])
def test_mismatched_checkpoint_is_refused(factory: ModelFactory, stream: EventStream,
                                          tmp_path: Path, change: str) -> None:
    model = factory(stream)
    pt, _ = save_checkpoint(model, stream, tmp_path / "m.pt")
    other = {
        "name": planted_stream(num_events=150, num_src=8, num_dst=8, feat_dim=3, name="uci"),
        "nodes": planted_stream(num_events=150, num_src=9, num_dst=8, feat_dim=3),
        "features": planted_stream(num_events=150, num_src=8, num_dst=8, feat_dim=2),
    }[change]
    with pytest.raises(CheckpointMismatchError) as err:
        load_checkpoint(pt, other)
    assert isinstance(err.value, CftgnnError)
    assert "'planted'" in str(err.value) and f"'{other.name}'" in str(err.value)
    assert str(other.num_nodes) in str(err.value) and str(stream.num_nodes) in str(err.value)


def committed_checkpoints() -> list[Path]:
    return sorted((ROOT / "checkpoints").glob("*.pt"))


@pytest.mark.dataset
@pytest.mark.parametrize("pt", committed_checkpoints(), ids=lambda p: p.stem)
def test_committed_checkpoint_reproduces_its_card(pt: Path, real_data_dir: Path) -> None:
    """Each committed checkpoint loads and reproduces its card's test AP within 0.005."""
    torch.set_num_threads(1)
    card = json.loads(pt.with_suffix(".json").read_text())
    dataset_cfg = dict(card["train_config"]["dataset"])
    dataset_cfg["data_dir"] = str(real_data_dir)  # this machine's data directory
    dataset_cfg.pop("cache_dir", None)
    dataset_cfg["download"] = False
    stream = instantiate(dataset_cfg)
    assert card["dataset"]["sha256"] == stream_checksum(stream)
    model = load_checkpoint(pt, stream)
    test = evaluate_test(model, Split(**card["split"]), seed=card["eval_seed"])
    expected = card["metrics"]["test"]["transductive"]["ap"]
    assert np.isclose(test["transductive"]["ap"], expected, atol=0.005)
    assert pt.stat().st_size <= 20 * 2**20
