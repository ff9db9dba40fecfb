"""docs/add_explainer.md: its module, YAML file and test, written out as the page says, make a
working explainer — its own test passes, and ``scripts/explain.py`` runs it end to end from a
config folder outside the package (``hydra.searchpath``)."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "add_explainer.md"
BLOCK = re.compile(r"```(?:python|yaml)\n# file: (\S+)\n(.*?)```", re.S)


def write_guide_files(root: Path) -> dict[str, Path]:
    """Every ``# file: <path>`` block of the guide, written under ``root``."""
    files: dict[str, Path] = {}
    for name, body in BLOCK.findall(GUIDE.read_text()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# file: {name}\n{body}")
        files[name] = path
    (root / "my_explainers" / "__init__.py").touch()
    return files


def test_the_guide_holds_one_module_one_yaml_and_one_test(tmp_path: Path) -> None:
    files = write_guide_files(tmp_path)
    assert sorted(files) == ["conf/explainer/prefix.yaml", "my_explainers/prefix.py",
                             "tests/test_prefix.py"]


def test_the_guides_own_test_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_guide_files(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("my_explainers")]:
        monkeypatch.delitem(sys.modules, name)
    spec = importlib.util.spec_from_file_location("guide_test_prefix",
                                                  tmp_path / "tests" / "test_prefix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.test_prefix_answers_the_shortest_flipping_prefix()


def _explain(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
           "WANDB_MODE": "offline"}
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "explain.py"), "debug=default",
         "checkpoint=null", "explainer=prefix", f"hydra.searchpath=[file://{tmp_path}/conf]",
         "progress=false", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_explain_py_runs_the_guides_explainer_end_to_end(tmp_path: Path) -> None:
    write_guide_files(tmp_path)
    out = tmp_path / "run"
    done = _explain(tmp_path, "n_events=4", "sample.prediction=any", f"out_dir={out}")
    assert done.returncode == 0, done.stderr
    records = pd.concat([pd.read_parquet(f) for f in sorted((out / "records").glob("*.parquet"))])
    assert len(records) == 4 and set(records["explainer"]) == {"prefix"}
    run = json.loads((out / "run.json").read_text())
    assert run["explainer"]["_target_"] == "my_explainers.prefix.PrefixExplainer"
    for row in records.itertuples():
        if row.is_counterfactual:  # every answer it reports flips the exact logit
            assert row.original_logit * row.final_logit < 0
            assert list(row.explanation) == list(row.counterfactuals[0])


def test_its_options_are_checked_like_the_built_in_ones(tmp_path: Path) -> None:
    write_guide_files(tmp_path)
    done = _explain(tmp_path, "explainer.longest=1.5", f"out_dir={tmp_path / 'bad'}")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: longest must be an integer >= 1, got 1.5"]
    done = _explain(tmp_path, "explainer=prefx", f"out_dir={tmp_path / 'bad'}")
    assert done.returncode == 2 and "unknown explainer 'prefx'" in done.stderr
    assert "prefix" in done.stderr  # the user's own file is among the choices


def test_a_search_path_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "explain.py"), "debug=default",
         "checkpoint=null", f"hydra.searchpath=[file://{tmp_path}/missing]",
         f"out_dir={tmp_path / 'run'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: hydra.searchpath folder '{tmp_path}/missing' does not exist"]
    assert not (tmp_path / "run").exists()
