"""Shared fixtures. Real-data tests are marked ``dataset``; they read the data directory
(``$CFTGNN_DATA_DIR``) and skip when its files are absent, unless ``CFTGNN_REQUIRE_DATA=1``
(set by CI), in which case an absent file fails the run."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from cftgnn.data.paths import resolve_data_dir

# tests/testsupport: the one home of the test-only helpers (tiny models, toy problems, the
# infrastructure stand-ins); the fixtures below are shared by every test folder
sys.path.insert(0, str(Path(__file__).resolve().parent))

from testsupport.models import (  # noqa: E402
    ModelFactory,
    dygformer,
    graphmixer,
    tgat,
    tgn1,
    tgn2,
)
from testsupport.planted import planted_stream  # noqa: E402
from testsupport.problems import PROBLEMS, STRATEGIES  # noqa: E402

from cftgnn.data.stream import EventStream  # noqa: E402
from cftgnn.explain import SelectionStrategy  # noqa: E402
from cftgnn.models import TemporalModel  # noqa: E402
from cftgnn.testing import ToyProblem  # noqa: E402


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
    # Absolute, so that tests which run a script from another folder (cwd=tmp_path) find it
    # when CFTGNN_DATA_DIR is relative, as CI sets it.
    return folder.resolve()


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


# ------------------------------------------------------------ tiny models (testsupport.models)
@pytest.fixture(params=[tgn1, tgn2, tgat, graphmixer, dygformer],
                ids=["tgn1", "tgn2", "tgat", "graphmixer", "dygformer"])
def factory(request: pytest.FixtureRequest) -> ModelFactory:
    def make(stream: EventStream) -> TemporalModel:
        torch.manual_seed(0)
        model = request.param(stream)
        model.eval()
        model.attach(stream)
        return model

    return make


@pytest.fixture
def stream() -> EventStream:
    """150 events (9 full batches of 16 and a partial one), many shared timestamps, 3 features."""
    return planted_stream(num_events=150, num_src=8, num_dst=8, feat_dim=3, seed=1)


# ---------------------------------------------------------- toy problems (testsupport.problems)
@pytest.fixture(params=sorted(PROBLEMS))
def problem(request: pytest.FixtureRequest) -> ToyProblem:
    return PROBLEMS[request.param]()


@pytest.fixture(params=sorted(STRATEGIES))
def strategy_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["exact", "approximate"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_strategy() -> Callable[[str], SelectionStrategy]:
    """Factory: a fresh strategy by name (random is seeded)."""
    return lambda name: STRATEGIES[name]()
