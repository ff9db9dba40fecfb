"""``scripts/explain.py target=rank`` end to end on a tiny stream with a negatives table of
its own: records hold the target, k and TGB's ranks before and after, consistent with the
margins' signs; certify, prune, constraints, the metrics and the picture run on it; bad input
is refused in one line before any work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.data import make_synthetic_stream
from cftgnn.data.negatives_io import load_negatives, random_negatives, save_negatives
from cftgnn.errors import CftgnnError
from cftgnn.reporting.picture import save_picture
from cftgnn.runs import pipeline
from cftgnn.runs.records import read_records

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
TINY = ["debug=default", "checkpoint=null", "progress=false", "sample.prediction=any",
        "n_events=4"]
FIRST = 255  # the negatives' events: the last 15 % of debug=default's 300


@pytest.fixture(scope="module")
def negatives(tmp_path_factory) -> Path:
    stream = make_synthetic_stream(num_nodes=30, num_events=300, seed=0, feat_dim=0)
    table = random_negatives(stream, np.arange(FIRST, 300), 10, seed=3)
    path = tmp_path_factory.mktemp("neg") / "negatives.npz"
    save_negatives(path, table)
    back = load_negatives(path, stream)
    np.testing.assert_array_equal(back.dst, table.dst)
    return path


def cfg_for(tmp_path: Path, *overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("explain", overrides=[*TINY, f"out_dir={tmp_path}", *overrides])


@pytest.mark.parametrize("k", [1, 3])
def test_rank_runs_record_ranks_consistent_with_the_margins(tmp_path, negatives, k, capsys):
    table = pipeline.run(cfg_for(tmp_path, "explainer=exhaustive", "explainer.max_size=2",
                                 "target=rank", f"target_k={k}",
                                 f"target_negatives={negatives}", "certify=2", "prune=true"),
                         draw=save_picture)
    records = read_records(tmp_path)
    assert len(records) == 4 and (records.event_id >= FIRST).all()
    assert (records.target == "rank").all() and (records.target_k == k).all()
    assert (records.num_negatives == 10).all()
    ok = records[records.status == "ok"]
    assert len(ok)
    for rec in ok.itertuples():
        assert 1.0 <= rec.rank_before <= 11.0
        # the margin's sign is hits@k, before and after
        assert (rec.original_logit > 0) == (rec.rank_before <= k)
        if rec.is_counterfactual:
            assert (rec.rank_after <= k) != (rec.rank_before <= k)
            assert rec.certified_minimal and rec.size == rec.min_size_lower_bound
        else:
            assert np.isnan(rec.rank_after) or (rec.rank_after <= k) == (rec.rank_before <= k)
    assert not table.empty
    assert list(tmp_path.glob("explanation_*.png"))  # the shown prediction's picture
    assert "true destination's rank" in capsys.readouterr().out  # the prediction in words


def test_rank_runs_honour_constraints_and_differ_from_logit_runs(tmp_path, negatives):
    out = tmp_path / "rank"
    pipeline.run(cfg_for(out, "explainer=greedy", "target=rank",
                         f"target_negatives={negatives}", "constraints.max_size=2",
                         "constraints.protect_pair=true"))
    records = read_records(out)
    assert (records.target == "rank").all()
    for rec in records[records.status == "ok"].itertuples():
        assert rec.size <= 2
    # the same directory refuses a logit run (run.json differs in target)
    with pytest.raises(CftgnnError, match="target"):
        pipeline.run(cfg_for(out, "explainer=greedy"))
    logit = tmp_path / "logit"
    pipeline.run(cfg_for(logit, "explainer=greedy"))
    plain = read_records(logit)
    assert (plain.target == "logit").all() and plain.rank_before.isna().all()


@pytest.mark.parametrize(("overrides", "message"), [
    (["target=rank"], "target=rank needs TGB's negatives"),
    (["target=rank", "target_negatives={neg}", "events=[10]"], "event 10 has no TGB negatives"),
    (["target=rank", "target_negatives={neg}", "target_k=11"], "target_k=11 is more than"),
    (["target=rank", "target_negatives={neg}", "target_k=11", f"events=[{FIRST}]"],
     "target_k=11 is more than the 10 negatives"),
    (["target=rank", "target_k=0"], "target_k must be"),
    (["target=ranks"], "target must be one of logit, rank"),
    (["target=rank", "target_negatives=/nonexistent.npz"], "does not exist"),
    (["target=rank", "target_negatives={neg}", "protocol=tempme"], "not available with target"),
    (["target=rank", "robustness=true"], "not available with target=rank"),
])
def test_bad_rank_options_are_one_error_line(tmp_path, negatives, overrides, message):
    args = [o.replace("{neg}", str(negatives)) for o in overrides]
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "explain.py"), *TINY,
                           f"out_dir={tmp_path / 'out'}", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not (tmp_path / "out" / "records").exists() or not any(
        (tmp_path / "out" / "records").iterdir())


def test_a_file_that_is_not_a_negatives_table_is_refused(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.arange(3))
    with pytest.raises(CftgnnError, match="not a negatives file"):
        load_negatives(bad)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(CftgnnError, match="not a negatives file"):
        load_negatives(junk)
    objects = tmp_path / "objects.npz"
    np.savez(objects, split=np.asarray("test"), event_ids=np.array([1], dtype=object),
             indptr=np.array([0, 1]), dst=np.array([2]))
    with pytest.raises(CftgnnError, match="not a negatives file"):
        load_negatives(objects)


def _tgb_run(tmp_path: Path, *overrides: str):
    from tests.data.test_tgb import write_jodie

    write_jodie(tmp_path / "tgb")
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("explain", overrides=[
            "dataset=tgb", "dataset.name=tgbl-wiki", f"dataset.data_dir={tmp_path / 'tgb'}",
            f"dataset.cache_dir={tmp_path / 'cache'}", "checkpoint=null", "progress=false",
            "picture=false", f"out_dir={tmp_path / 'out'}", "target=rank", *overrides])


def test_a_rank_run_reads_tgb_s_negatives_of_the_event_s_split(tmp_path):
    from cftgnn.data import load_tgb
    from tests.data.test_tgb import tgb_keys, write_jodie, write_negatives

    write_jodie(tmp_path / "tgb")
    s = load_tgb("tgbl-wiki", data_dir=tmp_path / "tgb", use_cache=False)
    t = s.meta["tgb"]["test_start"]
    nodes = np.unique(s.dst)
    test = {k: nodes[nodes != int(k[1])] for k in dict.fromkeys(tgb_keys(s, t, s.num_events))}
    write_negatives(tmp_path / "tgb", "tgbl-wiki", "test", test)  # no val file: test only
    pipeline.run(_tgb_run(tmp_path, "explainer=exhaustive", "explainer.max_size=2",
                          f"events=[{s.num_events - 1}]", "target_k=2"))
    (rec,) = read_records(tmp_path / "out").itertuples()
    assert rec.target == "rank" and rec.target_k == 2 and rec.num_negatives == len(nodes) - 1
    assert 1.0 <= rec.rank_before <= len(nodes)
    assert (rec.original_logit > 0) == (rec.rank_before <= 2)
    # an event of the validation split has no negatives here: one line, before any work
    with pytest.raises(CftgnnError, match=f"event {t - 1} has no TGB negatives"):
        pipeline.run(_tgb_run(tmp_path, f"events=[{t - 1}]", f"out_dir={tmp_path / 'v'}"))


def test_a_rank_run_without_tgb_s_negatives_files_is_refused(tmp_path):
    with pytest.raises(CftgnnError, match="no TGB negatives found"):
        pipeline.run(_tgb_run(tmp_path))
