"""The native replays of the window models (GraphMixer, DyGFormer: no memory, each endpoint's
window of most recent interactions) are exact: every call, single or batched, equals a fresh
replay of the stream without the removed events (1e-5), on synthetic streams and a UCI prefix."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cftgnn.data import EventStream, load_uci, make_synthetic_stream
from cftgnn.models import DyGFormer, GraphMixer, TemporalModel
from cftgnn.models.base import eval_mode
from cftgnn.oracle import OracleMode
from cftgnn.oracle.engine import ReplayEngine, naive_logit
from cftgnn.replay.dygformer import DyGFormerReplay
from cftgnn.replay.graphmixer import GraphMixerReplay
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.registry import replay_for

ATOL = 1e-5


def small_mixer(stream: EventStream, num_neighbors: int = 4) -> TemporalModel:
    torch.manual_seed(0)
    model = GraphMixer(stream.num_nodes, stream.feat_dim, time_dim=8, channels=12,
                       embedding_dim=12, num_neighbors=num_neighbors, batch_size=20)
    return model.eval()


def small_former(stream: EventStream, num_neighbors: int = 4, patch_size: int = 1
                 ) -> TemporalModel:
    """A DyGFormer reading at least ``num_neighbors`` interactions per endpoint."""
    torch.manual_seed(0)
    length = -(-(num_neighbors + 1) // patch_size) * patch_size
    model = DyGFormer(stream.num_nodes, stream.feat_dim, time_dim=8, channel_dim=4,
                      embedding_dim=12, max_input_sequence_length=length,
                      patch_size=patch_size, batch_size=20)
    return model.eval()


def small_former_patched(stream: EventStream, num_neighbors: int = 4) -> TemporalModel:
    return small_former(stream, num_neighbors, patch_size=2)


SMALL = {"graphmixer": small_mixer, "dygformer": small_former,
         "dygformer_patch2": small_former_patched}


def sets_for(cand: np.ndarray, stream: EventStream, rng: np.random.Generator,
             num_random: int) -> list[frozenset[int]]:
    """Nothing, everything, the oldest, the newest, events sharing a timestamp, random."""
    sets = [frozenset(), frozenset(cand.tolist())]
    if len(cand):
        sets += [frozenset([int(cand[0])]), frozenset([int(cand[-1])])]
        same_t = [int(e) for e in cand if (stream.t[cand] == stream.t[e]).sum() > 1]
        if same_t:
            sets.append(frozenset(same_t))
        sets += [frozenset(cand[rng.random(len(cand)) < q].tolist())
                 for q in rng.uniform(0.1, 0.6, num_random)]
    return sets


def check_against_fresh_replays(engine: ReplayEngine, model: TemporalModel, stream: EventStream,
                                events: tuple[int, ...], m_max: int, num_random: int
                                ) -> float:
    """Single calls and one batch per event against fresh replays; the largest change a
    removal made to a logit (so that the comparison is not between constants)."""
    rng = np.random.default_rng(0)
    moved = 0.0
    for i in events:
        oracle = engine.oracle(i, m_max=m_max)
        assert oracle.original_logit == pytest.approx(naive_logit(model, stream, i), abs=ATOL)
        sets = sets_for(oracle.candidates.ids, stream, rng, num_random)
        refs = [naive_logit(model, stream, i, sorted(s)) for s in sets]
        batched = engine.oracle(i, m_max=m_max).batch(sets)  # a fresh cache: all computed
        np.testing.assert_allclose(batched, refs, atol=ATOL)
        for s, ref in zip(sets, refs, strict=True):
            assert oracle.exact(s) == pytest.approx(ref, abs=ATOL)
        moved = max(moved, max(abs(r - oracle.original_logit) for r in refs))
    return moved


def test_the_window_models_get_their_registered_replays() -> None:
    stream = make_synthetic_stream(10, 50, seed=0)
    assert type(replay_for(small_mixer(stream))) is GraphMixerReplay
    assert type(replay_for(small_former(stream))) is DyGFormerReplay


@pytest.mark.parametrize(("name", "feat_dim", "num_neighbors"), [
    ("graphmixer", 0, 2), ("graphmixer", 2, 4), ("graphmixer", 0, 30),  # full windows
    ("dygformer", 0, 4), ("dygformer", 2, 2), ("dygformer", 2, 30),  # shift, roomy ones
    ("dygformer_patch2", 2, 4)])  # do not
def test_exact_calls_equal_fresh_replays_on_synthetic_streams(name: str, feat_dim: int,
                                                              num_neighbors: int) -> None:
    stream = make_synthetic_stream(25, 400, seed=7, feat_dim=feat_dim, p_tie=0.3)
    model = SMALL[name](stream, num_neighbors)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    moved = check_against_fresh_replays(engine, model, stream, (5, 160, 399), m_max=12,
                                        num_random=4)
    assert moved > 1e-3


@pytest.mark.parametrize("name", sorted(SMALL))
def test_approximate_calls_equal_fresh_replays_of_the_short_history(name: str) -> None:
    stream = make_synthetic_stream(25, 400, seed=3, feat_dim=2, p_tie=0.3)
    model = SMALL[name](stream)
    engine = ReplayEngine(model, stream)
    rng = np.random.default_rng(1)
    for i in (150, 330):
        oracle = engine.oracle(i, m_max=10, mode=OracleMode.APPROXIMATE)
        cand = oracle.candidates.ids
        for s in sets_for(cand, stream, rng, 3):
            drop = sorted(set(range(int(cand[0]), i)) - (set(cand.tolist()) - s))
            assert oracle(s) == pytest.approx(naive_logit(model, stream, i, drop), abs=ATOL)


@pytest.mark.dataset
@pytest.mark.parametrize("cls", [GraphMixer, DyGFormer], ids=["graphmixer", "dygformer"])
def test_exact_calls_equal_fresh_replays_on_a_uci_prefix(real_data_dir, tmp_path,
                                                          cls: type[TemporalModel]) -> None:
    """DyGLib's UCI sizes (the defaults), random weights, 32 sets a batch."""
    stream = load_uci(data_dir=real_data_dir, cache_dir=tmp_path, download=False).prefix(4000)
    torch.manual_seed(0)
    model = cls(stream.num_nodes, stream.feat_dim).eval()  # type: ignore[call-arg]
    engine = ReplayEngine(model, stream)
    moved = check_against_fresh_replays(engine, model, stream, (3999,), m_max=40,
                                        num_random=27)
    assert moved > 1e-3


@pytest.mark.parametrize("name", sorted(SMALL))
def test_soft_removal_and_pooling_weights(name: str) -> None:
    """Weight 1 is the plain logit; each window spreads a pooling mass of 1 over its events;
    GraphMixer: weight 0 on the oldest event of a window that is not full is its hard
    removal (DyGFormer's sequences start at the oldest event, so nothing is equal there)."""
    stream = make_synthetic_stream(25, 300, seed=5, feat_dim=2)
    model = SMALL[name](stream, 400)  # no window is full
    model.attach(stream)
    i = 250
    src, dst, t = stream.src[i:i + 1], stream.dst[i:i + 1], stream.t[i:i + 1]
    events = [e for e in range(i) if stream.src[e] in (src[0], dst[0])
              or stream.dst[e] in (src[0], dst[0])]
    with eval_mode(model):
        model.advance(0, i)
        plain = float(model.predict(src, dst, t)[0])
        ones = model.predict_soft(src, dst, t, events, torch.ones(len(events)))
        assert float(ones[0]) == plain
        oldest = events[0]
        zero = model.predict_soft(src, dst, t, [oldest], torch.zeros(1))
        mass = model.attention_by_event(src, dst, t, events)
    assert float(zero[0]) != pytest.approx(plain, abs=1e-7)  # the weight acts
    if name == "graphmixer":
        hard = naive_logit(model, stream, i, [oldest])
        assert float(zero[0]) == pytest.approx(hard, abs=ATOL)
    windows = sum(any(v in (stream.src[e], stream.dst[e]) for e in range(i))
                  for v in (src[0], dst[0]))  # the two queries' non-empty windows
    assert float(mass.sum()) == pytest.approx(windows, abs=1e-9)
    assert bool((mass > 0).all())


def test_dygformer_skips_the_pass_of_a_set_that_leaves_both_windows_unchanged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    stream = make_synthetic_stream(12, 400, seed=2, feat_dim=2, p_tie=0.1)
    model = small_former(stream, num_neighbors=3)
    engine = ReplayEngine(model, stream)
    i = 390
    oracle = engine.oracle(i, m_max=40, mode=OracleMode.EXACT)
    u, v = int(stream.src[i]), int(stream.dst[i])
    windows = {int(e) for n in (u, v)
               for e in engine.index.recent_neighbors(np.array([n]), np.array([i]),
                                                      model.num_neighbors)[1][0]}
    outside = [int(e) for e in oracle.candidates.ids if int(e) not in windows]
    inside = [int(e) for e in oracle.candidates.ids if int(e) in windows]
    assert outside and inside
    passes = []
    real = DyGFormer.logits_of_windows

    def counted(self, src, *rest):  # type: ignore[no-untyped-def]
        passes.append(len(src))
        return real(self, src, *rest)

    monkeypatch.setattr(DyGFormer, "logits_of_windows", counted)
    sets = [frozenset(outside[:1]), frozenset(outside), frozenset(inside[:1])]
    got = engine.oracle(i, m_max=40, mode=OracleMode.EXACT).batch(sets)
    refs = [naive_logit(model, stream, i, sorted(s)) for s in sets]
    np.testing.assert_allclose(got, refs, atol=ATOL)
    assert got[0] == got[1] == pytest.approx(oracle.original_logit, abs=ATOL)
    # one pass for the set that changes a window, at most one for the unperturbed pair
    assert sum(passes) <= 2
    # on the plan itself: the unperturbed pair is computed with the first set that needs a
    # pass, and a set that changes nothing then costs none
    model.attach(stream, index=engine.index)
    plan = DyGFormerReplay(model).plan(model.snapshot(), 0, i)
    passes.clear()
    with torch.no_grad():
        first = plan.logits(RemovalSets.from_sets([inside[:1], outside[:1]]))
        assert passes == [2]
        again = plan.logits(RemovalSets.from_sets([outside]))
    assert passes == [2]
    assert float(again[0]) == float(first[1])
    np.testing.assert_allclose(first.numpy(), refs[2:3] + refs[:1], atol=ATOL)


@pytest.mark.parametrize("fast", [True, False])
def test_dygformer_runs_its_transformer_layers_off_the_fused_path_and_restores_the_flag(
        fast: bool) -> None:
    # the fused eval-mode kernel parts from the CPU on CUDA by 2e-5 (docs/benchmarks.md)
    encoder = small_former(make_synthetic_stream(10, 40, seed=0, feat_dim=2)).encoder
    x = torch.randn(3, 6, encoder.output.in_features)
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(fast)
    try:
        with torch.no_grad():
            got = encoder._encode(x)
            assert torch.backends.mha.get_fastpath_enabled() is fast
            torch.backends.mha.set_fastpath_enabled(False)
            want = x
            for layer in encoder.transformers:
                want = layer(want)
    finally:
        torch.backends.mha.set_fastpath_enabled(before)
    assert torch.equal(got, want)
