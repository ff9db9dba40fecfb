"""Fault injection: nothing a user or a crash can do leaves a run unusable.

Each case asserts what the user sees (one ``error:`` / ``warning:`` line, no traceback), the
exit status, and that every record complete before the fault is still there, byte for byte.
The kill -9 loop runs a few trials here and 50 under ``-m slow``.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import torch
from hydra import compose, initialize_config_dir
from testsupport.errors import lines, one_line, refused

import cftgnn.config  # noqa: F401  (registers ${cftgnn_root:})
from cftgnn.analysis import compare
from cftgnn.analysis.compare import compare_records
from cftgnn.cli import hydra_problem, main_guard
from cftgnn.runs import pipeline
from cftgnn.runs.merge import merge_runs
from cftgnn.runs.records import RecordStore, UnreadableRecordError, read_records
from cftgnn.runs.rundir import find_runs, load_run
from cftgnn.training import loop
from cftgnn.training.checkpoint import checkpoint_path
from cftgnn.training.resolve import auto_checkpoint

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
SCRIPTS = ROOT / "scripts"
N = 5
TINY = ["debug=default", "checkpoint=null", "explainer=greedy", "progress=false",
        "sample.prediction=any", f"n_events={N}"]


def explain_cfg(*overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("explain", overrides=[*TINY, *overrides])


def train_cfg(*overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("train", overrides=["dataset=synthetic", "dataset.num_nodes=30",
                                           "dataset.num_events=300", "progress=false",
                                           *overrides])


def script(name: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPTS / name), *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def digests(run: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((run / "records").glob("*.parquet"))}


def same_records(a: Path, b: Path) -> bool:
    ra, rb = read_records(a), read_records(b)
    return len(ra) == len(rb) == N and compare_records(ra, rb).identical


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """An uninterrupted tiny run."""
    out = tmp_path_factory.mktemp("reference") / "run"
    pipeline.run(explain_cfg(f"out_dir={out}"))
    assert len(digests(out)) == N
    return out


@pytest.fixture
def run_copy(reference, tmp_path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    return out


def _foreign_record(path: Path) -> None:
    pd.DataFrame({"a": [1], "b": ["x"]}).to_parquet(path)


# --------------------------------------------------------------------------- records


def test_unreadable_records_are_set_aside_in_one_line_each_and_explained_again(
        run_copy, reference, tmp_path, capsys):
    files = sorted((run_copy / "records").glob("*.parquet"))
    truncated, empty, foreign = files[0], files[1], files[2]
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])
    empty.write_bytes(b"")
    _foreign_record(foreign)
    kept = {k: v for k, v in digests(run_copy).items()
            if k not in {truncated.name, empty.name, foreign.name}}
    capsys.readouterr()
    pipeline.run(explain_cfg(f"out_dir={run_copy}"))
    captured = capsys.readouterr()
    warned = lines(captured.err)
    assert len(warned) == 3 and all(w.startswith("warning: record ") for w in warned)
    for bad in (truncated, empty, foreign):
        assert sum(str(bad) in w for w in warned) == 1
        assert f"moved to corrupt/{bad.name}.corrupt-1," in " ".join(warned)
        assert (run_copy / "corrupt" / f"{bad.name}.corrupt-1").is_file()  # kept to inspect
    assert f"{N - 3} already recorded" in captured.out
    assert same_records(run_copy, reference)  # explained again, as an uninterrupted run
    after = digests(run_copy)
    assert {k: after[k] for k in kept} == kept  # complete records untouched
    # the repaired run reads the documented way: records/ holds records only
    assert sorted(p.name for p in (run_copy / "records").iterdir()) == sorted(after)
    assert len(pd.read_parquet(run_copy / "records")) == N
    assert pq.read_table(run_copy / "records").num_rows == N
    assert ds.dataset(run_copy / "records", format="parquet").count_rows() == N
    assert find_runs([run_copy]) == [run_copy]  # corrupt/ is no run of its own
    assert len(merge_runs([run_copy], tmp_path / "merged")) == N
    assert len(load_run(run_copy).records) <= N


def test_records_set_aside_inside_records_by_older_versions_move_out_on_resume(run_copy):
    bad = sorted((run_copy / "records").glob("*.parquet"))[0]
    old = bad.with_name(f"{bad.name}.corrupt-1")  # where runs resumed before 2026-12-01 kept it
    old.write_bytes(b"PAR1 cut")
    (run_copy / "corrupt").mkdir()
    (run_copy / "corrupt" / old.name).write_bytes(b"taken")
    RecordStore(run_copy, json.loads((run_copy / "run.json").read_text()))
    assert not list((run_copy / "records").glob("*.corrupt-*"))
    assert (run_copy / "corrupt" / f"{bad.name}.corrupt-2").read_bytes() == b"PAR1 cut"
    assert len(pd.read_parquet(run_copy / "records")) == N


def test_a_record_renamed_from_another_event_is_not_counted_as_done(run_copy):
    files = sorted((run_copy / "records").glob("*.parquet"))
    shutil.copyfile(files[0], files[1])  # file of event 1 now holds event 0
    store = RecordStore(run_copy, json.loads((run_copy / "run.json").read_text()))
    assert int(files[1].stem) not in store.done()
    assert int(files[0].stem) in store.done()


def test_read_records_warns_or_raises_naming_the_file(run_copy, capsys):
    bad = sorted((run_copy / "records").glob("*.parquet"))[0]
    bad.write_bytes(b"PAR1 not really")
    capsys.readouterr()
    records = read_records(run_copy)
    assert len(records) == N - 1 and int(bad.stem) not in set(records["event_id"])
    assert str(bad) in one_line(capsys.readouterr().err, "warning: ")
    with pytest.raises(UnreadableRecordError, match=bad.name):
        read_records(run_copy, unreadable="raise")
    assert bad.is_file()  # readers never move or delete anything


def test_report_merge_compare_and_rules_name_an_unreadable_record_in_one_line(
        run_copy, reference, tmp_path, capsys):
    bad = sorted((run_copy / "records").glob("*.parquet"))[-1]
    bad.write_bytes(bad.read_bytes()[:100])
    before = digests(run_copy)
    for args in (("report.py", str(run_copy), "--out", str(tmp_path / "report")),
                 ("merge_records.py", str(run_copy), "--out", str(tmp_path / "merged")),
                 ("compare_runs.py", str(reference), str(run_copy))):
        done = script(*args)
        assert done.returncode == 0, done.stderr
        assert str(bad) in one_line(done.stderr, "warning: "), args
    assert len(read_records(tmp_path / "merged")) == N - 1
    capsys.readouterr()
    run = load_run(run_copy)  # what rules.py reads
    assert len(run.records) <= N - 1
    assert str(bad) in one_line(capsys.readouterr().err, "warning: ")
    assert digests(run_copy) == before


# --------------------------------------------------------------------------- compare


def _edited_run(source: Path, dest: Path, **changes: str) -> Path:
    shutil.copytree(source, dest)
    fp = json.loads((dest / "run.json").read_text())
    if "dataset" in changes:
        fp["dataset"]["name"] = changes["dataset"]
    if "target" in changes:
        fp["model"]["config"]["_target_"] = changes["target"]
    (dest / "run.json").write_text(json.dumps(fp))
    return dest


def test_compare_refuses_other_datasets_and_models_in_one_line(reference, tmp_path, capsys):
    other_data = _edited_run(reference, tmp_path / "data", dataset="uci")
    assert "different datasets" in refused(capsys, compare.main,
                                           [str(reference), str(other_data)])
    other_model = _edited_run(reference, tmp_path / "model", target="cftgnn.models.TGAT")
    assert "different models" in refused(capsys, compare.main,
                                         [str(reference), str(other_model)])


def test_compare_of_runs_sharing_no_event_fails_instead_of_reporting_equal(
        reference, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(reference, a)
    shutil.copytree(reference, b)
    files = sorted((a / "records").glob("*.parquet"))
    for f in files[:2]:
        (b / "records" / f.name).unlink()
    for f in files[2:]:
        f.unlink()
    message = refused(capsys, compare.main, [str(a), str(b)])
    assert "share no event" in message


# --------------------------------------------------------------------------- checkpoints


@pytest.fixture
def bad_checkpoints(tmp_path) -> dict[str, Path]:
    good = (ROOT / "checkpoints" / "tgn_uci.pt").read_bytes()
    files = {"truncated": good[: len(good) // 3], "random": os.urandom(4096), "empty": b""}
    out = {}
    for name, data in files.items():
        out[name] = tmp_path / f"{name}.pt"
        out[name].write_bytes(data)
    return out


class _Hostile:
    marker: Path

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_corrupt_checkpoints_are_refused_in_one_line_naming_the_file(bad_checkpoints, tmp_path,
                                                                     capsys):
    for name, path in bad_checkpoints.items():
        message = refused(capsys, pipeline.run,
                          explain_cfg(f"checkpoint={path}", f"out_dir={tmp_path / name}"))
        assert str(path) in message, name
        assert not (tmp_path / name / "records").exists()


def test_a_hostile_pickle_is_never_run(tmp_path, capsys):
    marker = tmp_path / "the_pickle_ran"
    _Hostile.marker = marker
    hostile = tmp_path / "hostile.pt"
    torch.save({"state_dict": _Hostile(), "config": {}, "dataset": {}}, hostile)
    with open(tmp_path / "plain.pkl", "wb") as f:
        pickle.dump(_Hostile(), f)
    for path in (hostile, tmp_path / "plain.pkl"):
        message = refused(capsys, pipeline.run,
                          explain_cfg(f"checkpoint={path}", f"out_dir={tmp_path / 'out'}"))
        assert str(path) in message
    assert not marker.exists()


def test_checkpoint_auto_finds_what_train_writes_for_every_model_kind(tmp_path):
    for kind in ("tgn", "tgn2l", "tgat", "pyg_tgn", "graphmixer", "dygformer"):
        cfg = train_cfg(f"model={kind}", f"out_dir={tmp_path}")
        written = loop.checkpoint_destination(cfg, type("S", (), {"name": "synthetic"})())
        assert written == auto_checkpoint(tmp_path, cfg.model, "synthetic")
        assert written == checkpoint_path(tmp_path, kind, "synthetic")


def test_checkpoint_auto_refuses_an_older_spelling_and_warns_on_fresh_weights(tmp_path,
                                                                            capsys):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "pygtgn_synthetic.pt").write_bytes(b"old name")
    message = refused(capsys, pipeline.run,
                      explain_cfg("model=pyg_tgn", "checkpoint=auto",
                                  f"paths.checkpoint_dir={folder}", "n_events=1",
                                  f"out_dir={tmp_path / 'a'}"))
    assert "pygtgn_synthetic.pt" in message and "pyg_tgn_synthetic.pt" in message
    (folder / "pygtgn_synthetic.pt").unlink()
    capsys.readouterr()
    pipeline.run(explain_cfg("checkpoint=auto", f"paths.checkpoint_dir={folder}", "n_events=1",
                             f"out_dir={tmp_path / 'b'}"))
    captured = capsys.readouterr()
    warning = one_line(captured.err, "warning: ")
    assert "checkpoint=auto" in warning and "UNTRAINED" in warning
    assert "note: checkpoint=auto" in captured.out  # after the summary too
    weights = json.loads((tmp_path / "b" / "run.json").read_text())["model"]["weights"]
    assert weights.startswith("fresh random weights") and "tgn_synthetic.pt" in weights


# --------------------------------------------------------------------------- options


HYDRA_SCRIPTS = {"explain": "n_events", "train": "epochs", "dataset_info": "dataset",
                 "benchmark_index": "dataset", "benchmark_oracle": "dataset",
                 "benchmark_quality": "dataset"}


@pytest.mark.parametrize("config", sorted(HYDRA_SCRIPTS))
def test_typos_and_bad_syntax_are_one_line_with_the_nearest_key_in_every_script(config):
    key = HYDRA_SCRIPTS[config]
    typo = key[:-1] + "x" + key[-1]
    assert hydra_problem([f"{typo}=4"], CONF, config) == \
        f"unknown option {typo!r} (did you mean {key!r}?)"
    message = hydra_problem([f"{key}=[1,2"], CONF, config)
    assert message is not None and message.startswith(f"cannot read the option '{key}=[1,2'")
    assert hydra_problem([], CONF, config) is None


def test_nested_typos_and_sweeps_are_checked(capsys):
    assert hydra_problem(["sample.predction=any"], CONF, "explain") == \
        "unknown option 'sample.predction' (did you mean 'sample.prediction'?)"
    assert hydra_problem(["smaple.range=[0,1]"], CONF, "explain") == \
        "unknown option 'smaple.range' (did you mean 'sample.range'?)"
    assert "nevents" in str(hydra_problem(["-m", "nevents=1,2"], CONF, "explain"))
    assert hydra_problem(["-m", "n_events=1,2", "seed=range(0,3)"], CONF, "explain") is None

    def never() -> None:
        raise AssertionError("main must not run")

    with pytest.raises(SystemExit) as exc:
        main_guard(never, CONF, argv=["nevents=4"], config_name="explain")
    assert exc.value.code == 2
    one_line(capsys.readouterr().err)


def test_the_script_says_it_in_one_line():
    done = script("explain.py", "nevents=4")
    assert done.returncode == 2
    assert one_line(done.stderr) == "error: unknown option 'nevents' (did you mean 'n_events'?)"


@pytest.mark.parametrize("override, words", [
    ("events=[abc]", "events must be a list of integers"),
    ("n_events=abc", "n_events must be an integer"),
    ("n_events=1.5", "n_events must be an integer"),
    ("events=[1.5]", "events must be a list of integers"),
    ("seed=0.5", "seed must be an integer"),
    ("sample.prediction=bogus", "sample.prediction must be one of"),
    ("sample.range=[0.9,0.1]", "sample.range"),
    ("num_threads=0", "num_threads must be an integer >= 1"),
    ("num_workers=0", "num_workers must be an integer >= 1, got 0"),
    ("num_workers=1.5", "num_workers must be an integer >= 1, got 1.5"),
    ("num_workers=abc", "num_workers must be an integer >= 1, got 'abc'"),
])
def test_bad_values_are_refused_before_anything_loads(override, words, tmp_path, capsys):
    message = refused(capsys, pipeline.run, explain_cfg(override, f"out_dir={tmp_path}/o"))
    assert words in message
    assert not (tmp_path / "o" / "run.json").exists()


@pytest.mark.parametrize("override", ["epochs=0", "epochs=-1", "epochs=1.5", "lr=abc"])
def test_train_refuses_bad_counts_before_training(override, tmp_path, capsys):
    refused(capsys, loop.run, train_cfg(override, f"out_dir={tmp_path}"))
    assert not list(tmp_path.glob("*.pt"))


def test_unwritable_output_directories_are_refused_up_front(tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    for run, cfg in ((pipeline.run, explain_cfg(f"out_dir={a_file}/sub")),
                     (loop.run, train_cfg(f"out_dir={a_file}/sub", "epochs=1"))):
        assert "out_dir" in refused(capsys, run, cfg)
    with pytest.raises(SystemExit):
        main_guard(lambda: None, CONF, argv=[f"hydra.run.dir={a_file}/x"],
                   config_name="explain")
    assert "hydra.run.dir" in one_line(capsys.readouterr().err)


def test_a_read_only_directory_is_refused(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders; the file-as-folder case covers it")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert "cannot be written" in refused(capsys, pipeline.run,
                                              explain_cfg(f"out_dir={ro}/run"))
    finally:
        ro.chmod(0o700)


# --------------------------------------------------------------------------- W&B


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_wandb_online_without_a_key_logs_offline_with_one_warning(offline_wandb, monkeypatch,
                                                                 capsys):
    from cftgnn.tracking import WandbTracker, online_problem, tracking

    monkeypatch.setenv("NETRC", str(offline_wandb / "no-netrc"))
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{_closed_port()}")
    assert "no W&B API key" in str(online_problem())
    tracker = WandbTracker(mode="online")
    capsys.readouterr()
    with tracking(tracker, {"a": 1}, dir=offline_wandb):
        tracker.log_summary({"x": 1.0})
    assert tracker.mode == "offline" and tracker.run_dir is not None
    assert "logging offline instead" in one_line(capsys.readouterr().err, "warning: ")


def test_wandb_online_without_network_logs_offline_with_one_warning(offline_wandb, monkeypatch,
                                                                   capsys):
    from cftgnn.tracking import WandbTracker, online_problem, tracking

    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{_closed_port()}")
    assert "cannot reach 127.0.0.1" in str(online_problem())
    tracker = WandbTracker(mode="online")
    capsys.readouterr()
    with tracking(tracker, {"a": 1}, dir=offline_wandb):
        pass
    assert tracker.mode == "offline"
    assert "cannot reach" in one_line(capsys.readouterr().err, "warning: ")


def test_wandb_init_failing_online_falls_back_to_offline(offline_wandb, monkeypatch, capsys):
    import wandb

    from cftgnn import tracking as tracking_module

    real_init = wandb.init

    def init(*args, **kwargs):
        if kwargs.get("mode") == "online":
            raise wandb.errors.CommError("the server did not answer")
        return real_init(*args, **kwargs)

    monkeypatch.setattr(tracking_module, "online_problem", lambda: None)
    monkeypatch.setattr(wandb, "init", init)
    tracker = tracking_module.WandbTracker(mode="online")
    capsys.readouterr()
    with tracking_module.tracking(tracker, {"a": 1}, dir=offline_wandb):
        pass
    assert tracker.mode == "offline"
    assert "did not answer" in one_line(capsys.readouterr().err, "warning: ")


# --------------------------------------------------------------------------- signals


def _start(out: Path, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, str(SCRIPTS / "explain.py"), *TINY,
                             f"out_dir={out}", *extra], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for_records(out: Path, proc: subprocess.Popen[str], n: int) -> None:
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        if (out / "records").is_dir() and len(list((out / "records").glob("*.parquet"))) >= n:
            return
        time.sleep(0.01)


def test_ctrl_c_ends_in_one_line_with_status_130_and_the_run_resumes(reference, tmp_path):
    out = tmp_path / "run"
    proc = _start(out, tmp_path, "n_events=12")
    _wait_for_records(out, proc, 1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the run ended before Ctrl-C reached it")
    assert proc.returncode == 130
    assert "rerun the same command" in one_line(err, "interrupted (Ctrl-C): ")
    assert not (out / "corrupt").exists()
    read_records(out, unreadable="raise")  # every record it left is complete


def _kill_and_resume(reference: Path, tmp_path: Path, rng: random.Random) -> None:
    out = tmp_path / "run"
    shutil.rmtree(out, ignore_errors=True)
    proc = _start(out, tmp_path)
    try:
        _wait_for_records(out, proc, rng.randrange(0, N))
        time.sleep(rng.uniform(0.0, 0.4))  # a random moment: between, during or after writes
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.communicate()
    if (out / "records").is_dir():
        read_records(out, unreadable="raise")  # what the kill left is complete
    pipeline.run(explain_cfg(f"out_dir={out}"))  # resume
    assert not (out / "corrupt").exists(), "a record was cut short"
    assert not list(out.rglob("*.tmp")), "a killed writer's temporary file stayed"
    assert same_records(out, reference)  # none lost, none doubled, equal to uninterrupted


def test_kill_9_at_random_moments_then_resume_gives_an_uninterrupted_runs_records(
        reference, tmp_path):
    rng = random.Random(25)
    for _ in range(2):
        _kill_and_resume(reference, tmp_path, rng)


@pytest.mark.slow
def test_kill_9_acceptance_loop_of_50_trials(reference, tmp_path):
    rng = random.Random(2025)
    for _ in range(50):
        _kill_and_resume(reference, tmp_path, rng)
