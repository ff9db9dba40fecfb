"""``scripts/compare_runs.py``: two runs' records compared event by event."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.analysis.compare import compare_records, compared_columns, format_comparison
from cftgnn.errors import ConfigError
from cftgnn.runs import pipeline

ROOT = Path(__file__).resolve().parents[2]
TINY = ["debug=default", "checkpoint=null", "explainer=greedy", "progress=false",
        "sample.prediction=any", "n_events=5"]


def records(rows: list[tuple[int, list[int], bool, float]]) -> pd.DataFrame:
    return pd.DataFrame({
        "event_id": [r[0] for r in rows],
        "explanation": [np.array(r[1], dtype=np.int64) for r in rows],
        "is_counterfactual": [r[2] for r in rows],
        "size": [len(r[1]) for r in rows],
        "final_logit": [r[3] for r in rows],
        "agreement": [float("nan")] * len(rows),
        "time_s": np.random.default_rng(0).random(len(rows)),  # ignored
    })


def test_identical_runs_compare_equal_whatever_their_timings():
    a = records([(1, [3, 4], True, -0.5), (2, [], False, 0.7)])
    b = a.copy()
    b["time_s"] = b["time_s"] + 1
    c = compare_records(a, b)
    assert c.identical and c.common == 2 and c.columns_differ == {}
    assert c.fidelity == (0.5, 0.5) and c.mean_size == (2.0, 2.0)


def test_every_timing_column_is_ignored_the_others_compared():
    a = records([(1, [3, 4], True, -0.5), (2, [], False, 0.7)])
    a["robustness_time_s"] = [0.25, None]
    a["certify_time_s"] = [1.0, 2.0]  # any *_time_s column, even one added later
    a["robustness"] = [0.5, None]
    b = a.copy()
    b["robustness_time_s"] = [0.75, 3.0]
    b["certify_time_s"] = [9.0, 9.0]
    assert compare_records(a, b).identical
    b["robustness"] = [0.6, None]
    assert compare_records(a, b).columns_differ == {"robustness": 1}
    assert compared_columns(["time_s", "wall_time_s", "robustness_time_s", "robustness",
                             "final_logit", "schema_version"]) == ["final_logit", "robustness"]


def test_differences_are_counted_per_kind():
    a = records([(1, [3, 4], True, -0.5), (2, [5], False, 0.7), (3, [6, 7], True, -1.0),
                 (9, [], False, 1.0)])
    b = records([(1, [4, 3], True, -0.5), (2, [5, 8], True, -0.1), (3, [6, 7], True,
                                                                       -1.0 + 1e-9),
                 (10, [], False, 1.0)])
    c = compare_records(a, b, atol=1e-6)
    assert (c.common, c.only_a, c.only_b) == (3, 1, 1)
    assert c.explanation_differs == [2] and c.order_differs == [1] and c.flip_differs == [2]
    # event 3's logit differs by 1e-9 only; event 1's list differs in order
    assert c.columns_differ == {"explanation": 2, "final_logit": 1, "is_counterfactual": 1,
                                "size": 1}
    assert not c.identical
    text = format_comparison(c)
    assert "explanation differs (as a set): 1 of 3 [2]" in text
    # answer overlap: events 1 and 3 the same set (1), event 2 {5} against {5, 8} (1/2)
    assert c.overlap == pytest.approx((1 + 0.5 + 1) / 3)
    assert "answer overlap (mean Jaccard; seed stability" in text and "0.833" in text
    assert compare_records(a, b, atol=1e-12).columns_differ["final_logit"] == 2


def test_a_column_missing_in_one_run_differs_on_every_event_and_required_columns_are_checked():
    a = records([(1, [3], True, -0.5)])
    b = a.drop(columns=["agreement"])
    assert compare_records(a, b).columns_differ == {"agreement": 1}
    with pytest.raises(ConfigError, match="no column"):
        compare_records(a.drop(columns=["explanation"]), b)


def test_schema_4_columns_of_older_records_are_not_recorded_rather_than_different():
    old = records([(1, [3, 4], True, -0.5), (2, [], False, 0.7), (5, [6], True, -0.1)])
    new = old.copy()
    old["schema_version"] = [3, 3, 3]
    new["schema_version"] = [5, 5, 5]
    # what upgrade_records gives older rows: empty lists; the new run kept its ranking
    old["ranking"] = [[], [], []]
    new["ranking"] = [[4, 3, 9], [9], [6, 1]]
    old["acc_curve_logits"] = [[], [], []]
    new["acc_curve_logits"] = [[0.5, -0.1], [0.7], [0.2]]
    c = compare_records(old, new)
    assert c.identical and c.not_recorded == {"acc_curve_logits": 3, "ranking": 3}
    assert "not recorded in one run" in format_comparison(c)
    # a record of schema 4 or later with an empty ranking did record it: a difference
    old.loc[2, "schema_version"] = 4
    c = compare_records(old, new)
    assert c.columns_differ == {"acc_curve_logits": 1, "ranking": 1}
    assert c.not_recorded == {"acc_curve_logits": 2, "ranking": 2}
    # and so does a non-empty cell, whatever the schema, and an older record without a
    # version (schema 1)
    old.loc[1, "ranking"] = [8]
    c = compare_records(old.drop(columns="schema_version"), new)
    assert c.columns_differ["ranking"] == 1 and c.not_recorded["ranking"] == 2
    assert not compare_records(old, new).identical


def test_next_size_share_of_records_before_schema_8_is_not_recorded_rather_than_different():
    old = records([(1, [3, 4], True, -0.5), (2, [], False, 0.7)])
    new = old.copy()
    old["schema_version"], new["schema_version"] = [7, 7], [8, 8]
    old["next_size_share"] = [float("nan")] * 2  # what upgrade_records gives older rows
    new["next_size_share"] = [float("nan"), 0.25]  # the second was cut short
    c = compare_records(old, new)
    assert c.identical and c.not_recorded == {"next_size_share": 2}
    # a schema-8 record's NaN is a value (nothing was cut short): compared
    old["schema_version"] = [8, 8]
    assert compare_records(old, new).columns_differ == {"next_size_share": 1}


def test_two_runs_of_one_configuration_give_equal_records_through_the_script(tmp_path):
    for name in ("a", "b"):
        with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
            cfg = compose("explain", overrides=[*TINY, f"out_dir={tmp_path / name}"])
        pipeline.run(cfg)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare_runs.py"),
                           str(tmp_path / "a"), str(tmp_path / "b"), "--strict"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "events: 5 in both" in done.stdout and "every compared column is equal" in done.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare_runs.py"),
                          str(tmp_path / "a"), str(tmp_path / "nothing")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: ")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_the_records_digest_ignores_seconds_and_sees_every_bit_of_a_value():
    from cftgnn.analysis.compare import records_digest

    records = pd.DataFrame({"event_id": [5, 3], "final_logit": [0.25, -1.5],
                            "explanation": [np.array([1, 2]), np.array([], dtype=np.int64)],
                            "time_s": [1.0, 2.0], "curve_time_s": [0.1, np.nan]})
    digest = records_digest(records)
    slower = records.assign(time_s=[9.0, 8.0], curve_time_s=[3.0, 4.0])
    assert records_digest(slower) == digest
    assert records_digest(records.iloc[::-1]) == digest  # rows by event id
    nudged = records.assign(final_logit=[0.25, np.nextafter(-1.5, 0)])
    assert records_digest(nudged) != digest
    other = records.assign(explanation=[np.array([2, 1]), np.array([], dtype=np.int64)])
    assert records_digest(other) != digest
