"""Every explainer × strategy option of conf/ composes, instantiates and explains a toy event."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from cftgnn.data.stream import EventStream
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
from cftgnn.explain.attention import AttentionExplainer
from cftgnn.explain.pgexplainer import EdgeScorer, PGExplainer, TrainedScorer
from cftgnn.explain.temgx import TemGXExplainer
from cftgnn.explain.tempme import EncoderShape, MotifEncoder, TempMEExplainer, TrainedTempME
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
    trained = ({"trained": _identity_scorer()} if explainer == "pgexplainer" else
               {"trained": TrainedTempME(MotifEncoder(EncoderShape(edge_dim=0, hidden=4,
                                                                   time_dim=2)), 4, 3, {})}
               if explainer == "tempme" else {})
    exp = instantiate(cfg.explainer, strategy=strat, **trained)
    assert isinstance(exp, Explainer) and exp.strategy is strat
    assert isinstance(exp, {"cftgnn": CFTGNNExplainer, "greedy": GreedyExplainer,
                            "exhaustive": ExhaustiveExplainer, "beam": BeamExplainer,
                            "nsga2": NSGA2Explainer, "pso": PSOExplainer,
                            "perturb_one": PerturbOneExplainer,
                            "random": RandomExplainer,
                            "tgnnexplainer": TGNNExplainer,
                            "attention": AttentionExplainer,
                            "pgexplainer": PGExplainer, "tempme": TempMEExplainer,
                            "temgx": TemGXExplainer}[explainer])
    oracle = make_oracle(make_candidates([1, 2, 3], [0, 1, 1]),
                         AdditiveBackend(1.0, {1: 0.6, 2: 0.7, 3: 0.1}))
    oracle.probe = _Probe()  # attention and features for the explainers that read the model
    oracle.stream = _Probe.model.stream  # TemGX's window: events 1 and 2 (3 lies apart)
    result = exp.explain(oracle)
    # every flipping set holds {1, 2}; a random ranking's shortest flipping prefix may hold 3
    assert result.is_counterfactual and {1, 2} <= set(result.explanation)
    assert len(result.explanation) == 2 or explainer == "random"


class _Probe:
    """The toy event's model view: attention (also the one feature) favours events 1 and 2."""

    removable = np.array([1, 2, 3])
    # TempME's walks: from 0 only event 1 (0-2), from 1 only event 2 (1-3); event 3 (7-8) and
    # event 0 (5-6) lie on no walk of the explained event 4 (0-1)
    model = SimpleNamespace(stream=EventStream(
        src=np.array([5, 0, 1, 7, 0]), dst=np.array([6, 2, 3, 8, 1]), t=np.arange(5.0),
        edge_feat=np.zeros((5, 0), dtype=np.float32), labels=np.zeros(5, dtype=np.int64),
        num_nodes=9))
    src, dst, t, history_end = 0, 1, 4.0, 4

    def attention(self) -> np.ndarray:
        return np.array([0.45, 0.5, 0.05])

    def features(self) -> torch.Tensor:
        return torch.tensor([[0.45], [0.5], [0.05]])

    def node_embeddings(self, nodes: np.ndarray) -> np.ndarray:
        return np.stack([np.ones(2) * (1 + int(n)) for n in nodes])


def _identity_scorer() -> TrainedScorer:
    """A PGExplainer MLP whose score is its one (non-negative) feature."""
    mlp = EdgeScorer(1, hidden=1)
    with torch.no_grad():
        for layer in (mlp.net[0], mlp.net[2]):
            layer.weight.fill_(1.0)
            layer.bias.zero_()
    return TrainedScorer(mlp, {})


def test_cftgnn_defaults_match_design() -> None:
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain")
    exp = instantiate(cfg.explainer)
    p = exp.params
    assert p.alpha == pytest.approx(2 / 3) and p.beta == pytest.approx(1 / 3)
    assert p.it_max == 300 and p.iteration_cap == 300 and p.backprop.value == "weighted"
