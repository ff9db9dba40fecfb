"""docs/add_model.md, docs/add_dataset.md, docs/add_metric.md: the files each guide shows,
written out as the page says, work — their own tests pass, and ``scripts/explain.py`` runs the
model and the dataset end to end from a config folder outside the package
(``hydra.searchpath``). docs/add_explainer.md has its own test
(tests/explain/test_add_explainer_guide.py)."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cftgnn.runs.records import read_records

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```(?:python|yaml)\n# file: (\S+)\n(.*?)```", re.S)


def write_guide(guide: str, root: Path) -> list[str]:
    """Every ``# file: <path>`` block of docs/<guide>.md, written under ``root``."""
    names = []
    for name, body in BLOCK.findall((ROOT / "docs" / f"{guide}.md").read_text()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# file: {name}\n{body}")
        if path.suffix == ".py" and not name.startswith("tests/"):
            (path.parent / "__init__.py").touch()
        names.append(name)
    return sorted(names)


def run_guide_tests(root: Path, test_file: str, monkeypatch: pytest.MonkeyPatch,
                    tmp_path: Path) -> int:
    """Import the guide's test module and call each of its tests; the number run."""
    monkeypatch.syspath_prepend(str(root))
    package = test_file.split("/")[-1].removeprefix("test_").removesuffix(".py")
    for name in [m for m in sys.modules if m.startswith("my_")]:
        monkeypatch.delitem(sys.modules, name)
    spec = importlib.util.spec_from_file_location(f"guide_{package}", root / test_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = [f for n, f in vars(module).items() if n.startswith("test_") and callable(f)]
    for test in tests:
        params = inspect.signature(test).parameters
        test(**({"tmp_path": tmp_path} if "tmp_path" in params else {}))
    return len(tests)


def explain(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(ROOT)]),
           "WANDB_MODE": "offline"}
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "explain.py"), "checkpoint=null",
         f"hydra.searchpath=[file://{root}/conf]", "progress=false", "n_events=3",
         "sample.prediction=any", "explainer=greedy", *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_add_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "guide"
    assert write_guide("add_model", root) == ["conf/model/activity.yaml",
                                               "my_models/activity.py", "tests/test_activity.py"]
    assert run_guide_tests(root, "tests/test_activity.py", monkeypatch, tmp_path) == 1
    out = tmp_path / "run"
    done = explain(root, "debug=default", "model=activity", f"out_dir={out}")
    assert done.returncode == 0, done.stderr
    records = read_records(out)
    assert len(records) == 3 and set(records["model"]) == {"activitymodel"}  # the class name
    for row in records.itertuples():  # every answer it reports flips the exact logit
        assert not row.is_counterfactual or row.original_logit * row.final_logit < 0


def test_add_a_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "guide"
    assert write_guide("add_dataset", root) == ["conf/dataset/triples.yaml",
                                                 "my_datasets/triples.py", "tests/test_triples.py"]
    assert run_guide_tests(root, "tests/test_triples.py", monkeypatch, tmp_path) == 2
    rng = np.random.default_rng(0)
    events = tmp_path / "events.txt"
    events.write_text("".join(f"{rng.integers(0, 25)} {rng.integers(25, 40)} {t}\n"
                              for t in np.sort(rng.integers(0, 10_000, 400))))
    out = tmp_path / "run"
    done = explain(root, "dataset=triples", f"dataset.path={events}", f"out_dir={out}",
                   f"paths.cache_dir={tmp_path / 'cache'}")
    assert done.returncode == 0, done.stderr
    records = read_records(out)
    assert len(records) == 3 and set(records["dataset"]) == {"triples"}
    done = explain(root, "dataset=triples", f"dataset.path={tmp_path / 'absent.txt'}",
                   f"out_dir={tmp_path / 'bad'}")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: dataset.path '{tmp_path / 'absent.txt'}' is not a file"]


def test_add_a_metric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "guide"
    assert write_guide("add_metric", root) == ["my_metrics/small_flips.py",
                                                "tests/test_small_flips.py"]
    assert run_guide_tests(root, "tests/test_small_flips.py", monkeypatch, tmp_path) == 2
    from my_metrics.small_flips import small_flip_rate, small_flip_rates  # the guide's

    out = tmp_path / "run"
    (root / "conf").mkdir()  # explain() names it; the metric needs no config
    done = explain(root, "debug=default", f"out_dir={out}")
    assert done.returncode == 0, done.stderr
    records = read_records(out)
    rates = small_flip_rates(records, max_size=3)
    ok = records[records["status"] == "ok"]
    assert set(rates.index) == set(ok["group"])
    everything = small_flip_rate(ok["is_counterfactual"], ok["size"], max_size=10**6)
    flipped = float(np.mean(ok["is_counterfactual"]))
    assert everything == pytest.approx(flipped)  # no size bound: the fidelity+ of the run
