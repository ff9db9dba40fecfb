"""Several counterfactuals per event in reports: the table's diversity columns, the per-event
Pareto plot and ``scripts/show_pareto.py``, on tiny run directories written with RecordStore."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cftgnn.cli import friendly_errors
from cftgnn.errors import ConfigError
from cftgnn.explain.result import ExplanationResult
from cftgnn.reporting import pareto, report
from cftgnn.reporting.plots import pareto_figure
from cftgnn.runs.records import RECORD_SCHEMA, EventContext, RecordStore, event_record

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
CANDIDATES = tuple(range(1, 11))  # |R| = 10


def _fingerprint(explainer: str) -> dict[str, Any]:
    return {"dataset": {"name": "toy"}, "model": {"config": {"_target_": "toy.Model"}},
            "explainer": {"_target_": f"toy.{explainer}"}, "m_max": 64}


def _context() -> EventContext:
    return EventContext(setup_time_s=0.1, time_s=0.5, group="correct",
                        screen_logit=1.0, dataset="toy", model="tgn", strategy_name="closest",
                        constraints="{}", auto_mode_ratio=math.nan, shard=0)


def _result(event_id: int, explainer: str, sets: list[tuple[int, ...]], logits: list[float],
            consequences: list[int] | None = None, original_logit: float = 1.0,
            miss: tuple[int, ...] = (5,)) -> ExplanationResult:
    """A result handing back ``sets`` (the first is the answer); none: ``miss`` fails."""
    flips = bool(sets)
    return ExplanationResult(
        explainer=explainer, event_id=event_id, original_logit=original_logit,
        candidate_ids=CANDIDATES, explanation=sets[0] if flips else miss,
        final_logit=logits[0] if flips else original_logit / 2, is_counterfactual=flips,
        iterations=1, search_calls=10, exact_calls=2, cache_hits=0, agreement=None,
        agreement_n=0, wall_time_s=0.4, oracle_time_s=0.3, num_removable=len(CANDIDATES),
        counterfactuals=tuple(sets), counterfactual_logits=tuple(logits),
        counterfactual_consequences=None if consequences is None else tuple(consequences))


# three counterfactuals of p_orig = 1, |R| = 10: sizes 2, 1, 3 and margins 0.5, 0.2, 0.9
THREE = [(1, 2), (3,), (1, 2, 4)]
THREE_LOGITS = [-0.5, -0.2, -0.9]
# Jaccard distances: {1,2}-{3}: 1, {1,2}-{1,2,4}: 1 - 2/3, {3}-{1,2,4}: 1
THREE_DIVERSITY = (1 + 1 / 3 + 1) / 3
# points (0.1, 0.2), (0.2, 0.5), (0.3, 0.9) below the reference (1, 0): a staircase of
# 0.9 · 0.2 + 0.8 · 0.3 + 0.7 · 0.4
THREE_HV = 0.70


@pytest.fixture
def diverse_run(tmp_path) -> Path:
    """Event 1: three counterfactuals (consequences measured); event 2: none."""
    store = RecordStore(tmp_path / "nsga2", _fingerprint("NSGA2"), RECORD_SCHEMA)
    store.write(event_record(_result(1, "nsga2", THREE, THREE_LOGITS, [3, 0, 7]), _context()))
    store.write(event_record(_result(2, "nsga2", [], []), _context()))
    return store.root


@pytest.fixture
def old_run(tmp_path) -> Path:
    """Records written before schema version 3 (no counterfactual lists): event 7 flips."""
    store = RecordStore(tmp_path / "greedy", _fingerprint("Greedy"))
    new = ("n_counterfactuals", "counterfactuals", "counterfactual_logits",
           "counterfactual_consequences")
    for result in (_result(7, "greedy", [(4, 5)], [-0.6]), _result(8, "greedy", [], [])):
        rec = {k: v for k, v in event_record(result, _context()).items() if k not in new}
        store.write({**rec, "schema_version": 2})
    return store.root


# --------------------------------------------------------------------------- the table


def test_table_reports_the_counterfactuals_of_each_event(diverse_run):
    table = report.comparison_table(report.load_runs([diverse_run]))
    assert list(table.columns[-7:-3]) == ["n_counterfactuals", "cf_ge3", "diversity",
                                          "hypervolume"]  # then time, on GPU, oracle calls
    assert list(table.columns).index("n_counterfactuals") == (
        list(table.columns).index("mean_size") + 1)
    (row,) = table.to_dict("records")
    assert row["n_counterfactuals"] == 3.0 and row["cf_ge3"] == 1.0  # event 2 has none
    assert row["diversity"] == pytest.approx(THREE_DIVERSITY)
    assert row["hypervolume"] == pytest.approx(THREE_HV)
    head, _, line = report.markdown_table(table).splitlines()
    cells = dict(zip(head.strip("| ").split(" | "), line.strip("| ").split(" | "), strict=True))
    assert cells["CFs / event"] == "3.000" and cells["≥ 3 CFs"] == "1.000"
    assert cells["diversity ↑"] == f"{THREE_DIVERSITY:.3f}" and cells["HV ↑"] == "0.700"


def test_old_records_show_one_counterfactual_and_no_diversity(diverse_run, old_run):
    records = report.load_runs([diverse_run.parent])
    table = report.comparison_table(records)
    old = table[table.explainer == "greedy"].iloc[0]
    assert old["n_counterfactuals"] == 1.0 and old["cf_ge3"] == 0.0
    assert math.isnan(old["diversity"])
    # one point, size 2 of 10 and margin 0.6: (1 - 0.2) · 0.6
    assert old["hypervolume"] == pytest.approx(0.48)
    text = report.markdown_table(table)
    heads = text.splitlines()[0].strip("| ").split(" | ")
    greedy = next(line for line in text.splitlines() if "| greedy |" in line)
    cells = dict(zip(heads, greedy.strip("| ").split(" | "), strict=True))
    assert cells["diversity ↑"] == "–" and cells["CFs / event"] == "1.000"


# --------------------------------------------------------------------------- the figure


def _record(consequences: list[int] | None) -> dict[str, Any]:
    """Five counterfactuals of p_orig = -1: the answer, a stacked copy of its point, a smaller
    and a larger one on the front, and a dominated one."""
    sets = [(1, 2), (3,), (1, 2, 4), (5, 6, 7), (8, 9)]
    logits = [0.5, 0.2, 0.9, 0.3, 0.5]
    result = _result(4, "nsga2", sets, logits, consequences, original_logit=-1.0)
    return event_record(result, _context())


# all pairs are disjoint except {1,2}-{1,2,4} (distance 1/3): (9 + 1/3) / 10
FIVE_DIVERSITY = (9 + 1 / 3) / 10


def test_pareto_figure_shows_every_counterfactual():
    fig = pareto_figure(_record([3, 0, 7, 1, 2]))
    ax, bar = fig.axes
    assert bar.get_ylabel() == "later events changed"
    (dots,) = [c for c in ax.collections if c.get_gid() == "counterfactuals"]
    assert dots.get_offsets().tolist() == [[2, 0.5], [1, 0.2], [3, 0.9], [3, 0.3], [2, 0.5]]
    assert dots.get_array().tolist() == [3, 0, 7, 1, 2]
    (ring,) = [c for c in ax.collections if c.get_gid() == "answer"]
    assert ring.get_offsets().tolist() == [[2, 0.5]]
    (front,) = [line for line in ax.get_lines() if line.get_gid() == "front"]
    assert front.get_xdata().tolist() == [1, 2, 3, 4]  # the dominated (3, 0.3) is left out
    assert front.get_ydata().tolist() == [0.2, 0.5, 0.9, 0.9]
    assert [t.get_text() for t in ax.texts] == ["×2"]  # (8, 9) lies on the answer's point
    title = fig.get_suptitle()
    assert "event 4 · toy · tgn · nsga2" in title and "5 counterfactuals" in title
    assert f"diversity (Jaccard) {FIVE_DIVERSITY:.3f}" in title and "HV 0.700" in title
    assert "not measured" not in title
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_legend() is not None


def test_pareto_figure_without_consequences_uses_one_colour():
    fig = pareto_figure(_record(None))
    (ax,) = fig.axes  # no colourbar
    (dots,) = [c for c in ax.collections if c.get_gid() == "counterfactuals"]
    assert dots.get_array() is None
    assert len({tuple(c) for c in np.round(dots.get_facecolors(), 6)}) == 1
    assert "consequences not measured" in fig.get_suptitle()


def test_pareto_figure_of_one_counterfactual_has_no_diversity(old_run):
    record = pareto.load_pareto_record(old_run, 7)  # upgraded on read: one, unmeasured
    fig = pareto_figure(record)
    assert "1 counterfactual ·" in fig.get_suptitle() and "n/a" in fig.get_suptitle()
    assert "consequences not measured" in fig.get_suptitle()


def test_pareto_figure_refuses_an_event_without_counterfactual(diverse_run):
    record = report.load_runs([diverse_run]).set_index("event_id", drop=False).loc[2]
    with pytest.raises(ConfigError, match="event 2 has no counterfactual"):
        pareto_figure(record)


# --------------------------------------------------------------------------- the command


def test_show_pareto_writes_the_default_png(diverse_run, capsys):
    out = pareto.main([str(diverse_run), "1"])
    assert out == diverse_run / "pareto_1.png"
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "3 counterfactuals" in printed


def test_show_pareto_writes_where_asked(diverse_run, tmp_path):
    out = pareto.main([str(diverse_run), "1", "--out", str(tmp_path / "pics" / "p.png")])
    assert out == tmp_path / "pics" / "p.png" and out.is_file()


@pytest.mark.parametrize(("where", "event", "message"), [
    ("missing", "1", "error: {run} does not exist"),
    ("parent", "1", "error: {run} is not a run directory"),
    ("run", "99", "error: event 99 is not in the records of {run} (2 events: 1, 2)"),
    ("run", "2", "error: event 2 has no counterfactual in {run} "),
])
def test_show_pareto_errors_are_one_line(diverse_run, where, event, message, capsys):
    """As the script runs it (inside ``friendly_errors``), without a subprocess each."""
    run = {"missing": diverse_run / "nope", "parent": diverse_run.parent,
           "run": diverse_run}[where]
    with pytest.raises(SystemExit) as exc, friendly_errors():
        pareto.main([str(run), event])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith(message.format(run=run)), err
    if event == "2":
        assert lines[0].endswith("events with one: 1")


def test_show_pareto_script_exits_2_with_one_line(diverse_run):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "show_pareto.py"),
                           str(diverse_run), "2"], env=ENV, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: event 2 has no counterfactual")
