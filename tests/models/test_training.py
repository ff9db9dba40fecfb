"""Training learns a planted pattern; run(cfg) trains, evaluates and writes a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf

import cftgnn.config  # noqa: F401
from cftgnn.models import TemporalModel
from cftgnn.models.checkpoint import load_checkpoint
from cftgnn.models.testing import planted_stream
from cftgnn.models.training import Split, evaluate_test, fit, link_metrics, run, score_range
from tests.models.conftest import ModelFactory

CONF = Path(__file__).resolve().parents[2] / "conf"


def test_training_lowers_the_loss_and_beats_random(factory: ModelFactory) -> None:
    torch.set_num_threads(1)
    stream = planted_stream(num_events=640, num_src=10, num_dst=10, seed=4)
    model = factory(stream)
    split = Split.chronological(stream.num_events, model.batch_size)
    fitted = fit(model, epochs=4, patience=4, lr=1e-2, seed=0, split=split, progress=False)
    losses = [h["loss"] for h in fitted["history"]]
    assert min(losses[1:]) < losses[0]
    model.reset()
    model.advance(0, split.train_end)
    pos, neg, _ = score_range(model, split.train_end, split.val_end, seed=1)
    assert link_metrics(pos, neg)["ap"] > 0.6


def tiny_cfg(tmp_path: Path, model: str) -> object:
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=[
            f"model={model}", "model.memory_dim=8" if model == "tgn" else "model.node_dim=4",
            "model.time_dim=4", "model.embedding_dim=8", "model.num_neighbors=3",
            "model.batch_size=25", "epochs=2", "lr=0.01", "progress=false",
            f"checkpoint_dir={tmp_path}"])
    cfg.dataset = OmegaConf.create({"_target_": "cftgnn.models.testing.planted_stream",
                                    "num_events": 400, "feat_dim": 2})
    return cfg


@pytest.mark.parametrize("model", ["tgn", "tgat"])
def test_run_writes_a_checkpoint_that_reproduces_its_card(tmp_path: Path, model: str) -> None:
    cfg = tiny_cfg(tmp_path, model)
    card = run(cfg)  # type: ignore[arg-type]
    pt, js = tmp_path / f"{model}_planted.pt", tmp_path / f"{model}_planted.json"
    assert pt.is_file() and js.is_file()
    on_disk = json.loads(js.read_text())
    test = on_disk["metrics"]["test"]
    assert test["transductive"]["ap"] == card["metrics"]["test"]["transductive"]["ap"]
    assert "_target_" in on_disk["model"] and len(on_disk["dataset"]["sha256"]) == 64
    assert {"split", "epochs_run", "training_seconds", "versions"} <= set(on_disk)
    assert torch.load(pt, weights_only=True)["config"]["_target_"].startswith("cftgnn.models.")
    stream = instantiate(cfg.dataset)  # type: ignore[attr-defined]
    loaded: TemporalModel = load_checkpoint(pt, stream)
    again = evaluate_test(loaded, Split(**on_disk["split"]), seed=on_disk["eval_seed"])
    assert np.isclose(again["transductive"]["ap"], test["transductive"]["ap"], atol=1e-6)


def test_model_configs_instantiate() -> None:
    for name in ("tgn", "tgat"):
        with initialize_config_dir(str(CONF), version_base="1.3"):
            cfg = compose("train", overrides=[f"model={name}"])
        model = instantiate(cfg.model, num_nodes=5, edge_dim=0)
        assert isinstance(model, TemporalModel)
        assert instantiate(model.config()).config() == model.config()
