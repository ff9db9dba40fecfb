"""Training learns a planted pattern; run(cfg) trains, evaluates and writes a checkpoint into
its own run directory, replacing an existing one only with ``overwrite=true``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf
from testsupport.models import ModelFactory
from testsupport.planted import planted_stream

import cftgnn.config  # noqa: F401
from cftgnn.errors import ConfigError
from cftgnn.models import TemporalModel
from cftgnn.training import loop as training
from cftgnn.training.checkpoint import file_sha256, load_checkpoint
from cftgnn.training.kinds import weights_sha256
from cftgnn.training.loop import (
    Split,
    evaluate_test,
    fit,
    link_metrics,
    run,
    score_range,
    validate,
)

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


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


#: A tiny TGN: trains on the synthetic debug-size stream in a second or two.
TINY_TGN = ["model=tgn", "model.memory_dim=8", "model.time_dim=4", "model.embedding_dim=8",
            "model.num_neighbors=3", "model.batch_size=25", "epochs=1", "progress=false"]


#: Each model's own size options, shrunk for the tiny runs.
TINY_SIZE = {"tgn": ["model.memory_dim=8", "model.num_neighbors=3"],
             "tgat": ["model.node_dim=4", "model.num_neighbors=3"],
             "graphmixer": ["model.channels=8", "model.num_neighbors=3"],
             "dygformer": ["model.channel_dim=4", "model.max_input_sequence_length=4"]}


def tiny_cfg(tmp_path: Path, model: str, *overrides: str) -> object:
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=[
            f"model={model}", *TINY_SIZE[model], "model.time_dim=4", "model.embedding_dim=8",
            "model.batch_size=25", "epochs=2", "lr=0.01", "progress=false",
            f"out_dir={tmp_path}", *overrides])
    cfg.dataset = OmegaConf.create({"_target_": "testsupport.planted.planted_stream",
                                    "num_events": 400, "feat_dim": 2})
    return cfg


@pytest.mark.parametrize("model", ["tgn", "tgat", "graphmixer", "dygformer"])
def test_run_writes_a_checkpoint_that_reproduces_its_card(tmp_path: Path, model: str) -> None:
    cfg = tiny_cfg(tmp_path, model)
    card = run(cfg)  # type: ignore[arg-type]
    pt, js = tmp_path / f"{model}_planted.pt", tmp_path / f"{model}_planted.json"
    assert pt.is_file() and js.is_file()
    on_disk = json.loads(js.read_text())
    test = on_disk["metrics"]["test"]
    assert test["transductive"]["ap"] == card["metrics"]["test"]["transductive"]["ap"]
    assert "_target_" in on_disk["model"] and len(on_disk["dataset"]["sha256"]) == 64
    assert on_disk["weights_sha256"] == weights_sha256(pt)  # the card names its weights
    assert {"split", "epochs_run", "training_seconds", "versions"} <= set(on_disk)
    assert torch.load(pt, weights_only=True)["config"]["_target_"].startswith("cftgnn.models.")
    stream = instantiate(cfg.dataset)  # type: ignore[attr-defined]
    loaded: TemporalModel = load_checkpoint(pt, stream)
    again = evaluate_test(loaded, Split(**on_disk["split"]), seed=on_disk["eval_seed"])
    assert np.isclose(again["transductive"]["ap"], test["transductive"]["ap"], atol=1e-6)
    # the validation AP that kept these weights is theirs too, replayed afresh (TGN's was
    # scored from the training pass's own memory before, written by weights that changed
    # batch by batch: 0.541 on the card, 0.558 replayed)
    assert on_disk["val_scored_from"] == "replay"
    val = validate(loaded, Split(**on_disk["split"]), seed=int(cfg.seed) + 1)  # type: ignore[attr-defined]
    assert np.isclose(val["ap"], on_disk["metrics"]["best_val_ap"], atol=1e-6)
    best = on_disk["history"][on_disk["best_epoch"] - on_disk["epochs_numbered_from"]]
    assert best["val_ap"] == on_disk["metrics"]["best_val_ap"]


def test_model_configs_instantiate() -> None:
    for name in ("tgn", "tgat", "graphmixer", "dygformer"):
        with initialize_config_dir(str(CONF), version_base="1.3"):
            cfg = compose("train", overrides=[f"model={name}"])
        model = instantiate(cfg.model, num_nodes=5, edge_dim=0)
        assert isinstance(model, TemporalModel)
        assert instantiate(model.config()).config() == model.config()


def committed_files() -> dict[str, str]:
    return {p.name: file_sha256(p) for p in sorted((ROOT / "checkpoints").iterdir())}


def test_train_py_writes_into_its_own_run_directory(tmp_path: Path) -> None:
    """The default output is Hydra's run directory; checkpoints/ is left as it was."""
    before = committed_files()
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), *TINY_TGN, "dataset=synthetic",
         "dataset.num_events=300", "dataset.num_nodes=30", f"hydra.run.dir={run_dir}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    pt = run_dir / "tgn_synthetic.pt"
    card = json.loads(pt.with_suffix(".json").read_text())
    assert card["weights_sha256"] == weights_sha256(pt)
    assert committed_files() == before


def test_train_py_out_dir_gets_the_checkpoint_and_card_only(tmp_path: Path) -> None:
    """``out_dir`` (``checkpoints/`` when a committed checkpoint is retrained) receives the
    checkpoint and its card, nothing of Hydra's: ``.hydra/`` and ``train.log`` stay in the
    run directory under ``outputs/train/``, unlike ``explain.py``, whose ``out_dir`` is its
    run directory."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), *TINY_TGN, "dataset=synthetic",
         "dataset.num_events=300", "dataset.num_nodes=30", f"out_dir={out}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["tgn_synthetic.json", "tgn_synthetic.pt"]
    (hydra,) = (tmp_path / "outputs" / "train").rglob(".hydra")
    assert (hydra.parent / "train.log").is_file()


def test_the_default_run_directory_is_under_outputs_train() -> None:
    from hydra.core.hydra_config import HydraConfig

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=["model=tgat", "dataset=wikipedia"],
                      return_hydra_config=True)
    hc = HydraConfig.instance()
    try:
        hc.set_config(cfg)
        assert str(cfg.hydra.run.dir).startswith("outputs/train/tgat-wikipedia/")
    finally:
        hc.cfg = None
    assert cfg.out_dir is None and cfg.overwrite is False


def test_an_existing_checkpoint_is_replaced_only_with_overwrite(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run(tiny_cfg(tmp_path, "tgn"))  # type: ignore[arg-type]
    pt = tmp_path / "tgn_planted.pt"
    kept = (file_sha256(pt), pt.with_suffix(".json").read_text())

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("training started although the output would be refused")

    monkeypatch.setattr(training, "fit", never)
    with pytest.raises(ConfigError, match=r"tgn_planted\.pt exists .* overwrite=true"):
        run(tiny_cfg(tmp_path, "tgn"))  # type: ignore[arg-type]
    assert (file_sha256(pt), pt.with_suffix(".json").read_text()) == kept
    monkeypatch.undo()
    card = run(tiny_cfg(tmp_path, "tgn", "overwrite=true", "seed=1"))  # type: ignore[arg-type]
    on_disk = json.loads(pt.with_suffix(".json").read_text())
    assert on_disk["train_config"]["seed"] == 1 == card["train_config"]["seed"]
    assert on_disk["weights_sha256"] == weights_sha256(pt)


def test_a_card_alone_is_not_replaced_either(tmp_path: Path) -> None:
    (tmp_path / "tgat_planted.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"tgat_planted\.json exists"):
        run(tiny_cfg(tmp_path, "tgat"))  # type: ignore[arg-type]


def test_run_outside_hydra_needs_out_dir() -> None:
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=["dataset=synthetic"])
    with pytest.raises(ConfigError, match="set out_dir"):
        training.output_dir(cfg)


@pytest.mark.dataset
def test_one_epoch_on_uci_does_not_replace_the_committed_checkpoint(real_data_dir: Path,
                                                                    tmp_path: Path) -> None:
    """The issue's data loss: ``out_dir=checkpoints`` without ``overwrite=true`` is refused in
    one line before training, and the committed files are unchanged."""
    before = committed_files()
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), "model=tgn", "dataset=uci",
         "epochs=1", "out_dir=checkpoints", f"hydra.run.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "CFTGNN_DATA_DIR": str(real_data_dir)})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: checkpoints/tgn_uci.pt exists"), (
        done.stderr)
    assert "overwrite=true" in lines[0]
    assert committed_files() == before
