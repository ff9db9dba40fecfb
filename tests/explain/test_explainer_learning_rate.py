"""``train_explainer.py``'s ``lr``: null (the default) trains each explainer at its reference's
rate, the PGExplainer at 1e-4 and TempME at 1e-3; a number overrides both; the options a card
and a resumable state keep hold the rate used."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.errors import ConfigError
from cftgnn.explain.training.options import check_train_explainer_options
from cftgnn.explain.training.pgexplainer import PGExplainerTrainer
from cftgnn.explain.training.tempme import TempMETrainer

CONF = Path(__file__).resolve().parents[2] / "conf"


def _cfg(*overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("train_explainer", overrides=list(overrides))


@pytest.mark.parametrize("explainer, trainer, rate", [
    ("pgexplainer", PGExplainerTrainer, 1e-4),
    ("tempme", TempMETrainer, 1e-3),
])
def test_a_null_rate_is_the_explainers_reference(explainer, trainer, rate):
    cfg = _cfg(f"explainer={explainer}")
    assert cfg.lr is None
    check_train_explainer_options(cfg)
    assert trainer().options_of(cfg)["lr"] == rate
    assert trainer().options_of(_cfg(f"explainer={explainer}", "lr=0.01"))["lr"] == 0.01


@pytest.mark.parametrize("value", ["0", "-1e-3", "fast"])
def test_a_bad_rate_is_refused(value):
    with pytest.raises(ConfigError, match="lr"):
        check_train_explainer_options(_cfg(f"lr={value}"))


@pytest.mark.parametrize("explainer, trainer", [
    ("pgexplainer", PGExplainerTrainer), ("tempme", TempMETrainer)])
def test_the_trainer_is_the_explainers_by_target(explainer, trainer):
    """``conf/trainer/<explainer>.yaml`` follows ``explainer=``: its ``_target_`` is the
    objective that trains it (no dispatch on the name in the script)."""
    from hydra.utils import get_class

    cfg = _cfg(f"explainer={explainer}")
    assert get_class(cfg.trainer._target_) is trainer


def test_an_explainer_that_does_not_learn_has_no_trainer_and_is_refused_in_one_line():
    from cftgnn.explain import training

    cfg = _cfg("explainer=greedy")
    assert cfg.get("trainer") is None
    with pytest.raises(ConfigError, match="trains explainer=pgexplainer or explainer=tempme"):
        training.run(cfg)
