"""Faults on the newer surfaces (2026-11-26): synthetic sizes, streams too small to train on,
read-only outputs, bad arguments of the argparse scripts, a pickled PGExplainer file.

Each case asserts what the user sees: one ``error:`` line, exit status 2, no traceback, and
(for outputs) that nothing was done or written first. A few cases run the real scripts in
subprocesses; the rest call the scripts' ``main`` under ``friendly_errors``,
as the scripts do, to keep the file fast.
"""

from __future__ import annotations

import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import torch
from hydra import compose, initialize_config_dir
from testsupport.errors import one_line, refused

import cftgnn.config  # noqa: F401  (registers ${cftgnn_root:})
from cftgnn.analysis import compare
from cftgnn.analysis.rules import report as rules_report
from cftgnn.cli import main_guard
from cftgnn.data import info
from cftgnn.data.synthetic import make_synthetic_stream
from cftgnn.errors import ConfigError
from cftgnn.explain.pgexplainer import load_scorer
from cftgnn.reporting import pareto, picture, report
from cftgnn.runs import merge, pipeline
from cftgnn.training import loop
from cftgnn.training.checkpoint import CheckpointError

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
SCRIPTS = ROOT / "scripts"
#: The tiny synthetic stream with a batch size that trains and validates on it.
TINY_TRAIN = ["dataset=synthetic", "dataset.num_nodes=30", "dataset.num_events=300",
              "model=tgn", "model.memory_dim=8", "model.time_dim=4", "model.embedding_dim=8",
              "model.num_neighbors=3", "model.batch_size=25", "epochs=1", "progress=false"]


def script(name: str, *args: str, cwd: Path) -> str:
    """Run ``scripts/<name>``; it must exit with status 2 and one ``error:`` line (returned)."""
    done = subprocess.run([sys.executable, str(SCRIPTS / name), *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)
    assert done.returncode == 2, done.stderr
    return one_line(done.stderr)


def config(name: str, *overrides: str) -> Any:
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose(name, overrides=list(overrides))


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder on a read-only file system (a tmpfs mounted ``ro``; as root, permission bits
    stop nothing, so a mount is the honest read-only case)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {done.stderr.strip() or 'failed'}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


# ---- 1. synthetic sizes ----------------------------------------------------------------------


def test_a_fractional_synthetic_size_is_one_line_in_train(tmp_path: Path) -> None:
    message = script("train.py", "dataset=synthetic", "dataset.num_events=2.5",
                     f"out_dir={tmp_path / 'out'}", cwd=tmp_path)
    assert "dataset.num_events must be an integer >= 0, got 2.5" in message
    assert not list(tmp_path.rglob("*.pt"))


def test_a_synthetic_stream_too_big_for_the_machine_is_refused_before_allocating(
        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config("dataset_info", "dataset=synthetic", "dataset.feat_dim=1e9")
    message = refused(capsys, info.run, cfg)
    assert "feat_dim 1,000,000,000 would need" in message and "TiB of memory" in message


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"num_nodes": "ten"}, "dataset.num_nodes must be an integer >= 2, got 'ten'"),
    ({"num_events": 2.5}, "dataset.num_events must be an integer >= 0, got 2.5"),
    ({"feat_dim": -1}, "dataset.feat_dim must be an integer >= 0"),
    ({"num_events": 1e11}, "100,000,000,000 events"),
    ({"num_nodes": 1e12}, "1,000,000,000,000 nodes"),
])
def test_bad_synthetic_sizes_are_named(kwargs: dict[str, Any], words: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    started = time.perf_counter()
    assert words in refused(capsys, lambda: make_synthetic_stream(**kwargs))
    assert time.perf_counter() - started < 1  # refused, not allocated


def test_an_integral_float_size_is_taken() -> None:
    assert make_synthetic_stream(num_nodes=1e1, num_events=1e2).num_events == 100


def test_explain_refuses_a_synthetic_stream_too_big(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config("explain", "debug=default", "checkpoint=null", "dataset.feat_dim=1e8",
                 f"out_dir={tmp_path / 'out'}")
    assert "would need" in refused(capsys, pipeline.run, cfg)
    assert not (tmp_path / "out" / "run.json").exists()


# ---- 2. streams too small to train and validate on ------------------------------------------


def test_train_refuses_a_stream_too_small_and_writes_no_checkpoint(tmp_path: Path) -> None:
    message = script("train.py", "dataset=synthetic", "dataset.num_events=3",
                     f"out_dir={tmp_path / 'out'}", cwd=tmp_path)
    assert "has 3 events, too few to train and validate on" in message
    assert "471 events at least" in message  # batch size 200, split 0.7 / 0.15 / 0.15
    assert not list(tmp_path.rglob("*.pt"))


@pytest.mark.parametrize("events", [1, 2])
def test_train_refuses_one_and_two_event_csv_streams(events: int, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "few.csv"
    csv.write_text("src,dst,t\n" + "".join(f"0,1,{t}\n" for t in range(events)))
    cfg = config("train", "dataset=csv", f"dataset.path={csv}", f"out_dir={tmp_path / 'out'}",
                 "progress=false")
    message = refused(capsys, loop.run, cfg)
    assert f"has {events} events, too few" in message
    assert not list(tmp_path.rglob("*.pt"))


@pytest.mark.parametrize(("batch", "val", "test"), [
    (1, 0.15, 0.15), (25, 0.15, 0.15), (200, 0.15, 0.15), (200, 0.01, 0.5), (7, 0.3, 0.6),
])
def test_minimum_events_is_the_fewest_that_train_and_validate(batch: int, val: float,
                                                              test: float) -> None:
    need = loop.minimum_events(batch, val, test)
    assert loop.Split.chronological(need, batch, val, test).trainable
    assert not any(loop.Split.chronological(n, batch, val, test).trainable
                   for n in range(need))


@pytest.mark.parametrize(("batch", "val", "test"), [
    (1, 0.15, 0.15), (25, 0.15, 0.15), (200, 0.15, 0.15), (200, 0.01, 0.5), (7, 0.3, 0.6),
])
def test_every_size_from_safe_events_on_trains_and_validates(batch: int, val: float,
                                                             test: float) -> None:
    safe = loop.safe_events(batch, val, test)
    assert all(loop.Split.chronological(n, batch, val, test).trainable
               for n in range(safe, safe + 20 * batch + 100))


def test_a_size_between_the_least_and_the_safe_one_that_does_not_split_is_refused(
        tmp_path: Path) -> None:
    # batch size 200, split 0.7 / 0.15 / 0.15: 471 splits, 600 does not (both parts round
    # down to 400 events), 1,341 and more always do
    assert loop.Split.chronological(471, 200).trainable
    assert not loop.Split.chronological(600, 200).trainable
    message = script("train.py", "dataset=synthetic", "dataset.num_events=600",
                     f"out_dir={tmp_path / 'out'}", cwd=tmp_path)
    assert "has 600 events, which do not split into training and validation parts" in message
    assert "1,341 events or more always split" in message
    assert not list(tmp_path.rglob("*.pt"))


def test_minimum_events_is_quick_for_a_tiny_validation_share() -> None:
    started = time.perf_counter()
    need = loop.minimum_events(200, 1e-9, 0.15)
    assert time.perf_counter() - started < 1
    assert loop.Split.chronological(need, 200, 1e-9, 0.15).trainable


def test_a_nan_loss_saves_no_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    real = loop.train_epoch
    monkeypatch.setattr(loop, "train_epoch", lambda *a, **k: real(*a, **k) * float("nan"))
    cfg = config("train", *TINY_TRAIN, f"out_dir={tmp_path}")
    message = refused(capsys, loop.run, cfg)
    assert "epoch 1: the training loss is nan" in message and "no checkpoint" in message
    assert not list(tmp_path.glob("*.pt")) and not list(tmp_path.glob("*.json"))


# ---- 4. read-only outputs -------------------------------------------------------------------


def test_train_explainer_refuses_a_read_only_out_dir_before_training(
        tmp_path: Path, read_only: Path) -> None:
    run_dir = tmp_path / "run"
    message = script("train_explainer.py", "dataset=synthetic", "checkpoint=null",
                     f"out_dir={read_only}", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert f"out_dir {str(read_only)!r} cannot be written (Read-only file system)" in message
    assert not (run_dir / "state.pt").exists()


def test_a_read_only_hydra_run_dir_is_refused_before_hydra_makes_it(
        read_only: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ran = []
    with pytest.raises(SystemExit) as exc:
        main_guard(lambda: ran.append(1), CONF, argv=[f"hydra.run.dir={read_only}/run"],
                   config_name="train")
    assert exc.value.code == 2 and not ran
    message = one_line(capsys.readouterr().err)
    assert f"hydra.run.dir '{read_only}/run' cannot be" in message
    assert "Read-only file system" in message or f"no write permission in {read_only}" in message


def _merge(runs: str, out: str) -> Any:
    return merge.main([runs, "--out", out])


def _picture(runs: str, out: str) -> Any:
    return picture.main([runs, "3", "--out", out])


def _pareto(runs: str, out: str) -> Any:
    return pareto.main([runs, "3", "--out", out])


def _rules(runs: str, out: str) -> Any:
    return rules_report.main([runs, "--out", out])


def _report(runs: str, out: str) -> Any:
    return report.main([runs, "--out", out])


COMMANDS = {"merge_records": (_merge, "merged"), "show_explanation": (_picture, "e.png"),
            "show_pareto": (_pareto, "p.png"), "rules": (_rules, "rules"),
            "report": (_report, "report")}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_read_only_outputs_are_refused_first(name: str, tmp_path: Path, read_only: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    main, leaf = COMMANDS[name]
    # the run does not even exist: the output is checked first
    message = refused(capsys, main, str(tmp_path / "no_run"), str(read_only / leaf))
    assert "--out" in message and "(Read-only file system)" in message


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_file_in_place_of_the_output_folder_is_refused(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main, leaf = COMMANDS[name]
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    message = refused(capsys, main, str(tmp_path / "no_run"), str(a_file / leaf))
    assert f"({a_file} is not a folder)" in message


def test_a_picture_out_naming_a_folder_is_refused(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    message = refused(capsys, _picture, str(tmp_path / "no_run"), str(tmp_path))
    assert "it is a folder; name a file" in message


# ---- refused runs leave no run directory behind ---------------------------------------------


def test_a_run_refused_after_hydra_made_its_directory_leaves_none(tmp_path: Path) -> None:
    """A refusal raised once the run has started used to leave ``outputs/train/<model>-
    <dataset>/<time>/`` holding only ``.hydra/``, one more for every refused run."""
    message = script("train.py", "dataset=synthetic", "dataset.num_events=3", cwd=tmp_path)
    assert "has 3 events, too few to train and validate on" in message
    assert list(tmp_path.iterdir()) == []


def _hydra_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task: Callable[[Path], None],
               *argv: str) -> int | str | None:
    """Run ``task(run_dir)`` as the job of a Hydra app (job name ``app``) started in
    ``tmp_path`` with ``argv``, under ``friendly_errors`` as the scripts run their ``main``;
    its exit status (0 when it returned)."""
    import hydra
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from cftgnn.cli import friendly_errors

    conf = tmp_path.parent / f"{tmp_path.name}-conf"
    conf.mkdir()
    (conf / "app.yaml").write_text("x: 1\n")

    @hydra.main(config_path=str(conf), config_name="app", version_base="1.3")
    def app(cfg: Any) -> None:
        with friendly_errors():
            task(Path(HydraConfig.get().runtime.output_dir))

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["app.py", *argv, "hydra/job_logging=disabled",
                                      "hydra/hydra_logging=disabled", "hydra.job.name=app"])
    try:
        app()
    except SystemExit as exc:
        return exc.code
    finally:
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None
    return 0


def _refused(run_dir: Path) -> None:
    (run_dir / "app.log").write_text("Hydra's log of the job\n")
    raise ConfigError("n_events must be an integer >= 0, got 'abc'")


def _refused_after_a_result(run_dir: Path) -> None:
    (run_dir / "records").mkdir()
    (run_dir / "records" / "1.parquet").write_bytes(b"a result")
    _refused(run_dir)


def _done(run_dir: Path) -> None:
    (run_dir / "app.log").write_text("Hydra's log of the job\n")


#: What Hydra writes into a run directory before the job runs.
HYDRA = [".hydra/config.yaml", ".hydra/hydra.yaml", ".hydra/overrides.yaml"]
RUN = "outputs/app/2026-12-01"


@pytest.mark.parametrize(("argv", "task", "left"), [
    ([f"hydra.run.dir={RUN}"], _refused, []),
    (["-m", "hydra.sweep.dir=sweeps/now", "x=1,2"], _refused, []),  # its multirun.yaml too
    ([f"hydra.run.dir={RUN}"], _refused_after_a_result,
     [f"{RUN}/{f}" for f in [*HYDRA, "app.log", "records/1.parquet"]]),
    (["hydra.run.dir=."], _refused, [*HYDRA, "app.log"]),  # the folder it ran in: kept
    ([f"hydra.run.dir={RUN}"], _done, [f"{RUN}/{f}" for f in [*HYDRA, "app.log"]]),
], ids=["refused", "refused-sweep", "refused-after-a-result", "run-in-cwd", "not-refused"])
def test_a_refused_run_removes_its_run_directory_only_when_it_holds_only_hydras_files(
        argv: list[str], task: Callable[[Path], None], left: list[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    status = _hydra_job(tmp_path, monkeypatch, task, *argv)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
                  if p.is_file()) == sorted(left)
    if task is _done:
        assert status == 0
    else:
        assert status == 2
        assert one_line(capsys.readouterr().err) == (
            "error: n_events must be an integer >= 0, got 'abc'")
    if not left:
        assert list(tmp_path.iterdir()) == []  # no empty outputs/app/ either


# ---- 10. compare_runs' tolerance ------------------------------------------------------------


@pytest.mark.parametrize("atol", ["-1", "nan"])
def test_a_negative_tolerance_is_an_error(atol: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # the runs do not exist: the tolerance is checked first
    message = refused(capsys, compare.main, ["a", "b", "--atol", atol, "--strict"])
    assert message == f"error: --atol must be a number >= 0, got {float(atol)}"


# ---- minors: argparse errors, pickled PGExplainer files -------------------------------------


def test_a_bad_argument_type_is_one_line_in_a_subprocess(tmp_path: Path) -> None:
    message = script("show_explanation.py", "run", "x", cwd=tmp_path)
    assert "argument event_id: invalid int value: 'x'" in message


@pytest.mark.parametrize(("main", "argv"), [
    (report.main, ["--bogus"]),
    (merge.main, []),
    (rules_report.main, ["run", "--max-depth", "two"]),
    (pareto.main, ["run", "x"]),
    (picture.main, ["run", "3.5"]),
    (picture.main, ["run", "3", "--x", "sideways"]),
    (compare.main, ["a", "b", "--atol", "tiny"]),
])
def test_every_argparse_script_has_one_error_line(main: Callable[..., Any], argv: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    message = refused(capsys, main, argv)
    assert "--help" in message and "usage:" not in message


def test_help_still_prints_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        compare.main(["--help"])
    assert exc.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_a_pickled_pgexplainer_file_is_one_line_without_torch_advice(tmp_path: Path) -> None:
    path = tmp_path / "pickled.pt"
    # a Python object only a full (unsafe) unpickling would rebuild
    torch.save({"input_dim": 4, "hidden": 8, "card": Fraction(1, 3)}, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning may escape
        with pytest.raises(CheckpointError) as exc:
            load_scorer(path)
    message = str(exc.value)
    assert message.startswith(f"PGExplainer checkpoint {path} holds a pickled Python object "
                              "(fractions.Fraction), which safe weights-only loading refuses; "
                              "nothing in it was run; ")
    assert "weights_only" not in message and "\n" not in message and "\x1b" not in message


# ---- checkpoints of another kind, and truncated checkpoints --------------------------------

#: The committed checkpoints the cases pass where another kind is read (read only).
GIVEN = {"pg": ROOT / "checkpoints" / "pgexplainer_tgn_uci.pt",
         "tm": ROOT / "checkpoints" / "tempme_tgn_uci.pt",
         "model": ROOT / "checkpoints" / "tgn_uci.pt"}
#: A tiny explain.py run (fresh TGAT weights unless the case names a checkpoint).
TINY_EXPLAIN = ["debug=default", "model=tgat", "checkpoint=null", "n_events=1",
                "progress=false", "picture=false"]
#: A tiny train_explainer.py run (the case names the model checkpoint).
TINY_EXPLAINER = ["dataset=synthetic", "dataset.num_nodes=30", "dataset.num_events=300",
                  "model=tgat", "n_train_events=4", "n_val_events=2", "epochs=1",
                  "progress=false"]
#: (script's config, options with {pg}, {tm}, {model} and {cut_pg}, {cut_model} (truncated
#: copies), the line's start): each is one ``error:`` line, before any event or epoch.
CHECKPOINT_CASES = [
    ("explain", ["explainer=pgexplainer", "explainer.checkpoint={tm}"],
     "error: {tm} is a TempME checkpoint, not a PGExplainer checkpoint: pass it as "
     "explainer=tempme explainer.checkpoint={tm}; explainer=pgexplainer (and T-GNNExplainer's "
     "pgexplainer and mlp navigators) reads a PGExplainer checkpoint"),
    ("explain", ["explainer=tgnnexplainer", "explainer.navigator=mlp",
                 "explainer.checkpoint={tm}"],
     "error: {tm} is a TempME checkpoint, not a PGExplainer checkpoint: pass it as "
     "explainer=tempme explainer.checkpoint={tm}; "),
    ("explain", ["explainer=tgnnexplainer", "explainer.checkpoint={model}"],
     "error: {model} is a model checkpoint, not a PGExplainer checkpoint: pass it as "
     "checkpoint={model}; "),
    ("explain", ["explainer=tempme", "explainer.checkpoint={pg}"],
     "error: {pg} is a PGExplainer checkpoint, not a TempME checkpoint: pass it as "
     "explainer=pgexplainer explainer.checkpoint={pg} (or as T-GNNExplainer's navigator, "
     "explainer=tgnnexplainer explainer.checkpoint={pg}); explainer=tempme reads a TempME "
     "checkpoint"),
    ("explain", ["checkpoint={tm}"],
     "error: {tm} is a TempME checkpoint, not a model checkpoint: pass it as explainer=tempme "
     "explainer.checkpoint={tm}; checkpoint= (the model) reads a model checkpoint"),
    ("explain", ["explainer=pgexplainer", "explainer.checkpoint={cut_pg}"],
     "error: PGExplainer checkpoint {cut_pg} is truncated: it begins as a torch checkpoint "
     "but its archive ends early (an interrupted copy or download, or a full disk); "),
    ("explain", ["checkpoint={cut_model}"],
     "error: model checkpoint {cut_model} is truncated: it begins as a torch checkpoint but "
     "its archive ends early"),
    ("train_explainer", ["checkpoint={pg}"],
     "error: {pg} is a PGExplainer checkpoint, not a model checkpoint: pass it as "
     "explainer=pgexplainer explainer.checkpoint={pg}"),
    ("train_explainer", ["explainer=tempme", "checkpoint={cut_model}"],
     "error: model checkpoint {cut_model} is truncated: "),
]


@pytest.mark.parametrize(("name", "args", "words"), CHECKPOINT_CASES,
                         ids=[f"{n}:{' '.join(a)}" for n, a, _ in CHECKPOINT_CASES])
def test_a_checkpoint_of_another_kind_or_truncated_is_one_line_naming_it(
        name: str, args: list[str], words: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A TempME given as a PGExplainer was "a PGExplainer checkpoint of format 1 … add
    out_dir=checkpoints overwrite=true to replace it", which overwrote the committed one; a
    truncated one ended in torch's message cut mid-sentence."""
    from cftgnn.explain import training

    files = {k: str(v) for k, v in GIVEN.items()}
    for key, source in (("cut_pg", GIVEN["pg"]), ("cut_model", GIVEN["model"])):
        cut = tmp_path / f"cut_{source.name}"
        cut.write_bytes(source.read_bytes()[: source.stat().st_size // 2])
        files[key] = str(cut)
    before = {p: p.read_bytes() for p in GIVEN.values()}
    options = [a.format(**files) for a in args]
    if name == "explain":
        cfg = config("explain", *TINY_EXPLAIN, *options, f"out_dir={tmp_path / 'out'}")
        main: Callable[..., Any] = pipeline.run
    else:
        cfg = config("train_explainer", *TINY_EXPLAINER, *options,
                     f"+run_dir={tmp_path / 'run'}")
        main = training.run
    message = refused(capsys, main, cfg)
    assert message.startswith(words.format(**files)), message
    assert "overwrite" not in message and "format 1" not in message
    assert not (tmp_path / "out" / "records").exists()
    assert not list((tmp_path / "run").glob("*.pt"))  # no state, no trained explainer
    assert {p: p.read_bytes() for p in GIVEN.values()} == before
