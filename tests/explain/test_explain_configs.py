"""Every explainer × strategy option of conf/ composes, instantiates and explains a toy event."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from cftgnn.explain import (
    BeamExplainer,
    CFTGNNExplainer,
    ExhaustiveExplainer,
    Explainer,
    GreedyExplainer,
    NSGA2Explainer,
    PerturbOneExplainer,
    PSOExplainer,
    RandomExplainer,
    SelectionStrategy,
    TGNNExplainer,
)
from cftgnn.testing import AdditiveBackend, make_candidates, make_oracle

CONF = Path(__file__).resolve().parents[2] / "conf"


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def test_groups_present() -> None:
    assert {"beam", "cftgnn", "exhaustive", "greedy", "nsga2", "pso", "perturb_one",
            "random", "tgnnexplainer"} <= set(_options("explainer"))
    assert _options("strategy") == ["closest", "one_best", "random", "recent"]


@pytest.mark.parametrize("strategy", _options("strategy"))
@pytest.mark.parametrize("explainer", _options("explainer"))
def test_compose_and_instantiate(explainer: str, strategy: str) -> None:
    with initialize_config_dir(str(CONF), version_base="1.3"):
        # tgnnexplainer's default navigator is a trained PGExplainer: a toy event has none
        navigator = ["explainer.navigator=perturb_one"] if explainer == "tgnnexplainer" else []
        cfg = compose("explain", overrides=[f"explainer={explainer}", f"strategy={strategy}",
                                            *navigator])
    strat = instantiate(cfg.strategy)
    assert isinstance(strat, SelectionStrategy)
    exp = instantiate(cfg.explainer, strategy=strat)
    assert isinstance(exp, Explainer) and exp.strategy is strat
    assert isinstance(exp, {"cftgnn": CFTGNNExplainer, "greedy": GreedyExplainer,
                            "exhaustive": ExhaustiveExplainer, "beam": BeamExplainer,
                            "nsga2": NSGA2Explainer, "pso": PSOExplainer,
                            "perturb_one": PerturbOneExplainer,
                            "random": RandomExplainer,
                            "tgnnexplainer": TGNNExplainer}[explainer])
    oracle = make_oracle(make_candidates([1, 2, 3], [0, 1, 1]),
                         AdditiveBackend(1.0, {1: 0.6, 2: 0.7, 3: 0.1}))
    result = exp.explain(oracle)
    # every flipping set holds {1, 2}; a random ranking's shortest flipping prefix may hold 3
    assert result.is_counterfactual and {1, 2} <= set(result.explanation)
    assert len(result.explanation) == 2 or explainer == "random"


def test_cftgnn_defaults_match_design() -> None:
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain")
    exp = instantiate(cfg.explainer)
    p = exp.params
    assert p.alpha == pytest.approx(2 / 3) and p.beta == pytest.approx(1 / 3)
    assert p.it_max == 300 and p.iteration_cap == 300 and p.backprop.value == "weighted"
