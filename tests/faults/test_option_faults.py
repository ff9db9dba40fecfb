"""Bad options of the Hydra entry points end in one ``error:`` line and exit status 2 within a
second: checked on the composed config before torch_geometric (or torch) loads and before
Hydra makes a run directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from testsupport.errors import script_refused as refused

from cftgnn.cli import main_guard
from cftgnn.runs.options import check_explain_options

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


CASES = [
    ("explain.py", ["nevents=4"], "unknown option 'nevents' (did you mean 'n_events'?)"),
    ("explain.py", ["n_events=abc"], "n_events must be an integer"),
    ("explain.py", ["mode=bogus"], "mode must be one of approximate, exact, auto"),
    ("explain.py", ["history=bogus"], "history must be one of"),
    ("explain.py", ["curves=every"], "curves must be one of auto, none, common, all, got 'every'"),
    ("explain.py", ["protocol=bogus"], "protocol must be one of common, tgnnexplainer, tempme, "
     "temgx, all, or a list of them"),
    ("explain.py", ["protocol=[common,tmpme]"], "got ['common', 'tmpme']"),
    ("explain.py", ["sample.prediction=bogus"], "sample.prediction must be one of"),
    ("explain.py", ["replay.cone=sparse"],
     "error: replay.cone must be one of auto, rows, dense, got 'sparse'"),
    ("explain.py", ["logger=wandb", "logger.mode=bogus"], "logger.mode must be one of"),
    ("explain.py", ["sweep=baselines"], "sweep=baselines is a sweep, which runs only with -m"),
    ("explain.py", ["+n_evnts=2"], "unknown option 'n_evnts' (did you mean 'n_events'?)"),
    ("explain.py", ["+strategy.bogus=1", "n_events=1"],
     "error: unknown option bogus of ClosestStrategyParams (it takes none)"),
    ("explain.py", ["strategy=random", "strategy.seed=-1"],
     "error: seed must be an integer >= 0, got -1"),
    ("explain.py", ["strategy=random", "strategy.seed=1.5"],
     "error: seed must be an integer >= 0, got 1.5"),
    ("explain.py", ["strategy=random", "+strategy.sed=1"],
     "error: unknown option sed of RandomStrategyParams (known: seed)"),
    ("benchmark_memory.py", ["strategy=one_best", "+strategy.depth=2"],
     "error: unknown option depth of OneBestStrategyParams (it takes none)"),
    # -m: every job of the sweep is checked, not only the first values (the job is named)
    ("explain.py", ["-m", "explainer=choice(greedy,bogus)", "n_events=1"],
     "error: unknown explainer 'bogus' (choose from: attention, beam, cftgnn, exhaustive, "),
    ("explain.py", ["-m", "explainer.width=5,-1", "explainer=beam", "n_events=1"],
     "error: width must be an integer >= 1, got -1 (job #1 of the sweep's 2: "
     "explainer.width=-1)"),
    ("explain.py", ["-m", "strategy=random", "strategy.seed=range(1,-2,-2)"],
     "error: seed must be an integer >= 0, got -1 (job #1 of the sweep's 2: strategy.seed=-1)"),
    # the first job's error names the job too (its config is the command line's own)
    ("explain.py", ["-m", "explainer=greedy,beam", "explainer.width=3"],
     "error: unknown option 'explainer.width' (job #0 of the sweep's 2: explainer=greedy)"),
    ("explain.py", ["-m", "sweep=strategies", "explainer=greedy,beam", "explainer.width=3"],
     "error: unknown option 'explainer.width' (job #0 of the sweep's 8: strategy=random "
     "explainer=greedy)"),
    ("explain.py", ["-m", "n_events=abc,2"],
     "error: n_events must be an integer >= 0, got 'abc' (job #0 of the sweep's 2: "
     "n_events=abc)"),
    ("explain.py", ["-m", "sweep=baselines", "shard=5", "num_shards=2", "n_events=2"],
     "error: shard must be in [0, num_shards), got shard=5 num_shards=2 (job #0 of the "
     "sweep's 44: dataset=uci model=tgn baseline=random)"),
    ("explain.py", ["-m", "sweep=it_max", "explainer=greedy"],
     "error: unknown option 'explainer.it_max' (job #0 of the sweep's 8: strategy=closest "
     "explainer.it_max=30)"),
    ("explain.py", ["shard=2", "num_shards=2"],
     "error: shard must be in [0, num_shards), got shard=2 num_shards=2"),
    ("explain.py", ["-m", "sweep=baselines", "shard=0,7", "num_shards=2", "n_events=2"],
     "error: shard must be in [0, num_shards), got shard=7 num_shards=2 (job #1 of the "
     "sweep's 88: dataset=uci model=tgn baseline=random shard=7)"),
    ("explain.py", ["-m", "n_events=interval(1,2)"],
     "error: BasicSweeper does not support sweep type : INTERVAL_SWEEP"),
    ("train.py", ["epochs=0"], "epochs must be an integer >= 1"),
    ("train.py", ["tgb.hits_k=0"], "tgb.hits_k must be an integer >= 1"),
    ("train.py", ["tgb.max_pairs=1.5"], "tgb.max_pairs must be an integer >= 1, got 1.5"),
    ("train_explainer.py", ["explainer=attention"],
     "train_explainer.py trains explainer=pgexplainer or explainer=tempme, the explainers "
     "that learn (got explainer=attention)"),
    ("train_explainer.py", ["batch_size=0"], "batch_size must be an integer >= 1"),
    ("benchmark_explainers.py", ["pairs=[uci-graphmix]"], "unknown model 'graphmix'"),
    ("benchmark_explainers.py", ["explainers=[attentoin]"], "unknown explainer 'attentoin'"),
    ("benchmark_oracle.py", ["batch_size=0"], "batch_size must be an integer >= 1"),
    ("benchmark_index.py", ["ks=[0]"], "ks must be a list of integers >= 1"),
    ("benchmark_memory.py", ["streams=[[0,5]]"], "streams must hold [num_events, num_nodes]"),
    ("benchmark_tail.py", ["max_size=0"], "max_size must be an integer >= 1"),
    ("benchmark_quality.py", ["n_events=1.5"], "n_events must be an integer >= 1"),
    ("dataset_info.py", ["dataset=uci2"], "unknown dataset 'uci2'"),
    # the command line as Hydra's argument parser reads it: key=value, -m before the overrides
    ("explain.py", ["n_events=2", "-m", "sweep=shards"],
     "error: -m goes first, before the overrides (options are key=value): python "
     "scripts/explain.py -m n_events=2 sweep=shards"),
    ("explain.py", ["--n_events", "3"],
     "error: options are key=value, not flags: write n_events=3 instead of '--n_events 3' "
     "(-m, for a sweep, goes first, before the overrides)"),
    ("train.py", ["--epochs=2"], "write epochs=2 instead of '--epochs=2'"),
    ("benchmark_tail.py", ["max_size=2", "--multirun", "n_events=3"],
     "error: --multirun goes first, before the overrides (options are key=value): python "
     "scripts/benchmark_tail.py --multirun max_size=2 n_events=3"),
    # an output that cannot be written: refused before the measurement, not after it
    ("benchmark_explainers.py", ["out=/dev/null/x.json"],
     "error: out '/dev/null/x.json' cannot be written (/dev/null is not a folder); choose a "
     "writable file"),
    ("benchmark_oracle.py", ["out=/dev/null/x.json"], "error: out '/dev/null/x.json' cannot"),
    ("benchmark_tail.py", ["out=/dev/null/x.json"], "error: out '/dev/null/x.json' cannot"),
    ("benchmark_memory.py", ["out=/dev/null/x.json"], "error: out '/dev/null/x.json' cannot"),
    ("benchmark_quality.py", ["out=/dev/null/q"],
     "error: out '/dev/null/q' cannot be written (/dev/null is not a folder); choose a "
     "writable folder"),
    ("benchmark_gpu.py", ["devices=[cpu,cpu]", "out_dir=/dev/null/g"],
     "error: out_dir '/dev/null/g' cannot be written (/dev/null is not a folder)"),
    ("train.py", ["out_dir=/dev/null/t"], "error: out_dir '/dev/null/t' cannot be written"),
    ("train_explainer.py", ["out_dir=/dev/null/t"],
     "error: out_dir '/dev/null/t' cannot be written"),
    ("explain.py", ["-m", "out_dir=/dev/null/e", "n_events=1,2"],
     "error: out_dir '/dev/null/e' cannot be written (/dev/null is not a folder); choose a "
     "writable folder (job #0 of the sweep's 2: n_events=1)"),
    # a checkpoint path that is not a file: refused before the imports, not after them
    ("explain.py", ["checkpoint=checkpoints/tgn_ucii.pt"],
     "error: checkpoint 'checkpoints/tgn_ucii.pt' does not exist (checkpoint=auto: the "
     "committed one, checkpoint=null: fresh weights)"),
    ("explain.py", ["checkpoint=/"], "error: checkpoint '/' is a folder, not a checkpoint file"),
    ("explain.py", ["robustness=true", "robust.checkpoint=seed1.pt"],
     "error: robust.checkpoint 'seed1.pt' does not exist"),
    ("train_explainer.py", ["checkpoint=tgn.pt"], "error: checkpoint 'tgn.pt' does not exist"),
    ("benchmark_oracle.py", ["checkpoint=tgn.pt"], "error: checkpoint 'tgn.pt' does not exist"),
    ("benchmark_tail.py", ["checkpoint=tgn.pt"], "error: checkpoint 'tgn.pt' does not exist"),
    ("benchmark_quality.py", ["checkpoint=tgn.pt"], "error: checkpoint 'tgn.pt' does not exist"),
    ("benchmark_gpu.py", ["devices=[cpu,cpu]", "checkpoint=tgn.pt"],
     "error: checkpoint 'tgn.pt' does not exist"),
    ("benchmark_gpu.py", ["devices=[cpu,cpu]", "batch_sizes=[{pair:uci-tgx,size:5}]"],
     "error: batch_sizes[0].pair entry 'uci-tgx': unknown model 'tgx'"),
    ("benchmark_gpu.py", ["devices=[cpu,cpu]", "searches=[{pair:wiki-tgn,event:1,max_size:2}]"],
     "error: searches[0].pair entry 'wiki-tgn': unknown dataset 'wiki'"),
]


@pytest.mark.parametrize(("name", "args", "words"), CASES,
                         ids=[f"{n}:{' '.join(a)}" for n, a, _ in CASES])
def test_a_bad_option_is_one_line_before_torch_geometric_and_any_run_directory(
        name, args, words, tmp_path):
    line, imported = refused(name, *args, cwd=tmp_path)
    assert words in line
    assert "hydra" in imported  # the import log was read (the check is not vacuous)
    assert "torch_geometric" not in imported and "torch" not in imported
    assert list(tmp_path.iterdir()) == []  # no outputs/, no .hydra/


#: The JIT switch's refusal (``cftgnn.cli.environment_problem``).
JIT_MAYBE = ("error: environment variable CFTGNN_JIT must be one of 1, true, yes, on, 0, false, "
             "no, off, got 'maybe'")
#: Bad values of the project's environment variables: every script refuses them in one line,
#: the argparse ones too (``friendly_errors``); the data folder before any download is tried.
ENV_CASES = [
    ("rescore.py", ["run", "--protocol", "common"], "CFTGNN_JIT", "maybe", JIT_MAYBE),
    ("report.py", ["run"], "CFTGNN_JIT", "maybe", JIT_MAYBE),
    ("benchmark_oracle_versions.py", [], "CFTGNN_JIT", "maybe", JIT_MAYBE),
    ("dataset_info.py", ["dataset=uci"], "CFTGNN_DATA_DIR", "{tmp}/no_data",
     "error: CFTGNN_DATA_DIR names '{tmp}/no_data', which does not exist; create it, point "
     "CFTGNN_DATA_DIR at the folder of the data files, or unset it (then <project>/data is "
     "used, and made for downloads)"),
    ("dataset_info.py", ["dataset=wikipedia"], "CFTGNN_DATA_DIR", "{tmp}/a_file",
     "error: CFTGNN_DATA_DIR names '{tmp}/a_file', which is a file, not a folder; point it at "
     "the folder of the data files"),
]


@pytest.mark.parametrize(("name", "args", "variable", "value", "expected"), ENV_CASES,
                         ids=[f"{n}:{v}={x}" for n, _, v, x, _ in ENV_CASES])
def test_a_bad_environment_variable_is_one_line_in_every_script(
        name, args, variable, value, expected, tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("not a folder")
    monkeypatch.setenv(variable, value.format(tmp=tmp_path))
    line, _ = refused(name, *args, cwd=tmp_path)
    assert line == expected.format(tmp=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["a_file"]  # no data folder made


def test_every_script_runs_under_the_friendly_errors():
    """``friendly_errors`` checks the environment first: a script outside it (``rescore.py``
    once) took ``CFTGNN_JIT=maybe``."""
    scripts = sorted(p for p in (ROOT / "scripts").glob("*.py") if p.name != "_ctrl_c.py")
    outside = [p.name for p in scripts
               if "friendly_errors(" not in (text := p.read_text()) and "main_guard(" not in text]
    assert len(scripts) > 15 and outside == []


def test_a_sweep_is_every_combination_of_its_values_as_hydra_runs_them():
    from hydra import compose, initialize_config_dir

    from cftgnn.cli import sweep_jobs

    argv = ["-m", "sweep=strategies", "n_events=choice(1,2)", "explainer=glob([gre*,be*])"]
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=["sweep=strategies"], return_hydra_config=True)
    message, jobs = sweep_jobs(argv, cfg, CONF)
    assert message is None and len(jobs) == 4 * 2 * 2
    assert jobs[0] == ["strategy=random", "sweep=strategies", "n_events=1", "explainer=beam"]
    assert jobs[-1] == ["strategy=one_best", "sweep=strategies", "n_events=2",
                        "explainer=greedy"]
    assert sweep_jobs(argv[1:], cfg, CONF) == (None, [])  # without -m: no sweep


def test_a_sweep_whose_every_job_is_good_starts(capsys):
    ran: list[int] = []
    main_guard(lambda: ran.append(1), CONF, argv=["-m", "explainer=greedy,beam",
                                                 "strategy=random,recent", "n_events=1,2"],
               config_name="explain", check=check_explain_options)
    assert ran == [1]
    with pytest.raises(SystemExit) as refused_sweep:  # strategy=recent has no seed
        main_guard(lambda: ran.append(2), CONF, config_name="explain",
                   argv=["-m", "strategy=random,recent", "++strategy.seed=1"],
                   check=check_explain_options)
    assert refused_sweep.value.code == 2 and ran == [1]
    assert capsys.readouterr().err == (
        "error: unknown option seed of RecentStrategyParams (it takes none) (job #1 of the "
        "sweep's 2: strategy=recent)\n")


def test_a_run_directory_that_cannot_be_made_is_refused(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    line, _ = refused("explain.py", f"hydra.run.dir={a_file}/x", cwd=tmp_path)
    assert "hydra.run.dir" in line and "is not a folder" in line
    if Path("/proc/self").is_dir():  # Linux: /proc passes os.access for root, yet takes no mkdir
        line, _ = refused("explain.py", "hydra.run.dir=/proc/x", cwd=tmp_path)
        assert line.startswith("error: hydra.run.dir '/proc/x' cannot be created")
        line, _ = refused("explain.py", cwd=Path("/proc"))  # the default outputs/explain/...
        assert line == ("error: hydra.run.dir 'outputs/explain' cannot be created (no folder "
                        "can be made in /proc: No such file or directory)")
        line, _ = refused("benchmark_oracle.py", "out=/proc/x/y.json", cwd=tmp_path)
        assert line == ("error: out '/proc/x/y.json' cannot be written (no file can be made in "
                        "/proc: No such file or directory); choose a writable file")
    assert list(tmp_path.iterdir()) == [a_file]


def test_the_option_checks_import_neither_torch_nor_the_models():
    code = ("import sys, cftgnn.cli, cftgnn.config, cftgnn.runs.options, "
            "cftgnn.training.options, cftgnn.benchmarks.options; "
            "print(sorted(m for m in ('torch', 'torch_geometric', 'pandas') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_the_lazy_packages_still_export_their_names():
    from cftgnn import oracle, runs
    from cftgnn.scoring.groups import PredictionGroup

    assert oracle.Oracle.__name__ == "Oracle" and oracle.is_flip.__name__ == "is_flip"
    assert runs.PredictionGroup is PredictionGroup
    with pytest.raises(AttributeError):
        _ = oracle.Orcale


def _seen_argv(monkeypatch, *args: str) -> list[str]:
    """``sys.argv`` as ``main`` sees it after ``main_guard`` for ``explain.py args``."""
    monkeypatch.setattr(sys, "argv", ["explain.py", *args])
    seen: list[str] = []
    main_guard(lambda: seen.extend(sys.argv), CONF, config_name="explain",
               run_dir_from="out_dir")
    return seen[1:]


def test_the_run_directory_follows_out_dir(monkeypatch, tmp_path):
    out = tmp_path / "my run, 1"
    assert _seen_argv(monkeypatch, f"out_dir='{out}'") == \
        [f"out_dir='{out}'", f"hydra.run.dir='{out}'"]
    given = f"hydra.run.dir={tmp_path / 'mine'}"
    assert _seen_argv(monkeypatch, f"out_dir={out}", given) == [f"out_dir={out}", given]
    assert _seen_argv(monkeypatch, "-m", f"out_dir={out}") == ["-m", f"out_dir={out}"]
    assert _seen_argv(monkeypatch) == []
    assert not out.exists()  # the probe leaves nothing behind


@pytest.mark.parametrize(("args", "job"), [
    (["-m", "model=tgn,tgx", "n_events=1"], " (job #1 of the sweep's 2: model=tgx)"),
    (["-m", "model=tgx,tgn", "n_events=1"], " (job #0 of the sweep's 2: model=tgx)"),
    (["-m", "model=choice(tgn,tgx)", "n_events=1"], " (job #1 of the sweep's 2: model=tgx)"),
    (["-m", "model=tgx", "n_events=1,2"], ""),  # every job's: the command line's, no job
    (["model=tgx"], ""),
])
def test_an_unknown_swept_choice_names_its_job_however_the_sweep_is_written(args, job,
                                                                             tmp_path):
    """``model=tgn,tgx`` named no job while ``model=choice(tgn,tgx)`` did."""
    line, _ = refused("explain.py", *args, cwd=tmp_path)
    assert line == ("error: unknown model 'tgx' (choose from: dygformer, graphmixer, pyg_tgn, "
                    f"tgat, tgn, tgn2l){job}")
