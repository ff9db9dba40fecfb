"""``mode=auto`` picks the search oracle by the measured cost ratio."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.errors import ConfigError
from cftgnn.oracle import OracleMode
from cftgnn.oracle.auto_mode import pick_mode
from cftgnn.runs import pipeline
from cftgnn.runs.records import RunDirectoryError, read_records

CONF = Path(__file__).resolve().parents[2] / "conf"


def test_pick_mode_by_the_ratio() -> None:
    assert pick_mode([3.0, 3.0, 100.0], [2.0, 2.0, 2.5]).mode is OracleMode.EXACT  # 1.5
    choice = pick_mode([3.1, 3.1], [2.0, 2.0])
    assert choice.mode is OracleMode.APPROXIMATE and choice.ratio == pytest.approx(1.55)
    assert pick_mode([5.0], [1.0], threshold=6.0).mode is OracleMode.EXACT
    with pytest.raises(ConfigError):
        pick_mode([], [1.0])
    with pytest.raises(ConfigError):
        pick_mode([1.0], [1.0], threshold=0.0)


def _cfg(tmp_path: Path, *overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("explain", overrides=[
            "debug=default", "checkpoint=null", "explainer=greedy", "progress=false",
            "sample.prediction=any", "n_events=3", "mode=auto", f"out_dir={tmp_path}",
            *overrides])


@pytest.mark.parametrize("threshold, expected", [(1e6, "exact"), (1e-6, "approximate")])
def test_auto_mode_run_records_its_choice_and_a_resumed_run_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threshold: float, expected: str
) -> None:
    pipeline.run(_cfg(tmp_path, f"auto_threshold={threshold}", "n_events=2"))
    stored = json.loads((tmp_path / "auto_mode.json").read_text())
    assert stored["mode"] == expected and stored["ratio"] > 0
    records = read_records(tmp_path)
    assert set(records[records.status == "ok"].oracle_mode) <= {expected}
    assert (records.auto_mode_ratio == stored["ratio"]).all()

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("a resumed run must not measure again")

    monkeypatch.setattr(pipeline, "measure_mode", fail)
    with pytest.raises(RunDirectoryError):  # a different n_events is another configuration
        pipeline.run(_cfg(tmp_path, f"auto_threshold={threshold}", "n_events=3"))
    pipeline.run(_cfg(tmp_path, f"auto_threshold={threshold}", "n_events=2"))


def test_unknown_mode_is_refused_before_loading(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mode must be"):
        pipeline.run(_cfg(tmp_path, "mode=fast"))


@pytest.mark.parametrize("ratio, expected", [(0.9, "exact"), (2.0, "approximate")])
def test_auto_mode_takes_the_pair_ratio_from_the_table_without_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    ratio: float, expected: str
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("a pair in auto_ratios must not be timed")

    monkeypatch.setattr(pipeline, "measure_mode", fail)
    pipeline.run(_cfg(tmp_path, "n_events=2", f"+auto_ratios.synthetic-tgn={ratio}"))
    stored = json.loads((tmp_path / "auto_mode.json").read_text())
    assert stored == {"mode": expected, "ratio": ratio, "threshold": 1.5, "calls": 0}
    records = read_records(tmp_path)
    assert set(records[records.status == "ok"].oracle_mode) <= {expected}
    assert "(auto_ratios table; threshold 1.5)" in capsys.readouterr().out


def test_auto_ratios_must_be_positive_numbers(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="auto_ratios.synthetic-tgn"):
        pipeline.run(_cfg(tmp_path, "+auto_ratios.synthetic-tgn=-1"))


def test_the_quality_benchmark_and_explain_share_the_ratio_table() -> None:
    with initialize_config_dir(str(CONF), version_base="1.3"):
        explain = compose("explain")
        quality = compose("benchmark_quality")
    assert explain.auto_ratios == quality.auto_ratios
    assert explain.auto_threshold == quality.auto_threshold
