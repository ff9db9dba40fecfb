"""``scripts/benchmark_quality.py``: the table's arithmetic and a tiny end-to-end run."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.benchmarks import quality
from cftgnn.errors import CftgnnError

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


def _rows() -> pd.DataFrame:
    nan = np.nan
    # events 1, 2 have minima 1 and 2; event 3 has none of size <= K (certified)
    base = {1: (1, True), 2: (2, True), 3: (nan, True)}
    found = {"a": {1: 1, 2: 3, 3: 5}, "b": {1: 2, 2: nan, 3: nan}}
    rows = []
    for name, sizes in found.items():
        for event, (m, cert) in base.items():
            size = sizes[event]
            rows.append({"event_id": event, "config": name, "status": "ok", "min_size": m,
                         "min_certified": cert, "found": not math.isnan(size), "size": size,
                         "certified_minimal": size == m, "time_s": 1.0 * event,
                         "oracle_calls": 10, "ceiling_flips": event != 2})
    rows.append({**rows[0], "event_id": 4, "status": "no_candidates", "config": "a"})
    return pd.DataFrame(rows)


def test_quality_table_by_hand() -> None:
    table = quality.quality_table(_rows()).set_index("config")
    a, b = table.loc["a"], table.loc["b"]
    assert a.events == 3 and a.found == 1.0 and a.found_min_le_K == 1.0
    assert a.true_min == 0.5 and a.excess == 0.5  # (1-1 + 3-2) / 2
    assert a.found_rest == 1.0 and a.size_rest == 5 and a.certified == pytest.approx(1 / 3)
    assert b.found == pytest.approx(1 / 3) and b.true_min == 0.0 and b.excess == 1.0
    assert b.found_rest == 0.0 and math.isnan(b.size_rest) and a.time_p50 == 2.0
    assert math.isnan(a.pruned_ge5)  # no pruning in these rows
    summary = quality.event_summary(_rows())
    assert summary["min_le_K"] == 2 and summary["none_le_K"] == 1
    assert summary["min_sizes"] == {1: 1, 2: 1} and summary["ceiling_flips"] == 2
    text = quality.to_markdown(quality.quality_table(_rows()), summary, "t")
    assert "| a | 3 | 1.000 |" in text
    rows = _rows().assign(prune=True, size_before_prune=lambda d: d["size"] * 2)
    pruned = quality.quality_table(rows).set_index("config")
    assert pruned.loc["a"].pruned_ge5 == 0.5 and math.isnan(pruned.loc["b"].pruned_ge5)


def _cfg(tmp_path: Path, *overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("benchmark_quality", overrides=[
            "debug=default", "checkpoint=null", "n_events=3", "max_size=2", "progress=false",
            "sample.prediction=any", f"out={tmp_path}", *overrides])


def test_tiny_run_agrees_with_the_certificates(tmp_path: Path) -> None:
    explainers = ("+explainers={greedy: {explainer: greedy, strategy: recent},"
                  " certified: {explainer: greedy, strategy: closest, certify: 2, prune: true},"
                  " mcts: {explainer: cftgnn, strategy: closest, params: {it_max: 30}}}")
    table = quality.run(_cfg(tmp_path, "~explainers", explainers))
    rows = pd.read_parquet(tmp_path / "quality.parquet")
    assert (tmp_path / "quality.md").is_file()
    assert list(table.config) == ["exhaustive K=2", "greedy", "certified", "mcts"]
    ok = rows[rows.status == "ok"]
    exhaustive = ok[ok.config == "exhaustive K=2"]
    assert (exhaustive.found == exhaustive.min_size.notna()).all()
    for row in ok.itertuples():
        if row.found and not math.isnan(row.min_size):
            assert row.size >= row.min_size  # nothing beats the certified minimum
    certified = ok[ok.config == "certified"]
    has = certified.min_size.notna()
    assert has.any()  # the tiny run has a minimum of size <= K to find
    # certify=K finds it (the column, not DataFrame.size)
    assert (certified[has]["size"] == certified[has].min_size).all()


@pytest.mark.parametrize("overrides, message", [
    (["max_size=0"], "max_size must be an integer >= 1"),
    (["+explainers.x={explainer: nope}"], "unknown explainer 'nope'"),
    (["+explainers.x={explainer: greedy, strategy: far}"], "unknown strategy 'far'"),
    (["+explainers.x={explainer: greedy, colour: 1}"], "unknown key 'colour'"),
    (["+explainers.x={explainer: greedy, certify: -1}"], "certify must be"),
    (["+explainers.x={explainer: exhaustive, params: {max_size: 0}}"], "max_size must be"),
    (["only=[greedy-closest,nope]"], "only: unknown configuration 'nope'"),
])
def test_bad_configurations_are_refused(tmp_path: Path, overrides: list[str],
                                        message: str) -> None:
    with pytest.raises(CftgnnError, match=message):
        quality.run(_cfg(tmp_path, *overrides))
    assert not (tmp_path / "quality.parquet").exists()


def test_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark_quality.py"),
                           "debug=default", "max_size=0", f"out={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: max_size must be an integer >= 1, got 0"]


def test_an_interrupted_run_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    only = "only=[greedy-closest]"
    first = quality.run(_cfg(tmp_path, only, "n_events=2"))
    calls = []
    real = quality.evaluate_event

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(args[1])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(quality, "evaluate_event", counting)
    again = quality.run(_cfg(tmp_path, only, "n_events=2"))
    assert calls == []  # nothing evaluated again
    pd.testing.assert_frame_equal(again, first)
    from cftgnn.runs.records import RunDirectoryError

    with pytest.raises(RunDirectoryError):  # other options, same directory
        quality.run(_cfg(tmp_path, "only=[greedy-recent]", "n_events=2"))


def test_mode_auto_configurations_take_the_table_or_a_timed_and_kept_choice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from omegaconf import OmegaConf

    from cftgnn.oracle.auto_mode import ModeChoice
    from cftgnn.oracle.oracle import OracleMode

    cfg = OmegaConf.create({"auto_threshold": 1.5, "k": None, "m_max": 64, "seed": 0,
                            "auto_ratios": {"uci-tgn": 0.97, "wikipedia-tgn": 1.91}})
    timed: list[str] = []

    def measure(*args: object, **kwargs: object) -> ModeChoice:
        timed.append("x")
        return ModeChoice(OracleMode.APPROXIMATE, 3.0, 1.5, 10)

    from cftgnn.runs import pipeline

    monkeypatch.setattr(pipeline, "measure_mode", measure)
    engine = None  # never used: measure_mode is replaced

    def mode(pair: str) -> str:  # one run directory per pair, as in a benchmark run
        (tmp_path / pair).mkdir(exist_ok=True)
        return pipeline.choose_auto_mode(cfg, engine, [1], tmp_path / pair, pair).mode.value

    assert mode("uci-tgn") == "exact"
    assert mode("wikipedia-tgn") == "approximate"
    assert timed == []
    assert mode("uci-tgat") == "approximate"
    assert mode("uci-tgat") == "approximate"
    assert timed == ["x"]  # timed once, then read from the run directory
    assert (tmp_path / "uci-tgat" / "auto_mode.json").is_file()
