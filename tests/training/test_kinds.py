"""``cftgnn.training.kinds``: every loader tells a checkpoint's kind, refuses another kind or a
truncated file in one whole sentence naming it, and cards hash the tensors, not the file."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from testsupport.models import tgn1
from testsupport.planted import planted_stream

from cftgnn.explain.pgexplainer import EdgeScorer, load_scorer, save_scorer
from cftgnn.explain.tempme import (
    EncoderShape,
    MotifEncoder,
    TrainedTempME,
    load_tempme,
    save_tempme,
)
from cftgnn.files import file_sha256
from cftgnn.training.checkpoint import card_mismatch, load_checkpoint, save_checkpoint
from cftgnn.training.kinds import (
    MODEL,
    PGEXPLAINER,
    STATE,
    TEMPME,
    CheckpointError,
    CheckpointKindError,
    CheckpointMismatchError,
    checkpoint_kind,
    load_torch,
    tensors_sha256,
)
from cftgnn.training.loop import EPOCHS_FROM

ROOT = Path(__file__).resolve().parents[2]
CKPT = ROOT / "checkpoints"
#: One committed file of each kind (read only).
COMMITTED = {"model": CKPT / "tgn_uci.pt", "pgexplainer": CKPT / "pgexplainer_tgn_uci.pt",
             "tempme": CKPT / "tempme_tgn_uci.pt"}
#: What a user types to pass each kind.
OPTION = {"model": "pass it as checkpoint=",
          "pgexplainer": "pass it as explainer=pgexplainer explainer.checkpoint=",
          "tempme": "pass it as explainer=tempme explainer.checkpoint="}
TITLE = {"model": "a model checkpoint", "pgexplainer": "a PGExplainer checkpoint",
         "tempme": "a TempME checkpoint"}


def _load_model(path: Path) -> Any:
    return load_checkpoint(path, planted_stream(num_events=50, num_src=4, num_dst=4))


#: Each kind's loader.
LOADERS: dict[str, Callable[[Path], Any]] = {"model": _load_model, "pgexplainer": load_scorer,
                                             "tempme": load_tempme}
#: Torch's own words, which a message must not pass on.
TORCH_WORDS = ("PytorchStreamReader", "miniz", "central directory", "weights_only", "torch.load",
               "Unsupported operand", "\n")


def test_the_committed_checkpoints_are_told_apart_by_their_entries():
    assert {name: checkpoint_kind(load_torch(path, MODEL)) for name, path in COMMITTED.items()} \
        == {"model": MODEL, "pgexplainer": PGEXPLAINER, "tempme": TEMPME}
    state = {"mlp": {}, "optimizer": {}, "epoch": 1, "history": [], "seconds": 0.0}
    assert checkpoint_kind(state) is STATE
    assert checkpoint_kind({"memory": {}}) is None and checkpoint_kind([1]) is None


@pytest.mark.parametrize("given", sorted(COMMITTED))
@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_a_checkpoint_of_another_kind_is_named_with_the_option_that_takes_it(given, loader):
    """A TempME read as a PGExplainer was "a PGExplainer checkpoint of format 1 … add
    overwrite=true to replace it", advice that overwrote the committed PGExplainer."""
    if given == loader:  # its own loader takes it (a model then checks its stream)
        if given == "model":
            with pytest.raises(CheckpointMismatchError, match="trained on dataset 'uci'"):
                _load_model(COMMITTED[given])
        else:
            LOADERS[loader](COMMITTED[given])
        return
    path = COMMITTED[given]
    with pytest.raises(CheckpointKindError) as err:
        LOADERS[loader](path)
    said = str(err.value)
    assert said.startswith(f"{path} is {TITLE[given]}, not {TITLE[loader]}: "), said
    assert f"{OPTION[given]}{path}" in said
    assert "overwrite" not in said and "format" not in said and "retrain" not in said
    assert "\n" not in said


def test_a_pgexplainer_is_also_offered_as_t_gnnexplainers_navigator():
    with pytest.raises(CheckpointKindError) as err:
        load_tempme(COMMITTED["pgexplainer"])
    assert (f"(or as T-GNNExplainer's navigator, explainer=tgnnexplainer "
            f"explainer.checkpoint={COMMITTED['pgexplainer']})") in str(err.value)


def test_a_training_state_is_not_taken_for_a_checkpoint(tmp_path):
    state = tmp_path / "state.pt"
    torch.save({"mlp": EdgeScorer(4, 8).state_dict(), "optimizer": {}, "epoch": 1,
                "history": [], "seconds": 1.0, "options": "{}"}, state)
    for load in LOADERS.values():
        with pytest.raises(CheckpointKindError) as err:
            load(state)
        said = str(err.value)
        assert said.startswith(f"{state} is the training state of an unfinished "
                               "scripts/train_explainer.py run"), said
        assert "rerun its training" in said and "overwrite" not in said


@pytest.mark.parametrize("given", sorted(COMMITTED))
def test_a_truncated_checkpoint_is_said_to_be_truncated_in_a_whole_sentence(given, tmp_path):
    cut = tmp_path / COMMITTED[given].name
    data = COMMITTED[given].read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as err:
        LOADERS[given](cut)
    said = str(err.value)
    assert f" {cut} is truncated: it begins as a torch checkpoint but its archive ends early " \
           in said, said
    assert not any(word in said for word in TORCH_WORDS), said
    # its own clause, not torch's cut mid-sentence (a model's names the PyG-TGN writer too)
    assert re.search(r"writes one( \(cftgnn\.training\.checkpoint\.save_pyg_tgn, for a TGN "
                     r"trained with PyG's modules\))?$", said), said


@pytest.mark.parametrize(("content", "words"), [
    (b"not a checkpoint", "is not a torch checkpoint: it is neither a torch archive nor a pickle"),
    (b'{"weights_sha256": "ab"}', "is not a torch checkpoint: it is JSON text"),
    (b"", "is empty (0 bytes)"),
    (b"\x80\x02}q\x00", "is truncated or damaged: its pickle does not read to its end"),
])
@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_a_file_that_is_no_torch_checkpoint_is_said_so(content, words, loader, tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(content)
    with pytest.raises(CheckpointError) as err:
        LOADERS[loader](bad)
    said = str(err.value)
    assert f"{bad} {words}" in said and not any(w in said for w in TORCH_WORDS), said


def test_equal_tensors_hash_equal_however_saved_and_one_bit_changes_the_hash(tmp_path):
    torch.manual_seed(0)
    tensors = {"b": torch.randn(3), "a.weight": torch.randn(2, 3), "steps": torch.tensor(7)}
    copy = {k: v.clone() for k, v in reversed(tensors.items())}  # another order of names
    for name, blob in (("one", tensors), ("two", copy)):
        torch.save({"state_dict": blob, "card": {"training_seconds": len(name)}},
                   tmp_path / f"{name}.pt")
    loaded = [torch.load(tmp_path / f"{n}.pt", weights_only=True)["state_dict"]
              for n in ("one", "two")]
    assert file_sha256(tmp_path / "one.pt") != file_sha256(tmp_path / "two.pt")
    assert tensors_sha256(loaded[0]) == tensors_sha256(loaded[1]) == tensors_sha256(tensors)
    flipped = {k: v.clone() for k, v in tensors.items()}
    flipped["b"].view(torch.int32)[1] ^= 1  # one bit of one value
    assert tensors_sha256(flipped) != tensors_sha256(tensors)
    # the dtype, the shape and the name are hashed too, not only the bytes
    assert tensors_sha256({**tensors, "steps": torch.tensor(7, dtype=torch.int32)}) \
        != tensors_sha256(tensors)
    assert tensors_sha256({**tensors, "b": tensors["b"].reshape(3, 1)}) != tensors_sha256(tensors)
    assert tensors_sha256({"c": tensors["b"]}) != tensors_sha256({"b": tensors["b"]})


def test_every_card_records_the_tensors_hash_so_two_saves_of_one_training_agree(tmp_path):
    stream = planted_stream(num_events=120, num_src=6, num_dst=6, feat_dim=2)
    model = tgn1(stream)
    cards = [json.loads(save_checkpoint(model, stream, tmp_path / f"m{i}" / "m.pt",
                                        {"training_seconds": i})[1].read_text())
             for i in range(2)]
    assert cards[0]["weights_sha256"] == cards[1]["weights_sha256"] == tensors_sha256(
        model.state_dict())
    assert card_mismatch(tmp_path / "m0" / "m.pt") is None
    mlp = EdgeScorer(4, 8)
    pg = [json.loads(save_scorer(tmp_path / f"p{i}.pt", mlp, {"training_seconds": i})[1]
                     .read_text())["weights_sha256"] for i in range(2)]
    assert pg[0] == pg[1] == tensors_sha256(mlp.state_dict())
    enc = MotifEncoder(EncoderShape(edge_dim=2, hidden=8, time_dim=4))
    tm = [json.loads(save_tempme(tmp_path / f"t{i}.pt", TrainedTempME(
        enc, 4, 3, {"training_seconds": i}))[1].read_text())["weights_sha256"]
        for i in range(2)]
    assert tm[0] == tm[1] == tensors_sha256(enc.state_dict())


def test_a_card_whose_tensors_changed_is_told(tmp_path):
    stream = planted_stream(num_events=120, num_src=6, num_dst=6, feat_dim=2)
    model = tgn1(stream)
    pt, js = save_checkpoint(model, stream, tmp_path / "m.pt")
    card = json.loads(js.read_text())
    js.write_text(json.dumps({**card, "weights_sha256": "0" * 64}))
    assert "does not match the checksum its card" in str(card_mismatch(pt))
    js.write_text(json.dumps({**card, "weights_sha256": file_sha256(pt)}))  # an older card
    assert card_mismatch(pt) is None


@pytest.mark.parametrize("card", sorted(CKPT.glob("*.json")), ids=lambda p: p.stem)
def test_the_committed_cards_record_their_tensors_hash_and_count_epochs_from_1(card):
    weights = load_torch(card.with_suffix(".pt"), MODEL)["state_dict"]
    said = json.loads(card.read_text())
    assert said["weights_sha256"] == tensors_sha256(weights)
    epochs = [h["epoch"] for h in said["history"]]
    assert said["epochs_numbered_from"] == EPOCHS_FROM == 1
    assert epochs == list(range(1, len(epochs) + 1)) and said["best_epoch"] in epochs
