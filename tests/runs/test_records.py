"""Resumable record store: atomic per-event files, fingerprint checks."""

from __future__ import annotations

import json

import pytest

from cftgnn.runs.records import RecordStore, RunDirectoryError, fingerprint_diff, read_records

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


def test_a_run_of_an_older_schema_resumes_and_a_newer_one_is_refused(tmp_path):
    old = {**FP, "schema_version": 7}
    RecordStore(tmp_path, old).write({**rec(5), "schema_version": 7})
    new = {**FP, "schema_version": 8}
    store = RecordStore(tmp_path, new)  # an upgrade of the code: the run goes on
    assert store.done() == {5}
    assert json.loads((tmp_path / "run.json").read_text()) == new
    store.write({**rec(6), "schema_version": 8})
    assert store.load().schema_version.tolist() == [7, 8]  # each row keeps its own
    with pytest.raises(RunDirectoryError, match="differs in: schema_version"):
        RecordStore(tmp_path, old)  # older code never writes into a newer run
    with pytest.raises(RunDirectoryError, match=r"differs in: schema_version, seed"):
        RecordStore(tmp_path, {**old, "seed": 1})  # with other settings: refused as before


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


def test_a_run_directory_reads_as_one_dataset(tmp_path):
    import pandas as pd
    import pyarrow.dataset as ds

    from cftgnn.runs.records import column_type

    store = RecordStore(tmp_path, {"x": 1})
    store.write({"event_id": 3, "explanation": [], "agreement": None, "keep_logit": float("nan"),
                 "size": 0, "status": "no_candidates", "is_counterfactual": False})
    store.write({"event_id": 4, "explanation": [7, 2], "agreement": 0.5, "keep_logit": 1.5,
                 "size": 2, "status": "ok", "is_counterfactual": True})
    store.write_rows(5, [{"event_id": 5, "explanation": [1], "agreement": 1.0,
                          "keep_logit": None, "size": 1, "status": "ok",
                          "is_counterfactual": True}])
    frame = pd.read_parquet(tmp_path / "records")  # plain pandas, no project reader
    assert sorted(frame.event_id) == [3, 4, 5]
    assert [list(x) for x in frame.sort_values("event_id").explanation] == [[], [7, 2], [1]]
    table = ds.dataset(tmp_path / "records", format="parquet").to_table()
    assert table.num_rows == 3
    assert str(table.schema.field("explanation").type).startswith("list<")
    assert str(table.schema.field("agreement").type) == "double"
    assert column_type([1, None, 2.5]) == column_type([None]) == column_type([float("nan")])
    assert str(column_type([1, None])) == "int64"
    assert str(column_type([[], None])).startswith("list")
