"""Training on a TGB stream: TGB's split on whole batches, and TGB's MRR and hits@k on the card,
each event ranked against its negatives from the state ``score_range`` scores it from."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from testsupport.models import ModelFactory, tgat, tgn1
from testsupport.tgbstreams import tgb_stream, tgb_tables, write_tgb_wiki

import cftgnn.config  # noqa: F401
from cftgnn.data.stream import EventStream
from cftgnn.data.synthetic import make_synthetic_stream
from cftgnn.data.tgb import load_tgb, load_tgb_negatives
from cftgnn.data.tgb_negatives import TGBNegatives
from cftgnn.errors import ConfigError, DataFormatError, DataNotFoundError
from cftgnn.models.base import eval_mode
from cftgnn.training import loop as training
from cftgnn.training import tgb_eval
from cftgnn.training.checkpoint import load_checkpoint
from cftgnn.training.loop import Split, evaluate_tgb, run
from cftgnn.training.metrics import mrr, tgb_ranks
from cftgnn.training.tgb_eval import TGBSplit

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


class DstScorer(torch.nn.Module):
    """A toy model whose logit of ``(src, dst)`` is ``-|dst - position mod N|``: it reads
    the state (how many events were consumed), so a rank tells which state scored it."""

    def __init__(self, stream: EventStream, batch_size: int) -> None:
        super().__init__()
        self.stream, self.batch_size, self.position = stream, batch_size, 0

    def reset(self) -> None:
        self.position = 0

    def advance(self, lo: int, hi: int) -> None:
        assert lo == self.position
        self.position = hi

    def predict(self, src: Any, dst: Any, t: Any, before: Any = None) -> torch.Tensor:
        assert before is None or np.all(np.asarray(before) >= self.position)
        c = self.position % self.stream.num_nodes
        return torch.as_tensor(-np.abs(np.asarray(dst) - c), dtype=torch.float32)


def test_tgb_split_is_rounded_down_to_batches() -> None:
    stream = tgb_stream(val_start=283, test_start=341)
    tgb = TGBSplit.of(stream, 25)
    assert tgb is not None and (tgb.train_end, tgb.val_end) == (275, 325)
    assert TGBSplit.of(make_synthetic_stream(num_events=50), 25) is None
    on_bounds = TGBSplit.of(tgb_stream(val_start=275, test_start=350), 25)
    assert on_bounds is not None and (on_bounds.train_end, on_bounds.val_end) == (275, 350)
    with pytest.raises(ConfigError, match="smaller model.batch_size"):
        TGBSplit.of(stream, 300).check_trainable(300, stream.num_events)  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="smaller model.batch_size"):  # val in one batch
        TGBSplit.of(tgb_stream(val_start=283, test_start=290), 25).check_trainable(  # type: ignore[union-attr]
            25, 400)
    for bad in ({"val_start": 300, "test_start": 200}, {"val_start": 1}, "x"):
        broken = make_synthetic_stream(num_events=50)
        broken.meta["tgb"] = bad
        with pytest.raises(DataFormatError, match="meta|split"):
            TGBSplit.of(broken, 10)


def test_toy_ranks_are_the_hand_computed_ones_from_the_batch_start_state() -> None:
    stream = tgb_stream()
    tables = tgb_tables(stream)
    model = DstScorer(stream, batch_size=25)
    split = Split(275, 325, stream.num_events)
    for max_pairs in (1, 4, 8192):
        got = evaluate_tgb(model, split, tables, k=3, max_pairs=max_pairs)  # type: ignore[arg-type]
        for part, table in tables.items():
            ranks = []
            for e in table.event_ids:
                c = (e - e % 25) % stream.num_nodes  # the state: the batches before e's
                pos, negs = -abs(stream.dst[e] - c), -np.abs(table.of(e) - c)
                ranks.append((negs > pos).sum() + 0.5 * (negs == pos).sum() + 1)
            assert got[part]["n"] == table.num_events
            assert math.isclose(got[part]["mrr"], float(np.mean(1 / np.array(ranks))))
            assert math.isclose(got[part]["hits@3"], float(np.mean(np.array(ranks) <= 3)))
        assert got["k"] == 3
        assert got["pairs"] == sum(int(t.indptr[-1]) + t.num_events for t in tables.values())


@pytest.mark.parametrize("factory", [tgn1, tgat], ids=["tgn", "tgat"])
def test_ranks_equal_a_fresh_replay_for_each_event(factory: ModelFactory) -> None:
    """A model's ranks from the ranking walk, chunked or not, equal those of a fresh replay to
    each event's batch followed by one call for its positive and its negatives."""
    torch.manual_seed(0)
    stream = tgb_stream()
    tables = tgb_tables(stream, most=12)
    model = factory(stream)
    model.attach(stream)
    tgb = TGBSplit.of(stream, model.batch_size)
    assert tgb is not None
    split = Split(tgb.train_end, tgb.val_end, stream.num_events)
    whole = evaluate_tgb(model, split, tables, max_pairs=8192)
    chunked = evaluate_tgb(model, split, tables, max_pairs=5)
    for part, table in tables.items():
        ranks = []
        for e in table.event_ids[::3]:
            model.reset()
            model.advance(0, e - e % model.batch_size)
            negs = table.of(e)
            with eval_mode(model):  # as the walk scores: no dropout
                logits = model.predict(np.full(len(negs) + 1, stream.src[e]),
                                       np.r_[stream.dst[e], negs],
                                       np.full(len(negs) + 1, stream.t[e]),
                                       before=np.full(len(negs) + 1, e)).numpy()
            ranks.append(tgb_ranks(logits[:1], logits[None, 1:])[0])
        assert len(ranks) > 3
        assert math.isclose(chunked[part]["mrr"], whole[part]["mrr"], abs_tol=1e-12)
        # the subsample's MRR from the walk's own ranks
        walk = evaluate_tgb(model, split, {part: TGBNegatives.from_lists(
            part, {int(e): table.of(e) for e in table.event_ids[::3]})})
        assert math.isclose(walk[part]["mrr"], mrr(ranks), abs_tol=1e-12)


def tgb_cfg(tmp_path: Path, *overrides: str) -> Any:
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=[
            "model=tgn", "model.memory_dim=8", "model.time_dim=4", "model.embedding_dim=8",
            "model.num_neighbors=3", "model.batch_size=25", "epochs=2", "lr=0.01",
            "progress=false", f"out_dir={tmp_path}", "tgb.max_pairs=64", *overrides])
    cfg.dataset = OmegaConf.create({"_target_": "testsupport.tgbstreams.tgb_stream"})
    return cfg


def test_run_trains_on_tgb_split_and_reports_tgb_metrics(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(tgb_eval, "load_negatives", tgb_tables)
    monkeypatch.setattr(training, "load_negatives", tgb_tables)
    card = run(tgb_cfg(tmp_path, "tgb.hits_k=5", "split.val=0.3"))
    assert card["split"] == {"train_end": 275, "val_end": 325, "num_events": 400}
    assert card["tgb_split"]["val_start"] == 283 and card["tgb_split"]["test_start"] == 341
    tgb = card["metrics"]["tgb"]
    tables = tgb_tables(tgb_stream())
    for part in ("val", "test"):
        assert tgb[part]["n"] == tables[part].num_events
        assert 0 < tgb[part]["mrr"] <= 1 and 0 <= tgb[part]["hits@5"] <= 1
        assert tgb[part]["mrr"] > 1 / (1 + tables[part].counts().max())  # never below last
    on_disk = json.loads((tmp_path / "tgn_tgbl-toy.json").read_text())
    assert on_disk["metrics"]["tgb"]["test"]["mrr"] == tgb["test"]["mrr"]
    # the card's metric is the saved weights' own
    stream = tgb_stream()
    model = load_checkpoint(tmp_path / "tgn_tgbl-toy.pt", stream)
    again = evaluate_tgb(model, Split(275, 325, 400), tables, k=5, max_pairs=7)
    for part in ("val", "test"):
        assert math.isclose(again[part]["mrr"], tgb[part]["mrr"], rel_tol=1e-9)
        assert again[part]["hits@5"] == tgb[part]["hits@5"]


def test_missing_negatives_stop_the_run_before_training(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(stream: EventStream) -> dict[str, TGBNegatives]:
        raise DataNotFoundError("tgbl-toy_val_ns_v2.pkl is missing")

    def no_training(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("trained before the negatives were read")

    monkeypatch.setattr(training, "load_negatives", missing)
    monkeypatch.setattr(training, "fit", no_training)
    with pytest.raises(DataNotFoundError, match="val_ns"):
        run(tgb_cfg(tmp_path))
    assert not list(tmp_path.iterdir())


def test_negatives_inside_the_training_part_are_refused() -> None:
    stream = tgb_stream()
    tables = tgb_tables(stream)
    tables["val"] = TGBNegatives.from_lists("val", {100: [1, 2], 300: [3]})
    with pytest.raises(DataFormatError, match="inside the training part"):
        evaluate_tgb(DstScorer(stream, 25), Split(275, 325, 400), tables)  # type: ignore[arg-type]


TINY = ["model=tgn", "model.memory_dim=8", "model.time_dim=4", "model.embedding_dim=8",
        "model.num_neighbors=3", "model.batch_size=25", "epochs=1", "progress=false"]


def train_py(tmp_path: Path, root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), *TINY, "dataset=tgb",
         "dataset.name=tgbl-wiki", f"dataset.data_dir={root}",
         f"paths.cache_dir={tmp_path / 'cache'}", f"out_dir={tmp_path / 'out'}", *extra],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_train_py_on_a_tgb_download_reports_tgb_metrics(tmp_path: Path) -> None:
    """TGB's layout on disk (edge list and negatives pickles), read through dataset=tgb."""
    root = write_tgb_wiki(tmp_path / "tgb")
    done = train_py(tmp_path, root, "tgb.hits_k=3")
    assert done.returncode == 0, done.stderr[-3000:]
    card = json.loads((tmp_path / "out" / "tgn_tgbl-wiki.json").read_text())
    stream = load_tgb("tgbl-wiki", root, use_cache=False)
    info = stream.meta["tgb"]
    assert card["tgb_split"]["val_start"] == info["val_start"] == 280
    assert card["split"]["train_end"] == 275 and card["split"]["val_end"] == 325
    for part, n in (("val", info["test_start"] - info["val_start"]),
                    ("test", stream.num_events - info["test_start"])):
        got = card["metrics"]["tgb"][part]
        assert got["n"] == n and set(got) == {"mrr", "hits@3", "n", "mean_negatives"}
        assert 0 < got["mrr"] <= 1
    # the card's numbers are the checkpoint's, ranked again here
    model = load_checkpoint(tmp_path / "out" / "tgn_tgbl-wiki.pt", stream)
    tables = {s: load_tgb_negatives(stream, s) for s in ("val", "test")}
    again = evaluate_tgb(model, Split(275, 325, stream.num_events), tables, k=3)
    assert math.isclose(again["test"]["mrr"], card["metrics"]["tgb"]["test"]["mrr"],
                        rel_tol=1e-9)


def test_train_py_without_tgb_negatives_stops_in_one_line(tmp_path: Path) -> None:
    root = write_tgb_wiki(tmp_path / "tgb")
    (root / "tgbl_wiki" / "tgbl-wiki_test_ns_v2.pkl").unlink()
    done = train_py(tmp_path, root)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: TGB's test negatives of tgbl-wiki")
    assert "Traceback" not in done.stderr and "epoch" not in done.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
