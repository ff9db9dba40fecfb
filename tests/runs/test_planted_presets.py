"""The presets of the committed planted checkpoints: ``dataset=planted_rule`` and
``dataset=planted_hawkes`` compose to the generator options each checkpoint's card says it was
trained on, so ``checkpoint=auto`` finds and loads the committed model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

import cftgnn.config  # noqa: F401  (registers ${cftgnn_root:})
from cftgnn.training.resolve import auto_checkpoint

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINTS = ROOT / "checkpoints"
PAIRS = [(model, kind) for kind in ("rule", "hawkes")
         for model in ("tgn", "tgat", "graphmixer")]


def _compose(*overrides: str) -> DictConfig:
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        return compose("explain", overrides=list(overrides))


@pytest.mark.parametrize(("model", "kind"), PAIRS)
def test_the_preset_composes_to_the_card_s_stream(model: str, kind: str) -> None:
    card = json.loads((CHECKPOINTS / f"{model}_planted_{kind}.json").read_text())
    cfg = _compose(f"dataset=planted_{kind}", f"model={model}")
    assert OmegaConf.to_container(cfg.dataset) == card["train_config"]["dataset"]
    # and they differ from dataset=planted's defaults, which do not fit the checkpoints
    assert OmegaConf.to_container(_compose("dataset=planted").dataset) != \
        card["train_config"]["dataset"]


@pytest.mark.parametrize(("model", "kind"), PAIRS)
def test_checkpoint_auto_names_the_committed_files(model: str, kind: str) -> None:
    cfg = _compose(f"dataset=planted_{kind}", f"model={model}")
    stream = instantiate(cfg.dataset)
    assert stream.name == f"planted_{kind}"
    assert auto_checkpoint(cfg.paths.checkpoint_dir, cfg.model, stream.name) == \
        Path(cfg.paths.checkpoint_dir) / f"{model}_planted_{kind}.pt"
    assert (CHECKPOINTS / f"{model}_planted_{kind}.pt").is_file()


@pytest.mark.parametrize("model", ["tgn", "graphmixer"])
def test_explain_runs_on_the_committed_checkpoint(model: str, tmp_path: Path) -> None:
    """A 2-event run of ``dataset=planted_rule model=<model>`` loads the committed checkpoint
    (not fresh weights) and scores its explanations against the planted causes."""
    from cftgnn.runs import pipeline
    from cftgnn.runs.records import read_records

    cfg = _compose("dataset=planted_rule", f"model={model}", "explainer=perturb_one",
                   "progress=false", "curves=none", f"out_dir={tmp_path}")
    stream = instantiate(cfg.dataset)
    effects = np.flatnonzero(stream.labels == 3)
    events = [int(e) for e in effects[effects >= 25500][:2]]
    cfg.events = events
    pipeline.run(cfg)
    run = json.loads((tmp_path / "run.json").read_text())
    assert Path(str(run["model"]["weights"])).resolve() == \
        (CHECKPOINTS / f"{model}_planted_rule.pt").resolve()
    records = read_records(tmp_path)
    assert sorted(records["event_id"].tolist()) == events
    assert records["cause_total"].tolist() == [2, 2]
