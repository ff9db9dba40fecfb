"""Shared fixtures. Real-data tests are marked ``dataset``; they read the data directory
(``$CFTGNN_DATA_DIR``) and skip when its files are absent, unless ``CFTGNN_REQUIRE_DATA=1``
(set by CI), in which case an absent file fails the run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cftgnn.data.paths import resolve_data_dir

# tests/testsupport: the test-only helpers of the project's infrastructure
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    """The data directory holding the UCI and Wikipedia files."""
    folder = resolve_data_dir()
    needed = [
        ("CollegeMsg.txt.gz", "CollegeMsg.txt"),
        ("wikipedia_nofeatures.csv.gz", "wikipedia_nofeatures.csv", "wikipedia.csv"),
    ]
    missing = [names[0] for names in needed if not any((folder / n).is_file() for n in names)]
    if missing:
        msg = f"real data absent from {folder}: {missing} (set CFTGNN_DATA_DIR)"
        if os.environ.get("CFTGNN_REQUIRE_DATA") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return folder


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch) -> Path:
    for var, value in {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
        "WANDB_SILENT": "true",
        "WANDB_CONSOLE": "off",
        "WANDB_ERROR_REPORTING": "false",
        "WANDB_CONFIG_DIR": str(tmp_path / "config"),
        "WANDB_CACHE_DIR": str(tmp_path / "cache"),
        "WANDB_DATA_DIR": str(tmp_path / "data"),
    }.items():
        monkeypatch.setenv(var, value)
    for var in ("WANDB_API_KEY", "WANDB_RUN_ID", "WANDB_RESUME"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path
