"""A bad ``explainer.*`` (or post-search) option, and a device the machine lacks, end in one
``error:`` line and exit status 2 before Hydra makes a run directory; the explainer's options
are checked by its own parameter declaration without loading torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from testsupport.errors import one_line, script_refused

from cftgnn.cli import main_guard
from cftgnn.errors import ExplainerError, user_error
from cftgnn.explain.params import (
    LIGHT_PARAMS,
    check_explainer_options,
    check_strategy_options,
    explainer_params,
    strategy_params,
)
from cftgnn.explain.strategies import RandomStrategy
from cftgnn.runs.options import check_explain_options

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
EXPLAINERS = sorted(p.stem for p in (CONF / "explainer").glob("*.yaml"))
STRATEGIES = sorted(p.stem for p in (CONF / "strategy").glob("*.yaml"))

CASES = [
    ("explain.py", ["explainer=greedy", "explainer.max_iterations=-1", "out_dir=out"],
     "error: max_iterations must be an integer >= 0 or null, got -1"),
    ("explain.py", ["explainer=cftgnn", "explainer.backprop=bogus"],
     "error: backprop must be one of"),
    ("explain.py", ["explainer=tgnnexplainer", "explainer.max_time_s=abc"],
     "error: max_time_s must be a number >= 0 or null, got 'abc'"),
    ("explain.py", ["explainer=tempme", "explainer.seed=-1"],
     "error: seed must be an integer >= 0, got -1"),
    ("explain.py", ["explainer=temgx", "explainer.trd_scale=0"],
     "error: trd_scale must be a number > 0, got 0.0"),
    ("explain.py", ["explainer=temgx", "+explainer.sparsity=5"],
     "error: unknown option sparsity of TemGXParams (known: alpha,"),
    ("explain.py", ["explainer=temgx", "explainer.time_scale=weeks"],
     "error: time_scale must be one of steps | seconds | hours | days, got 'weeks'"),
    ("explain.py", ["explainer=pgexplainer", "+explainer.hiden=8"],
     "error: unknown option hiden of PGExplainerParams (known: checkpoint,"),
    ("explain.py", ["baseline=search_plus", "explainer.width=0"],
     "error: width must be an integer >= 1, got 0"),
    ("explain.py", ["certify_max_time_s=-1"],
     "error: certify_max_time_s must be a number >= 0 or null"),
    ("train_explainer.py", ["explainer=tempme", "explainer.seed=1.5"],
     "error: seed must be an integer >= 0, got 1.5"),
    ("benchmark_memory.py", ["explainer.sample_size=0"],
     "error: sample_size must be an integer >= 1, got 0"),
]


@pytest.mark.parametrize(("name", "args", "words"), CASES,
                         ids=[f"{n}:{' '.join(a)}" for n, a, _ in CASES])
def test_a_bad_explainer_option_is_one_line_before_torch_and_any_run_directory(
        name, args, words, tmp_path):
    line, imported = script_refused(name, *args, cwd=tmp_path)
    assert line.startswith(words), line
    assert "hydra" in imported  # the import log was read (the check is not vacuous)
    assert "torch" not in imported and "torch_geometric" not in imported
    assert list(tmp_path.iterdir()) == []  # no out/, outputs/ or .hydra/


def test_every_explainer_is_checked_without_torch():
    """Each file of conf/explainer/: its defaults pass, a bad budget is refused, by its
    declaration, and torch never loads (one process for all of them)."""
    code = f"""
import sys
from omegaconf import OmegaConf
from cftgnn.errors import ExplainerError
from cftgnn.explain.params import check_explainer_options, explainer_params
for name in {EXPLAINERS!r}:
    node = OmegaConf.load({str(CONF / "explainer")!r} + "/" + name + ".yaml")
    assert explainer_params(node._target_) is not None, name
    check_explainer_options(node)
    node.max_iterations = -1
    try:
        check_explainer_options(node)
    except ExplainerError as exc:
        assert "max_iterations" in str(exc), (name, exc)
    else:
        raise AssertionError(name + ": max_iterations=-1 passed")
print(sorted(m for m in ("torch", "torch_geometric") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", EXPLAINERS)
def test_the_light_declaration_is_the_explainers_own(name):
    """``explainer_params`` finds the very class the explainer's constructor checks with, and
    the early check refuses what the constructor refuses, in the same words."""
    node = OmegaConf.load(CONF / "explainer" / f"{name}.yaml")
    module, _, cls = str(node._target_).rpartition(".")
    explainer = getattr(__import__(module, fromlist=[cls]), cls)
    assert explainer_params(node._target_) is explainer.Params
    node.max_time_s = -2.0
    with pytest.raises(ExplainerError) as early:
        check_explainer_options(node)
    with pytest.raises(Exception) as late:  # noqa: B017 (instantiate wraps the error)
        instantiate(node)
    assert str(user_error(late.value)) == str(early.value)


def test_the_light_table_names_only_explainers_of_conf():
    targets = {str(OmegaConf.load(CONF / "explainer" / f"{n}.yaml")._target_)
               for n in EXPLAINERS}
    assert set(LIGHT_PARAMS) <= targets


def test_an_explainer_the_check_cannot_find_is_left_to_its_constructor():
    check_explainer_options(OmegaConf.create({"_target_": "mine.Explainer", "x": -1}))
    check_explainer_options(OmegaConf.create({"x": -1}))
    check_explainer_options(None)
    assert explainer_params("cftgnn.explain.greedy.NoSuchExplainer") is None


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_strategys_early_check_is_its_constructors(name):
    """Each file of conf/strategy/: its keys are its declaration's defaults, and an unknown
    key is refused early in the words its constructor refuses it with."""
    node = OmegaConf.load(CONF / "strategy" / f"{name}.yaml")
    module, _, cls = str(node._target_).rpartition(".")
    strategy = getattr(__import__(module, fromlist=[cls]), cls)
    assert strategy_params(node._target_) is strategy.Params
    assert {k: v for k, v in node.items() if k != "_target_"} == strategy.Params.defaults()
    check_strategy_options(node)
    node.bogus = 1
    with pytest.raises(ExplainerError, match="unknown option bogus of") as early:
        check_strategy_options(node)
    with pytest.raises(Exception) as late:  # noqa: B017 (instantiate wraps the error)
        instantiate(node)
    assert str(user_error(late.value)) == str(early.value)


def test_a_strategy_of_the_users_with_arguments_of_its_own_is_left_to_its_constructor():
    class Seeded(RandomStrategy):  # inherits RandomStrategy's Params, takes another argument
        def __init__(self, offset: int) -> None:
            super().__init__(seed=offset + 1)

    target = f"{__name__}.Seeded"
    globals()["Seeded"] = Seeded
    try:
        assert strategy_params(target) is None
        check_strategy_options(OmegaConf.create({"_target_": target, "offset": 3}))
    finally:
        del globals()["Seeded"]
    check_strategy_options(OmegaConf.create({"_target_": "mine.Strategy", "x": -1}))
    check_strategy_options(None)


def test_a_device_this_machine_lacks_is_refused_before_the_run_directory(
        monkeypatch, tmp_path, capsys):
    """``device=cuda out_dir=X`` without CUDA (made so here): one line, exit status 2, and no
    ``X``; torch's answer is asked only for a device other than cpu or auto."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ran: list[bool] = []
    out = tmp_path / "x"
    for device in ("cuda", "cuda:1", "gpu"):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main_guard(lambda: ran.append(True), CONF, argv=[f"device={device}",
                                                             "debug=default", f"out_dir={out}"],
                       config_name="explain", check=check_explain_options,
                       run_dir_from="out_dir")
        assert exc.value.code == 2
        line = one_line(capsys.readouterr().err)
        assert (f"device={device} but CUDA is not available" in line if device != "gpu"
                else line == "error: unknown device 'gpu' (use cpu, cuda, cuda:N or auto)")
    assert not ran and list(tmp_path.iterdir()) == []


def test_cpu_and_auto_are_taken_without_torch():
    code = ("import sys; from omegaconf import OmegaConf; "
            "from cftgnn.training.options import device; "
            "[device(OmegaConf.create({'device': d})) for d in ('cpu', 'auto')]; "
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("package", ["cftgnn.explain", "cftgnn.explain.tempme",
                                     "cftgnn.explain.tgnnexplainer"])
def test_the_lazy_explain_packages_export_every_name(package):
    module = __import__(package, fromlist=["__all__"])
    assert all(getattr(module, name) is not None for name in module.__all__)
    with pytest.raises(AttributeError):
        _ = module.NoSuchName
