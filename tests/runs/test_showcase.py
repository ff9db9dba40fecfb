"""The explained prediction a run shows before its summary (``cftgnn.runs.showcase``),
the summary as printed (NaN metrics hidden, one line on each), and the no-download demo
``explain.py debug=default checkpoint=null``, which must find a counterfactual."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from testsupport.commands import Command, compose_command, hydra_app, hydra_job

import cftgnn.config  # noqa: F401  (registers ${cftgnn_root:})
from cftgnn.data.stream import EventStream
from cftgnn.oracle.oracle import is_flip
from cftgnn.runs.records import read_records
from cftgnn.runs.showcase import (
    MAX_LISTED,
    describe_record,
    logit_text,
    pick_shown,
    why_shown,
)
from cftgnn.scoring.summaries import MEANINGS, SUMMARY_COLUMNS, format_summary, summarize

ROOT = Path(__file__).resolve().parents[2]


def _records(rows: list[tuple[int, str, int, float, float]]) -> pd.DataFrame:
    """Records of ``(event_id, status, size, original_logit, final_logit)``."""
    return pd.DataFrame(rows, columns=["event_id", "status", "size", "original_logit",
                                       "final_logit"])


def test_the_smallest_counterfactual_is_shown_the_earliest_among_equals():
    records = _records([(40, "ok", 3, 1.0, -0.5), (30, "ok", 2, -1.0, 0.2),
                        (20, "ok", 1, 2.0, 1.0),  # not a flip: size 1 does not count
                        (25, "ok", 2, 1.0, -0.1), (10, "no_candidates", 0, 0.5, 0.5)])
    shown = pick_shown(records)
    assert shown is not None and int(shown["event_id"]) == 25
    assert why_shown(shown) == "the smallest counterfactual found"


def test_without_a_counterfactual_the_closest_attempt_is_shown():
    # final / original: 0.5, 0.1 (closest), 0.1 (later), 0.9; a zero original logit never
    records = _records([(5, "ok", 4, 2.0, 1.0), (7, "ok", 2, -3.0, -0.3),
                        (9, "ok", 1, 1.0, 0.1), (11, "ok", 0, 0.0, 0.0),
                        (13, "ok", 6, 1.0, 0.9)])
    shown = pick_shown(records)
    assert shown is not None and int(shown["event_id"]) == 7
    assert why_shown(shown) == "no counterfactual found; the closest attempt"


def test_nothing_is_shown_without_an_explained_record():
    assert pick_shown(_records([])) is None
    assert pick_shown(_records([(3, "no_candidates", 0, 1.0, 1.0)])) is None


def _stream() -> EventStream:
    n = 12
    return EventStream(name="toy", src=np.arange(n) % 3, dst=(np.arange(n) % 3) + 3,
                       t=np.arange(n, dtype=np.float64) * 60.0,
                       edge_feat=np.zeros((n, 0), dtype=np.float32),
                       labels=np.zeros(n, dtype=np.int64), num_nodes=6)


def test_a_record_in_words_names_the_event_the_logits_and_the_removed_events():
    record = {"event_id": 11, "original_logit": 0.8125, "final_logit": -0.25,
              "explanation": [9, 4], "num_candidates": 10}
    text = describe_record(record, _stream(), "the smallest counterfactual found")
    lines = text.splitlines()
    assert lines[0] == ("explained prediction: event 11 (2 → 5 at t=660 s): the smallest "
                        "counterfactual found")
    assert "original logit 0.812 (correct: predicts the link) → final logit -0.250 (flipped)" \
        in lines[1]
    assert "removing 2 of 10 candidate events:" in lines[2]
    assert lines[3].strip() == "event 9: 0 → 3 at t=540 s, 2 minutes before"
    assert lines[4].strip() == "event 4: 1 → 4 at t=240 s, 7 minutes before"


@pytest.mark.parametrize(("logit", "text"), [
    (-0.000174, "-0.000174"), (0.004, "0.004"), (0.0412, "0.0412"), (-1.74e-05, "-1.74e-05"),
    (0.8125, "0.812"), (-0.25, "-0.250"), (12.5, "12.500"), (0.0, "0.000"),
    (float("nan"), "n/a")])
def test_a_logit_in_words_keeps_its_value_and_its_sign(logit, text):
    assert logit_text(logit) == text


def test_a_small_final_logit_is_printed_with_its_digits_in_words_and_in_the_picture_title():
    record = {"event_id": 11, "original_logit": -0.0312, "final_logit": -0.000174,
              "explanation": [9], "num_candidates": 10}
    line = describe_record(record, _stream()).splitlines()[1]
    assert "original logit -0.0312 (incorrect" in line
    assert line.endswith("→ final logit -0.000174 (not flipped)")
    from cftgnn.reporting.picture import ExplanationView, picture_title

    ints = np.zeros(3, dtype=np.int64)
    view = ExplanationView(event_id=11, src=2, dst=5, t=660.0, ids=np.arange(3), cand_src=ints,
                           cand_dst=ints, cand_t=np.zeros(3), hops=ints,
                           removed=np.array([False, True, False]), explanation=(1,),
                           original_logit=-0.0312, final_logit=-0.000174,
                           keep_logit=float("nan"), k=1, m_max=64)
    assert "logit -0.0312 → -0.000174 (not flipped)" in picture_title(view)


def test_a_long_explanation_is_cut_after_a_few_events():
    record = {"event_id": 11, "original_logit": -1.0, "final_logit": -0.5,
              "explanation": list(range(10, 2, -1)), "num_candidates": 11}
    lines = describe_record(record, _stream()).splitlines()
    assert "incorrect: predicts no link" in lines[1] and "(not flipped)" in lines[1]
    assert len(lines) == 3 + MAX_LISTED + 1
    assert lines[-1].strip() == f"... and {8 - MAX_LISTED} more"


def test_every_summary_metric_has_a_meaning():
    assert set(MEANINGS) == set(SUMMARY_COLUMNS)
    assert all(0 < len(m) <= 55 for m in MEANINGS.values())


def test_the_printed_summary_hides_metrics_without_a_value_and_explains_the_rest():
    table = summarize(pd.DataFrame({
        "status": ["ok", "ok"], "original_logit": [1.0, -1.0], "final_logit": [-1.0, -2.0],
        "size": [2, 0], "num_candidates": [10, 10], "oracle_calls": [5, 7]}))
    assert np.isnan(table["robust_impl"].iloc[0])
    text = format_summary(table.assign(group="all"), index="group", hide_nan=True,
                          meanings=True)
    lines = {line.split()[0]: line for line in text.splitlines()[1:] if line.strip()}
    assert "robust_impl" not in lines and "diversity" not in lines
    assert lines["fidelity_plus"].split()[1] == "0.500"
    assert lines["fidelity_plus"].endswith(MEANINGS["fidelity_plus"])
    assert lines["oracle_calls"].endswith(MEANINGS["oracle_calls"])
    foot = text.split("\nnot shown, no value in this run: ", 1)[1]  # wrapped at 100
    assert "robust_impl" in foot and all(len(line) <= 100 for line in text.splitlines())
    assert text.splitlines()[-1].endswith("definitions: docs/metrics.md")
    # the plain form keeps every column
    plain = format_summary(table.assign(group="all"), index="group")
    assert "robust_impl" in plain and "docs/metrics.md" not in plain


def test_the_demo_finds_a_counterfactual_and_shows_it_before_the_summary(tmp_path, capsys):
    """``python scripts/explain.py debug=default checkpoint=null`` as documented, run as
    Hydra runs it (only the output directory and the progress bar differ)."""
    script = ROOT / "scripts" / "explain.py"
    app = hydra_app(script)
    assert app is not None
    out = tmp_path / "run"
    (cfg,) = compose_command(app, Command("scripts/explain.py", (
        "debug=default", "checkpoint=null", f"out_dir={out}", "progress=false")))
    main = runpy.run_path(str(script), run_name="demo_check")["main"]
    with hydra_job(cfg) as task:
        main(task)
    printed = capsys.readouterr().out
    records = read_records(out)
    flips = records[(records["status"] == "ok")
                    & is_flip(records["original_logit"].to_numpy(float),
                              records["final_logit"].to_numpy(float))]
    assert len(flips) >= 1, "the demo found no counterfactual"
    assert set(records["group"]) == {"correct", "incorrect"}
    assert "only 0 incorrect" not in printed
    shown = pick_shown(records)
    assert shown is not None
    head = f"explained prediction: event {int(shown['event_id'])} "
    assert head in printed and "the smallest counterfactual found" in printed
    picture = out / f"explanation_{int(shown['event_id'])}.png"
    assert picture.read_bytes().startswith(b"\x89PNG")
    assert f"picture: {picture}" in printed
    assert printed.index(head) < printed.index("fidelity_plus")
    assert "robust_impl" not in printed.split("fidelity_plus", 1)[1].split("not shown")[0]


def test_picture_false_shows_the_prediction_in_words_only(tmp_path, capsys):
    from hydra import compose, initialize_config_dir

    from cftgnn.reporting.picture import save_picture
    from cftgnn.runs.pipeline import run

    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("explain", overrides=["debug=default", "checkpoint=null", "n_events=2",
                                            "explainer.it_max=20", "sample.prediction=any",
                                            "progress=false", "picture=false",
                                            f"out_dir={tmp_path}"])
    run(cfg, draw=save_picture)
    printed = capsys.readouterr().out
    assert "explained prediction: event " in printed and "picture:" not in printed
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("value", ["maybe", "1"])
def test_a_bad_picture_option_is_one_error(tmp_path, value):
    from hydra import compose, initialize_config_dir

    from cftgnn.errors import ConfigError
    from cftgnn.runs.pipeline import run

    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("explain", overrides=["debug=default", "checkpoint=null",
                                            f"picture={value}", f"out_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="picture must be true or false"):
        run(cfg)


def test_a_picture_that_cannot_be_written_is_one_warning(tmp_path, capsys):
    import errno

    from cftgnn.runs.pipeline import show_prediction

    def full_disk(*_args: object) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")

    records = pd.DataFrame([{"event_id": 11, "status": "ok", "size": 1, "original_logit": 1.0,
                             "final_logit": -1.0, "explanation": [9], "num_candidates": 4}])
    show_prediction(records, _stream(), {}, tmp_path, full_disk)
    out, err = capsys.readouterr()
    assert out.startswith("explained prediction: event 11 ") and "picture:" not in out
    assert err == f"warning: no picture of event 11 in {tmp_path}: No space left on device\n"


def test_a_run_whose_events_were_all_skipped_says_so(tmp_path, capsys):
    from cftgnn.runs.pipeline import show_prediction

    records = _records([(0, "no_candidates", 0, 1.0, 1.0)])
    show_prediction(records, _stream(), {}, tmp_path, None)
    assert capsys.readouterr().out == ("explained prediction: none, every event was skipped "
                                       "(no_candidates)\n")
