"""``scripts/explain.py`` records the curve metrics' exact logits and summarises them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import cftgnn.config  # noqa: F401
from cftgnn.evaluation import pipeline
from cftgnn.evaluation.curves import ACC_SHARES, FID_SHARES, kept_removal_sets
from cftgnn.evaluation.records import read_records
from cftgnn.oracle.engine import naive_logit
from cftgnn.training.resolve import resolve_model

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
TINY = ["debug=default", "checkpoint=null", "progress=false", "sample.prediction=any",
        "n_events=3"]


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
    monkeypatch.setattr(pipeline, "curve_logits", lambda oracle, ranking: ((), ()))
    pipeline.run(cfg_for(without, "explainer=greedy"))
    a, b = read_records(with_curves), read_records(without)
    assert len(a.fid_curve_logits.iloc[0]) == 21 and len(b.fid_curve_logits.iloc[0]) == 0
    for col in ("oracle_calls", "search_calls", "exact_calls", "cache_hits", "final_logit",
                "keep_logit", "min_size_lower_bound"):
        assert a[col].tolist() == b[col].tolist(), col
