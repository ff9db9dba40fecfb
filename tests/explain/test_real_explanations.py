"""On the committed UCI TGN checkpoint, every reported counterfactual flips the exact logit."""

from __future__ import annotations

from pathlib import Path

import pytest

from cftgnn.data import load_uci
from cftgnn.explain import (
    CFTGNNExplainer,
    ClosestStrategy,
    GreedyExplainer,
    OneBestStrategy,
    explain_event,
)
from cftgnn.oracle import ReplayEngine, naive_logit

pytestmark = pytest.mark.dataset

CKPT = Path(__file__).resolve().parents[2] / "checkpoints" / "tgn_uci.pt"


def test_reported_counterfactuals_flip_the_exact_logit(real_data_dir, tmp_path):
    stream = load_uci(data_dir=real_data_dir, cache_dir=tmp_path, download=False)
    assert CKPT.is_file(), f"committed checkpoint {CKPT} is missing"
    engine = ReplayEngine.from_checkpoint(CKPT, stream)
    explainers = [
        CFTGNNExplainer(strategy=ClosestStrategy(), it_max=60),
        GreedyExplainer(strategy=OneBestStrategy()),
    ]
    found = 0
    for i in (52_000, 59_000):
        for explainer in explainers:
            result = explain_event(engine, explainer, i)
            assert result.status.value == "ok"
            ref = naive_logit(engine.model, stream, i, sorted(result.explanation))
            assert result.final_logit == pytest.approx(ref, abs=1e-5)
            assert result.is_counterfactual == (ref * result.original_logit < 0)
            found += result.is_counterfactual
    assert found > 0  # the check above was exercised on real counterfactuals


@pytest.mark.parametrize("ckpt", ["tgn_uci", "tgat_uci"])
def test_oracle_is_exact_on_a_real_data_prefix(real_data_dir, tmp_path, ckpt):
    """Exact and approximate oracles equal fresh replays on the first 8,000 UCI events."""
    import numpy as np

    from cftgnn.oracle.engine import EventReplay

    stream = load_uci(data_dir=real_data_dir, cache_dir=tmp_path, download=False).prefix(8_000)
    path = CKPT.parent / f"{ckpt}.pt"
    engine = ReplayEngine.from_checkpoint(path, stream)
    rng = np.random.default_rng(0)
    for i in (3_000, 7_999):
        replay = EventReplay(engine, i)
        cand = replay.candidates.ids
        sets = [frozenset(), frozenset(cand.tolist()), frozenset([int(cand[0])])]
        sets += [frozenset(cand[rng.random(len(cand)) < 0.2].tolist()) for _ in range(2)]
        exact = replay.exact(sets)
        approx = replay.approximate(sets)
        for s, e, a in zip(sets, exact, approx, strict=True):
            assert e == pytest.approx(naive_logit(engine.model, stream, i, sorted(s)), abs=1e-5)
            drop = sorted(set(range(int(cand[0]), i)) - (set(cand.tolist()) - s))
            assert a == pytest.approx(naive_logit(engine.model, stream, i, drop), abs=1e-5)
