"""``scripts/explain.py`` with the exhaustive explainer, certify, prune and user constraints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.errors import CftgnnError
from cftgnn.explain.result import RECORD_DEFAULTS_V1, SCHEMA_VERSION
from cftgnn.runs import pipeline
from cftgnn.runs.records import read_records, upgrade_records
from cftgnn.scoring import summaries

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
TINY = ["debug=default", "checkpoint=null", "progress=false", "sample.prediction=any",
        "n_events=4"]


def cfg_for(tmp_path: Path, *overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("explain", overrides=[*TINY, f"out_dir={tmp_path}", *overrides])


def test_exhaustive_run_records_certificates(tmp_path):
    pipeline.run(cfg_for(tmp_path, "explainer=exhaustive", "explainer.max_size=2"))
    records = read_records(tmp_path)
    ok = records[records.status == "ok"]
    assert len(ok) > 0
    for rec in ok.itertuples():
        if rec.is_counterfactual:
            assert rec.certified_minimal and rec.size == rec.min_size_lower_bound
        else:  # nothing of size <= 2 flips
            assert rec.min_size_lower_bound == min(2, rec.num_removable) + 1
            assert len(rec.explanation) == 0
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["schema_version"] == SCHEMA_VERSION and run["explainer"]["max_size"] == 2


def test_certify_and_prune_are_recorded_and_never_worse(tmp_path):
    plain = tmp_path / "plain"
    pipeline.run(cfg_for(plain, "explainer=greedy"))
    done = tmp_path / "certified"
    pipeline.run(cfg_for(done, "explainer=greedy", "prune=true",
                         "certify=2"))
    a, b = read_records(plain), read_records(done)
    assert a.event_id.tolist() == b.event_id.tolist()
    assert (b.prune.all() and (b.certify == 2).all())
    for x, y in zip(a.itertuples(), b.itertuples(), strict=True):
        if x.status != "ok":
            continue
        assert y.is_counterfactual or not x.is_counterfactual  # certify only adds
        if x.is_counterfactual:
            assert y.size <= x.size and y.size_before_prune == x.size
        if y.is_counterfactual and y.size <= 3:  # smaller sets (<= 2) were all checked
            assert y.certified_minimal


def test_constraints_are_honoured_and_recorded(tmp_path):
    base = tmp_path / "base"
    pipeline.run(cfg_for(base, "explainer=greedy"))
    first = read_records(base)
    ok = first[first.status == "ok"]
    protect = sorted({int(e) for ids in ok.candidate_ids for e in list(ids)[-3:]})
    out = tmp_path / "constrained"
    pipeline.run(cfg_for(out, "explainer=greedy",
                         f"constraints.events=[{','.join(map(str, protect))}]",
                         "constraints.max_size=2", "constraints.protect_pair=true"))
    records = read_records(out)
    for rec in records[records.status == "ok"].itertuples():
        assert not set(rec.explanation) & set(protect) and rec.size <= 2
        assert rec.num_removable <= len(rec.candidate_ids) - 3
        stored = json.loads(rec.constraints)
        assert stored["events"] == protect and stored["max_size"] == 2
    run = json.loads((out / "run.json").read_text())
    assert run["constraints"]["events"] == protect and run["constraints"]["protect_pair"]


def test_an_event_with_every_candidate_protected_gets_its_own_status(tmp_path):
    pipeline.run(cfg_for(tmp_path, "explainer=greedy",
                         "constraints.hops=[5,6]"))  # no candidate is 5 hops away (k = 1)
    records = read_records(tmp_path)
    assert set(records.status) <= {"no_removable", "no_candidates"}
    assert (records.status == "no_removable").any()


@pytest.mark.parametrize("overrides, message", [
    (["constraints.nodes=[100000]"], "unknown node 100000"),
    (["constraints.events=[5,300]"], "event id 300 is outside"),
    (["explainer=exhaustive", "explainer.max_size=0"],
     "max_size must be an integer >= 1"),
    (["certify=-1"], "certify must be"),
    (["constraints.max_size=0"], "constraints.max_size must be >= 1"),
    (["+constraints.colour=red"], "unknown constraint 'colour'"),
    (["m_max=0"], "m_max must be an integer >= 1"),
    (["k=0"], "k must be null or an integer >= 1"),
    (["mode=quick"], "mode must be"),
])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, overrides, message):
    with pytest.raises(CftgnnError, match=message):
        pipeline.run(cfg_for(tmp_path, *overrides))
    assert not (tmp_path / "run.json").exists()


@pytest.mark.parametrize("args, message", [
    (["constraints.nodes=[100000]"], "error: constraints.nodes: unknown node 100000"),
    (["explainer=exhaustive", "explainer.max_size=0"], "error: max_size must be"),
    (["certify=-2"], "error: certify must be"),
    (["explainer.it_max=-1"], "error: it_max must be an integer >= 0"),
])
def test_cli_bad_input_is_one_line_and_nothing_recorded_is_lost(tmp_path, args, message):
    pipeline.run(cfg_for(tmp_path, "explainer=greedy", "n_events=2"))
    before = sorted(p.name for p in (tmp_path / "records").iterdir())
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "explain.py"), *TINY, *args,
                           f"out_dir={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), done.stderr
    assert sorted(p.name for p in (tmp_path / "records").iterdir()) == before


def test_records_of_schema_1_still_read(tmp_path):
    run = tmp_path / "old"
    pipeline.run(cfg_for(run, "explainer=greedy", "n_events=2"))
    files = sorted((run / "records").glob("*.parquet"))
    old = pd.read_parquet(files[0])
    old = old.drop(columns=[c for c in old.columns if c in RECORD_DEFAULTS_V1
                            or c in ("size_before_prune", "constraints")])
    old["schema_version"] = 1
    old.to_parquet(files[0], index=False)
    records = read_records(run)
    assert len(records) == 2
    row = records.iloc[0]
    assert row.min_size_lower_bound == 0 and not row.certified_minimal
    assert row.size_before_prune == row["size"] and row.num_removable == row.num_candidates
    assert upgrade_records(pd.DataFrame()).empty
    assert np.isfinite(summaries.summary_table(records)["fidelity_plus"].iloc[-1])
