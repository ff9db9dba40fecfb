"""``explain.py`` end to end on the debug stream with every explainer, for the models the
DyGLib benchmark trains: trained for an epoch by ``train.py``'s ``run``, with a
PGExplainer and a TempME trained for them by ``train_explainer.py``'s, every reported counterfactual
checked against a fresh replay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import cftgnn.config  # noqa: F401
from cftgnn.explain import training
from cftgnn.oracle.engine import naive_logit
from cftgnn.runs import pipeline
from cftgnn.runs.records import read_records
from cftgnn.training import loop
from cftgnn.training.resolve import resolve_model

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
MODELS = ["graphmixer", "dygformer"]
EXPLAINERS = sorted(p.stem for p in (CONF / "explainer").glob("*.yaml"))
#: The debug stream: 300 synthetic events of 30 nodes (``debug=default`` of explain.py).
DEBUG = ["dataset=synthetic", "dataset.num_nodes=30", "dataset.num_events=300",
         "progress=false"]


def _compose(name: str, *overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose(name, overrides=[*DEBUG, *overrides])


@pytest.fixture(scope="module", params=MODELS)
def trained(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, object]:
    """A model checkpoint of the debug stream (one epoch), and a PGExplainer and a TempME
    for it."""
    model = str(request.param)
    root = tmp_path_factory.mktemp(model)
    loop.run(_compose("train", f"model={model}", "model.batch_size=25", "epochs=1",
                      f"out_dir={root}"))
    ckpt = root / f"{model}_synthetic.pt"
    training.run(_compose("train_explainer", f"model={model}", f"checkpoint={ckpt}",
                          "n_train_events=8", "n_val_events=4", "batch_size=4", "m_max=8",
                          "epochs=1", f"+run_dir={root / 'run'}", f"out_dir={root}"))
    training.run(_compose("train_explainer", "explainer=tempme", f"model={model}",
                          f"checkpoint={ckpt}", "n_train_events=8", "batch_size=4",
                          "m_max=8", "epochs=1", "tempme.n_walks=4", "tempme.hidden=8",
                          "tempme.n_val_events=2", "tempme.null_events=4",
                          f"+run_dir={root / 'run_tempme'}", f"out_dir={root}"))
    return {"model": model, "checkpoint": ckpt,
            "pg": root / f"pgexplainer_{model}_synthetic.pt",
            "tempme": root / f"tempme_{model}_synthetic.pt"}


@pytest.mark.parametrize("explainer", EXPLAINERS)
def test_every_explainer_explains_the_model(trained: dict[str, object], explainer: str,
                                            tmp_path: Path) -> None:
    model, ckpt = trained["model"], trained["checkpoint"]
    trained_mlp = ([f"explainer.checkpoint={trained['pg']}"]
                   if explainer in ("pgexplainer", "tgnnexplainer") else
                   [f"explainer.checkpoint={trained['tempme']}"] if explainer == "tempme"
                   else [])
    cfg = _compose("explain", f"model={model}", f"checkpoint={ckpt}",
                   f"explainer={explainer}", *trained_mlp, "sample.prediction=any",
                   "n_events=2", "m_max=8", f"out_dir={tmp_path}")
    table = pipeline.run(cfg)
    records = read_records(tmp_path)
    assert len(records) == 2 and not table.empty
    assert set(records.model) == {model} and set(records.explainer) == {explainer}
    stream = instantiate(cfg.dataset)
    fitted, _ = resolve_model(cfg.model, stream, str(ckpt), ".", "cpu", cfg.seed)
    for rec in records.itertuples():
        if rec.final_logit * rec.original_logit < 0:  # a flip is a flip of the fresh replay
            flipped = naive_logit(fitted, stream, rec.event_id, list(rec.explanation))
            assert flipped * rec.original_logit < 0


def test_explain_py_runs_the_model(trained: dict[str, object], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "explain.py"), "debug=default", "progress=false",
         f"model={trained['model']}", f"checkpoint={trained['checkpoint']}", "n_events=1",
         "sample.prediction=any", f"out_dir={tmp_path}"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(read_records(tmp_path)) == 1
