"""Resumable record store: atomic per-event files, fingerprint checks."""

from __future__ import annotations

import json

import pytest

from cftgnn.evaluation.records import RecordStore, RunDirectoryError, fingerprint_diff, read_records

FP = {"dataset": {"name": "uci"}, "explainer": {"it_max": 300}, "seed": 0}


def rec(i: int) -> dict:
    return {"event_id": i, "explanation": [i - 2, i - 1], "final_logit": -0.5 * i, "ok": True}


def test_write_done_load_roundtrip(tmp_path):
    store = RecordStore(tmp_path / "run", FP)
    assert store.done() == set() and store.load().empty
    for i in (30, 4, 12):
        store.write(rec(i))
    assert store.done() == {4, 12, 30}
    df = store.load()
    assert df.event_id.tolist() == [4, 12, 30]  # ordered by event id
    assert list(df.explanation[1]) == [10, 11] and df.final_logit[2] == -15.0
    assert read_records(tmp_path / "run").equals(df)
    # an interrupted write leaves a temporary file behind, which is not a record
    (store.records_dir / ".0000000099.parquet.tmp").write_bytes(b"partial")
    assert store.done() == {4, 12, 30}


def test_reopening_with_the_same_fingerprint_resumes(tmp_path):
    RecordStore(tmp_path, FP).write(rec(5))
    again = RecordStore(tmp_path, json.loads(json.dumps(FP)))
    assert again.done() == {5}
    again.write(rec(5))  # rewriting an event replaces its record, never duplicates it
    assert len(again.load()) == 1


def test_another_configuration_is_refused_and_nothing_is_lost(tmp_path):
    RecordStore(tmp_path, FP).write(rec(5))
    other = {**FP, "explainer": {"it_max": 100}, "seed": 1}
    with pytest.raises(RunDirectoryError, match=r"differs in: explainer\.it_max, seed"):
        RecordStore(tmp_path, other)
    assert RecordStore(tmp_path, FP).done() == {5}
    assert json.loads((tmp_path / "run.json").read_text()) == FP


def test_records_without_fingerprint_or_broken_fingerprint(tmp_path):
    (tmp_path / "a" / "records").mkdir(parents=True)
    (tmp_path / "a" / "records" / "0000000001.parquet").write_bytes(b"x")
    with pytest.raises(RunDirectoryError, match="no run.json"):
        RecordStore(tmp_path / "a", FP)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "run.json").write_text("{not json")
    with pytest.raises(RunDirectoryError, match="not valid JSON"):
        RecordStore(tmp_path / "b", FP)


def test_fingerprint_diff_is_over_dotted_leaves():
    assert fingerprint_diff({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}, "d": 0}) == [
        "a.c", "d"]
    assert fingerprint_diff(FP, FP) == []


def test_a_directory_without_records_is_taken_over_by_another_configuration(tmp_path):
    RecordStore(tmp_path, FP)  # e.g. a run that failed on bad input before its first record
    other = {**FP, "seed": 1}
    assert RecordStore(tmp_path, other).done() == set()
    assert json.loads((tmp_path / "run.json").read_text()) == other
