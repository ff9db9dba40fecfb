"""``scripts/explain.py``: a run on a tiny synthetic stream, resuming, sharding, bad input."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import cftgnn.config  # noqa: F401
from cftgnn.errors import CftgnnError, ConfigError, print_block
from cftgnn.oracle.engine import naive_logit
from cftgnn.runs import build, pipeline
from cftgnn.runs.merge import find_runs, merge_runs
from cftgnn.runs.records import RecordStore, RunDirectoryError, read_records
from cftgnn.scoring.protocols import Protocol
from cftgnn.training.resolve import resolve_model

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
# tiny and fast: 300 synthetic events, fresh weights, short searches
TINY = ["debug=default", "checkpoint=null", "explainer.it_max=40", "progress=false",
        "sample.prediction=any", "n_events=6"]


def cfg_for(tmp_path: Path, *overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("explain", overrides=[*TINY, f"out_dir={tmp_path}", *overrides])


def test_run_writes_one_record_per_event_and_a_summary(tmp_path):
    cfg = cfg_for(tmp_path)
    table = pipeline.run(cfg)
    records = read_records(tmp_path)
    assert len(records) == 6 and records.event_id.is_unique
    assert records.event_id.min() >= int(0.85 * 300)
    for col in ("explanation", "final_logit", "keep_logit", "group", "screen_logit",
                "time_s", "dataset", "model", "strategy_name", "explainer"):
        assert col in records.columns
    assert set(records.strategy_name) == {"closest"} and set(records.explainer) == {"cftgnn"}
    assert (tmp_path / "summary.csv").is_file() and (tmp_path / "run.json").is_file()
    assert table["events"].iloc[-1] == 6
    flips = (records.original_logit * records.final_logit < 0).mean()
    assert table["fidelity_plus"].iloc[-1] == pytest.approx(flips)


def test_an_empty_sample_ends_in_a_zero_event_summary(tmp_path, capsys):
    # seed 0's fresh weights predict no incorrect link in the test split: nothing to explain
    cfg = cfg_for(tmp_path, "seed=0", "sample.prediction=incorrect", "n_events=2")
    table = pipeline.run(cfg)
    out = capsys.readouterr().out
    assert "| 0 events" in out and "nothing to explain" in out
    assert table["events"].iloc[-1] == 0 and read_records(tmp_path).empty
    assert (tmp_path / "summary.csv").is_file()


def test_keep_logit_is_the_exact_logit_with_only_the_explanation_kept(tmp_path):
    cfg = cfg_for(tmp_path, "n_events=2")
    pipeline.run(cfg)
    records = read_records(tmp_path)
    from hydra.utils import instantiate

    stream = instantiate(cfg.dataset)
    model, _ = resolve_model(cfg.model, stream, None, ".", "cpu", cfg.seed)
    for rec in records.itertuples():
        removed = sorted(set(rec.candidate_ids) - set(rec.explanation))
        expect = naive_logit(model, stream, rec.event_id, removed)
        assert rec.keep_logit == pytest.approx(expect, abs=1e-5)
        assert rec.final_logit == pytest.approx(
            naive_logit(model, stream, rec.event_id, list(rec.explanation)), abs=1e-5)


def _strip_timing(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in df.columns if c.endswith("time_s")])


def test_an_interrupted_run_resumes_without_losing_or_duplicating(tmp_path, monkeypatch):
    full = tmp_path / "full"
    pipeline.run(cfg_for(full))
    part = tmp_path / "part"
    write = RecordStore.write
    calls = {"n": 0}

    def flaky(self, record):
        if calls["n"] == 3:
            raise KeyboardInterrupt  # as if Ctrl-C hit after three events
        calls["n"] += 1
        return write(self, record)

    monkeypatch.setattr(RecordStore, "write", flaky)
    with pytest.raises(KeyboardInterrupt):
        pipeline.run(cfg_for(part))
    assert len(read_records(part)) == 3
    monkeypatch.setattr(RecordStore, "write", write)
    pipeline.run(cfg_for(part))
    a, b = read_records(full), read_records(part)
    assert b.event_id.is_unique and len(b) == 6
    pd.testing.assert_frame_equal(_strip_timing(a), _strip_timing(b))


def test_a_killed_process_resumes(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, str(ROOT / "scripts" / "explain.py"), *TINY, "n_events=12",
           "explainer.it_max=150", f"out_dir={out}"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if (out / "records").is_dir() and len(list((out / "records").glob("*.parquet"))):
                break
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    killed_with = len(read_records(out))
    assert 1 <= killed_with < 12, "the run must be killed part-way for this test to mean much"
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{killed_with} already recorded" in done.stdout
    records = read_records(out)
    assert len(records) == 12 and records.event_id.is_unique


def test_another_configuration_in_the_same_directory_is_refused(tmp_path):
    pipeline.run(cfg_for(tmp_path, "n_events=2"))
    before = read_records(tmp_path)
    with pytest.raises(RunDirectoryError, match="differs in: explainer.it_max"):
        pipeline.run(cfg_for(tmp_path, "n_events=2", "explainer.it_max=41"))
    pd.testing.assert_frame_equal(read_records(tmp_path), before)


def test_shards_partition_the_events_and_merge_into_the_whole(tmp_path):
    whole = tmp_path / "whole"
    pipeline.run(cfg_for(whole))
    for shard in (0, 1, 2):
        pipeline.run(cfg_for(tmp_path / "sweep" / f"s{shard}", f"shard={shard}",
                             "num_shards=3"))
    runs = find_runs([tmp_path / "sweep"])
    assert len(runs) == 3
    merged = merge_runs(runs, tmp_path / "merged")
    expected = _strip_timing(read_records(whole))
    pd.testing.assert_frame_equal(
        expected, _strip_timing(merged).assign(shard=0)[expected.columns])
    assert read_records(tmp_path / "merged").event_id.tolist() == merged.event_id.tolist()


def test_halves_of_a_run_split_across_a_schema_upgrade_merge(tmp_path):
    """A shard written before a record-schema bump (its run.json one version older) merges
    with one written after; the merged run.json says the newest version."""
    import json

    from cftgnn.explain.result import SCHEMA_VERSION

    for shard in (0, 1):
        pipeline.run(cfg_for(tmp_path / "sweep" / f"s{shard}", f"shard={shard}",
                             "num_shards=2", "n_events=4"))
    old = tmp_path / "sweep" / "s0" / "run.json"
    fp = json.loads(old.read_text())
    old.write_text(json.dumps({**fp, "schema_version": SCHEMA_VERSION - 1}))
    merged = merge_runs(find_runs([tmp_path / "sweep"]), tmp_path / "merged")
    assert len(merged) == 4
    assert json.loads((tmp_path / "merged" / "run.json").read_text())[
        "schema_version"] == SCHEMA_VERSION
    # anything else that differs is still refused
    old.write_text(json.dumps({**fp, "seed": 7}))
    with pytest.raises(ConfigError, match="differs in: seed"):
        merge_runs(find_runs([tmp_path / "sweep"]), tmp_path / "merged2")


def test_merge_refuses_runs_of_different_configurations(tmp_path):
    pipeline.run(cfg_for(tmp_path / "a", "n_events=1"))
    pipeline.run(cfg_for(tmp_path / "b", "n_events=1", "strategy=recent"))
    with pytest.raises(ConfigError, match="not a shard of the same configuration"):
        merge_runs(find_runs([tmp_path]), tmp_path / "merged")


@pytest.mark.parametrize("overrides, message", [
    (["shard=2", "num_shards=2"], "shard must be in"),
    (["events=[5,300]"], "outside the stream"),
    (["sample.range=[0.5,0.2]"], "sample.range"),
])
def test_bad_input_raises_a_project_error(tmp_path, overrides, message):
    from cftgnn.errors import CftgnnError

    with pytest.raises(CftgnnError, match=message):
        pipeline.run(cfg_for(tmp_path, *overrides))


#: A dataset that cannot load: an option refused with its own message proves that it was
#: checked before any data (or model) was loaded.
UNLOADABLE = ["dataset=uci", "dataset.data_dir=/nonexistent", "dataset.cache_dir=/nonexistent",
              "dataset.download=false", "checkpoint=auto"]


@pytest.mark.parametrize("overrides, message", [
    (["explainer.it_max=-1"], "it_max must be an integer >= 0, got -1"),
    (["explainer.backprop=sideways"], r"backprop must be one of weighted \| thesis, got "
                                      "'sideways'"),
    (["+explainer.colour=red"], "unknown option colour of CFTGNNParams"),
    (["explainer.max_oracle_calls=-1"], "max_oracle_calls must be an integer >= 0 or null"),
    (["explainer.max_time_s=nan"], "max_time_s must be a number >= 0 or null, got nan"),
    (["strategy=random", "strategy.seed=-1"], "seed must be an integer >= 0, got -1"),
    (["strategy=random", "strategy.seed=abc"], "seed must be an integer >= 0, got 'abc'"),
    (["+strategy.depth=2"], "unknown option depth of ClosestStrategyParams"),
    (["constraints.max_size=0"], "constraints.max_size must be >= 1"),
    (["constraints.hops=[2]"], r"constraints.hops must be \[lo, hi\]"),
    (["constraints.before=soon"], "constraints.before must be a time"),
    (["m_max=0"], "m_max must be an integer >= 1, got 0"),
    (["m_max=-3"], "m_max must be an integer >= 1, got -3"),
    (["k=0"], "k must be null or an integer >= 1, got 0"),
])
def test_options_are_refused_before_any_data_or_model_loads(tmp_path, overrides, message):
    with pytest.raises(CftgnnError, match=message) as err:
        pipeline.run(cfg_for(tmp_path, *UNLOADABLE, *overrides))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run.json").exists()


def test_a_checkpoint_whose_card_checksum_differs_is_warned_about_and_used(tmp_path, capsys):
    from hydra.utils import instantiate

    from cftgnn.training.checkpoint import save_checkpoint

    cfg = cfg_for(tmp_path / "run", "n_events=2")
    stream = instantiate(cfg.dataset)
    model, _ = resolve_model(cfg.model, stream, None, ".", "cpu", cfg.seed)
    pt, js = save_checkpoint(model, stream, tmp_path / "tgn_synthetic.pt")
    card = js.read_text()
    other = resolve_model(cfg.model, stream, None, ".", "cpu", seed=int(cfg.seed) + 1)[0]
    save_checkpoint(other, stream, pt)
    js.write_text(card)  # the old card next to new weights
    pipeline.run(cfg_for(tmp_path / "run", "n_events=2", f"checkpoint={pt}"))
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [f"warning: {pt} does not match the checksum its card "
                        "tgn_synthetic.json records: the card's metrics and training settings "
                        "describe other weights"]
    assert len(read_records(tmp_path / "run")) == 2  # a warning: the run went on


def test_explicit_events(tmp_path):
    pipeline.run(cfg_for(tmp_path, "events=[0,120,250]"))
    records = read_records(tmp_path)
    assert records.event_id.tolist() == [0, 120, 250]
    assert records.status[0] == "no_candidates"  # the first event has no history


@pytest.mark.parametrize("args, message", [
    (["dataset=wikipedai"], "error: unknown dataset 'wikipedai' (choose from: csv, jodie_ml, "
                            "planted, planted_hawkes, planted_rule, synthetic, tgb, uci, "
                            "wikipedia)"),
    (["-m", "strategy=closest,nearest"], "error: unknown strategy 'nearest'"),
    (["debug=default", "checkpoint=checkpoints/tgn_uci.pt"], "error: checkpoint"),
    (["debug=default", "model=tgat", "checkpoint=checkpoints/tgn_uci.pt"],
     "error: checkpoint 'checkpoints/tgn_uci.pt' holds a tgn model but model=tgat"),
    (["debug=default", "explainer.it_max=-1"], "error: it_max must be an integer >= 0, got -1"),
    (["debug=default", "m_max=0"], "error: m_max must be an integer >= 1, got 0"),
    (["debug=default", "k=0"], "error: k must be null or an integer >= 1, got 0"),
    (["debug=default", "strategy=random", "strategy.seed=-1"],
     "error: seed must be an integer >= 0, got -1"),
    # a non-integer count is refused, never truncated (explainer, strategy, post-processing)
    (["debug=default", "checkpoint=null", "explainer.it_max=1.5"],
     "error: it_max must be an integer >= 0, got 1.5"),
    (["debug=default", "checkpoint=null", "explainer=nsga2", "explainer.max_iterations=2.5"],
     "error: max_iterations must be an integer >= 0 or null, got 2.5"),
    (["debug=default", "checkpoint=null", "strategy=random", "strategy.seed=1.5"],
     "error: seed must be an integer >= 0, got 1.5"),
    (["debug=default", "checkpoint=null", "certify=1.5"],
     "error: certify must be an integer >= 0, got 1.5"),
    (["debug=default", "constraints.hops=[2]"], "error: constraints.hops must be [lo, hi]"),
])
def test_cli_bad_input_is_one_line(tmp_path, args, message):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "explain.py"), *args,
                           f"out_dir={tmp_path}", "progress=false"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), done.stderr


def test_multirun_sweep_writes_one_run_per_job(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "explain.py"), "-m", *TINY, "n_events=2",
         "strategy=random,one_best", f"hydra.sweep.dir={tmp_path}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    runs = find_runs([tmp_path])
    assert [r.name.split("-")[4] for r in runs] == ["random", "one_best"]
    for run in runs:
        assert len(read_records(run)) == 2
    assert np.array_equal(read_records(runs[0]).event_id, read_records(runs[1]).event_id)


def test_a_block_of_lines_reaches_the_terminal_in_one_write(monkeypatch):
    class Raw(io.RawIOBase):
        def __init__(self) -> None:
            self.calls: list[bytes] = []

        def writable(self) -> bool:
            return True

        def write(self, b) -> int:  # type: ignore[override]
            self.calls.append(bytes(b))
            return len(b)

    raw = Raw()
    out = io.TextIOWrapper(io.BufferedWriter(raw, buffer_size=64), encoding="utf-8",
                           line_buffering=True)
    monkeypatch.setattr(sys, "stdout", out)
    print("before")
    block = "\n".join(f"line {i} → of a shard's table" for i in range(40))  # past the buffer
    print_block(block)
    assert raw.calls == [b"before\n", f"{block}\n".encode()]


def test_sharded_sweep_through_joblib_then_merge_command(tmp_path):
    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "explain.py"), "-m", "sweep=shards", *TINY,
         "n_events=8", f"hydra.sweep.dir={sweep}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    runs = find_runs([sweep])
    assert len(runs) == 4
    lines = done.stdout.splitlines()
    for shard, run in enumerate(runs):  # each shard's lines after its events come whole
        (start,) = [i for i, line in enumerate(lines) if line == f"shard {shard}/4 ({run}):"]
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("↑ / ↓"))
        block = lines[start + 1:end]
        assert block[0].startswith("explained prediction: event ")
        assert [line for line in block if "picture:" in line] == [
            f"  picture: {p}" for p in run.glob("explanation_*.png")]
        assert not [line for line in block  # no other shard's first or last lines
                    if line.startswith(("shard ", "records:", "synthetic (300 events)"))]
    # then, once, the table of all four together and the command that merges them
    together = lines.index(f"all 4 shards of {sweep} together: 8 records")
    assert together > max(i for i, line in enumerate(lines) if line.startswith("shard "))
    assert lines[together + 1].split() == ["correct", "incorrect", "all"]
    assert lines[together + 2].split()[:4] == ["events", "1", "7", "8"]  # the debug sample
    assert lines[-1] == (f"to write them as one run directory ({sweep / 'merged'}): "
                         f"python scripts/merge_records.py {sweep}")
    merged = subprocess.run([sys.executable, str(ROOT / "scripts" / "merge_records.py"),
                             str(sweep)], capture_output=True, text=True, timeout=120)
    assert merged.returncode == 0, merged.stderr
    assert "merged 8 records from 4 runs" in merged.stdout
    records = read_records(sweep / "merged")
    assert len(records) == 8 and records.event_id.is_unique
    assert sorted(set(records.shard)) == [0, 1, 2, 3]


def test_wandb_logger_records_config_table_and_summary_offline(tmp_path, offline_wandb):
    from testsupport.wandb_log import finished_run_log

    out = tmp_path / "run"
    table = pipeline.run(cfg_for(out, "logger=wandb", "n_events=3"))
    (run_dir,) = (out / "wandb").glob("offline-run-*")
    logged = finished_run_log(run_dir)
    assert logged["exit_code"] == 0
    assert logged["config"]["explainer"]["it_max"] == 40  # the resolved config
    summary = logged["summary"]
    row = table.iloc[-1]
    group = row["group"]
    assert summary[f"summary/{group}/fidelity_plus"] == pytest.approx(row["fidelity_plus"])
    assert summary[f"summary/{group}/events"] == 3
    assert summary["records/nrows"] == 3 and summary["records/_type"] == "table-file"
    assert list((run_dir / "files" / "media" / "table").glob("records*.table.json"))


def test_wandb_run_is_finished_as_failed_when_the_run_fails(tmp_path, offline_wandb,
                                                            monkeypatch):
    from testsupport.wandb_log import finished_run_log

    def boom(*args, **kwargs):
        raise RuntimeError("search crashed")

    monkeypatch.setattr(pipeline, "_explain", boom)
    with pytest.raises(RuntimeError, match="search crashed"):
        pipeline.run(cfg_for(tmp_path, "logger=wandb", "n_events=2"))
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    assert finished_run_log(run_dir)["exit_code"] == 1


def test_jobs_of_one_sweep_share_one_tracking_group(tmp_path):
    from hydra.core.hydra_config import HydraConfig

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=["hydra.mode=MULTIRUN",
                                            f"hydra.sweep.dir={tmp_path}/2026-11-22_10-00"],
                      return_hydra_config=True)
    hc = HydraConfig.instance()
    try:
        hc.set_config(cfg)
        assert build.tracking_group(cfg) == "2026-11-22_10-00"
        assert build.tracking_group(OmegaConf.merge(cfg, {"group": "mine"})) == "mine"
        with initialize_config_dir(str(CONF), version_base="1.3"):
            single = compose("explain", return_hydra_config=True)
        hc.set_config(single)
        assert build.tracking_group(single) is None
    finally:
        hc.cfg = None


def _toy_engine(kind: str):
    from cftgnn.data.synthetic import make_synthetic_stream
    from cftgnn.models.tgat import TGAT
    from cftgnn.models.tgn import TGN
    from cftgnn.oracle.engine import ReplayEngine

    stream = make_synthetic_stream(20, 200, seed=1, feat_dim=1)
    model = (TGN(stream.num_nodes, stream.feat_dim, memory_dim=8, time_dim=4, embedding_dim=8,
                 num_layers=1, num_heads=1, num_neighbors=3, batch_size=20) if kind == "tgn"
             else TGAT(stream.num_nodes, stream.feat_dim, time_dim=4, embedding_dim=8,
                       num_layers=1, num_heads=1, num_neighbors=3))
    return ReplayEngine(model, stream)


@pytest.mark.parametrize(("kind", "mode", "choice", "events", "starts"), [
    ("tgn", "exact", None, 3, True),
    ("tgn", "approximate", None, 3, False),
    ("tgn", "auto", "exact", 3, True),
    ("tgn", "auto", "approximate", 3, False),
    ("tgn", "exact", None, 0, False),  # nothing left to explain (a resumed run)
    ("tgat", "exact", None, 3, False),  # no compiled loops in its replay
])
def test_an_exact_search_of_tgn_starts_the_compiled_loops_first(monkeypatch, kind, mode,
                                                                choice, events, starts):
    """An exact search's hundreds of small exact calls would run the loops' NumPy twins
    until numba started (``jit.for_sets``): the pipeline starts it before the events."""
    from cftgnn import jit
    from cftgnn.oracle.auto_mode import ModeChoice
    from cftgnn.oracle.oracle import OracleMode

    calls: list[int] = []
    # with a notice: the run says so when numba's cache is cold (tests/replay/test_jit.py)
    monkeypatch.setattr(jit, "warm_up", lambda notice=None: calls.append(int(notice is print)))
    picked = None if choice is None else ModeChoice(OracleMode(choice), 1.0, 1.5, 0)
    todo = pd.DataFrame({"event_id": list(range(100, 100 + events))})
    pipeline._start_compiled_loops(OmegaConf.create({"mode": mode}), _toy_engine(kind), picked,
                                   todo)
    assert calls == ([1] if starts else [])


def test_a_run_builds_its_explainer_once(tmp_path, monkeypatch):
    """One explainer for the whole run (its options checked, ``supports`` asked for the
    protocols before anything loads and for the model once it is loaded, then every event
    explained by it), not one per event."""
    from cftgnn.explain.mcts import CFTGNNExplainer

    built, explained, asked = [], [], []
    init, explain = CFTGNNExplainer.__init__, CFTGNNExplainer.explain
    supports = CFTGNNExplainer.supports

    def counting_supports(self, fingerprint=None, protocols=()):
        asked.append((fingerprint, tuple(protocols)))
        supports(self, fingerprint, protocols)

    def counting_init(self, *args, **kwargs):
        built.append(self)
        init(self, *args, **kwargs)

    def counting_explain(self, oracle):
        explained.append(self)
        return explain(self, oracle)

    monkeypatch.setattr(CFTGNNExplainer, "__init__", counting_init)
    monkeypatch.setattr(CFTGNNExplainer, "explain", counting_explain)
    monkeypatch.setattr(CFTGNNExplainer, "supports", counting_supports)
    pipeline.run(cfg_for(tmp_path))
    assert len(read_records(tmp_path)) == 6 and len(explained) == 6
    assert len(built) == 1 and all(e is built[0] for e in explained)
    # its capability asked before the first event: the run's protocols, then its model
    assert len(asked) == 2 and asked[0] == (None, (Protocol.COMMON,))
    assert asked[1][0] is not None and asked[1][1] == ()


def test_an_explainer_that_cannot_serve_the_run_is_refused_before_the_first_event(
        tmp_path, monkeypatch):
    from cftgnn.explain.mcts import CFTGNNExplainer

    def refuse(self, fingerprint=None, protocols=()):
        if fingerprint is not None:
            raise ConfigError(f"cftgnn cannot explain {fingerprint.model} here")

    searched = []
    monkeypatch.setattr(CFTGNNExplainer, "supports", refuse)
    monkeypatch.setattr(CFTGNNExplainer, "_search", lambda *a: searched.append(a))
    with pytest.raises(ConfigError) as refused:
        pipeline.run(cfg_for(tmp_path / "run"))
    assert "\n" not in str(refused.value) and "cannot explain" in str(refused.value)
    assert searched == [] and not (tmp_path / "run" / "records").exists()


def test_a_protocol_the_explainer_cannot_serve_ends_the_run_before_the_first_event(
        tmp_path, monkeypatch):
    from cftgnn.explain.mcts import CFTGNNExplainer

    searched, loaded = [], []
    monkeypatch.setattr(CFTGNNExplainer, "protocols", frozenset({"common"}))
    monkeypatch.setattr(CFTGNNExplainer, "_search", lambda *a: searched.append(a))
    monkeypatch.setattr(pipeline, "resolve_model", lambda *a, **k: loaded.append(a))
    with pytest.raises(ConfigError) as refused:
        pipeline.run(cfg_for(tmp_path / "run", "protocol=[common,tempme]"))
    assert str(refused.value) == ("explainer cftgnn cannot be scored under protocol=tempme (it "
                                  "serves common); choose another protocol or curves=none")
    assert searched == [] and not (tmp_path / "run" / "records").exists()
    assert loaded == []  # refused before the model loads
