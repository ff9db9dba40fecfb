"""Fault injection on the newer surfaces (2026-11-26): a full disk, a truncated training state or
processed cache, writers killed at random moments, a rerun with fewer epochs.

Each case goes through what a script runs (the function inside its ``friendly_errors``, or the
script itself) and asserts what the user sees (one ``error:`` line and exit status 2, or one
``warning:`` line and a complete run) and what is left on the disk: nothing half-written under
a file's final name, no temporary file, every record and state complete, and a resumed run
equal to an uninterrupted one.

A full disk is a small tmpfs mounted for the test (Linux, root); where it cannot be mounted
those tests skip, saying why. The kill -9 loop of ``train_explainer.py`` runs one trial here
and 20 under ``-m slow`` (``explain.py``'s loop is in ``tests/runs/test_faults.py``);
under ``-m slow`` too, the PGExplainer's and TempME's trainings killed once their first epoch's
state is written resume there to an uninterrupted run's weights and card.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from PIL import Image
from testsupport.errors import lines, one_line, refused

import cftgnn.config  # noqa: F401  (registers ${cftgnn_root:})
from cftgnn.analysis.compare import compare_records
from cftgnn.cli import unwritable_run_dir
from cftgnn.data import info
from cftgnn.explain import training
from cftgnn.files import (
    DiskFullError,
    atomic_output,
    atomic_write,
    remove_stale_temporaries,
)
from cftgnn.reporting import report
from cftgnn.runs import pipeline
from cftgnn.runs.records import read_records
from cftgnn.training import loop
from cftgnn.training.kinds import weights_sha256

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
SCRIPTS = ROOT / "scripts"
N = 4
EXPLAIN = ["debug=default", "checkpoint=null", "explainer=greedy", "progress=false",
           "sample.prediction=any", f"n_events={N}"]
STREAM = ["dataset=synthetic", "dataset.num_nodes=30", "dataset.num_events=300",
          "progress=false"]
#: A tiny PGExplainer training (with ``checkpoint=`` the model fixture's).
PG = [*STREAM, "model=tgat", "n_train_events=12", "batch_size=4", "m_max=8", "n_val_events=4"]
SCORER = "pgexplainer_tgat_synthetic.pt"


def cfg_of(name: str, *overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose(name, overrides=list(overrides))


def temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp") or ".tmp." in p.name]


# ------------------------------------------------------------------------- a small disk


class Disk:
    """A mounted tmpfs the test fills (``fill``) and frees (``free_up``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.filler = root / "filler"

    def free(self) -> int:
        return shutil.disk_usage(self.root).free

    def fill(self, leave: int) -> None:
        """Leave about ``leave`` bytes free (the tmpfs counts whole pages)."""
        self.free_up()
        with open(self.filler, "wb") as f:
            f.write(bytes(max(self.free() - leave, 0)))
        assert self.free() <= leave + 4096

    def free_up(self) -> None:
        self.filler.unlink(missing_ok=True)


@pytest.fixture
def disk(tmp_path) -> Iterator[Disk]:
    """A 4 MiB tmpfs under ``tmp_path``, unmounted afterwards; skipped where it cannot be
    mounted (not Linux, not root, no ``mount``)."""
    point = tmp_path / "disk"
    point.mkdir()
    if not sys.platform.startswith("linux") or shutil.which("mount") is None:
        pytest.skip("a full disk needs a small tmpfs: Linux with mount(8) only")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        reason = (lines(done.stderr) or ["mount failed"])[0]
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {reason}")
    try:
        yield Disk(point)
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


# ----------------------------------------------------------------------- atomic writes


def _enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_write_that_finds_the_disk_full_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "out" / "state.pt"
    path.parent.mkdir()
    atomic_write(path, b"complete")
    with pytest.raises(DiskFullError) as err, atomic_output(path) as f:
        f.write(b"half")
        raise _enospc()
    said = str(err.value)
    assert "\n" not in said and "[Errno" not in said
    assert said.startswith("no space left on device writing state.pt in ")
    assert str(path.parent) in said and "the disk mounted at" in said
    assert path.read_bytes() == b"complete" and temporaries(tmp_path) == []
    # torch.save says RuntimeError("unexpected pos"), raised while handling the OSError
    with pytest.raises(DiskFullError), atomic_output(tmp_path / "out" / "new.pt"):
        try:
            raise _enospc()
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc] . unexpected pos") from None
    assert not (tmp_path / "out" / "new.pt").exists() and temporaries(tmp_path) == []


def test_a_full_disk_anywhere_in_a_script_is_one_error_line(capsys):
    def torch_like():
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/data/run/x.png")
        except OSError:
            raise RuntimeError("unexpected pos 704 vs 598") from None

    said = refused(capsys, torch_like)
    assert said.startswith("error: no space left on device writing x.png in /data/run")

    def quota():
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    assert refused(capsys, quota).startswith("error: disk quota exceeded")


def test_temporaries_of_dead_writers_are_removed_a_live_writers_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".0000000007.parquet.{dead.pid}.tmp"
    live = tmp_path / f".0000000008.parquet.{os.getpid()}.tmp"
    other = tmp_path / "notes.tmp"
    for p in (stale, live, other):
        p.write_bytes(b"x")
    assert remove_stale_temporaries(tmp_path) == [stale]
    assert live.exists() and other.exists() and not stale.exists()


# ----------------------------------------------------------------------------- explain


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """An uninterrupted tiny explain run."""
    out = tmp_path_factory.mktemp("reference") / "run"
    pipeline.run(cfg_of("explain", *EXPLAIN, f"out_dir={out}"))
    assert len(list((out / "records").glob("*.parquet"))) == N
    return out


def same_records(a: Path, b: Path) -> bool:
    ra, rb = read_records(a), read_records(b)
    return len(ra) == len(rb) == N and compare_records(ra, rb).identical


def test_explain_on_a_disk_that_fills_up_stops_in_one_line_and_resumes(disk, reference,
                                                                       capsys):
    record = max(p.stat().st_size for p in (reference / "records").glob("*.parquet"))
    out = disk.root / "run"
    disk.fill(leave=16 * 1024 + int(record * 1.5))  # run.json, the probe, one record
    said = refused(capsys, pipeline.run, cfg_of("explain", *EXPLAIN, f"out_dir={out}"))
    assert said.startswith("error: no space left on device writing ")
    assert f"in {out / 'records'} (the disk mounted at {disk.root}" in said
    assert temporaries(out) == []
    left = read_records(out, unreadable="raise")  # what is there is complete
    assert 1 <= len(left) < N
    assert not (out / "summary.csv").exists()
    disk.free_up()
    pipeline.run(cfg_of("explain", *EXPLAIN, f"out_dir={out}"))  # resume
    assert same_records(out, reference) and temporaries(out) == []


def test_a_full_disk_is_refused_before_any_work(disk, capsys):
    disk.fill(leave=0)
    out = disk.root / "run"
    said = refused(capsys, pipeline.run, cfg_of("explain", *EXPLAIN, f"out_dir={out}"))
    assert said.startswith(f"error: out_dir: no space left on device in {out}")
    assert not (out / "records").exists() and temporaries(disk.root) == []
    # Hydra writes into hydra.run.dir before a script's code: main_guard's check
    message = unwritable_run_dir([f"hydra.run.dir={disk.root / 'pg'}"])
    assert message is not None and message.startswith("hydra.run.dir: no space left")


def test_report_on_a_full_disk_leaves_no_empty_or_cut_image(disk, reference, capsys):
    disk.fill(leave=64 * 1024)  # the first plots fit, the rest do not
    out = disk.root / "report"
    said = refused(capsys, report.main, [str(reference), "--out", str(out)])
    assert said.startswith("error: no space left on device writing ")
    assert temporaries(out) == [] and not (out / "report.md").exists()
    for png in out.glob("*.png"):  # each one there is whole
        with Image.open(png) as image:
            image.verify()
    disk.free_up()
    done = report.main([str(reference), "--out", str(out)])
    assert all(p.stat().st_size > 0 for p in done.files)


def test_stale_record_temporaries_of_a_killed_writer_go_on_resume(reference, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    first = sorted((out / "records").glob("*.parquet"))[0]
    stale = first.with_name(f".{first.name}.{dead.pid}.tmp")
    stale.write_bytes(first.read_bytes()[:100])  # what a kill mid-write leaves
    pipeline.run(cfg_of("explain", *EXPLAIN, f"out_dir={out}"))
    assert not stale.exists() and temporaries(out) == []
    assert same_records(out, reference)


# ------------------------------------------------------------------------ the processed cache


def test_a_truncated_processed_cache_is_rebuilt_with_one_warning(tmp_path, capsys):
    csv = tmp_path / "events.csv"
    csv.write_text("src,dst,t\n" + "".join(f"{i % 5},{5 + i % 3},{i}\n" for i in range(40)))
    cfg = cfg_of("dataset_info", "dataset=csv", f"dataset.path={csv}",
                 f"paths.cache_dir={tmp_path / 'cache'}")
    first = info.run(cfg)
    (cached,) = (tmp_path / "cache" / "processed").glob("*.npz")
    cached.write_bytes(cached.read_bytes()[:200])
    with pytest.raises(zipfile.BadZipFile):
        np.load(cached)
    capsys.readouterr()
    again = info.run(cfg)
    warned = one_line(capsys.readouterr().err, "warning: ")
    assert f"processed cache {cached} does not load" in warned and "rebuilding" in warned
    assert np.array_equal(again.src, first.src) and np.array_equal(again.t, first.t)
    third = info.run(cfg)  # rebuilt: read from the cache again, silently
    assert third.meta.get("from_cache") == str(cached)
    assert lines(capsys.readouterr().err) == [] and temporaries(tmp_path / "cache") == []


# ----------------------------------------------------------------------- train_explainer


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A tiny TGAT checkpoint to train explainers for."""
    out = tmp_path_factory.mktemp("model")
    loop.run(cfg_of("train", *STREAM, "model=tgat", "model.batch_size=25", "epochs=1",
                    f"out_dir={out}"))
    return out / "tgat_synthetic.pt"


def pg(model: Path, run_dir: Path, epochs: int):
    return cfg_of("train_explainer", *PG, f"checkpoint={model}", f"epochs={epochs}",
                  f"+run_dir={run_dir}")


@pytest.fixture(scope="module")
def trained(model, tmp_path_factory) -> Path:
    """A run directory of a finished 2-epoch training."""
    run = tmp_path_factory.mktemp("pg") / "run"
    training.run(pg(model, run, 2))
    return run


def card(run: Path, name: str = SCORER) -> dict:
    return json.loads((run / name).with_suffix(".json").read_text())


def test_train_explainer_on_a_disk_that_fills_up_keeps_the_last_state(disk, model, trained,
                                                                       capsys):
    state_size = (trained / "state.pt").stat().st_size
    run = disk.root / "run"
    disk.fill(leave=int(state_size * 1.5))  # epoch 1's state fits, epoch 2's new one not
    said = refused(capsys, training.run, pg(model, run, 2))
    assert said.startswith(f"error: no space left on device writing state.pt in {run} ")
    assert temporaries(run) == [] and not (run / SCORER).exists()
    state = torch.load(run / "state.pt", weights_only=True)
    assert state["epoch"] == 1
    disk.free_up()
    capsys.readouterr()
    training.run(pg(model, run, 2))
    assert f"resuming {run / 'state.pt'} after epoch 1" in capsys.readouterr().out
    got = card(run)
    assert got["epochs"] == 2 and [h["epoch"] for h in got["history"]] == [1, 2]
    assert got["weights_sha256"] == weights_sha256(run / SCORER) and temporaries(run) == []


def test_a_truncated_state_is_set_aside_with_one_warning_and_training_restarts(
        model, trained, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    state = run / "state.pt"
    state.write_bytes(state.read_bytes()[:1000])
    (run / "state.tmp").write_bytes(bytes(100))  # what versions before 2026-11-26 left
    capsys.readouterr()
    training.run(pg(model, run, 2))
    warned = one_line(capsys.readouterr().err, "warning: ")
    assert warned.startswith(f"warning: training state {state} is unreadable: it is truncated: it "
                             "begins as a torch checkpoint but its archive ends early")
    assert "moved to state.pt.corrupt-1, training starts again from epoch 0" in warned
    assert (run / "state.pt.corrupt-1").stat().st_size == 1000
    assert torch.load(state, weights_only=True)["epoch"] == 2
    assert [h["epoch"] for h in card(run)["history"]] == [1, 2]
    assert temporaries(run) == []


def test_fewer_epochs_than_the_state_holds_are_refused_and_the_card_tells_the_truth(
        model, trained, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    said = refused(capsys, training.run, pg(model, run, 1))
    assert said == (f"error: {run / 'state.pt'} holds 2 trained epochs, more than epochs=1; "
                    "rerun with epochs=2 (or more, to train on), or use another "
                    "hydra.run.dir to train 1 epoch from scratch")
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # nothing rewritten
    training.run(pg(model, run, 2))  # the same epochs: the card is rewritten, true
    assert card(run)["epochs"] == 2 == len(card(run)["history"])


def _kill_and_resume(model: Path, run: Path, rng: random.Random) -> None:
    shutil.rmtree(run, ignore_errors=True)
    args = [*PG, f"checkpoint={model}", "epochs=3", f"hydra.run.dir={run}"]
    proc = subprocess.Popen([sys.executable, str(SCRIPTS / "train_explainer.py"), *args],
                            cwd=run.parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and not run.is_dir():
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 3.0))  # a random moment: loading, training, saving
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    if (run / "state.pt").exists():
        assert torch.load(run / "state.pt", weights_only=True)["epoch"] in (1, 2, 3)
    training.run(pg(model, run, 3))  # resume
    got = card(run)
    assert [h["epoch"] for h in got["history"]] == [1, 2, 3] and got["epochs"] == 3
    assert got["weights_sha256"] == weights_sha256(run / SCORER)
    assert temporaries(run) == [] and not list(run.glob("*.corrupt-*"))


def test_train_explainer_killed_at_a_random_moment_resumes_to_a_complete_card(
        model, tmp_path):
    _kill_and_resume(model, tmp_path / "run", random.Random(39))


@pytest.mark.slow
def test_train_explainer_kill_9_loop_of_20_trials(model, tmp_path):
    rng = random.Random(3939)
    for _ in range(20):
        _kill_and_resume(model, tmp_path / "run", rng)


#: A tiny TempME training (with ``checkpoint=`` the model fixture's).
TM = [*STREAM, "explainer=tempme", "model=tgat", "n_train_events=12", "batch_size=4",
      "m_max=8", "tempme.n_walks=6", "tempme.hidden=8", "tempme.n_val_events=4",
      "tempme.null_events=10"]
#: Per trained explainer: its tiny training's options and the file it writes.
TRAININGS = {"pgexplainer": (PG, SCORER), "tempme": (TM, "tempme_tgat_synthetic.pt")}
#: What differs between two runs of the same training: times (the card's ``weights_sha256``
#: hashes the tensors, so it does not).
_TIMES = ("training_seconds", "seconds")


def _timeless(card: dict) -> dict:
    out = {k: v for k, v in card.items() if k not in _TIMES}
    out["history"] = [{k: v for k, v in h.items() if k not in _TIMES} for h in card["history"]]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("which", sorted(TRAININGS))
def test_train_explainer_killed_after_an_epoch_resumes_there_to_the_uninterrupted_result(
        which, model, tmp_path):
    """``train_explainer.py`` killed with SIGKILL once its first epoch's state is
    written resumes from that state when the same command is rerun (not from epoch 0), and
    ends with the checkpoint and card of an uninterrupted run: the same weights (training is
    deterministic given the seed) and the same card but for times."""
    options, name = TRAININGS[which]
    epochs = 4
    command = [sys.executable, str(SCRIPTS / "train_explainer.py"), *options,
               f"checkpoint={model}", f"epochs={epochs}"]
    whole, run = tmp_path / "whole", tmp_path / "run"
    subprocess.run([*command, f"hydra.run.dir={whole}"], cwd=tmp_path, capture_output=True,
                   timeout=600, check=True)
    proc = subprocess.Popen([*command, f"hydra.run.dir={run}"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.time() + 600
        while proc.poll() is None and not (run / "state.pt").exists() and time.time() < deadline:
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL  # killed, not finished or failed
    done = torch.load(run / "state.pt", weights_only=True)["epoch"]
    assert 1 <= done < epochs and not (run / name).exists()
    again = subprocess.run([*command, f"hydra.run.dir={run}"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"resuming {run / 'state.pt'} after epoch {done}" in again.stdout
    if which == "pgexplainer":  # it prints each epoch it trains: none before the state's
        trained = [ln.split(":")[0] for ln in again.stdout.splitlines()
                   if ln.startswith("epoch ") and "loss" in ln]
        assert trained == [f"epoch {e + 1}" for e in range(done, epochs)]
    got, want = card(run, name), card(whole, name)
    assert [h["epoch"] for h in got["history"]] == list(range(1, epochs + 1))
    assert got["weights_sha256"] == weights_sha256(run / name)
    assert _timeless(got) == _timeless(want)
    weights = [torch.load(r / name, weights_only=True)["state_dict"] for r in (run, whole)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert temporaries(run) == [] and not list(run.glob("*.corrupt-*"))


def test_a_state_of_another_model_checkpoint_is_refused(model, trained, tmp_path, capsys):
    other = tmp_path / "other"
    loop.run(cfg_of("train", *STREAM, "model=tgat", "model.batch_size=25", "epochs=1",
                    "seed=1", f"out_dir={other}"))
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    said = refused(capsys, training.run, pg(other / model.name, run, 3))
    assert said.startswith(f"error: {run / 'state.pt'} holds a training for the model "
                           "checkpoint of SHA-256 ")
    assert str(other / model.name) in said and said.endswith(
        "rerun with that checkpoint, or use another hydra.run.dir to train for this one "
        "from scratch")
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # nothing rewritten
