"""``scripts/rescore.py``: a protocol added to a finished run gives the records a run made with
it directly gives (bitwise), leaves every other column alone, resumes, and refuses bad input in
one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from testsupport.errors import refused

import cftgnn.config  # noqa: F401
from cftgnn.analysis.rescore import main
from cftgnn.runs import pipeline
from cftgnn.runs.records import read_records
from cftgnn.training.checkpoint import save_checkpoint
from cftgnn.training.resolve import resolve_model

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"

#: The columns a protocol adds (with ``curve_protocols`` and the seconds ``curve_time_s``).
ADDED = {
    "tempme": ("tempme_curve_logits", "tempme_neg_dst", "tempme_neg_logit",
               "tempme_neg_curve_logits"),
    "tgnnexplainer": ("tgnnexplainer_curve_logits",),
    "common": ("fid_curve_logits", "acc_curve_logits"),
    "temgx": ("temgx_curve_logits", "single_removal_logits"),
}


def cfg_for(out: Path, checkpoint: Path, *overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("explain", overrides=[
            "debug=default", f"checkpoint={checkpoint}", "progress=false",
            "sample.prediction=any", "n_events=2", "picture=false", f"out_dir={out}",
            *overrides])


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Callable[..., Path]:
    """``runs(explainer, *overrides)``: a tiny run of the debug stream with a checkpoint file
    (made once per module and arguments; copy it before changing it)."""
    root = tmp_path_factory.mktemp("rescore")
    cfg = cfg_for(root / "probe", root / "none.pt")
    stream = instantiate(cfg.dataset)
    model, _ = resolve_model(cfg.model, stream, None, ".", "cpu", cfg.seed)
    pt, _ = save_checkpoint(model, stream, root / "tgn_synthetic.pt")
    made: dict[tuple[str, ...], Path] = {}

    def run(explainer: str, *overrides: str) -> Path:
        key = (explainer, *overrides)
        if key not in made:
            out = root / f"run{len(made)}"
            pipeline.run(cfg_for(out, pt, f"explainer={explainer}", *overrides))
            made[key] = out
        return made[key]

    run.checkpoint = pt  # type: ignore[attr-defined]
    return run


def copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def _plain(value: object) -> object:
    """A record value as plain Python (nested lists), NaN as None."""
    if isinstance(value, list | tuple | np.ndarray):
        return [_plain(v) for v in value]
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _same(a: object, b: object) -> bool:
    """Bitwise equality of two record values (nested lists, NaN, None)."""
    return _plain(a) == _plain(b)


def _close(a: object, b: object) -> bool:
    """Equality of two lists of logits to the oracle's exactness (1e-5)."""
    x, y = np.asarray(_plain(a), dtype=float), np.asarray(_plain(b), dtype=float)
    return x.shape == y.shape and np.allclose(x, y, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("explainer, protocol, base", [
    ("perturb_one", "tempme", "protocol=common"),
    ("greedy", "tempme", "protocol=common"),
    ("greedy", "tgnnexplainer", "protocol=[common,tempme]"),
    ("perturb_one", "temgx", "protocol=common"),
    ("random", "common", "curves=none"),
    # a search scored by its coalitions: its tgnnexplainer curves are held, tempme is added
    ("tgnnexplainer explainer.navigator=perturb_one", "tempme",
     "protocol=[common,tgnnexplainer]"),
])
def test_a_rescored_run_holds_the_direct_runs_curves(runs, tmp_path, explainer, protocol, base):
    explainer, *options = explainer.split()
    before = runs(explainer, *options, base)
    rescored = copy(before, tmp_path / "run")
    held = json.loads((before / "run.json").read_text())
    have = [] if base == "curves=none" else held.get("protocols", ["common"])
    together = [p for p in ("common", "tgnnexplainer", "tempme", "temgx")
                if p in {*have, protocol}]
    direct = runs(explainer, *options, "curves=common", f"protocol=[{','.join(together)}]")

    assert main([str(rescored), "--protocol", protocol, "--no-progress"]) >= 1
    old, new, ref = (read_records(p) for p in (before, rescored, direct))
    ok = new.status == "ok"
    assert ok.any()
    assert new.event_id.tolist() == ref.event_id.tolist() == old.event_id.tolist()
    # bitwise the direct run's; temgx's single removals were mostly evaluated by the direct
    # run's search (in other batches), which a rescore does not rerun: equal to 1e-5
    equal = _close if protocol == "temgx" else _same
    for column in ADDED[protocol]:
        assert all(equal(a, b) for a, b in zip(new[column], ref[column], strict=True)), column
    assert [list(p) for p in new.curve_protocols[ok]] == [together] * int(ok.sum())
    assert (new.curve_time_s[ok] > old.curve_time_s[ok].fillna(0.0)).all()
    for column in set(new.columns) - {*ADDED[protocol], "curve_protocols", "curve_time_s"}:
        assert all(_same(a, b) for a, b in zip(new[column], old[column], strict=True)), column
    # run.json now says what a direct run's says (it resumes with the new protocol list)
    assert json.loads((rescored / "run.json").read_text()) == json.loads(
        (direct / "run.json").read_text())
    # the summary is written again: the added protocol's metric has a value
    summary = pd.read_csv(rescored / "summary.csv")
    metric = {"tempme": "tempme_acc_auc", "tgnnexplainer": "tgnnexplainer_best_fid",
              "common": "best_fid", "temgx": "temgx_aufsc"}[protocol]
    assert np.isfinite(summary[metric].iloc[-1])
    assert summary[metric].iloc[-1] == pytest.approx(
        pd.read_csv(direct / "summary.csv")[metric].iloc[-1],
        abs=1e-6 if protocol == "temgx" else 1e-12)

    # twice: nothing to do, no file rewritten
    files = {f: (f.stat().st_mtime_ns, f.read_bytes()) for f in rescored.rglob("*") if f.is_file()}
    assert main([str(rescored), "--protocol", protocol, "--no-progress"]) == 0
    assert files == {f: (f.stat().st_mtime_ns, f.read_bytes())
                     for f in rescored.rglob("*") if f.is_file()}


def test_a_stopped_rescore_continues_and_a_sweep_dir_rescores_every_run(runs, tmp_path, capsys):
    sweep = tmp_path / "sweep"
    one = copy(runs("perturb_one", "protocol=common"), sweep / "0-a")
    two = copy(runs("greedy", "protocol=common"), sweep / "1-b")
    assert main([str(sweep), "--protocol", "tempme", "--no-progress"]) == 4
    done = read_records(one)
    # as if killed after the first record: the second one and run.json as they were
    original = runs("perturb_one", "protocol=common")
    last = sorted((original / "records").glob("*.parquet"))[-1]
    shutil.copy(last, one / "records" / last.name)
    shutil.copy(original / "run.json", one / "run.json")
    capsys.readouterr()
    assert main([str(sweep), "--protocol", "tempme"]) == 1  # the progress bar: stderr
    out = capsys.readouterr().out
    assert f"{one}: 1 of 2 explained records rescored" in out
    assert f"{two}: 0 of 2 explained records rescored" in out
    again = read_records(one)
    for column in ADDED["tempme"]:
        assert all(_same(a, b) for a, b in zip(again[column], done[column], strict=True))
    assert json.loads((one / "run.json").read_text())["protocols"] == ["common", "tempme"]
    # the report reads the rescored records like fresh ones: the new protocol's column
    from cftgnn.reporting.report import write_report
    text = write_report([one], tmp_path / "report").files[0].read_text()
    assert "ACC-AUC · TempME (± pairs)" in text


def _error(argv: list[str], capsys) -> str:
    return refused(capsys, main, argv)


def test_bad_input_ends_in_one_line_and_status_2(runs, tmp_path, capsys, monkeypatch):
    run = copy(runs("perturb_one", "protocol=common"), tmp_path / "run")
    (tmp_path / "plain").mkdir()
    assert "is not a run directory and holds none" in _error(
        [str(tmp_path / "plain"), "--protocol", "tempme"], capsys)
    assert "does not exist" in _error([str(tmp_path / "nowhere"), "--protocol", "tempme"],
                                      capsys)
    assert "at least one run directory" in _error(["--protocol", "tempme"], capsys)
    assert "protocol must be one of" in _error([str(run), "--protocol", "tempmee"], capsys)
    assert "--protocol" in _error([str(run)], capsys)
    untouched = {f: f.read_bytes() for f in run.rglob("*") if f.is_file()}

    # a search scored by its coalitions: not its tgnnexplainer protocol, before any work
    search = copy(run, tmp_path / "search")
    fp = json.loads((search / "run.json").read_text())
    fp["explainer"]["_target_"] = "cftgnn.explain.TGNNExplainer"
    (search / "run.json").write_text(json.dumps(fp))
    line = _error([str(run), str(search), "--protocol", "tgnnexplainer"], capsys)
    assert f"{search}: the tgnnexplainer protocol of explainer tgnnexplainer cannot be " \
           "added afterwards" in line
    assert untouched == {f: f.read_bytes() for f in run.rglob("*") if f.is_file()}

    # an explainer its run.json's options no longer build: one line, before any work
    stale = copy(run, tmp_path / "stale")
    fp = json.loads((stale / "run.json").read_text())
    fp["explainer"]["it_maxx"] = 3
    (stale / "run.json").write_text(json.dumps(fp))
    line = _error([str(stale), "--protocol", "tempme"], capsys)
    assert line.startswith(f"error: {stale}/run.json: its explainer does not build (")
    assert "unknown option it_maxx" in line

    # an explainer that cannot be scored under the protocol: its ``supports`` refuses it
    from cftgnn.explain.ranking import PerturbOneExplainer
    with monkeypatch.context() as patched:
        patched.setattr(PerturbOneExplainer, "protocols", frozenset({"common"}))
        line = _error([str(run), "--protocol", "tempme"], capsys)
    assert line == (f"error: {run}: explainer perturb_one cannot be scored under "
                    "protocol=tempme (it serves common); choose another protocol or curves=none")
    assert untouched == {f: f.read_bytes() for f in run.rglob("*") if f.is_file()}

    # a checkpoint whose checksum is not the run's: refused before any record is rewritten
    pt = runs.checkpoint
    kept = pt.read_bytes()
    try:
        pt.write_bytes(kept + b"\0")
        line = _error([str(run), "--protocol", "tempme"], capsys)
    finally:
        pt.write_bytes(kept)
    assert f"the checkpoint {pt} is not the one {run} was explained with" in line
    assert untouched == {f: f.read_bytes() for f in run.rglob("*") if f.is_file()}


@pytest.mark.slow  # a fresh interpreter loads torch (about 15 s on a loaded machine)
def test_the_script_prints_one_error_line(tmp_path):
    (tmp_path / "plain").mkdir()
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "rescore.py"),
                           str(tmp_path / "plain"), "--protocol", "tempme"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'plain'} is not a run directory and holds none (no run.json)"]
