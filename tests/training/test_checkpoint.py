"""Checkpoint save/load round trip, refusal of mismatched streams, committed checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from testsupport.models import ModelFactory
from testsupport.planted import planted_stream

from cftgnn.data.stream import EventStream
from cftgnn.errors import CftgnnError
from cftgnn.training.checkpoint import (
    CheckpointMismatchError,
    card_mismatch,
    file_sha256,
    load_checkpoint,
    save_checkpoint,
    stream_checksum,
)
from cftgnn.training.kinds import weights_sha256
from cftgnn.training.loop import Split, evaluate_test

ROOT = Path(__file__).resolve().parents[2]


def test_save_load_round_trip(factory: ModelFactory, stream: EventStream,
                              tmp_path: Path) -> None:
    model = factory(stream)
    pt, js = save_checkpoint(model, stream, tmp_path / "m_planted.pt", {"note": "x"})
    assert json.loads(js.read_text())["note"] == "x"
    assert set(torch.load(pt, weights_only=True)) == {"state_dict", "config", "dataset"}
    loaded = load_checkpoint(pt, stream)
    assert type(loaded) is type(model) and loaded.config() == model.config()
    for m in (model, loaded):
        m.advance(0, 100)
    q = (stream.src[100:110], stream.dst[100:110], stream.t[100:110])
    with torch.no_grad():
        assert torch.equal(model.predict(*q), loaded.predict(*q))


@pytest.mark.parametrize("change", ["name", "nodes", "features"])
def test_mismatched_checkpoint_is_refused(factory: ModelFactory, stream: EventStream,
                                          tmp_path: Path, change: str) -> None:
    model = factory(stream)
    pt, _ = save_checkpoint(model, stream, tmp_path / "m.pt")
    other = {
        "name": planted_stream(num_events=150, num_src=8, num_dst=8, feat_dim=3, name="uci"),
        "nodes": planted_stream(num_events=150, num_src=9, num_dst=8, feat_dim=3),
        "features": planted_stream(num_events=150, num_src=8, num_dst=8, feat_dim=2),
    }[change]
    with pytest.raises(CheckpointMismatchError) as err:
        load_checkpoint(pt, other)
    assert isinstance(err.value, CftgnnError)
    assert "'planted'" in str(err.value) and f"'{other.name}'" in str(err.value)
    assert str(other.num_nodes) in str(err.value) and str(stream.num_nodes) in str(err.value)


def committed_checkpoints() -> list[Path]:
    # model checkpoints only: trained explainers (pgexplainer_*.pt, tempme_*.pt) have cards
    # of their own
    return sorted(p for p in (ROOT / "checkpoints").glob("*.pt")
                  if not p.stem.startswith(("pgexplainer_", "tempme_")))


@pytest.mark.parametrize("pt", sorted((ROOT / "checkpoints").glob("*.pt")), ids=lambda p: p.stem)
def test_committed_cards_record_the_checksum_of_their_tensors(pt: Path) -> None:
    """Each committed card (the models' and the trained explainers') records the SHA-256 of
    its checkpoint's tensors (``tensors_sha256``), which a second save of the same weights
    gives again; a model card's is what ``card_mismatch`` checks."""
    card = json.loads(pt.with_suffix(".json").read_text())
    assert card["weights_sha256"] == weights_sha256(pt) != file_sha256(pt)
    if not pt.stem.startswith(("pgexplainer_", "tempme_")):
        assert card_mismatch(pt) is None


def test_a_card_that_no_longer_describes_its_weights_is_told(
        factory: ModelFactory, stream: EventStream, tmp_path: Path) -> None:
    model = factory(stream)
    pt, js = save_checkpoint(model, stream, tmp_path / "m.pt", {"note": "first"})
    assert card_mismatch(pt) is None
    first_card = js.read_text()
    with torch.no_grad():
        next(iter(model.parameters())).add_(1.0)
    save_checkpoint(model, stream, pt)  # new weights ...
    js.write_text(first_card)  # ... under the old card
    message = card_mismatch(pt)
    assert message is not None and "\n" not in message
    assert str(pt) in message and "m.json" in message
    js.write_text(json.dumps({k: v for k, v in json.loads(first_card).items()
                              if k != "weights_sha256"}))
    assert card_mismatch(pt) is None  # a card from before checksums: nothing to compare
    js.unlink()
    assert card_mismatch(pt) is None


@pytest.mark.parametrize("target", ["cftgnn.models.TGAT", "cftgnn.models.tgat.TGAT"])
def test_a_checkpoint_of_another_model_kind_is_refused_naming_both(
        stream: EventStream, target: str) -> None:
    tgn = ROOT / "checkpoints" / "tgn_uci.pt"
    with pytest.raises(CheckpointMismatchError) as err:
        load_checkpoint(tgn, stream, expect_target=target)  # the kind is checked first
    assert str(err.value) == (f"checkpoint {str(tgn)!r} holds a tgn model but model=tgat; "
                              "use model=tgn or a tgat checkpoint")


def test_the_same_class_under_another_path_is_accepted(factory: ModelFactory,
                                                       stream: EventStream,
                                                       tmp_path: Path) -> None:
    model = factory(stream)
    pt, _ = save_checkpoint(model, stream, tmp_path / "m.pt")
    short = f"cftgnn.models.{type(model).__name__}"  # the conf/model spelling
    assert type(load_checkpoint(pt, stream, expect_target=short)) is type(model)


#: Checkpoints whose card check takes 44-139 s in the default run (an evaluation of the
#: Wikipedia test split by DyGFormer or GraphMixer, or a second seed of one checked there):
#: run with ``-m slow``. Every model kind keeps a checkpoint checked by default
#: (``dygformer_uci``, ``graphmixer_uci``), and every card's weights checksum is checked above.
SLOW_CARDS = ("dygformer_wikipedia", "dygformer_uci_seed1", "graphmixer_wikipedia",
              "graphmixer_wikipedia_seed1")


@pytest.mark.dataset
@pytest.mark.parametrize("pt", [pytest.param(p, marks=pytest.mark.slow, id=p.stem)
                                if p.stem in SLOW_CARDS else pytest.param(p, id=p.stem)
                                for p in committed_checkpoints()])
def test_committed_checkpoint_reproduces_its_card(pt: Path, real_data_dir: Path) -> None:
    """Each committed checkpoint loads and reproduces its card's test AP within 0.005."""
    torch.set_num_threads(1)
    card = json.loads(pt.with_suffix(".json").read_text())
    dataset_cfg = dict(card["train_config"]["dataset"])
    if "data_dir" in dataset_cfg:  # a file's stream (a generated one, planted, has none)
        dataset_cfg["data_dir"] = str(real_data_dir)  # this machine's data directory
        dataset_cfg.pop("cache_dir", None)
        dataset_cfg["download"] = False
    stream = instantiate(dataset_cfg)
    assert card["dataset"]["sha256"] == stream_checksum(stream)
    model = load_checkpoint(pt, stream)
    test = evaluate_test(model, Split(**card["split"]), seed=card["eval_seed"])
    expected = card["metrics"]["test"]["transductive"]["ap"]
    assert np.isclose(test["transductive"]["ap"], expected, atol=0.005)
    assert pt.stat().st_size <= 20 * 2**20


def test_a_model_kind_is_named_by_its_model_option() -> None:
    from cftgnn.training.checkpoint import model_kind

    assert model_kind("cftgnn.models.pyg_tgn.PyGTGN") == "pyg_tgn"  # conf/model/pyg_tgn.yaml
    assert model_kind("cftgnn.models.tgn.TGN") == model_kind("cftgnn.models.TGN") == "tgn"
    assert model_kind("elsewhere.MyModel") == "mymodel"  # no config file: the class name


def test_a_class_of_several_model_options_is_named_by_its_values() -> None:
    """TGN is built by model=tgn (1 layer) and model=tgn2l (2 layers): a config or a
    checkpoint's hyperparameters say which; without one, or matching neither, tgn."""
    from cftgnn.training.checkpoint import model_kind, option_of

    target = "cftgnn.models.tgn.TGN"
    assert model_kind(target, {"num_layers": 2, "memory_dim": 16}) == "tgn2l"
    assert model_kind(target, {"num_layers": 1}) == "tgn"
    assert model_kind(target, {"num_layers": 3}) == model_kind(target) == "tgn"
    assert option_of(target, {"num_layers": 2}) == "tgn2l"
    assert option_of(target, {"memory_dim": 16}) is option_of(target, None) is None
    assert option_of("cftgnn.models.TGAT", {}) == "tgat"  # one file builds it


def test_a_checkpoint_of_the_other_tgn_option_is_refused_naming_both(
        stream: EventStream, tmp_path: Path) -> None:
    """A 1-layer TGN checkpoint under model=tgn2l (whose num_layers=2 is the file's default,
    not an override) would run as a 1-layer model recorded as tgn2l."""
    from cftgnn.models import TGN
    from cftgnn.training.resolve import resolve_model

    pt, _ = save_checkpoint(TGN(stream.num_nodes, stream.feat_dim, memory_dim=8, time_dim=8,
                                embedding_dim=8, num_layers=1), stream, tmp_path / "m.pt")
    conf = OmegaConf.load(ROOT / "conf" / "model" / "tgn2l.yaml")
    with pytest.raises(CheckpointMismatchError) as err:
        resolve_model(conf, stream, str(pt), tmp_path)
    assert str(err.value) == (f"checkpoint {str(pt)!r} holds a tgn model but model=tgn2l; "
                              "use model=tgn or a tgn2l checkpoint")
