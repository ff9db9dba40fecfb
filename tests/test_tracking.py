"""The tracking layer: NullTracker without wandb, WandbTracker offline, the context manager and
the ``logger`` config group. Never touches the network (W&B runs offline into tmp_path)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from testsupport.wandb_log import finished_run_log

from cftgnn.tracking import NullTracker, Tracker, WandbTracker, table_frame, tracking

CONF = Path(__file__).resolve().parents[1] / "conf"
TRACKING_PY = Path(__file__).resolve().parents[1] / "cftgnn" / "tracking.py"

CONFIG = {"dataset": {"name": "uci"}, "explainer": {"sample_size": 10}, "seed": 7}


def records_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "event_id": [3, 9],
            "explanation": [[1, 2], []],
            "candidate_ids": [(1, 2, 5), (4,)],
            "success": [True, False],
            "score": [0.25, float("nan")],
        }
    )


# ---------------------------------------------------------------------------------------------
# Without wandb


def fresh_tracking_module(name: str) -> ModuleType:
    """Execute cftgnn/tracking.py anew under another name (leaves cftgnn.tracking untouched)."""
    spec = importlib.util.spec_from_file_location(name, TRACKING_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def test_null_tracker_and_import_need_no_wandb(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` now raises ImportError
    with pytest.raises(ImportError):
        import wandb  # noqa: F401
    module = fresh_tracking_module("_cftgnn_tracking_without_wandb")

    tracker = module.NullTracker()
    with module.tracking(tracker, dict(CONFIG), name="n", group="g", dir="unused") as active:
        assert active is tracker
        active.log_progress(0, {"progress/success_rate": 0.0})
        active.log_records(records_frame())
        active.log_summary({"summary/fidelity_plus": float("nan")})
    tracker.finish()  # again: harmless

    wandb_tracker = module.WandbTracker()  # constructing never imports wandb
    with pytest.raises(ImportError, match="pip install wandb"):
        wandb_tracker.start(dict(CONFIG))
    assert wandb_tracker.run is None and not wandb_tracker.active


# ---------------------------------------------------------------------------------------------
# The context manager


class RecordingTracker(Tracker):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def start(self, config, name=None, group=None, dir=None):
        self.calls.append(("start", (config, name, group, dir)))

    def log_records(self, records):
        self.calls.append(("log_records", len(records)))

    def log_summary(self, metrics):
        self.calls.append(("log_summary", dict(metrics)))

    def log_progress(self, step, metrics):
        self.calls.append(("log_progress", step))

    def finish(self, failed=False):
        self.calls.append(("finish", failed))


def test_tracking_finishes_successful_run():
    tracker = RecordingTracker()
    with tracking(tracker, {"a": 1}, name="run", group="grp", dir="d") as active:
        active.log_progress(1, {"x": 1.0})
    assert tracker.calls == [
        ("start", ({"a": 1}, "run", "grp", "d")),
        ("log_progress", 1),
        ("finish", False),
    ]


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_tracking_marks_run_failed_and_reraises(error):
    tracker = RecordingTracker()
    with pytest.raises(type(error)), tracker.session({"a": 1}):
        raise error
    assert [c[0] for c in tracker.calls] == ["start", "finish"]
    assert tracker.calls[-1] == ("finish", True)


def test_tracking_does_not_finish_a_run_that_failed_to_start():
    class FailingStart(RecordingTracker):
        def start(self, config, name=None, group=None, dir=None):
            raise OSError("no disk")

    tracker = FailingStart()
    with pytest.raises(OSError, match="no disk"), tracking(tracker, {}):
        pytest.fail("body must not run")
    assert tracker.calls == []


# ---------------------------------------------------------------------------------------------
# Records -> table frame


def test_table_frame_turns_containers_into_json_text():
    records = records_frame()
    records["mixed"] = [1, "x"]
    frame = table_frame(records)
    assert frame["explanation"].tolist() == ["[1, 2]", "[]"]
    assert frame["candidate_ids"].tolist() == ["[1, 2, 5]", "[4]"]
    assert frame["mixed"].tolist() == ["1", "x"]
    assert frame["event_id"].tolist() == [3, 9]
    assert isinstance(records["explanation"].iloc[0], list)  # the input is left alone


# ---------------------------------------------------------------------------------------------
# WandbTracker, offline


def test_wandb_tracker_writes_config_records_and_summary_offline(offline_wandb):
    tracker = WandbTracker(tags=["test"], notes="unit test")
    with pytest.raises(RuntimeError, match="not started"):
        tracker.log_summary({"summary/x": 1.0})
    with tracking(tracker, dict(CONFIG), name="uci-greedy", group="uci", dir=offline_wandb):
        assert tracker.active
        tracker.log_progress(0, {"progress/success_rate": 0.0})
        tracker.log_records(records_frame())
        tracker.log_progress(0, {"progress/success_rate": 0.5})  # step may repeat
        tracker.log_summary(
            {
                "summary/fidelity_plus": 0.5,
                "summary/mean_size": 1.5,
                "summary/nan_metric": float("nan"),
            }
        )
    assert not tracker.active
    run_dir = tracker.run_dir
    assert run_dir is not None and run_dir.is_relative_to(offline_wandb)
    assert run_dir.name.startswith("offline-run-")

    logged = finished_run_log(run_dir)
    assert logged["exit_code"] == 0
    assert {k: logged["config"][k] for k in CONFIG} == CONFIG
    summary = logged["summary"]
    assert summary["summary/fidelity_plus"] == 0.5
    assert summary["summary/mean_size"] == 1.5
    assert summary["summary/nan_metric"] is None  # NaN is written as JSON null
    progress = [row for row in logged["history"] if "progress/success_rate" in row]
    assert [(r["progress/step"], r["progress/success_rate"]) for r in progress] == [
        (0, 0.0),
        (0, 0.5),
    ]

    (table_file,) = (run_dir / "files").glob("media/table/records_*.table.json")
    table = json.loads(table_file.read_text())
    assert table["columns"] == ["event_id", "explanation", "candidate_ids", "success", "score"]
    assert [row[1] for row in table["data"]] == ["[1, 2]", "[]"]
    assert table["data"][0][0] == 3
    # wandb >= 0.18 (wandb-core) writes summary/config only to run-<id>.wandb when offline;
    # older versions also wrote files/wandb-summary.json, which must then agree.
    for summary_file in offline_wandb.glob("**/wandb-summary.json"):
        assert json.loads(summary_file.read_text())["summary/fidelity_plus"] == 0.5


def test_wandb_tracker_finishes_failed_run_after_exception(offline_wandb):
    from wandb.errors import UsageError

    tracker = WandbTracker()
    with pytest.raises(ValueError, match="explainer blew up"), tracker.session({"seed": 1}):
        tracker.log_progress(3, {"progress/success_rate": 1.0})
        raise ValueError("explainer blew up")
    assert not tracker.active
    run = tracker.run
    assert run is not None
    with pytest.raises(UsageError):  # the wandb run itself is finished
        run.log({"x": 1})
    tracker.finish()  # again: harmless
    assert tracker.run_dir is not None
    assert finished_run_log(tracker.run_dir)["exit_code"] == 1
    with pytest.raises(RuntimeError, match="twice"):
        tracker.start({})


# ---------------------------------------------------------------------------------------------
# conf/logger


def test_logger_none_config_instantiates_null_tracker():
    tracker = instantiate(OmegaConf.load(CONF / "logger" / "none.yaml"))
    assert isinstance(tracker, NullTracker)


@pytest.mark.parametrize("env_mode", [None, "online", "disabled"])
def test_logger_wandb_config_mode_follows_env(monkeypatch, env_mode):
    if env_mode is None:
        monkeypatch.delenv("WANDB_MODE", raising=False)
    else:
        monkeypatch.setenv("WANDB_MODE", env_mode)
    tracker = instantiate(OmegaConf.load(CONF / "logger" / "wandb.yaml"))
    assert isinstance(tracker, WandbTracker)
    assert tracker.mode == (env_mode or "offline")
    assert (tracker.project, tracker.entity, tracker.tags) == ("cftgnn", None, ())
    assert (tracker.job_type, tracker.notes) == ("explain", None)
    assert tracker.run is None  # nothing started, wandb not initialised


def test_logger_wandb_config_overrides(monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    cfg = OmegaConf.merge(
        OmegaConf.load(CONF / "logger" / "wandb.yaml"),
        OmegaConf.from_dotlist(["mode=online", "tags=[uci,greedy]", "entity=lab"]),
    )
    tracker = instantiate(cfg)
    assert (tracker.mode, tracker.tags, tracker.entity) == ("online", ("uci", "greedy"), "lab")


def test_wandb_tracker_rejects_unknown_mode():
    with pytest.raises(ValueError, match="mode must be one of online, offline, disabled, shared"):
        WandbTracker(mode="offlne")


def test_wandb_tracker_logs_a_curve_as_a_line_plot_offline(offline_wandb):
    tracker = WandbTracker()
    with tracking(tracker, dict(CONFIG), name="curves", dir=offline_wandb):
        tracker.log_curve("curves/fidelity_kept", [0.0, 0.5, 1.0], [0.25, float("nan"), 1.5],
                          "share kept", "mean fidelity")
    (table_file,) = (tracker.run_dir / "files").glob("media/table/curves/fidelity_kept*.table.json")
    table = json.loads(table_file.read_text())
    assert table["columns"] == ["share kept", "mean fidelity"]
    assert table["data"] == [[0.0, 0.25], [1.0, 1.5]]  # the NaN point left out


def test_null_tracker_ignores_curves_and_the_pipeline_logs_the_mean_ones():
    from cftgnn.runs.pipeline import log_curves
    from cftgnn.scoring.curves import (
        ACC_SHARES,
        FID_SHARES,
        acc_curve,
        mean_fidelity_curve,
    )

    NullTracker().log_curve("curves/x", [0.0], [1.0], "x", "y")  # a no-op

    class Recorder(NullTracker):
        def __init__(self) -> None:
            self.curves: dict[str, tuple[list[float], list[float], str, str]] = {}

        def log_curve(self, key, x, y, x_label, y_label):  # type: ignore[no-untyped-def]
            self.curves[key] = (list(x), list(y), x_label, y_label)

    rng = np.random.default_rng(0)
    records = pd.DataFrame({
        "status": ["ok", "ok", "error"],
        "original_logit": [1.5, -0.5, 2.0],
        "fid_curve_logits": [tuple(rng.normal(size=len(FID_SHARES))) for _ in range(3)],
        "acc_curve_logits": [tuple(rng.normal(size=len(ACC_SHARES))) for _ in range(3)],
    })
    tracker = Recorder()
    log_curves(tracker, records)
    ok = records.iloc[:2]
    fid = tracker.curves["curves/fidelity_kept"]
    assert fid[0] == list(FID_SHARES)
    np.testing.assert_allclose(fid[1], mean_fidelity_curve(ok["original_logit"].to_numpy(),
                                                           list(ok["fid_curve_logits"])))
    acc = tracker.curves["curves/acc"]
    assert acc[0] == list(ACC_SHARES)
    np.testing.assert_allclose(acc[1], acc_curve(ok["original_logit"].to_numpy(),
                                                 list(ok["acc_curve_logits"])))
    quiet = Recorder()
    log_curves(quiet, records.drop(columns=["fid_curve_logits", "acc_curve_logits"]))
    log_curves(quiet, records.iloc[:0])
    assert quiet.curves == {}
