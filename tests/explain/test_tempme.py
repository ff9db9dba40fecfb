"""explainer=tempme: its walk sampler (backwards in time, history=), anonymisation, loss,
training on a planted stream, checkpoint (round trip, refusal of another model or stream) and
scripts/train_explainer.py explainer=tempme end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from testsupport.models import dygformer, graphmixer, tgat, tgn1, tgn2

import cftgnn.config  # noqa: F401  (registers ${cftgnn_root:})
from cftgnn.cli import friendly_errors
from cftgnn.data.index import TemporalIndex
from cftgnn.data.planted import make_planted_stream
from cftgnn.errors import ConfigError, ExplainerError
from cftgnn.explain import training
from cftgnn.explain.tempme import (
    EncoderShape,
    MotifEncoder,
    TempMEExplainer,
    TrainedTempME,
    anonymise,
    check_tempme_card,
    event_walks,
    load_tempme,
    motif_classes,
    null_prior,
    prior_kl,
    resolve_tempme,
    sample_walks,
    save_tempme,
    tempme_card,
    tempme_loss,
    tempme_path,
)
from cftgnn.explain.training import tempme as tempme_training
from cftgnn.explain.training.events import validation_events
from cftgnn.explain.training.options import check_train_explainer_options
from cftgnn.explain.training.pgexplainer import PGExplainerTrainer
from cftgnn.explain.training.setup import training_setup
from cftgnn.explain.training.tempme import (
    TempMETrainer,
    tempme_event,
    train_epoch,
    validation_loss,
)
from cftgnn.files import file_sha256
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.runs import pipeline
from cftgnn.training import loop
from cftgnn.training.checkpoint import CheckpointError, CheckpointMismatchError
from cftgnn.training.kinds import weights_sha256

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
WALK = {"n_walks": 8, "length": 3, "degree": 5}


@pytest.fixture(scope="module")
def planted():
    return make_planted_stream(kind="rule", num_nodes=30, num_events=400, seed=0)


# ------------------------------------------------------------------------------ walks
def _check_walks(stream, walks, end: int) -> None:
    ev = walks.events
    assert (ev < end).all()
    for w in range(len(ev)):
        nodes = {walks.root}
        last, last_t = end, math.inf
        for j in range(ev.shape[1]):
            e = int(ev[w, j])
            if e < 0:
                assert (ev[w, j:] < 0).all()  # a walk that stops stays stopped
                break
            assert e < last and stream.t[e] <= last_t  # strictly earlier, backwards in time
            pair = {int(stream.src[e]), int(stream.dst[e])}
            assert int(walks.src[w, j]) in nodes and pair & nodes  # grows from the walk
            assert pair == {int(walks.src[w, j]), int(walks.dst[w, j])}
            nodes |= pair
            last, last_t = e, stream.t[e]


def test_walks_go_backwards_in_time_from_the_history_end(planted) -> None:
    index = TemporalIndex(planted)
    rng = np.random.default_rng(0)
    for event in (150, 287, 399):
        for root in (int(planted.src[event]), int(planted.dst[event])):
            walks = sample_walks(index, root, event, 16, 3, 5, rng)
            _check_walks(planted, walks, event)
            assert (walks.events[:, 0] >= 0).any()  # these roots have a history
    empty = sample_walks(index, int(planted.src[0]), 0, 4, 3, 5, rng)
    assert (empty.events < 0).all()  # nothing before the first event


@pytest.mark.parametrize("history", ["event", "batch_start"])
def test_the_walks_of_an_oracle_respect_its_history(planted, history) -> None:
    engine = ReplayEngine(tgn1(planted), planted)  # batch 16
    event = 16 * 15 + 9  # mid-batch: batch_start ends the history 9 events earlier
    oracle = engine.oracle(event, history=history)
    end = event if history == "event" else 16 * 15
    assert oracle.probe is not None and oracle.probe.history_end == end
    walks = event_walks(oracle, 32, 3, 8, seed=0)
    for w in walks:
        _check_walks(planted, w, end)
    walked = np.concatenate([w.events.reshape(-1) for w in walks])
    if history == "batch_start":  # the batch's own events are never walked
        assert not np.isin(walked, np.arange(end, event)).any()
    else:  # the ones just before the event are (the roots are active there)
        assert walked.max() >= 16 * 15


def test_anonymisation_is_invariant_to_node_relabelling(planted) -> None:
    perm = np.random.default_rng(3).permutation(planted.num_nodes)
    relabelled = type(planted)(src=perm[planted.src], dst=perm[planted.dst], t=planted.t,
                               edge_feat=planted.edge_feat, labels=planted.labels,
                               num_nodes=planted.num_nodes, name="relabelled")
    a, b = TemporalIndex(planted), TemporalIndex(relabelled)
    for event in (120, 333):
        root = int(planted.src[event])
        one = sample_walks(a, root, event, 12, 3, 5, np.random.default_rng(7))
        two = sample_walks(b, int(perm[root]), event, 12, 3, 5, np.random.default_rng(7))
        assert np.array_equal(one.events, two.events)  # the same walks, other labels
        assert np.array_equal(one.anon, two.anon) and np.array_equal(one.classes, two.classes)
        assert np.array_equal(perm[one.dst[one.valid]], two.dst[two.valid])
    # by hand: root 7; 7-3, then 3-9, then 9-7 (a triangle); and the same under 7→0, 3→5, 9→1
    anon, classes = anonymise(7, [[7, 3, 9]], [[3, 9, 7]])
    anon2, classes2 = anonymise(0, [[0, 5, 1]], [[5, 1, 0]])
    assert classes == classes2 == [((0, 1), (1, 2), (0, 2))]
    assert anon.tolist() == anon2.tolist() == [[[0, 1], [1, 2], [2, 0]]]
    assert classes[0] in motif_classes(3)


def test_the_null_prior_is_a_distribution_over_every_class(planted) -> None:
    prior = null_prior(planted, np.arange(100, 300, 20), 8, 3, 5, seed=0)
    assert prior.shape == (len(motif_classes(3)),)
    assert abs(prior.sum() - 1) < 1e-12 and (prior > 0).all()


# ------------------------------------------------------------------------------- loss
def test_the_loss_matches_a_hand_computation() -> None:
    p = torch.tensor([0.2, 0.6, 0.4])
    classes = torch.tensor([0, 1, 1])
    prior = torch.tensor([0.5, 0.25, 0.25])
    rho, beta, logit = 0.3, 0.5, torch.tensor(0.7)
    s = 0.4  # mean importance; q_0 = 0.2 / 3, q_1 = (0.6 + 0.4) / 3
    q0, q1 = 0.2 / 3, 1.0 / 3
    kl = ((1 - s) * math.log((1 - s) / (1 - rho)) + q0 * math.log(q0 / (rho * 0.5))
          + q1 * math.log(q1 / (rho * 0.25)))
    assert abs(float(prior_kl(p, classes, prior, rho)) - kl) < 1e-5
    bce = math.log(1 + math.exp(-0.7))  # label 1
    second = (torch.tensor([0.5]), torch.tensor([2]))  # one walk: s = q_2 = 0.5
    kl2 = 0.5 * math.log(0.5 / 0.7) + 0.5 * math.log(0.5 / (rho * 0.25))
    got = tempme_loss(logit, 1.0, [(p, classes), second], prior, rho, beta)
    assert abs(float(got) - (bce + beta * (kl + kl2))) < 1e-5
    # the KL vanishes where the importances follow the prior: s = rho, classes as pi
    even = torch.full((4,), rho)
    assert abs(float(prior_kl(even, torch.tensor([0, 0, 1, 2]), prior, rho))) < 1e-5


def test_training_lowers_the_loss_on_a_planted_stream(planted) -> None:
    torch.manual_seed(0)
    engine = ReplayEngine(tgat(planted), planted)
    events = [tempme_event(engine, e, None, 16, WALK, seed=0) for e in range(120, 320, 8)]
    events = [e for e in events if e is not None]
    assert len(events) >= 15
    prior = torch.from_numpy(null_prior(planted, np.arange(100, 200, 10), 8, 3, 5, 0)).float()
    enc = MotifEncoder(EncoderShape(edge_dim=planted.feat_dim, hidden=16, time_dim=8))
    opt = torch.optim.Adam(enc.parameters(), lr=1e-2)
    hp = {"temp": 0.07, "prior_p": 0.3, "beta": 0.5}
    before = validation_loss(enc, events, planted, prior, hp)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        train_epoch(enc, opt, events, planted, prior, hp, 8, gen)
    after = validation_loss(enc, events, planted, prior, hp)
    assert after < before - 0.05, (before, after)


@pytest.mark.parametrize("factory", [tgn2, graphmixer, dygformer], ids=lambda f: f.__name__)
def test_tempme_trains_and_ranks_through_every_model_with_a_probe(factory) -> None:
    stream = make_planted_stream(kind="rule", num_nodes=30, num_events=400, seed=0, feat_dim=3)
    engine = ReplayEngine(factory(stream), stream)
    event = tempme_event(engine, 300, None, 16, WALK, seed=0)
    assert event is not None
    enc = MotifEncoder(EncoderShape(edge_dim=3, hidden=8, time_dim=4))
    prior = torch.full((len(motif_classes(3)),), 1 / len(motif_classes(3)))
    hp = {"temp": 0.07, "prior_p": 0.3, "beta": 0.5}
    tempme_training.event_loss(enc, event, stream, prior, hp, train=True).backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in enc.parameters())
    oracle = engine.oracle(300)
    result = TempMEExplainer(trained=TrainedTempME(enc, 8, 5, {})).explain(oracle)
    assert sorted(result.ranking) == sorted(int(e) for e in oracle.removable)


def test_a_drawn_event_without_history_is_left_out_and_said(planted, capsys) -> None:
    """An event between two nodes new to the stream has no candidate event: TempME's
    training leaves it out, says so in one line and names it with the reason (the card's
    ``skipped_events``), instead of silently training on one event fewer."""
    engine = ReplayEngine(tgat(planted), planted)
    lonely = [e for e in (1, 2, 8) if len(engine.index.candidates(e, 2, 8)) == 0]
    assert lonely == [1, 2, 8]  # the planted stream's first meetings of new nodes
    cfg = OmegaConf.create({"k": None, "m_max": 8, "seed": 0, "progress": False})
    ids = np.array([1, 2, 8, 300], dtype=np.int64)
    events, skipped = tempme_training.tempme_events(engine, ids, cfg, WALK, "training events")
    assert [ev.probe.event_id for ev in events] == [300]
    reason = "no candidate event (no earlier event within k=2 hops of its endpoints)"
    assert skipped == {1: reason, 2: reason, 8: reason}
    assert capsys.readouterr().out == (
        f"training events: 1 of 4 drawn used; 3 left out (events 1, 2, 8: {reason})\n")


# ------------------------------------------------------------------------- checkpoint
def fingerprint(**change: object) -> ModelFingerprint:
    base: dict[str, object] = dict(dataset="planted_rule", dataset_sha256="d" * 64,
                                   model="tgat", weights="tgat_planted_rule.pt",
                                   weights_sha256="w" * 64, checkpoint_dir=".", probe=True)
    return ModelFingerprint(**(base | change))  # type: ignore[arg-type]


def test_a_trained_tempme_round_trips_through_its_checkpoint(planted, tmp_path) -> None:
    torch.manual_seed(1)
    enc = MotifEncoder(EncoderShape(edge_dim=planted.feat_dim, hidden=8, time_dim=4))
    card = tempme_card(fingerprint(), epochs=1)
    pt, js = save_tempme(tempme_path(tmp_path, "tgat", "planted_rule"),
                         TrainedTempME(enc, 8, 5, card))
    loaded = load_tempme(pt)
    assert loaded.n_walks == 8 and loaded.degree == 5 and loaded.card == card
    assert json.loads(js.read_text())["weights_sha256"] == weights_sha256(pt)
    oracle = ReplayEngine(tgat(planted), planted).oracle(300)
    a = TempMEExplainer(trained=TrainedTempME(enc, 8, 5, card)).scores(oracle)
    b = TempMEExplainer(checkpoint=str(pt)).scores(oracle)
    assert np.array_equal(a, b) and (a > 0).any()
    check_tempme_card(loaded.card, fingerprint(), str(pt))  # its own run: accepted
    for change in ({"model": "tgn"}, {"dataset": "uci"}, {"dataset_sha256": "e" * 64},
                   {"weights_sha256": "v" * 64}):
        with pytest.raises(CheckpointMismatchError, match="^TempME checkpoint .* trained for"):
            resolve_tempme(str(pt), fingerprint(**change))
    with pytest.raises(ConfigError, match="no trained TempME at"):
        resolve_tempme("auto", fingerprint(checkpoint_dir=str(tmp_path / "none")))
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match=f"^TempME checkpoint {bad} is not a torch "
                       "checkpoint: it is neither a torch archive nor a pickle; "):
        load_tempme(bad)
    with pytest.raises(ExplainerError, match="needs a model with a probe"):
        TempMEExplainer(checkpoint=str(pt)).supports(fingerprint(probe=False))


# ------------------------------------------------------------------ end to end, tiny stream
TINY = ["dataset=synthetic", "dataset.num_nodes=30", "dataset.num_events=300",
        "progress=false"]


def _compose(name: str, *overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose(name, overrides=[*TINY, *overrides])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, object]:
    """Two TGAT checkpoints (seeds 0 and 1) of the tiny stream and a TempME of the first,
    trained for one epoch, then resumed for a second."""
    root = tmp_path_factory.mktemp("tempme")
    for seed in (0, 1):
        loop.run(_compose("train", "model=tgat", "model.batch_size=25", "epochs=1",
                          f"seed={seed}", f"out_dir={root / f'm{seed}'}"))
    model = root / "m0" / "tgat_synthetic.pt"
    common = ["explainer=tempme", "model=tgat", f"checkpoint={model}", "n_train_events=12",
              "batch_size=4", "m_max=8", "tempme.n_walks=6", "tempme.hidden=8",
              "tempme.n_val_events=4", "tempme.null_events=10", f"+run_dir={root / 'run'}"]
    training.run(_compose("train_explainer", *common, "epochs=1"))
    card = training.run(_compose("train_explainer", *common, "epochs=2"))
    return {"model": model, "other": root / "m1" / "tgat_synthetic.pt",
            "tm": root / "run" / "tempme_tgat_synthetic.pt", "root": root, "card": card,
            "common": common}


def test_train_explainer_tempme_resumes_and_writes_a_card(trained) -> None:
    card = json.loads(Path(str(trained["tm"])).with_suffix(".json").read_text())
    assert [h["epoch"] for h in card["history"]] == [1, 2]  # the second run resumed
    assert card["explainer"] == "tempme" and card["model"] == "tgat"
    assert card["model_weights_sha256"] == file_sha256(Path(str(trained["model"])))
    assert 0 < card["training_events"] <= 12 and card["epochs"] == 2
    skipped = {s["event_id"] for s in card["skipped_events"]}
    assert card["training_events"] == len(card["event_ids"]) - len(skipped)  # none unsaid
    assert skipped <= set(card["event_ids"])
    assert card["best_epoch"] in (1, 2) and math.isfinite(card["best_val_loss"])
    best = min(card["history"], key=lambda h: h["val_loss"])
    assert card["best_val_loss"] == best["val_loss"]  # validation-selected
    assert card["weights_sha256"] == weights_sha256(Path(str(trained["tm"])))


def test_tempme_draws_its_validation_events_as_the_pgexplainer_does(trained, tmp_path
                                                                   ) -> None:
    """One validation draw for both trainers (``validation_events``, seeded by
    ``[seed, 1 << 20]``): TempME drew its own before (``seed + 1``), other events."""
    options = [o for o in trained["common"] if not o.startswith("+run_dir")]  # type: ignore
    cfg = _compose("train_explainer", *options, f"+run_dir={tmp_path}")
    trainer = TempMETrainer()
    setup = training_setup(cfg, trainer.options_of(cfg), trainer.path_of, "TempME")
    drawn = validation_events(setup.split, 4, 0).tolist()
    assert trained["card"]["validation_event_ids"] == drawn  # type: ignore[index]
    pool = np.arange(setup.split.train_end, setup.split.val_end)
    earlier = np.sort(np.random.default_rng(1).choice(pool, size=4, replace=False)).tolist()
    assert drawn != earlier  # the draw before 2026-12-02: this test failed there


def test_explain_runs_with_the_trained_tempme(trained, tmp_path) -> None:
    table = pipeline.run(_explain(trained, f"checkpoint={trained['model']}",
                                  f"out_dir={tmp_path / 'ok'}"))
    assert not table.empty


def _explain(trained, *overrides: str):
    return _compose("explain", "debug=default", "model=tgat", "explainer=tempme",
                    f"explainer.checkpoint={trained['tm']}", "sample.prediction=any",
                    "n_events=2", "m_max=8", *overrides)


def test_explain_refuses_a_tempme_of_another_model_in_one_line_exit_2(trained, tmp_path,
                                                                       capsys) -> None:
    cfg = _explain(trained, f"checkpoint={trained['other']}", f"out_dir={tmp_path / 'no'}")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc, friendly_errors():
        pipeline.run(cfg)
    assert exc.value.code == 2
    err = [ln for ln in capsys.readouterr().err.splitlines()
           if ln.strip() and not ln.startswith("warning:")]
    assert len(err) == 1 and err[0].startswith("error: TempME checkpoint"), err
    assert "model checkpoint's SHA-256" in err[0]
    assert not (tmp_path / "no" / "records").exists()  # refused before any event


def test_train_explainer_tempme_refuses_bad_options_and_another_runs_directory(trained
                                                                              ) -> None:
    with pytest.raises(ConfigError, match="tempme.n_walks"):
        training.run(_compose("train_explainer", "explainer=tempme", "tempme.n_walks=0"))
    with pytest.raises(ConfigError, match="n_train_events"):
        training.run(_compose("train_explainer", "explainer=tempme", "n_train_events=0"))
    with pytest.raises(ConfigError, match="trains explainer=tempme"):
        TempMETrainer().run(_compose("train_explainer"))  # the PGExplainer's configuration
    with pytest.raises(ConfigError, match="trains explainer=pgexplainer or explainer=tempme"):
        check_train_explainer_options(_compose("train_explainer", "explainer=greedy"))
    with pytest.raises(ConfigError, match="trains explainer=pgexplainer, the configuration "
                       "selects explainer=tempme"):
        PGExplainerTrainer().run(_compose("train_explainer", *trained["common"]))  # type: ignore
    with pytest.raises(ConfigError, match="trains explainer=pgexplainer or explainer=tempme"):
        training.run(_compose("train_explainer", "explainer=greedy"))  # no trainer group
    with pytest.raises(ConfigError, match="other options"):
        training.run(_compose("train_explainer", *trained["common"],  # type: ignore
                              "tempme.beta=2.0"))

