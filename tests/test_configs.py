"""Every config group option composes and instantiates (no network, no real data needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import cftgnn.config  # noqa: F401
from cftgnn.data import EventStream

CONF = Path(__file__).resolve().parents[1] / "conf"


def dataset_options() -> list[str]:
    return sorted(p.stem for p in (CONF / "dataset").glob("*.yaml"))


@pytest.mark.parametrize("dataset", dataset_options())
def test_dataset_options_compose(dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("CFTGNN_DATA_DIR", str(tmp_path / "data"))
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("dataset_info", overrides=[f"dataset={dataset}"])
    assert cfg.dataset._target_.startswith("cftgnn.data.")
    if "data_dir" in cfg.dataset:
        assert cfg.dataset.data_dir == str(tmp_path / "data")  # the env var overrides


def test_paths_default_to_project_folders(monkeypatch):
    monkeypatch.delenv("CFTGNN_DATA_DIR", raising=False)
    monkeypatch.delenv("CFTGNN_CACHE_DIR", raising=False)
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("dataset_info")
    root = Path(cfg.paths.root_dir)
    assert (root / "pyproject.toml").is_file()
    assert cfg.paths.data_dir == str(root / "data")
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("dataset_info", overrides=["paths.data_dir=/elsewhere"])
    assert cfg.dataset.data_dir == "/elsewhere"


def test_debug_config_makes_a_tiny_synthetic_stream():
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("dataset_info", overrides=["debug=default"])
    stream = instantiate(cfg.dataset)
    assert isinstance(stream, EventStream) and stream.num_events == 300


def test_dataset_info_script_prints_summary(capsys):
    from cftgnn.data.info import run

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("dataset_info", overrides=["dataset=synthetic", "dataset.num_events=123"])
    run(cfg)
    out = capsys.readouterr().out
    assert "events       123" in out and "feature dim" in out and "data file" in out
