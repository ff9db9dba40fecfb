"""``notebooks/analysis.ipynb`` runs top to bottom on a tiny synthetic run and is stored clean."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.runs import pipeline

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "analysis.ipynb"


def test_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def test_notebook_runs_on_a_synthetic_run(tmp_path, monkeypatch):
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("explain", overrides=[
            "debug=default", "checkpoint=null", "model=tgat", "progress=false",
            "sample.prediction=any", "n_events=3", "explainer.it_max=20",
            f"out_dir={tmp_path / 'sweep' / 'run'}"])
    pipeline.run(cfg)
    monkeypatch.setenv("CFTGNN_RUNS", str(tmp_path / "sweep"))
    # the kernel imports this checkout's package, wherever it is installed from
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 4  # three report plots and the explanation picture
    assert any("text/markdown" in o.get("data", {}) for o in outputs)
    assert any(o.get("name") == "stdout" and "logit" in o.get("text", "") for o in outputs)
