"""``explain.py dataset=csv model=pyg_tgn checkpoint=...``: a researcher's own stream and PyG
TGN, explained end to end through the generic oracle, records written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.data import load_csv
from cftgnn.data.synthetic import make_synthetic_stream
from cftgnn.models.pyg_tgn import PyGTGN
from cftgnn.oracle.engine import naive_logit
from cftgnn.runs import pipeline
from cftgnn.runs.records import read_records
from cftgnn.training.checkpoint import load_checkpoint, save_pyg_tgn

CONF = Path(__file__).resolve().parents[2] / "conf"


def write_csv(path: Path) -> None:
    s = make_synthetic_stream(num_nodes=20, num_events=240, feat_dim=2, seed=5)
    pd.DataFrame({"src": s.src, "dst": s.dst, "t": s.t.astype(np.int64),
                  "f0": s.edge_feat[:, 0], "f1": s.edge_feat[:, 1]}).to_csv(path, index=False)


def test_explain_csv_stream_with_a_saved_pyg_tgn(tmp_path):
    events = tmp_path / "events.csv"
    write_csv(events)
    stream = load_csv(events, feature_cols="rest", cache_dir=tmp_path / "cache")
    fresh = PyGTGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=16,
                   embedding_dim=16, num_neighbors=5, batch_size=20)  # weights of "training"
    pt, _ = save_pyg_tgn(tmp_path / "pyg_tgn_events.pt", fresh.memory, fresh.gnn,
                         fresh.link_pred, stream, num_neighbors=5, batch_size=20)
    out = tmp_path / "run"
    overrides = ["dataset=csv", f"dataset.path={events}", "dataset.feature_cols=rest",
                 f"paths.cache_dir={tmp_path / 'cache'}", "model=pyg_tgn", f"checkpoint={pt}",
                 "model.memory_dim=16", "model.time_dim=16", "model.embedding_dim=16",
                 "model.num_neighbors=5", "model.batch_size=20", "n_events=3",
                 "sample.prediction=any", "explainer.it_max=20", "m_max=12", "progress=false",
                 f"out_dir={out}"]
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=overrides)
    table = pipeline.run(cfg)
    records = read_records(out)
    assert len(records) == 3 and table["events"].iloc[-1] == 3
    assert set(records.dataset) == {"events"} and (out / "summary.csv").is_file()
    model = load_checkpoint(pt, stream, attach=False)
    for rec in records.itertuples():  # the recorded logits are the model's, exactly
        assert rec.original_logit == pytest.approx(naive_logit(model, stream, rec.event_id),
                                                   abs=1e-5)
        assert rec.final_logit == pytest.approx(
            naive_logit(model, stream, rec.event_id, list(rec.explanation)), abs=1e-5)
