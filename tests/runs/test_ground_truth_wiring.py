"""The ground-truth metrics where a run shows its numbers: each record of a
run on a planted stream carries them (``cause_columns``), and the summary, the report and
the tracker show them when the stream has causes, and nothing extra when it has none."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cftgnn.data.planted import make_rule_stream, motif_matches
from cftgnn.data.stream import EventStream
from cftgnn.explain import GreedyExplainer, PerturbOneExplainer, RecentStrategy
from cftgnn.reporting.report import GROUND_TRUTH_NOTE, report_markdown
from cftgnn.reporting.tables import GROUND_TRUTH_TABLE_COLUMNS, comparison_table, markdown_table
from cftgnn.runs.records import GROUND_TRUTH_COLUMNS
from cftgnn.scoring.ground_truth import CAUSE_COLUMNS, cause_columns
from cftgnn.scoring.summaries import (
    GROUND_TRUTH_MEANINGS,
    SUMMARY_COLUMNS,
    format_summary,
    has_causes,
    summarize,
    summary_metrics,
)
from cftgnn.testing import AdditiveBackend, make_candidates, make_oracle

WINDOW, DELAY = 20, 1
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stream() -> EventStream:
    return make_rule_stream(num_nodes=30, num_events=300, seed=5, window=WINDOW, delay=DELAY,
                            motif_share=0.3, mean_gap=2.0)


def effect_with_one_motif(s: EventStream) -> tuple[int, list[int], list[int]]:
    """An effect explained by exactly one motif: ``(event, candidates, its two legs)``."""
    first, second = np.flatnonzero(s.labels == 1), np.flatnonzero(s.labels == 2)
    a, b = motif_matches(s.src, s.dst, s.t, first, second, WINDOW)
    for e in np.flatnonzero(s.labels == 3):
        hit = (s.src[a] == s.src[e]) & (s.dst[b] == s.dst[e]) & (s.t[b] + DELAY == s.t[e])
        legs = sorted({int(x) for x in np.concatenate([a[hit], b[hit]])})
        candidates = [i for i in range(int(e)) if s.t[i] >= s.t[e] - DELAY - WINDOW]
        if len(legs) == 2 and len(candidates) <= 14:
            return int(e), candidates, legs
    raise AssertionError("no effect with a single motif in the toy stream")


def test_the_record_columns_are_declared_in_one_order():
    assert [name for name, _ in GROUND_TRUTH_COLUMNS] == list(CAUSE_COLUMNS)


def test_cause_columns_of_a_model_that_reads_the_motif(stream):
    event, candidates, legs = effect_with_one_motif(stream)
    assert sorted(stream.causes.of(event).tolist()) == legs
    # the logit 1.5 loses 1 per removed leg: only removing both flips it
    oracle = make_oracle(make_candidates(candidates, event_id=event),
                         AdditiveBackend(1.5, dict.fromkeys(legs, 1.0)))
    result = GreedyExplainer(RecentStrategy()).explain(oracle)
    cols = cause_columns(result, stream.causes.of(event), oracle)
    assert list(cols) == list(CAUSE_COLUMNS)
    assert cols["cause_total"] == 2 and cols["cause_size"] == 2
    assert cols["cause_equal"] is True and cols["cause_contains"] is True
    assert cols["cause_logit"] == pytest.approx(-0.5) and cols["cause_flip"] is True
    ranked = PerturbOneExplainer().explain(oracle)
    cols = cause_columns(ranked, stream.causes.of(event), oracle)
    assert cols["cause_auc"] == 1.0 and cols["cause_precision"] == 1.0


def test_cause_columns_of_a_model_that_ignores_the_cause(stream):
    event, candidates, _ = effect_with_one_motif(stream)
    other = [c for c in candidates if c not in set(stream.causes.of(event).tolist())][:1]
    oracle = make_oracle(make_candidates(candidates, event_id=event),
                         AdditiveBackend(0.5, dict.fromkeys(other, 1.0)))
    result = GreedyExplainer(RecentStrategy()).explain(oracle)
    cols = cause_columns(result, stream.causes.of(event), oracle)
    assert cols["cause_flip"] is False and cols["cause_logit"] == pytest.approx(0.5)
    assert cols["cause_equal"] is False and cols["cause_contains"] is False  # it removed `other`


def test_cause_columns_of_an_event_without_a_cause_among_its_candidates(stream):
    event, candidates, legs = effect_with_one_motif(stream)
    pool = [c for c in candidates if c not in legs]
    oracle = make_oracle(make_candidates(pool, event_id=event), AdditiveBackend(1.0, {}))
    result = PerturbOneExplainer().explain(oracle)
    cols = cause_columns(result, legs, oracle)
    assert cols["cause_total"] == 2 and cols["cause_size"] == 0
    assert math.isnan(cols["cause_auc"]) and math.isnan(cols["cause_logit"])
    assert cols["cause_flip"] is None and cols["cause_equal"] is None


def planted_records() -> pd.DataFrame:
    """Four explained records with hand-set ground-truth columns, two per explainer."""
    base = {"status": "ok", "original_logit": 1.0, "final_logit": -1.0, "size": 2,
            "num_candidates": 10, "group": "correct"}
    rows = [
        {"explainer": "a", "cause_total": 2, "cause_size": 2, "cause_auc": 1.0,
         "cause_precision": 1.0, "cause_contains": True, "cause_contained": True,
         "cause_equal": True, "cause_logit": -0.5, "cause_flip": True},
        {"explainer": "a", "cause_total": 2, "cause_size": 1, "cause_auc": 0.5,
         "cause_precision": 0.0, "cause_contains": False, "cause_contained": True,
         "cause_equal": False, "cause_logit": 0.5, "cause_flip": False},
        {"explainer": "b", "cause_total": 2, "cause_size": 2, "cause_auc": 0.25,
         "cause_precision": 0.5, "cause_contains": None, "cause_contained": None,
         "cause_equal": None, "cause_logit": -0.5, "cause_flip": True},
        {"explainer": "b", "cause_total": 0, "cause_size": 0, "cause_auc": float("nan"),
         "cause_precision": float("nan"), "cause_contains": None, "cause_contained": None,
         "cause_equal": None, "cause_logit": float("nan"), "cause_flip": None},
    ]
    return pd.DataFrame([{**base, **r} for r in rows])


def test_summarize_adds_the_ground_truth_columns_only_with_causes():
    records = planted_records()
    assert has_causes(records)
    table = summarize(records, by=["explainer"]).set_index("explainer")
    assert list(table.columns) == [*SUMMARY_COLUMNS, *GROUND_TRUTH_MEANINGS]
    a, b = table.loc["a"], table.loc["b"]
    assert a.cause_found == 0.5 and b.cause_found == 1.0  # b's second event has no cause
    assert a.cause_auc == 0.75 and a.cause_precision == 0.5
    assert a.cause_contains == 0.5 and a.cause_contained == 1.0 and a.cause_equal == 0.5
    assert a.cause_flip == 0.5 and b.cause_flip == 1.0
    assert b.cause_auc == 0.25 and math.isnan(b.cause_equal)  # no answer to compare
    metrics = summary_metrics(records)
    assert metrics["cause_auc"] == pytest.approx((1.0 + 0.5 + 0.25) / 3)
    # the same records without the planted columns: nothing extra
    plain = records.drop(columns=list(CAUSE_COLUMNS))
    assert not has_causes(plain)
    assert list(summarize(plain).columns) == list(SUMMARY_COLUMNS)
    assert set(summary_metrics(plain)) == set(SUMMARY_COLUMNS)
    # null columns (a run directory's records of a stream without causes): nothing extra
    empty = records.assign(**{c: None for c in CAUSE_COLUMNS})
    assert list(summarize(empty).columns) == list(SUMMARY_COLUMNS)


def test_the_printed_summary_says_what_each_ground_truth_metric_means():
    table = summarize(planted_records()).assign(group="all")
    text = format_summary(table, index="group", hide_nan=True, meanings=True)
    line = next(x for x in text.splitlines() if x.startswith("cause_auc"))
    assert "0.583" in line and line.endswith(GROUND_TRUTH_MEANINGS["cause_auc"])
    assert "cause_flip" not in text.splitlines()[-2]  # never listed as hidden
    assert all(0 < len(m) <= 55 for m in GROUND_TRUTH_MEANINGS.values())


def test_the_report_table_shows_the_ground_truth_columns_only_with_causes():
    records = planted_records().assign(dataset="planted_rule", model="tgn",
                                       strategy_name="recent", run="r", it_max=None)
    table = comparison_table(records)
    assert list(table.columns)[-len(GROUND_TRUTH_TABLE_COLUMNS):] == list(
        GROUND_TRUTH_TABLE_COLUMNS)
    md = markdown_table(table)
    assert "cause AUC ↑" in md and "flip w/o cause ↑" in md
    text = report_markdown(records, table, comparison_table(records, by_group=True))
    assert GROUND_TRUTH_NOTE[0] in text
    plain = records.drop(columns=list(CAUSE_COLUMNS))
    table = comparison_table(plain)
    assert not set(GROUND_TRUTH_TABLE_COLUMNS) & set(table.columns)
    text = report_markdown(plain, table, comparison_table(plain, by_group=True))
    assert GROUND_TRUTH_NOTE[0] not in text


def test_a_run_on_a_planted_stream_records_writes_and_logs_them(tmp_path, monkeypatch):
    """``explain.py``'s pipeline (fresh weights) on a toy rule stream: every record carries the
    columns, ``summary.csv`` and the tracker's summary the means; a run on a stream without
    causes gets none of them."""
    from hydra import compose, initialize_config_dir

    import cftgnn.config  # noqa: F401  (the ${cftgnn_root:} resolver)
    from cftgnn.runs import pipeline
    from cftgnn.runs.records import read_records
    from cftgnn.tracking import NullTracker

    logged: list[dict[str, float]] = []
    monkeypatch.setattr(NullTracker, "log_summary",
                        lambda self, metrics: logged.append(dict(metrics)))
    s = make_rule_stream(num_events=400, feat_dim=3)
    effects = [int(e) for e in np.flatnonzero(s.labels == 3)[-2:]]

    def run(out: Path, *overrides: str) -> pd.DataFrame:
        with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
            cfg = compose("explain", overrides=[
                "checkpoint=null", "explainer=perturb_one", "progress=false", "curves=none",
                f"out_dir={out}", *overrides])
        return pipeline.run(cfg)

    table = run(tmp_path / "planted", "dataset=planted", "dataset.num_events=400",
                "dataset.feat_dim=3", f"events=[{','.join(map(str, effects))}]")
    records = read_records(tmp_path / "planted")
    assert records["cause_total"].tolist() == [2, 2]
    assert records["cause_flip"].notna().all()
    assert records["cause_size"].tolist() == [2, 2]  # both legs are candidates
    assert records["cause_auc"].between(0.0, 1.0).all()
    written = pd.read_csv(tmp_path / "planted" / "summary.csv")
    assert set(GROUND_TRUTH_MEANINGS) <= set(written.columns)
    assert written["cause_auc"].iloc[-1] == pytest.approx(records["cause_auc"].mean())
    group = table["group"].iloc[-1]
    assert logged[-1][f"summary/{group}/cause_found"] == table["cause_found"].iloc[-1] == 1.0
    assert logged[-1][f"summary/{group}/cause_auc"] == pytest.approx(
        records["cause_auc"].mean())

    table = run(tmp_path / "plain", "debug=default", "n_events=2")
    assert not set(GROUND_TRUTH_MEANINGS) & set(table.columns)
    assert read_records(tmp_path / "plain")["cause_total"].isna().all()
    assert not any(key.endswith("cause_auc") for key in logged[-1])
