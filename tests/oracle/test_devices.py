"""The oracles on another device equal the CPU's (1e-5 on the logit): exact, approximate and
batched calls of every model, on a copy of the model moved to the device.

The ``cpu`` variants run everywhere (a second copy on the CPU: the same code path, the model
moved with ``.to``, its own engine); the ``cuda`` variants are marked ``gpu`` (deselected by
default; ``python -m pytest -m gpu``, which ``scripts/gpu/check.sh`` runs on a GPU machine).
Without a CUDA device they skip, saying so, unless ``CFTGNN_REQUIRE_GPU=1`` (set by the
check script), which makes them fail.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from testsupport.devices import device_or_skip
from testsupport.models import dygformer, graphmixer, tgat, tgn1, tgn2

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.explain import ClosestStrategy, ExhaustiveExplainer
from cftgnn.oracle.engine import EventReplay, ReplayEngine

ATOL = 1e-5
FACTORIES = {"tgn1": tgn1, "tgn2": tgn2, "tgat": tgat, "graphmixer": graphmixer,
             "dygformer": dygformer}
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
EVENTS = (180, 333, 479)  # increasing: each engine's cursor moves forward


@pytest.fixture(scope="module")
def stream() -> EventStream:
    return make_synthetic_stream(30, 480, seed=3, feat_dim=2, p_tie=0.2)


def _pair(stream: EventStream, name: str, device: torch.device
          ) -> tuple[ReplayEngine, ReplayEngine]:
    torch.manual_seed(0)
    model = FACTORIES[name](stream).eval()
    moved = copy.deepcopy(model).to(device)
    assert moved.device.type == device.type
    return ReplayEngine(model, stream), ReplayEngine(moved, stream)


def _sets(cand: np.ndarray, seed: int) -> list[frozenset[int]]:
    rng = np.random.default_rng(seed)
    sets = [frozenset(), frozenset(cand.tolist())]
    sets += [frozenset(cand[rng.random(len(cand)) < q].tolist())
             for q in (0.05, 0.1, 0.3, 0.5, 0.8) for _ in range(3)]
    sets += [frozenset([int(c)]) for c in cand[:4]]  # single removals, the oldest first
    return sets


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_exact_approximate_and_batched_oracles_equal_the_cpu(stream, name, device):
    dev = device_or_skip(device)
    cpu, other = _pair(stream, name, dev)
    for i in EVENTS:
        ref, got = EventReplay(cpu, i, m_max=16), EventReplay(other, i, m_max=16)
        np.testing.assert_array_equal(got.candidates.ids, ref.candidates.ids)
        sets = _sets(ref.candidates.ids, i)
        for mode in ("exact", "approximate"):
            want = getattr(ref, mode)(sets)  # batched, on the CPU
            batched = getattr(got, mode)(sets)
            np.testing.assert_allclose(batched, want, atol=ATOL, err_msg=f"{mode} batch, {i}")
            singles = [float(getattr(got, mode)([s])[0]) for s in sets[:6]]
            np.testing.assert_allclose(singles, want[:6], atol=ATOL,
                                       err_msg=f"{mode} single calls, event {i}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["tgn1", "tgat"])
def test_an_exhaustive_search_on_the_device_gives_the_cpus_answer(stream, name, device):
    dev = device_or_skip(device)
    cpu, other = _pair(stream, name, dev)
    results = [ExhaustiveExplainer(ClosestStrategy(), max_size=2).explain(
        engine.oracle(EVENTS[-1], m_max=12, mode="exact")) for engine in (cpu, other)]
    assert results[1].explanation == results[0].explanation
    assert results[1].is_counterfactual == results[0].is_counterfactual
    assert results[1].final_logit == pytest.approx(results[0].final_logit, abs=ATOL)


def test_a_missing_cuda_device_skips_with_its_reason(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("CFTGNN_REQUIRE_GPU", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no CUDA device"):
        device_or_skip("cuda")
    monkeypatch.setenv("CFTGNN_REQUIRE_GPU", "1")
    with pytest.raises(pytest.fail.Exception, match="no CUDA device"):
        device_or_skip("cuda")
    assert device_or_skip("cpu") == torch.device("cpu")
