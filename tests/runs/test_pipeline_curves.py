"""``scripts/explain.py`` records the curve metrics' exact logits and summarises them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import cftgnn.config  # noqa: F401
from cftgnn.oracle.engine import naive_logit
from cftgnn.runs import pipeline
from cftgnn.runs.records import read_records
from cftgnn.scoring import checks
from cftgnn.scoring.curves import ACC_SHARES, FID_SHARES, kept_removal_sets
from cftgnn.training.resolve import resolve_model

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
TINY = ["debug=default", "checkpoint=null", "progress=false", "sample.prediction=any",
        "n_events=3"]


def test_curve_logits_are_one_batch_of_exact_logits_on_a_toy_oracle():
    from cftgnn.oracle.oracle import Oracle
    from cftgnn.testing.backends import AdditiveBackend
    from cftgnn.testing.search import make_candidates

    weights = {1: 0.5, 2: -0.25, 3: 1.0, 4: 0.125, 5: 2.0}
    backend = AdditiveBackend(1.0, weights)
    # event 5 is protected: R = {1, 2, 3, 4}; the ranking leaves 4 out (ranked last)
    oracle = Oracle(make_candidates([1, 2, 3, 4, 5]), 1.0, exact=backend,
                    removable=[1, 2, 3, 4])
    ranking = [3, 1, 2]
    fid, acc = checks.curve_logits(oracle, ranking)
    assert backend.batches == 1 and oracle.stats.exact_batches == 1
    assert backend.calls == len(set(backend.log))  # each distinct set once
    assert all(5 not in s for s in backend.log)
    for grid, got in ((FID_SHARES, fid), (ACC_SHARES, acc)):
        sets = kept_removal_sets(ranking, grid, removable=[1, 2, 3, 4])
        assert list(got) == pytest.approx([backend.logit(frozenset(s)) for s in sets])
        assert list(got) == pytest.approx([oracle.exact(s) for s in sets])
    # share 0 keeps the top event (3): 1, 2 and the unranked 4 removed
    assert fid[0] == pytest.approx(1.0 - 0.5 + 0.25 - 0.125)
    assert fid[-1] == pytest.approx(1.0 - 0.125)  # everything ranked kept; 4 still removed
    assert checks.curve_logits(oracle, []) == ((), ())


def cfg_for(tmp_path: Path, *overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("explain", overrides=[*TINY, f"out_dir={tmp_path}", *overrides])


@pytest.mark.parametrize("explainer", ["perturb_one", "greedy"])
def test_curve_logits_are_the_exact_logits_of_the_kept_top_shares(tmp_path, explainer):
    cfg = cfg_for(tmp_path, f"explainer={explainer}")
    table = pipeline.run(cfg)
    records = read_records(tmp_path)
    ok = records[records.status == "ok"]
    assert len(ok) >= 2
    stream = instantiate(cfg.dataset)
    model, _ = resolve_model(cfg.model, stream, None, ".", "cpu", cfg.seed)
    for rec in ok.itertuples():
        assert len(rec.ranking) == rec.num_removable > 0
        assert len(rec.fid_curve_logits) == 21 and len(rec.acc_curve_logits) == 16
        for grid, logits in ((FID_SHARES, rec.fid_curve_logits),
                             (ACC_SHARES, rec.acc_curve_logits)):
            sets = kept_removal_sets(list(rec.ranking), grid)
            expect = [naive_logit(model, stream, rec.event_id, list(s)) for s in sets]
            assert np.allclose(logits, expect, atol=1e-5)
        # share 1 keeps every event: the original prediction
        assert rec.fid_curve_logits[-1] == pytest.approx(rec.original_logit, abs=1e-5)
    for name in ("best_fid", "aufsc_keep", "acc_auc"):
        assert name in table.columns and np.isfinite(table[name].iloc[-1])
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert {"best_fid", "aufsc_keep", "acc_auc"} <= set(summary.columns)


def test_the_curve_call_leaves_the_explanations_counters_alone(tmp_path, monkeypatch):
    with_curves, without = tmp_path / "with", tmp_path / "without"
    pipeline.run(cfg_for(with_curves, "explainer=greedy"))
    monkeypatch.setattr(checks, "curve_logits", lambda oracle, ranking: ((), ()))
    pipeline.run(cfg_for(without, "explainer=greedy"))
    a, b = read_records(with_curves), read_records(without)
    assert len(a.fid_curve_logits.iloc[0]) == 21 and len(b.fid_curve_logits.iloc[0]) == 0
    for col in ("oracle_calls", "search_calls", "exact_calls", "cache_hits", "final_logit",
                "keep_logit", "min_size_lower_bound"):
        assert a[col].tolist() == b[col].tolist(), col


def test_the_tracker_gets_the_curve_metrics_and_logits(tmp_path, monkeypatch):
    from cftgnn.tracking import NullTracker, table_frame

    logged: dict[str, object] = {}
    monkeypatch.setattr(NullTracker, "log_summary",
                        lambda self, metrics: logged.update(summary=dict(metrics)))
    monkeypatch.setattr(NullTracker, "log_records",
                        lambda self, records: logged.update(records=records))
    table = pipeline.run(cfg_for(tmp_path, "explainer=perturb_one"))
    summary = logged["summary"]
    assert isinstance(summary, dict)
    group = table["group"].iloc[-1]
    for name in ("best_fid", "aufsc_keep", "acc_auc"):
        assert summary[f"summary/{group}/{name}"] == pytest.approx(float(table[name].iloc[-1]))
    records = logged["records"]
    assert isinstance(records, pd.DataFrame)
    frame = table_frame(records)  # what goes to the W&B table: lists as JSON text
    for text, logits in zip(frame["fid_curve_logits"], records["fid_curve_logits"],
                            strict=True):
        assert json.loads(text) == pytest.approx(list(logits))


def test_curves_none_makes_no_curve_call_and_leaves_the_rest_alone(tmp_path, monkeypatch):
    common, none = tmp_path / "common", tmp_path / "none"
    pipeline.run(cfg_for(common, "explainer=greedy"))
    calls: list[int] = []
    real = checks.curve_logits
    monkeypatch.setattr(checks, "curve_logits",
                        lambda oracle, ranking: calls.append(1) or real(oracle, ranking))
    table = pipeline.run(cfg_for(none, "explainer=greedy", "curves=none"))
    assert calls == []
    a, b = read_records(common), read_records(none)
    ok = a.status == "ok"
    assert ok.sum() >= 2
    assert all(len(x) == 21 for x in a.fid_curve_logits[ok])
    assert all(len(x) == 0 for x in b.fid_curve_logits) and all(
        len(x) == 0 for x in b.acc_curve_logits)
    # the seconds of the checks: measured where made, NaN where not
    assert (a.curve_time_s[ok] > 0).all() and a.curve_time_s[~ok].isna().all()
    assert b.curve_time_s.isna().all()
    assert (a.keep_time_s[ok] > 0).all() and (b.keep_time_s[ok] > 0).all()
    for col in ("explanation", "final_logit", "keep_logit", "oracle_calls", "exact_calls",
                "ranking", "time_s"):
        if col == "time_s":  # the checks stay out of time_s
            assert (a.time_s - a.setup_time_s - a.wall_time_s).abs().max() < 1e-9
            continue
        assert [np.asarray(x).tolist() for x in a[col]] == [
            np.asarray(x).tolist() for x in b[col]], col
    for name in ("best_fid", "aufsc_keep", "acc_auc", "curve_time_p50"):
        assert np.isnan(table[name].iloc[-1]), name
    with_curves = pd.read_csv(common / "summary.csv")
    assert with_curves["curve_time_p50"].iloc[-1] == pytest.approx(
        float(np.median(a.curve_time_s[ok])))
    # the fingerprint says curves=none; common, the old behaviour, is left out
    assert json.loads((none / "run.json").read_text())["curves"] == "none"
    assert "curves" not in json.loads((common / "run.json").read_text())


def test_resuming_with_another_curves_value_is_refused(tmp_path):
    from cftgnn.runs.records import RunDirectoryError

    pipeline.run(cfg_for(tmp_path, "explainer=perturb_one", "curves=none"))
    files = sorted((tmp_path / "records").glob("*.parquet"))
    files[-1].unlink()  # as if the run had been interrupted before its last event
    with pytest.raises(RunDirectoryError, match="differs in: curves"):
        pipeline.run(cfg_for(tmp_path, "explainer=perturb_one"))
    assert sorted((tmp_path / "records").glob("*.parquet")) == files[:-1]
    # the same value resumes: the missing event is explained, without curves either
    pipeline.run(cfg_for(tmp_path, "explainer=perturb_one", "curves=none"))
    assert sorted((tmp_path / "records").glob("*.parquet")) == files
    assert all(len(x) == 0 for x in read_records(tmp_path).fid_curve_logits)


def test_curves_auto_follows_the_streams_length():
    from cftgnn.errors import ConfigError
    from cftgnn.runs.options import AUTO_CURVES_MAX_EVENTS, curves_choice
    from cftgnn.scoring.protocols import CurveSet

    assert curves_choice("auto", AUTO_CURVES_MAX_EVENTS) is CurveSet.COMMON
    assert curves_choice("auto", AUTO_CURVES_MAX_EVENTS + 1) is CurveSet.NONE
    assert curves_choice("common", 10**9) is CurveSet.COMMON
    assert curves_choice("none", 10) is CurveSet.NONE
    with pytest.raises(ConfigError, match="curves must be one of auto, none, common"):
        curves_choice("every", 10)


def test_curves_auto_skips_the_curves_of_a_long_stream(tmp_path, monkeypatch, capsys):
    """The debug stream counts as long when the bound is below its length: ``auto`` then
    records what ``none`` does, says so, and its fingerprint says ``none``; ``common``
    computes them whatever the length."""
    from cftgnn.runs import options

    monkeypatch.setattr(options, "AUTO_CURVES_MAX_EVENTS", 10)
    monkeypatch.setattr(pipeline, "AUTO_CURVES_MAX_EVENTS", 10)
    table = pipeline.run(cfg_for(tmp_path / "auto", "explainer=perturb_one"))
    assert "curves=auto: no curve metrics on a stream of more than 10 events" in (
        capsys.readouterr().out)
    auto = read_records(tmp_path / "auto")
    assert all(len(x) == 0 for x in auto.fid_curve_logits) and auto.curve_time_s.isna().all()
    assert np.isnan(table["best_fid"].iloc[-1])
    assert json.loads((tmp_path / "auto" / "run.json").read_text())["curves"] == "none"
    pipeline.run(cfg_for(tmp_path / "common", "explainer=perturb_one", "curves=common"))
    common = read_records(tmp_path / "common")
    assert all(len(x) == 21 for x in common.fid_curve_logits[common.status == "ok"])
