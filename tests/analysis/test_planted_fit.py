"""``scripts/planted_fit.py``: a planted checkpoint's test AP split by whether the event has a
planted cause (how well a model learned the causes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401  (the ${cftgnn_root:} resolver)
from cftgnn.analysis.planted_fit import fit_table, main, planted_fit
from cftgnn.data import make_planted_stream
from cftgnn.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
TINY = ["model=tgn", "model.memory_dim=8", "model.time_dim=4", "model.embedding_dim=8",
        "model.num_neighbors=3", "model.batch_size=25", "epochs=1", "progress=false",
        "dataset=planted", "dataset.num_events=600", "dataset.feat_dim=3"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cftgnn.training.loop import run

    out = tmp_path_factory.mktemp("planted")
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[*TINY, f"out_dir={out}"])
    run(cfg)
    return out / "tgn_planted_rule.pt"


def test_the_split_adds_up_to_the_card(checkpoint: Path) -> None:
    card = json.loads(checkpoint.with_suffix(".json").read_text())
    row = planted_fit(checkpoint)
    # the replay scores the test range exactly as training did
    assert row["ap"] == pytest.approx(card["metrics"]["test"]["transductive"]["ap"], abs=1e-9)
    assert row["card_ap"] == card["metrics"]["test"]["transductive"]["ap"]
    stream = make_planted_stream(num_events=600, feat_dim=3)
    lo = card["split"]["val_end"]
    caused = int((np.diff(stream.causes.indptr)[lo:] > 0).sum())
    assert row["caused_n"] == caused > 0
    assert row["background_n"] == 600 - lo - caused
    assert row["model"] == "tgn" and row["stream"] == "planted_rule"
    table = fit_table([row])
    assert table.splitlines()[2].startswith("| tgn | planted_rule | ")


def test_a_checkpoint_of_another_stream_or_none_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        main([str(tmp_path / "none.pt")])
    pt = tmp_path / "tgn_uci.pt"
    pt.write_bytes(b"x")
    with pytest.raises(ConfigError, match="no readable model card"):
        main([str(pt)])
    card = json.loads((ROOT / "checkpoints" / "tgn_uci.json").read_text())
    pt.with_suffix(".json").write_text(json.dumps(card))
    with pytest.raises(ConfigError, match="trained on 'uci', not a planted stream"):
        main([str(pt)])


def test_the_script_says_a_bad_checkpoint_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "planted_fit.py"),
                           str(tmp_path / "none.pt")], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: checkpoint {str(tmp_path / 'none.pt')!r} does not exist"]
