"""Robustness measures on toy oracles whose answers are computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cftgnn.errors import ConfigError
from cftgnn.oracle.oracle import Oracle
from cftgnn.scoring.robustness import (
    ROBUSTNESS_COLUMNS,
    RobustnessOptions,
    flip_share,
    implementation_variants,
    local_rule,
    robustness_columns,
)
from cftgnn.testing.backends import AdditiveBackend
from cftgnn.testing.search import make_candidates, make_oracle


def _oracle(weights: dict[int, float], base: float = 1.0) -> Oracle:
    return make_oracle(make_candidates(sorted(weights)), AdditiveBackend(base, weights))


def test_variants_are_every_drop_and_add_when_few() -> None:
    got = implementation_variants([1, 2], [1, 2, 3, 4], n=10, rng=np.random.default_rng(0))
    assert got == [frozenset({2}), frozenset({1}), frozenset({1, 2, 3}), frozenset({1, 2, 4})]


def test_variants_sample_half_of_each_kind() -> None:
    got = implementation_variants([1, 2, 3, 4], range(1, 21), n=6,
                                  rng=np.random.default_rng(0))
    assert len(got) == len(set(got)) == 6
    assert sum(len(v) == 3 for v in got) == 3 and sum(len(v) == 5 for v in got) == 3


def test_flip_share() -> None:
    assert flip_share(1.0, [-1.0, 0.0, 2.0, -0.1]) == 0.5
    assert math.isnan(flip_share(1.0, []))


def test_implementation_noise_by_hand() -> None:
    # s = {1, 2}: logit 1 - 1.2 = -0.2 flips; dropping either leaves 0.4 (no flip); adding
    # 3, 4 or 5 keeps the flip: 3 of 5 variants flip
    oracle = _oracle({1: 0.6, 2: 0.6, 3: 0.6, 4: 0.1, 5: 0.0})
    cols = robustness_columns(oracle, (1, 2), True, RobustnessOptions())
    assert set(cols) == set(ROBUSTNESS_COLUMNS)
    assert cols["robust_impl"] == pytest.approx(0.6)
    assert cols["robust_impl_n"] == 5
    assert cols["robust_model"] is None


def test_local_rule_found_by_hand() -> None:
    # any 2 of {1, 2, 3} remove 1.2 and flip: the smallest group with |G| > r = 2
    oracle = _oracle({1: 0.6, 2: 0.6, 3: 0.6, 4: 0.1, 5: 0.0})
    rule = local_rule(oracle, (1, 2), RobustnessOptions(rule_pi=1.0),
                      np.random.default_rng(0))
    assert rule.group == (1, 2, 3) and rule.r == 2
    assert rule.prob == 1.0 and rule.samples == 3


def test_local_rule_absent_reports_last_estimate() -> None:
    # only {1, 2} flips among pairs; groups of 3, 4, 5 events have 3, 6, 10 pairs
    oracle = _oracle({1: 0.6, 2: 0.6, 3: 0.3, 4: 0.1, 5: 0.0})
    rule = local_rule(oracle, (1, 2), RobustnessOptions(rule_pi=0.9),
                      np.random.default_rng(0))
    assert rule.group == ()
    assert rule.samples == 10 and rule.prob == pytest.approx(0.1)


def test_local_rule_samples_when_many_subsets() -> None:
    weights = {e: 0.3 for e in range(1, 11)}  # any 4 events flip 1.0
    oracle = _oracle(weights)
    rule = local_rule(oracle, (1, 2, 3, 4), RobustnessOptions(rule_samples=3, rule_pi=1.0),
                      np.random.default_rng(0))
    assert rule.group == (1, 2, 3, 4, 5) and rule.samples == 3 and rule.prob == 1.0


def test_model_noise_uses_the_second_oracles_own_prediction() -> None:
    oracle = _oracle({1: 0.6, 2: 0.6, 3: 0.0})
    flips = _oracle({1: 1.0, 2: 1.0, 3: 0.0}, base=-0.5)  # p0 < 0, removal makes it more so
    same = _oracle({1: 1.0, 2: 1.0, 3: 0.0}, base=1.5)
    opts = RobustnessOptions()
    assert robustness_columns(oracle, (1, 2), True, opts, flips)["robust_model"] is False
    cols = robustness_columns(oracle, (1, 2), True, opts, same)
    assert cols["robust_model"] is True
    assert cols["robust_model_logit0"] == 1.5 and cols["robust_model_logit"] == -0.5


def test_no_counterfactual_measures_nothing() -> None:
    oracle = _oracle({1: 0.1})
    cols = robustness_columns(oracle, (1,), False, RobustnessOptions())
    assert all(v is None for v in cols.values())


@pytest.mark.parametrize("bad", [{"variants": 0}, {"rule_r": 0}, {"rule_pi": 0.0},
                                 {"rule_pi": 1.5}, {"rule_samples": 0}, {"rule_max_extra": 0}])
def test_bad_options(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        RobustnessOptions(**bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- explain.py
def _second_checkpoint(tmp_path):
    """A second model of the debug stream (other fresh weights), saved as a checkpoint."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    import cftgnn.config  # noqa: F401
    from cftgnn.training.checkpoint import save_checkpoint
    from cftgnn.training.resolve import resolve_model
    from tests.runs.test_pipeline import CONF

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=["debug=default"])
    stream = instantiate(cfg.dataset)
    model, _ = resolve_model(cfg.model, stream, None, cfg.paths.checkpoint_dir, "cpu", seed=7)
    pt, _ = save_checkpoint(model, stream, tmp_path / "second.pt")
    return pt


def test_explain_records_robustness_with_a_second_checkpoint(tmp_path):
    from cftgnn.runs import pipeline
    from cftgnn.runs.records import read_records
    from cftgnn.scoring.summaries import summarize
    from tests.runs.test_pipeline import cfg_for

    pt = _second_checkpoint(tmp_path)
    out = tmp_path / "run"
    pipeline.run(cfg_for(out, "n_events=12", "ceiling=true", "robustness=true",
                         f"robust.checkpoint={pt}", "robust.variants=6"))
    records = read_records(out)
    cf = records[records.is_counterfactual]
    assert len(cf) > 0
    assert cf.robust_impl.between(0, 1).all() and (cf.robust_impl_n <= 6).all()
    assert cf.robust_model.notna().all()
    assert records[~records.is_counterfactual].robust_impl.isna().all()
    assert (records.time_s >= records.robustness_time_s.fillna(0)).all()
    row = summarize(records).iloc[0]
    assert row.robust_impl == pytest.approx(cf.robust_impl.mean())
    assert row.robust_model == pytest.approx(cf.robust_model.astype(bool).mean())

    # the report: robustness columns, the robustness plot, and rules.md found below the run
    from cftgnn.reporting.report import write_report

    (out / "rules").mkdir()
    (out / "rules" / "rules.md").write_text("# Regional counterfactual rules\n\nplanted rule\n")
    rep = write_report([out], tmp_path / "report")
    text = (tmp_path / "report" / "report.md").read_text()
    assert "impl. noise ↑" in text and "model noise ↑" in text
    assert rep.table["robust_impl"].iloc[0] == pytest.approx(cf.robust_impl.mean())
    assert (tmp_path / "report" / "robustness.png").is_file()
    assert "## Regional rules" in text and "planted rule" in text


def test_explain_refuses_bad_robustness_options_before_loading(tmp_path):
    from cftgnn.runs import pipeline
    from tests.runs.test_pipeline import cfg_for

    with pytest.raises(ConfigError, match="robustness must be true or false"):
        pipeline.run(cfg_for(tmp_path, "robustness=maybe"))
    with pytest.raises(ConfigError, match="variants"):
        pipeline.run(cfg_for(tmp_path, "robustness=true", "robust.variants=0"))
    with pytest.raises(ConfigError, match="does not exist"):
        pipeline.run(cfg_for(tmp_path, "robustness=true", "robust.checkpoint=nowhere.pt"))
