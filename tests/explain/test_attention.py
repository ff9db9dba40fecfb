"""explainer=attention: the model's aggregated attention ranks the removable events."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from testsupport.models import tgat, tgn1
from testsupport.planted import planted_stream

from cftgnn.errors import ExplainerError
from cftgnn.explain.attention import AttentionExplainer, needs_probe
from cftgnn.explain.result import ExplanationStatus
from cftgnn.oracle import Oracle
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.testing import AdditiveBackend, make_candidates


class FixedAttention:
    """A probe whose attention is given."""

    def __init__(self, removable: list[int], attention: list[float]) -> None:
        self.removable = np.asarray(removable, dtype=np.int64)
        self._attention = np.asarray(attention, dtype=np.float64)

    def attention(self) -> np.ndarray:
        return self._attention


def fingerprint(probe: bool, model: str = "pyg_tgn") -> ModelFingerprint:
    return ModelFingerprint(dataset="uci", dataset_sha256="d" * 64, model=model,
                            weights="x.pt", weights_sha256="w" * 64, checkpoint_dir=".",
                            probe=probe)


def test_the_most_attended_event_comes_first_and_the_prefix_is_answered() -> None:
    ids = [2, 4, 6, 8]
    backend = AdditiveBackend(1.0, {2: 0.1, 4: 0.7, 6: 0.2, 8: 0.6})
    probe = FixedAttention(ids, [0.05, 0.5, 0.3, 0.15])
    oracle = Oracle(make_candidates(ids), 1.0, exact=backend, mode="exact",
                    probe=probe)  # type: ignore[arg-type]
    result = AttentionExplainer().explain(oracle)
    assert result.ranking == (4, 6, 8, 2)
    assert result.importance == pytest.approx((0.5, 0.3, 0.15, 0.05))
    # prefixes: {4} 0.3, {4, 6} 0.1, {4, 6, 8} -0.5: the first flip
    assert result.explanation == (4, 6, 8) and result.is_counterfactual
    assert result.exact_calls >= 1 and result.search_calls == 0


@pytest.mark.parametrize("factory", [tgn1, tgat], ids=["tgn", "tgat"])
def test_importance_is_the_models_own_attention_on_each_event(factory) -> None:
    stream = planted_stream(320, num_src=6, num_dst=6, seed=3)
    torch.manual_seed(0)
    model = factory(stream)
    twin = copy.deepcopy(model)
    engine = ReplayEngine(model, stream)
    oracle = engine.oracle(300, None, 16, "exact")
    result = AttentionExplainer().explain(oracle)
    assert result.status is ExplanationStatus.OK
    # independently: a copy of the model advanced over the whole history before the event
    twin.attach(stream)
    twin.eval()
    with torch.no_grad():
        twin.advance(0, 300)
        mass = twin.attention_by_event([int(stream.src[300])], [int(stream.dst[300])],
                                       [float(stream.t[300])],
                                       torch.from_numpy(oracle.removable)).numpy()
    got = dict(zip(result.ranking, result.importance, strict=True))
    assert [got[int(e)] for e in oracle.removable] == pytest.approx(mass.tolist(), abs=1e-6)
    assert mass.max() > 0
    assert result.ranking[0] in {int(e) for e in oracle.removable[mass == mass.max()]}


def test_a_model_without_attention_is_refused_naming_it() -> None:
    with pytest.raises(ExplainerError, match="needs a model with a probe.*pyg_tgn"):
        AttentionExplainer().supports(fingerprint(probe=False))
    AttentionExplainer().supports(fingerprint(probe=True, model="tgn"))  # accepted
    ids = [1, 2]
    oracle = Oracle(make_candidates(ids), 1.0, exact=AdditiveBackend(1.0, {1: 0.4, 2: 0.4}),
                    mode="exact")
    with pytest.raises(ExplainerError, match="needs a model with a probe"):
        AttentionExplainer().explain(oracle)


def test_the_refusal_names_every_model_with_a_probe(tmp_path, monkeypatch) -> None:
    """The models named are those of conf/model whose class offers soft removal (GraphMixer
    and DyGFormer too, not PyG's TGN), read off the registry, not a list kept by hand."""
    from cftgnn.models import TGN, DyGFormer, GraphMixer, PyGTGN
    from cftgnn.models.protocol import offers_soft_removal
    from cftgnn.training import checkpoint

    assert [offers_soft_removal(c) for c in (TGN, GraphMixer, DyGFormer, PyGTGN)] == \
        [True, True, True, False]
    assert str(needs_probe("attention", "pyg_tgn")) == (
        "explainer=attention needs a model with a probe (attention or pooling scores and soft "
        "removal); model 'pyg_tgn' offers none (its oracle has no probe); use "
        "model=dygformer, model=graphmixer, model=tgat, model=tgn or model=tgn2l")
    (tmp_path / "mine.yaml").write_text("_target_: cftgnn.models.GraphMixer\n")
    (tmp_path / "pyg.yaml").write_text("_target_: cftgnn.models.pyg_tgn.PyGTGN\n")
    monkeypatch.setattr(checkpoint, "MODEL_CONF", tmp_path)
    assert str(needs_probe("tempme", None)).endswith(
        "this model offers none (its oracle has no probe); use model=mine")
