"""The TGB path of docs/own_model.md: ``examples/tgb_pyg_tgn.py`` trains PyG's TGN on a TGB
download as TGB's example does, scores it with TGB's MRR in its own loop (PyG's modules
only), saves it with ``save_pyg_tgn`` and explains test events through ``model=pyg_tgn
dataset=tgb``. Its MRRs are those cftgnn's ranking (``train.py``'s, ``evaluate_tgb``) gives
the saved checkpoint."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from testsupport.tgbstreams import write_tgb_wiki

from cftgnn.data.tgb import load_tgb, load_tgb_negatives
from cftgnn.training.checkpoint import load_checkpoint
from cftgnn.training.loop import Split, evaluate_tgb

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tgb_pyg_tgn.py"
BATCH = 25


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example on a tiny tgbl-wiki in TGB's layout, as a user runs it."""
    base = tmp_path_factory.mktemp("tgb_example")
    root = write_tgb_wiki(base / "tgb")
    out = base / "out"
    done = subprocess.run([sys.executable, str(EXAMPLE), "--data-dir", str(root), "--out",
                           str(out), "--batch", str(BATCH), "--dim", "16", "--lr", "0.01",
                           "--epochs", "2", "--n-events", "3"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return root, out


def test_the_examples_tgb_mrr_is_cftgnns_ranking_of_the_checkpoint(walked: tuple[Path, Path]
                                                                    ) -> None:
    root, out = walked
    stream = load_tgb("tgbl-wiki", root, use_cache=False)
    info = stream.meta["tgb"]
    pt = out / "pyg_tgn_tgbl-wiki.pt"
    card = json.loads(pt.with_suffix(".json").read_text())
    model = load_checkpoint(pt, stream, check_checksum=True)
    tables = {s: load_tgb_negatives(stream, s) for s in ("val", "test")}
    split = Split(info["val_start"] // BATCH * BATCH, info["test_start"] // BATCH * BATCH,
                  stream.num_events)
    ours = evaluate_tgb(model, split, tables, max_pairs=16)
    for part in ("val", "test"):
        assert card["tgb"][part]["n"] == ours[part]["n"] == tables[part].num_events
        assert math.isclose(ours[part]["mrr"], card["tgb"][part]["mrr"], rel_tol=1e-6)
        assert ours[part]["hits@10"] == card["tgb"][part]["hits@10"]


def test_the_example_explains_test_events_of_the_tgb_stream(walked: tuple[Path, Path]) -> None:
    _, out = walked
    files = sorted((out / "run" / "records").glob("*.parquet"))
    recs = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    run = json.loads((out / "run" / "run.json").read_text())
    assert len(recs) == 3 and set(recs["history"]) == {"batch_start"}
    assert run["dataset"]["name"] == "tgbl-wiki"
    assert (recs["event_id"] >= 340).all()  # TGB's test part of the fixture
