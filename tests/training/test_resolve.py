"""Device names from the configs resolve to torch devices, or fail with one clear message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cftgnn.data import make_synthetic_stream
from cftgnn.errors import ConfigError
from cftgnn.training.checkpoint import CheckpointMismatchError
from cftgnn.training.resolve import resolve_device, resolve_model

ROOT = Path(__file__).resolve().parents[2]
TGN_CFG = {"_target_": "cftgnn.models.TGN", "memory_dim": 8, "time_dim": 4,
           "embedding_dim": 8, "num_neighbors": 3, "batch_size": 10}
TGAT_CFG = {"_target_": "cftgnn.models.TGAT", "node_dim": 4, "time_dim": 4,
            "embedding_dim": 8, "num_neighbors": 3, "batch_size": 10}
KIND_MISMATCH = ("error: checkpoint 'checkpoints/tgn_uci.pt' holds a tgn model but model=tgat; "
                 "use model=tgn or a tgat checkpoint")


def test_auto_and_cpu():
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == want
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.parametrize("name", ["gpu", "cuda:x", ""])
def test_unknown_device_names(name):
    with pytest.raises(ConfigError, match="unknown device"):
        resolve_device(name)


def test_cuda_that_is_not_there():
    if torch.cuda.is_available():  # a device index past the last one
        name, message = f"cuda:{torch.cuda.device_count()}", "CUDA device"
    else:
        name, message = "cuda", "CUDA is not available"
    with pytest.raises(ConfigError, match=message):
        resolve_device(name)


def test_resolve_model_checks_the_device_first():
    stream = make_synthetic_stream(5, 40, seed=0)
    model, source = resolve_model(TGN_CFG, stream, None, ROOT / "checkpoints", "auto")
    assert model.device.type == resolve_device("auto").type and "fresh" in source
    with pytest.raises(ConfigError):
        resolve_model(TGN_CFG, stream, None, ROOT / "checkpoints", "gpu")


def test_resolve_model_refuses_a_checkpoint_of_another_kind():
    stream = make_synthetic_stream(5, 40, seed=0)
    with pytest.raises(CheckpointMismatchError, match="holds a tgn model but model=tgat"):
        resolve_model(TGAT_CFG, stream, str(ROOT / "checkpoints" / "tgn_uci.pt"),
                      ROOT / "checkpoints")
    with pytest.raises(CheckpointMismatchError, match="holds a tgat model but model=tgn"):
        resolve_model(TGN_CFG, stream, str(ROOT / "checkpoints" / "tgat_uci.pt"),
                      ROOT / "checkpoints")


def test_a_named_checkpoint_that_does_not_exist_is_refused_not_replaced_by_fresh_weights():
    stream = make_synthetic_stream(5, 40, seed=0)
    with pytest.raises(ConfigError, match="checkpoint 'checkpoints/tgn_ucii.pt' does not exist"):
        resolve_model(TGN_CFG, stream, "checkpoints/tgn_ucii.pt", ROOT / "checkpoints")
    _, source = resolve_model(TGN_CFG, stream, "auto", ROOT / "checkpoints")  # none committed
    assert source.startswith("fresh random weights")


@pytest.mark.parametrize("script, args, message", [
    ("benchmark_oracle.py", ["dataset=synthetic", "device=gpu"], "error: unknown device 'gpu'"),
    ("train.py", ["dataset=synthetic", "device=gpu"], "error: unknown device 'gpu'"),
    ("train.py", ["model=tgnn"], "error: unknown model 'tgnn' (choose from: "),
    ("dataset_info.py", ["dataset=ucii"], "error: unknown dataset 'ucii'"),
    ("explain.py", ["model=tgat", "checkpoint=checkpoints/tgn_uci.pt", "debug=default"],
     KIND_MISMATCH),
    ("explain.py", ["checkpoint=checkpoints/tgn_ucii.pt", "debug=default"],
     "error: checkpoint 'checkpoints/tgn_ucii.pt' does not exist"),
])
def test_scripts_report_bad_input_in_one_line(script, args, message, tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args,
                           f"hydra.run.dir={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), done.stderr


def test_explain_py_on_a_cuda_device_that_is_not_there_ends_in_one_line(tmp_path):
    """``device=cuda`` without CUDA (or a CUDA index past the last device): one ``error:``
    line, exit status 2, before any work."""
    if torch.cuda.is_available():
        name, message = f"cuda:{torch.cuda.device_count()}", "error: device=cuda:"
    else:
        name, message = "cuda", "error: device=cuda but CUDA is not available"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "explain.py"),
                           f"device={name}", "debug=default", f"out_dir={tmp_path / 'run'}",
                           f"hydra.run.dir={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), done.stderr
    assert not any((tmp_path / "run").rglob("*"))  # refused before any work: nothing in it


@pytest.mark.dataset
def test_explain_refuses_tgn_weights_as_tgat_on_uci(real_data_dir, tmp_path):
    """The issue's command, on the real stream: refused in one line, nothing recorded."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "explain.py"), "model=tgat",
         "checkpoint=checkpoints/tgn_uci.pt", f"out_dir={tmp_path / 'run'}",
         f"hydra.run.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "CFTGNN_DATA_DIR": str(real_data_dir)})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [KIND_MISMATCH]
    assert not (tmp_path / "run" / "run.json").exists()


def test_auto_on_a_planted_stream_of_other_options_suggests_the_presets():
    from cftgnn.data import make_planted_stream

    stream = make_planted_stream(kind="rule", num_events=300, seed=0)  # feat_dim 0, not 3
    with pytest.raises(CheckpointMismatchError) as refused:
        resolve_model(TGN_CFG, stream, "auto", ROOT / "checkpoints")
    message = str(refused.value)
    assert "\n" not in message and "feat_dim: checkpoint 3 vs stream 0" in message
    assert message.endswith("; the committed planted checkpoints were trained on the streams "
                            "of dataset=planted_hawkes and dataset=planted_rule (conf/dataset/): "
                            "use one, without dataset.* overrides, or checkpoint=null for "
                            "fresh weights")
    named = str(ROOT / "checkpoints" / "tgn_planted_rule.pt")  # a path the user named: no hint
    with pytest.raises(CheckpointMismatchError, match="vs stream 0$"):
        resolve_model(TGN_CFG, stream, named, ROOT / "checkpoints")
