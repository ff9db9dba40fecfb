"""Explanation records are written with one explicit schema (``RECORD_SCHEMA``), so a run
directory reads as one dataset with plain ``pandas.read_parquet`` and ``pyarrow.dataset``,
whatever mix of statuses, empty explanations and absent measurements it holds."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.runs import pipeline
from cftgnn.runs.merge import merge_runs
from cftgnn.runs.records import RECORD_SCHEMA, RecordStore, arrow_table

ROOT = Path(__file__).resolve().parents[2]
#: Events 0 and 3 of the debug stream have no history (no candidates: empty explanation, no
#: agreement); 60 and 120 are explained, each with a set evaluated both ways.
EVENTS = "events=[0,60,3,120]"


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mixed")
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("explain", overrides=["debug=default", "checkpoint=null",
                                            "progress=false", "explainer=greedy", EVENTS,
                                            f"out_dir={out}"])
    pipeline.run(cfg)
    return out


def test_the_run_mixes_what_it_should(mixed_run: Path) -> None:
    frame = pd.read_parquet(mixed_run / "records").sort_values("event_id")
    assert frame.event_id.tolist() == [0, 3, 60, 120]
    sizes = [len(x) for x in frame.explanation]
    assert sizes[:2] == [0, 0] and min(sizes[2:]) > 0  # empty and non-empty explanations
    assert frame.agreement.isna().tolist() == [True, True, False, False]  # missing / present


def test_plain_pandas_reads_the_run_directory(mixed_run: Path) -> None:
    frame = pd.read_parquet(mixed_run / "records").sort_values("event_id", ignore_index=True)
    assert list(frame.columns) == RECORD_SCHEMA.names, (
        "a record column outside RECORD_SCHEMA: declare it in cftgnn.runs.records")
    assert frame.status.tolist()[:2] == ["no_candidates", "no_candidates"]
    assert all(int(e) in set(c) for x, c in zip(frame.explanation, frame.candidate_ids,
                                                strict=True) for e in x)
    assert frame.event_id.dtype == "int64" and frame.agreement.dtype == "float64"
    assert frame.is_counterfactual.dtype == bool
    assert math.isnan(frame.keep_logit[0]) and not math.isnan(frame.keep_logit[2])


def test_pyarrow_dataset_reads_the_run_directory_with_the_declared_schema(
        mixed_run: Path) -> None:
    table = ds.dataset(mixed_run / "records", format="parquet").to_table()
    assert table.num_rows == 4
    assert table.schema.equals(RECORD_SCHEMA)
    for f in sorted((mixed_run / "records").glob("*.parquet")):  # every file, not just one
        assert pq.read_schema(f).equals(RECORD_SCHEMA), f.name


def test_merged_records_keep_the_schema(mixed_run: Path, tmp_path: Path) -> None:
    merge_runs([mixed_run], tmp_path / "merged")
    table = ds.dataset(tmp_path / "merged" / "records", format="parquet").to_table()
    assert table.schema.equals(RECORD_SCHEMA) and table.num_rows == 4


def test_declared_columns_are_always_written_and_cast() -> None:
    table = arrow_table([{"event_id": 7, "agreement": None, "size": float("nan"),
                          "explanation": (), "original_logit": 2, "extra": "x"}],
                        RECORD_SCHEMA)
    assert table.schema.names == [*RECORD_SCHEMA.names, "extra"]
    row = table.to_pylist()[0]
    assert row["agreement"] is None and row["size"] is None and row["explanation"] == []
    assert row["original_logit"] == 2.0 and table.schema.field("original_logit").type == \
        pa.float64()
    assert row["status"] is None  # absent from the row: null, but the column is there


def test_a_store_without_schema_infers_types(tmp_path: Path) -> None:
    store = RecordStore(tmp_path, {"x": 1})
    store.write_rows(1, [{"event_id": 1, "found": True, "size": None}])
    assert pq.read_schema(store.records_dir / "0000000001.parquet").names == [
        "event_id", "found", "size"]


def test_the_schema_is_the_result_columns_then_the_event_context() -> None:

    from cftgnn.explain.result import ExplanationResult
    from cftgnn.runs.records import EventContext, event_record, record_fields
    from cftgnn.scoring.checks import Checks

    result = ExplanationResult(explainer="greedy", event_id=7, original_logit=1.0,
                               candidate_ids=(1, 2), explanation=(2,), final_logit=-0.5,
                               is_counterfactual=True, iterations=3, search_calls=4,
                               exact_calls=1, cache_hits=0, agreement=None, agreement_n=0,
                               wall_time_s=0.5, oracle_time_s=0.4)
    context = EventContext(setup_time_s=0.25, time_s=1.0, group="correct",
                           screen_logit=1.0, dataset="d", model="m", strategy_name="closest",
                           constraints="{}", auto_mode_ratio=float("nan"), shard=0,
                           checks=Checks(keep_logit=0.5))
    from cftgnn.scoring.ground_truth import CAUSE_COLUMNS
    from cftgnn.scoring.robustness import ROBUSTNESS_COLUMNS

    record = event_record(result, context)
    # the result's and the context's columns, then those robustness=true adds, then those of
    # a stream with planted causes
    assert list(record) + list(ROBUSTNESS_COLUMNS) + list(CAUSE_COLUMNS) == RECORD_SCHEMA.names
    assert record["setup_time_s"] == 0.25  # the context's replaces the result's
    context_names = [f.name for f in record_fields()]
    assert list(record)[-(len(context_names) - 1):] == [
        n for n in context_names if n != "setup_time_s"]
    assert record["keep_logit"] == 0.5  # the embedded checks' columns
