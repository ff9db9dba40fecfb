"""The bring-your-own path of docs/own_model.md, as a new user walks it.

``examples/own_pyg_tgn.py`` trains a TGN with PyG's modules as PyG's ``examples/tgn.py``
does, saves it with ``save_pyg_tgn`` and explains it with ``history=batch_start``. PyG's
evaluation loop, written here with ``torch_geometric`` alone (pandas reads the CSV, torch the
weights), reproduces every explained logit and confirms every reported flip. The frictions of
the path each give the documented behaviour.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest
import torch
from hydra import compose, initialize_config_dir
from torch_geometric.nn.models.tgn import LastNeighborLoader

import cftgnn.config  # noqa: F401  (registers ${cftgnn_root:})
from cftgnn.cli import friendly_errors
from cftgnn.runs import pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "own_pyg_tgn.py"
N_EVENTS = 4


def example_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("own_pyg_tgn", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def walked(tmp_path_factory) -> Path:
    """The example, run as a user runs it."""
    out = tmp_path_factory.mktemp("own") / "own"
    done = subprocess.run([sys.executable, str(EXAMPLE), "--out", str(out), "--n-events",
                           str(N_EVENTS)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def records(run: Path) -> pd.DataFrame:
    files = sorted((run / "records").glob("*.parquet"))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def pyg_evaluation_loop(ex: ModuleType, checkpoint: Path, events: pd.DataFrame,
                        queries: list[int], removed: set[int]) -> dict[int, float]:
    """PyG's evaluation loop, without cftgnn: batches of ``BATCH`` events in stream order;
    each batch's queries are predicted from memory and loader, then the batch's events
    (those not ``removed``) are fed to both."""
    src = torch.tensor(events["src"].to_numpy())
    dst = torch.tensor(events["dst"].to_numpy())
    t = torch.tensor(events["t"].to_numpy())
    msg = torch.tensor(events[["f0", "f1"]].to_numpy(dtype=np.float32))
    num_nodes = int(max(src.max(), dst.max())) + 1
    memory, gnn, link_pred = ex.modules(num_nodes, msg.size(-1))
    state = torch.load(checkpoint, weights_only=True)["state_dict"]
    for prefix, module in (("memory.", memory), ("gnn.", gnn), ("link_pred.", link_pred)):
        module.load_state_dict({k[len(prefix):]: v for k, v in state.items()
                                if k.startswith(prefix)})
    memory.eval(), gnn.eval(), link_pred.eval()
    memory.reset_state()
    loader = LastNeighborLoader(num_nodes, size=ex.SIZE)
    inserted: list[int] = []  # stream position of each loader id
    out: dict[int, float] = {}
    with torch.no_grad():
        for lo in range(0, max(queries) + 1, ex.BATCH):
            hi = min(lo + ex.BATCH, len(events))
            for i in [q for q in queries if lo <= q < hi]:
                pair = torch.stack([src[i], dst[i]])
                n_id, edge_index, e_id = loader(pair.unique())
                pos = torch.tensor(inserted, dtype=torch.long)[e_id]
                z, last_update = memory(n_id)
                z = gnn(z, last_update, edge_index, t[pos], msg[pos])
                rows = torch.searchsorted(n_id, pair)
                out[i] = float(link_pred(z[rows[:1]], z[rows[1:]]).reshape(()))
            kept = torch.tensor([e for e in range(lo, hi) if e not in removed],
                                dtype=torch.long)
            if len(kept):
                memory.update_state(src[kept], dst[kept], t[kept], msg[kept])
                loader.insert(src[kept], dst[kept])
                inserted += kept.tolist()
    return out


def test_pyg_evaluation_loop_reproduces_the_logits_and_confirms_every_flip(walked):
    ex = example_module()
    checkpoint = walked / "pyg_tgn_events.pt"
    events = pd.read_csv(walked / "events.csv")
    recs = records(walked / "run")
    assert len(recs) == N_EVENTS and set(recs["history"]) == {"batch_start"}
    ids = [int(e) for e in recs["event_id"]]
    plain = pyg_evaluation_loop(ex, checkpoint, events, ids, set())
    np.testing.assert_allclose(recs["original_logit"], [plain[i] for i in ids], atol=1e-5,
                               rtol=0)
    # the groups follow the explained logit: the screening pass scored the same prediction
    assert set(recs["group_logit"]) == {"explained"}
    np.testing.assert_allclose(recs["screen_logit"], recs["original_logit"], atol=1e-5, rtol=0)
    assert (recs["group"] == np.where(recs["original_logit"] > 0, "correct", "incorrect")).all()
    flips = 0
    for rec in recs.itertuples():
        h = rec.event_id // ex.BATCH * ex.BATCH
        assert all(c < h for c in rec.candidate_ids)  # nothing of its own batch
        for cf, logit in zip(rec.counterfactuals, rec.counterfactual_logits, strict=True):
            got = pyg_evaluation_loop(ex, checkpoint, events, [rec.event_id],
                                      {int(e) for e in cf})[rec.event_id]
            assert got == pytest.approx(logit, abs=1e-5)
            assert got * rec.original_logit < 0  # the flip, in the user's own loop
            flips += 1
    assert flips > 0  # the confirmation was exercised


def test_run_json_records_the_history_and_the_checkpoints_model(walked):
    fp = json.loads((walked / "run" / "run.json").read_text())
    ex = example_module()
    assert fp["history"] == "batch_start"
    config = fp["model"]["config"]  # the checkpoint's values, not conf/model/pyg_tgn.yaml's
    assert config["batch_size"] == ex.BATCH and config["memory_dim"] == ex.DIM


def refused(capsys, cfg) -> str:
    """``explain.py``'s run under its error handling: exit 2 and one ``error:`` line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc, friendly_errors():
        pipeline.run(cfg)
    assert exc.value.code == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def explain_cfg(walked: Path, csv: Path, *overrides: str):
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        return compose("explain", overrides=[
            "dataset=csv", f"dataset.path={csv}", "dataset.feature_cols=rest",
            "model=pyg_tgn", f"checkpoint={walked / 'pyg_tgn_events.pt'}", "n_events=0",
            "progress=false", f"paths.cache_dir={walked / 'cache'}", *overrides])


def test_a_batch_size_override_the_checkpoint_decides_is_refused(walked, tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "explain.py"), "dataset=csv",
         f"dataset.path={walked / 'events.csv'}", "dataset.feature_cols=rest",
         "model=pyg_tgn", f"checkpoint={walked / 'pyg_tgn_events.pt'}",
         "model.batch_size=100", "n_events=1", "progress=false",
         f"paths.cache_dir={walked / 'cache'}", f"out_dir={tmp_path / 'run'}"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: model.batch_size=100 disagrees "
                                                   "with checkpoint"), done.stderr
    assert "batch_size=50" in lines[0]
    assert not (tmp_path / "run" / "run.json").exists()  # never recorded as if used


def test_a_renamed_stream_file_is_matched_by_checksum(walked, tmp_path):
    copy = tmp_path / "my_events.csv"
    shutil.copy(walked / "events.csv", copy)
    table = pipeline.run(explain_cfg(walked, copy, f"out_dir={tmp_path / 'run'}"))
    assert int(table["events"].iloc[-1]) == 0  # loaded, checked, nothing asked for
    fp = json.loads((tmp_path / "run" / "run.json").read_text())
    assert fp["dataset"]["name"] == "my_events"


def test_other_events_under_the_trained_name_are_refused_naming_both_checksums(
        walked, tmp_path, capsys):
    events = pd.read_csv(walked / "events.csv")
    events["f0"] = -events["f0"]  # same nodes and features, other events
    other = tmp_path / "events.csv"
    events.to_csv(other, index=False)
    card = json.loads((walked / "pyg_tgn_events.json").read_text())
    line = refused(capsys, explain_cfg(walked, other, f"out_dir={tmp_path / 'run'}",
                                       f"paths.cache_dir={tmp_path / 'cache'}"))
    assert card["dataset"]["sha256"][:12] in line and "save_pyg_tgn" in line
    assert "checksum" in line


def test_batch_start_is_refused_for_a_model_without_memory(tmp_path, capsys):
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("explain", overrides=["debug=default", "checkpoint=null", "model=tgat",
                                            "history=batch_start", "progress=false",
                                            f"out_dir={tmp_path / 'run'}"])
    line = refused(capsys, cfg)
    assert line.startswith("error: history=batch_start applies to models with memory; tgat")


def test_an_unknown_history_is_refused(tmp_path, capsys):
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("explain", overrides=["debug=default", "checkpoint=null",
                                            "history=batch", f"out_dir={tmp_path / 'run'}"])
    assert "history must be one of event, batch_start" in refused(capsys, cfg)


def test_a_batch_start_record_is_drawn_with_its_own_candidates(walked):
    from cftgnn.reporting.picture import load_view

    ex = example_module()
    event_id = int(records(walked / "run")["event_id"].iloc[0])
    view = load_view(walked / "run", event_id)  # rebuilds the candidates before the batch
    assert len(view.ids) and int(view.ids.max()) < event_id // ex.BATCH * ex.BATCH


def test_the_summary_names_groups_that_follow_another_logit():
    from cftgnn.scoring.summaries import group_note

    recs = pd.DataFrame({"group": ["correct", "incorrect", "correct"],
                         "group_logit": ["screen"] * 3, "original_logit": [1.0, 0.5, 2.0]})
    note = group_note(recs)
    assert note is not None and "1 of 3 events" in note and "screen_logit" in note
    assert group_note(recs.assign(original_logit=[1.0, -0.5, 2.0])) is None  # they agree
    assert group_note(recs.assign(group_logit=["explained"] * 3)) is None
    mixed = group_note(recs.assign(group_logit=["screen", "explained", "screen"]))
    assert mixed is not None and "mix" in mixed


@pytest.mark.parametrize(("args", "message"), [
    (["--epochs", "0"], "error: argument --epochs: 0 is not >= 1 (see own_pyg_tgn.py --help)"),
    (["--n-events", "x"],
     "error: argument --n-events: 'x' is not an integer (see own_pyg_tgn.py --help)"),
])
def test_a_bad_argument_of_the_example_ends_in_one_error_line(args, message):
    done = subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [message]


def test_the_example_refuses_an_unwritable_out_before_training(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = subprocess.run([sys.executable, str(EXAMPLE), "--out", str(blocker / "run")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --out '{blocker / 'run'}' cannot")
    assert not done.stdout
