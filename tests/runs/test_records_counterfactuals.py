"""Several counterfactuals per event (schema version 3): validation, records, old records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from cftgnn.errors import ExplainerError
from cftgnn.explain.nsga2 import NSGA2Explainer
from cftgnn.explain.result import SCHEMA_VERSION, ExplanationResult
from cftgnn.oracle.oracle import Oracle
from cftgnn.runs.records import RECORD_SCHEMA, RecordStore, read_records, upgrade_records
from cftgnn.testing import HashedBackend, make_candidates

F = frozenset


def result(**over: Any) -> ExplanationResult:
    """p_orig = 2; the answer (5, 1) and two more counterfactuals."""
    kw: dict[str, Any] = dict(
        explainer="nsga2", event_id=7, original_logit=2.0, candidate_ids=(1, 3, 5, 6),
        explanation=(5, 1), final_logit=-0.5, is_counterfactual=True, iterations=4,
        search_calls=6, exact_calls=1, cache_hits=2, agreement=1.0, agreement_n=3,
        wall_time_s=0.01, oracle_time_s=0.001,
        counterfactuals=((5, 1), (3, 6), (1, 3, 6)), counterfactual_logits=(-0.5, -0.1, -2.0),
        counterfactual_consequences=(4, 0, 7),
    )
    kw.update(over)
    return ExplanationResult(**kw)


def test_several_counterfactuals_are_kept_and_counted():
    r = result()
    assert r.n_counterfactuals == 3 and r.counterfactuals[0] == r.explanation
    rec = r.to_record()
    assert rec["schema_version"] == SCHEMA_VERSION >= 3
    assert rec["n_counterfactuals"] == 3
    assert rec["counterfactuals"] == [[5, 1], [3, 6], [1, 3, 6]]
    assert rec["counterfactual_logits"] == [-0.5, -0.1, -2.0]
    assert rec["counterfactual_consequences"] == [4, 0, 7]


def test_one_answer_defaults():
    r = result(counterfactuals=(), counterfactual_logits=(), counterfactual_consequences=None)
    assert r.counterfactuals == ((5, 1),) and r.counterfactual_logits == (-0.5,)
    assert r.n_counterfactuals == 1 and r.counterfactual_consequences is None
    rec = r.to_record()
    assert rec["counterfactual_consequences"] is None
    none = result(explanation=(), final_logit=1.0, is_counterfactual=False, counterfactuals=(),
                  counterfactual_logits=(), counterfactual_consequences=None)
    assert none.n_counterfactuals == 0 and none.to_record()["counterfactuals"] == []


@pytest.mark.parametrize("over, match", [
    ({"counterfactuals": ((5, 1), (6, 3), (3, 6)), "counterfactual_consequences": (4, 0, 7)},
     "same set twice"),
    ({"counterfactual_logits": (-0.5, 0.1, -2.0)}, "does not flip"),
    ({"counterfactual_logits": (-0.5, 0.0, -2.0)}, "does not flip"),  # 0 is no flip
    ({"counterfactuals": ((3, 6), (5, 1), (1, 3, 6)),
      "counterfactual_logits": (-0.1, -0.5, -2.0)}, "first counterfactual must be the answer"),
    ({"counterfactual_consequences": (4, 0)}, "consequences"),
    ({"counterfactual_consequences": (4, 0, 7, 1)}, "consequences"),
    ({"counterfactual_logits": (-0.5, -0.1)}, "logits"),
    ({"counterfactuals": ((5, 1), (3, 9), (1, 3, 6))}, "non-candidate"),
    ({"final_logit": 1.0, "is_counterfactual": False}, "answer does not flip"),
])
def test_invalid_counterfactual_lists_are_rejected(over, match):
    with pytest.raises(ExplainerError, match=match):
        result(**over)


def test_the_first_counterfactual_may_list_the_answer_in_another_order():
    assert result(counterfactuals=((1, 5), (3, 6), (1, 3, 6))).counterfactuals[0] == (1, 5)


def test_records_round_trip_through_the_store(tmp_path: Path):
    store = RecordStore(tmp_path, {"x": 1}, schema=RECORD_SCHEMA)
    rows = {7: result(), 8: result(event_id=8, counterfactual_consequences=None),
            9: result(event_id=9, explanation=(), final_logit=1.0, is_counterfactual=False,
                      counterfactuals=(), counterfactual_logits=(),
                      counterfactual_consequences=None)}
    for r in rows.values():
        store.write(r.to_record())
    schema = pq.read_schema(store.records_dir / "0000000007.parquet")
    assert schema.field("counterfactuals").type == RECORD_SCHEMA.field("counterfactuals").type
    df = store.load()
    assert df.event_id.tolist() == [7, 8, 9]
    assert df.n_counterfactuals.tolist() == [3, 3, 0]
    lists = [[list(map(int, c)) for c in row] for row in df.counterfactuals]
    assert lists == [[[5, 1], [3, 6], [1, 3, 6]]] * 2 + [[]]
    assert [list(x) for x in df.counterfactual_logits] == [[-0.5, -0.1, -2.0]] * 2 + [[]]
    assert list(df.counterfactual_consequences[0]) == [4, 0, 7]
    assert df.counterfactual_consequences[1] is None
    assert df.counterfactual_consequences[2] is None


def test_a_searched_result_round_trips(tmp_path: Path):
    backend = HashedBackend(1.0, spread=1.0, seed=3)
    oracle = Oracle(make_candidates(range(6), event_id=10), 1.0, exact=backend,
                    consequence=lambda sets: [sum(s) for s in sets])
    r = NSGA2Explainer(pop_size=64, max_iterations=0).explain(oracle)
    assert r.n_counterfactuals > 1
    store = RecordStore(tmp_path, {"x": 1}, schema=RECORD_SCHEMA)
    store.write(r.to_record())
    row = store.load().iloc[0]
    assert [tuple(int(e) for e in c) for c in row.counterfactuals] == list(r.counterfactuals)
    assert tuple(row.counterfactual_logits) == r.counterfactual_logits
    assert tuple(row.counterfactual_consequences) == r.counterfactual_consequences


def v2_frame() -> pd.DataFrame:
    """Two records as schema version 2 wrote them: no columns of several counterfactuals."""
    rows = [result().to_record(),
            result(event_id=8, explanation=(), final_logit=1.0, is_counterfactual=False,
                   counterfactuals=(), counterfactual_logits=(),
                   counterfactual_consequences=None).to_record()]
    new = ("n_counterfactuals", "counterfactuals", "counterfactual_logits",
           "counterfactual_consequences")
    frame = pd.DataFrame(rows).drop(columns=list(new))
    frame["schema_version"] = 2
    return frame


def test_schema_2_frames_are_upgraded():
    up = upgrade_records(v2_frame())
    assert up.n_counterfactuals.tolist() == [1, 0]
    assert up.counterfactuals.tolist() == [[[5, 1]], []]
    assert up.counterfactual_logits.tolist() == [[-0.5], []]
    assert up.counterfactual_consequences.isna().all()
    assert upgrade_records(up).equals(up)  # idempotent


def test_schema_2_files_are_upgraded_on_read(tmp_path: Path):
    (tmp_path / "records").mkdir()
    for _, row in v2_frame().iterrows():
        pd.DataFrame([row]).to_parquet(tmp_path / "records" / f"{row.event_id:010d}.parquet",
                                       index=False)
    df = read_records(tmp_path)
    assert df.n_counterfactuals.tolist() == [1, 0]
    assert [[list(c) for c in x] for x in df.counterfactuals] == [[[5, 1]], []]


def test_a_run_directory_mixing_schema_2_and_3_files_is_upgraded_per_row(tmp_path: Path):
    store = RecordStore(tmp_path, {"x": 1}, schema=RECORD_SCHEMA)
    store.write(result(event_id=9).to_record())
    v2_frame().iloc[:1].to_parquet(store.records_dir / "0000000007.parquet", index=False)
    df = read_records(tmp_path)
    assert df.event_id.tolist() == [7, 9]
    assert df.n_counterfactuals.tolist() == [1, 3]
    assert [list(c) for c in df.counterfactuals[0]] == [[5, 1]]
