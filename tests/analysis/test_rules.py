"""``scripts/rules.py``: regional counterfactual rules, learned on one half of the explained
events and checked with an oracle on the other."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from testsupport.errors import refused

import cftgnn.config  # noqa: F401
from cftgnn.analysis.rules import (
    Condition,
    Rule,
    Run,
    RunOracles,
    candidate_features,
    check_rules,
    feature_table,
    group_rules,
    learn_rules,
    load_run,
    load_run_model,
    main,
    order_rules,
    split_events,
)
from cftgnn.data.index import TemporalIndex
from cftgnn.data.stream import EventStream
from cftgnn.data.synthetic import make_synthetic_stream
from cftgnn.errors import ConfigError
from cftgnn.files import file_sha256
from cftgnn.oracle.constraints import Constraints
from cftgnn.oracle.oracle import Oracle
from cftgnn.runs import pipeline
from cftgnn.runs.rundir import load_run_stream, run_checkpoint
from cftgnn.testing import AdditiveBackend, make_oracle

ROOT = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------ features by hand


def hand_stream() -> EventStream:
    """Events (src, dst, t); event 6 = (0, 1) at t = 10 is explained (u = 0, v = 1)."""
    events = [(0, 1, 1.0), (2, 3, 2.0), (1, 0, 3.0), (0, 2, 4.0), (3, 4, 5.0), (2, 4, 6.0),
              (0, 1, 10.0)]
    src, dst, t = (np.array(c) for c in zip(*events, strict=True))
    return EventStream(src, dst, t, None, None, 5, "hand")


def test_candidate_features_match_a_hand_computation():
    stream = hand_stream()
    index = TemporalIndex(stream)
    f = candidate_features(stream, index, index.candidates(6, k=2, m_max=64))
    # hops: 0 and 1 at distance 0, 2 at 1 (0-2), 3 and 4 at 2 (2-3, 2-4)
    assert f["candidate"].tolist() == [0, 1, 2, 3, 4, 5]
    assert (f["event_id"] == 6).all()
    assert f["hop"].tolist() == [0, 1, 0, 0, 2, 1]
    assert f["same_pair"].tolist() == [1, 0, 1, 0, 0, 0]  # (0,1) and (1,0)
    assert f["touches_src"].tolist() == [1, 0, 1, 1, 0, 0]
    assert f["touches_dst"].tolist() == [1, 0, 1, 0, 0, 0]
    assert f["recency_rank"].tolist() == [5, 4, 3, 2, 1, 0]
    assert f["pair_rank"].tolist() == [1, 0, 0, 0, 0, 0]  # event 2 is (0,1)'s latest
    assert f["time_gap"].tolist() == [9.0, 8.0, 7.0, 6.0, 5.0, 4.0]
    # degrees before event 6: node 0: 3, node 1: 2, node 2: 3, node 3: 2, node 4: 2
    assert f["min_degree"].tolist() == [2, 2, 2, 3, 2, 2]
    assert f["max_degree"].tolist() == [3, 3, 3, 3, 2, 3]
    # the cap keeps the 3 most recent; ranks are among those
    capped = candidate_features(stream, index, index.candidates(6, k=2, m_max=3))
    assert capped["candidate"].tolist() == [3, 4, 5]
    assert capped["recency_rank"].tolist() == [2, 1, 0]
    assert capped["same_pair"].tolist() == [0, 0, 0]


def test_record_features_label_removability_and_the_candidate_check():
    stream = hand_stream()
    record = {"event_id": 6, "candidate_ids": [0, 1, 2, 3, 4, 5], "explanation": [2, 4],
              "is_counterfactual": True, "group": "incorrect", "original_logit": -0.3,
              "status": "ok"}
    table = feature_table(stream, pd.DataFrame([record]), k=2, m_max=64,
                          constraints=Constraints(protect_pair=True))
    assert table["label"].tolist() == [False, False, True, False, True, False]
    assert table["removable"].tolist() == [False, True, False, True, True, True]
    assert (table["correct"] == 0).all()
    not_cf = feature_table(stream, pd.DataFrame([{**record, "is_counterfactual": False}]),
                           2, 64, Constraints())
    assert not not_cf["label"].any()  # only flipping explanations label candidates
    skipped = feature_table(stream, pd.DataFrame([{**record, "status": "no_candidates"}]),
                            2, 64, Constraints())
    assert skipped.empty
    with pytest.raises(ConfigError, match="not the record's"):
        feature_table(stream, pd.DataFrame([record]), k=1, m_max=64, constraints=Constraints())


def test_split_events_is_seeded_and_halves_distinct_events():
    train, held = split_events([5, 3, 3, 9, 1, 7, 2], seed=0)
    assert len(train) == 3 and len(held) == 3  # 6 distinct events
    assert set(train) | set(held) == {1, 2, 3, 5, 7, 9} and not set(train) & set(held)
    again = split_events([5, 3, 3, 9, 1, 7, 2], seed=0)
    assert train.tolist() == again[0].tolist()
    assert {tuple(split_events(range(20), s)[0]) for s in range(5)} != {tuple(train)}


def test_conditions_follow_the_tree_semantics_and_read_as_integers():
    table = pd.DataFrame({"recency_rank": [0, 1, 2, 3], "same_pair": [1, 0, 1, 0],
                          "time_gap": [60.0, 7200.0, 10.0, 90000.0], "hop": [0, 1, 2, 1],
                          "correct": [1, 1, 0, 0]})
    rank = Condition("recency_rank", high=1.5)
    assert rank.mask(table).tolist() == [True, True, False, False]
    assert rank.text() == "recency_rank <= 1" and "2 newest" in rank.phrase()
    assert Condition("recency_rank", high=0.5).text() == "recency_rank = 0"
    assert Condition("recency_rank", low=1.5).text() == "recency_rank >= 2"
    assert Condition("hop", low=0.5, high=1.5).text() == "hop = 1"
    assert Condition("hop", low=0.5, high=2.5).text() == "1 <= hop <= 2"
    assert Condition("same_pair", low=0.5).text() == "same_pair = 1"
    assert Condition("same_pair", high=0.5).phrase() == "do not link u and v"
    assert Condition("time_gap", high=3600.0).text() == "time_gap <= 1h"
    rule = Rule((Condition("same_pair", low=0.5), Condition("pair_rank", high=0.5),
                 Condition("correct", low=0.5)))
    assert rule.text == "same_pair = 1 and pair_rank = 0 and correct = 1"
    assert rule.action == ("correct predictions: remove the candidates that link u and v and "
                           "are the latest event between their two nodes")
    assert Rule(()).text == "all candidates" and Rule(()).action == "remove all candidates"


# ------------------------------------------------------------------ a planted rule

K, M_MAX = 1, 16


def planted(num_events: int = 120, noise: float = 0.3, seed: int = 0):
    """Records of a stream where the prediction flips iff the latest candidate between the
    explained pair is removed; explanations hold it, and sometimes one more event.

    Returns:
        ``(stream, records, oracle factory, calls)``: ``calls`` collects the event ids the
        factory was asked for.
    """
    stream = make_synthetic_stream(num_nodes=30, num_events=800, seed=seed, num_partners=1,
                                   p_partner=0.8)  # many repeated pairs
    index = TemporalIndex(stream)
    rng = np.random.default_rng(seed)
    rows, keys = [], {}
    for i in range(800 - num_events, 800):
        cands = index.candidates(i, K, M_MAX)
        if not len(cands):
            continue
        f = candidate_features(stream, index, cands)
        latest = f[(f["same_pair"] == 1) & (f["pair_rank"] == 0)]["candidate"].tolist()
        p0 = 1.0 if i % 2 else -1.0
        explanation: list[int] = []
        if latest:
            keys[i] = latest[0]
            explanation = [latest[0]]
            if rng.random() < noise:
                others = [int(e) for e in cands.ids if e != latest[0]]
                explanation.append(int(rng.choice(others)))
        rows.append({"event_id": i, "status": "ok", "candidate_ids": cands.ids.tolist(),
                     "explanation": explanation, "is_counterfactual": bool(latest),
                     "group": "correct" if p0 > 0 else "incorrect", "original_logit": p0})
    calls: list[int] = []

    def oracle_for(event_id: int):
        calls.append(event_id)
        p0 = 1.0 if event_id % 2 else -1.0
        weights = {keys[event_id]: 2 * p0} if event_id in keys else {}
        return make_oracle(index.candidates(event_id, K, M_MAX), AdditiveBackend(p0, weights))

    return stream, pd.DataFrame(rows), oracle_for, calls


def test_the_planted_rule_is_recovered_and_holds_on_held_out_events():
    stream, records, oracle_for, calls = planted()
    table = feature_table(stream, records, K, M_MAX, Constraints())
    train_ids, held_ids = split_events(table["event_id"], seed=0)
    rules = learn_rules(table[table["event_id"].isin(train_ids)], max_depth=3,
                        min_coverage=0.05, seed=0)
    assert rules
    held = table[table["event_id"].isin(held_ids)]
    checked = order_rules(check_rules(rules, held, oracle_for, progress=False))
    top = checked.iloc[0]
    # its conditions isolate the latest event between u and v
    assert "same_pair = 1" in top["rule"] and "pair_rank = 0" in top["rule"], top["rule"]
    assert "link u and v" in top["action"] and "latest event" in top["action"]
    assert top["precision"] == 1.0
    with_pair = held.groupby("event_id")["same_pair"].max()
    assert top["coverage"] == pytest.approx(with_pair.mean())
    assert top["heldout_events"] == len(held_ids) and top["mean_removed"] == 1.0
    # oracles are asked for in stream order, only for held-out events a rule covers
    assert calls == sorted(calls) and set(calls) <= set(held_ids.tolist())
    assert len(calls) == len(set(calls))


def test_group_rules_splits_learns_and_checks_through_an_injected_factory():
    stream, records, oracle_for, _ = planted(num_events=80, seed=1)
    run = Run(Path("planted"), {"k": K, "m_max": M_MAX, "constraints": {}}, records)
    result = group_rules("planted", [run], max_depth=2, min_coverage=0.05, top=2, seed=0,
                         oracles=lambda: oracle_for, progress=False, stream=stream)
    assert result.train_events + result.heldout_events == records["event_id"].nunique()
    assert len(result.table) <= 2 and result.table["rank"].tolist()[0] == 1
    assert result.table.iloc[0]["precision"] == 1.0
    assert (result.table["group"] == "planted").all()
    # no counterfactual at all: no rule, and no oracle is built
    none = records.assign(is_counterfactual=False)
    called = []
    empty = group_rules("none", [Run(Path("x"), run.fingerprint, none)], 2, 0.05, 2, 0,
                        oracles=lambda: called.append(1) or oracle_for, progress=False,
                        stream=stream)
    assert empty.table.empty and "no counterfactual" in empty.note and not called


def test_removal_sets_respect_the_oracles_removable_events():
    stream, records, _, _ = planted(num_events=40)
    index = TemporalIndex(stream)
    table = feature_table(stream, records, K, M_MAX, Constraints())
    backends: dict[int, AdditiveBackend] = {}  # each logs the sets it is asked for

    def protected_oracle(event_id: int) -> Oracle:
        cands = index.candidates(event_id, K, M_MAX)
        backends[event_id] = AdditiveBackend(1.0, {})
        return Oracle(cands, 1.0, exact=backends[event_id],
                      removable=cands.ids[1:])  # the oldest candidate is protected

    checked = check_rules([Rule(())], table, protected_oracle, progress=False)
    assert len(backends) == table["event_id"].nunique()
    for event_id, backend in backends.items():
        oldest = int(table[table["event_id"] == event_id]["candidate"].min())
        assert all(oldest not in s for s in backend.log)
        assert [len(s) for s in backend.log] in ([], [len(index.candidates(event_id, K,
                                                                           M_MAX)) - 1])
    assert checked.iloc[0]["precision"] == 0.0  # nothing flips this toy model


# ------------------------------------------------------------------ the command line

TINY = ["debug=default", "checkpoint=null", "explainer=greedy", "progress=false",
        "sample.prediction=any", "n_events=8"]


@pytest.fixture(scope="module")
def debug_run(tmp_path_factory) -> Path:
    """``python scripts/explain.py debug=default checkpoint=null n_events=8 explainer=greedy
    sample.prediction=any out_dir=...``, run in-process."""
    out = tmp_path_factory.mktemp("rules") / "run"
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("explain", overrides=[*TINY, f"out_dir={out}"])
    pipeline.run(cfg)
    return out


def test_the_script_writes_and_prints_the_rules_of_a_run(debug_run, tmp_path):
    out = tmp_path / "rules"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "rules.py"), str(debug_run),
                           "--out", str(out), "--max-depth", "3", "--min-coverage", "0.05",
                           "--top", "5", "--seed", "0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "### synthetic · tgn" in done.stdout
    assert "| # | rule | support (train) | coverage | precision | held-out events |" in \
        done.stdout
    assert "rules synthetic · tgn" in done.stderr  # the progress bar
    table = pd.read_csv(out / "rules.csv")
    assert len(table) >= 1 and (table["group"] == "synthetic · tgn").all()
    assert table["heldout_events"].eq(4).all() and table["train_events"].eq(4).all()
    assert table["coverage"].between(0, 1).all()
    assert table["score"].is_monotonic_decreasing
    assert "# Regional counterfactual rules" in (out / "rules.md").read_text()


def test_the_rebuilt_oracle_agrees_with_the_records_or_refuses(debug_run):
    run = load_run(debug_run)
    stream = load_run_stream(run.fingerprint)
    model = load_run_model(run, stream)
    event, logit = int(run.records["event_id"][0]), float(run.records["original_logit"][0])
    assert RunOracles(run, stream, model, {event: logit})(event).original_logit == \
        pytest.approx(logit, abs=1e-5)
    with pytest.raises(ConfigError, match="not the run's"):
        RunOracles(run, stream, model, {event: logit + 1.0})(event)


def _error(argv: list[str], capsys) -> str:
    return refused(capsys, main, argv)


def test_bad_input_ends_in_one_line_and_status_2(debug_run, tmp_path, capsys):
    assert "at least one run directory" in _error([], capsys)
    assert "does not exist" in _error([str(tmp_path / "nowhere")], capsys)
    (tmp_path / "plain").mkdir()
    assert "not a run directory" in _error([str(tmp_path / "plain")], capsys)
    empty = tmp_path / "empty"
    (empty / "records").mkdir(parents=True)
    shutil.copy(debug_run / "run.json", empty / "run.json")
    assert "no explained event" in _error([str(empty)], capsys)
    moved = tmp_path / "moved"
    shutil.copytree(debug_run, moved)
    fp = json.loads((moved / "run.json").read_text())
    fp["model"]["weights"] = str(tmp_path / "gone" / "tgn_synthetic.pt")
    (moved / "run.json").write_text(json.dumps(fp))
    line = _error([str(moved), "--checkpoint-dir", str(tmp_path / "gone")], capsys)
    assert "cannot be found" in line and "--checkpoint-dir" in line
    assert "--top" in _error([str(debug_run), "--top", "0"], capsys)


def test_a_checkpoint_retrained_in_place_is_refused_not_used(tmp_path):
    """``run_checkpoint`` (rules, rescore): the file at the run's recorded path must be the
    one it was explained with, by run.json's SHA-256; a fresh-weights run needs none."""
    pt = tmp_path / "tgn_uci.pt"
    pt.write_bytes(b"weights")
    fp = {"model": {"config": {"_target_": "cftgnn.models.TGN"}, "weights": str(pt),
                    "weights_sha256": file_sha256(pt)}}
    run = Run(tmp_path / "run", fp, pd.DataFrame())
    assert run_checkpoint(run) == pt
    pt.write_bytes(b"retrained")
    with pytest.raises(ConfigError, match=r"is not the one .* was explained with"):
        run_checkpoint(run)
    del fp["model"]["weights_sha256"]  # an older run.json without a checksum: the path
    assert run_checkpoint(run) == pt
