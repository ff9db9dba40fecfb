"""ExplanationResult validation and flat records."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

from cftgnn.errors import ExplainerError
from cftgnn.explain import SCHEMA_VERSION, ExplanationResult, ExplanationStatus


def _kwargs(**over: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        explainer="cftgnn", event_id=7, original_logit=2.0, candidate_ids=(1, 3, 5),
        explanation=(5, 1), final_logit=-0.5, is_counterfactual=True, iterations=4,
        search_calls=6, exact_calls=1, cache_hits=2, agreement=1.0, agreement_n=3,
        wall_time_s=0.01, oracle_time_s=0.001, trace=({"iteration": 1, "path": [5]},),
    )
    kw.update(over)
    return kw


def test_record_is_flat() -> None:
    r = ExplanationResult(**_kwargs())
    rec = r.to_record()
    assert rec["schema_version"] == SCHEMA_VERSION
    assert rec["explanation"] == [5, 1] and rec["candidate_ids"] == [1, 3, 5]
    assert rec["size"] == 2 and rec["oracle_calls"] == 7 and rec["status"] == "ok"
    assert rec["sparsity"] == pytest.approx(2 / 3)
    assert all(isinstance(v, (int, float, str, bool, list, type(None))) for v in rec.values())
    assert "trace_json" not in rec
    rec = r.to_record(include_trace=True)
    assert json.loads(rec["trace_json"]) == [{"iteration": 1, "path": [5]}]
    frame = pd.DataFrame([rec, ExplanationResult(**_kwargs(agreement=None)).to_record(True)])
    assert len(frame) == 2


def test_status_from_string() -> None:
    r = ExplanationResult(**_kwargs(status="zero_logit", explanation=(), final_logit=2.0,
                                    is_counterfactual=False))
    assert r.status is ExplanationStatus.ZERO_LOGIT and r.size == 0


@pytest.mark.parametrize("over", [
    {"explanation": (1, 1)},
    {"explanation": (2,)},
    {"iterations": -1},
    {"agreement": 1.5},
    {"final_logit": 0.5},  # claims counterfactual
    {"final_logit": float("nan")},
    {"status": "bogus"},
])
def test_validation(over: dict[str, Any]) -> None:
    with pytest.raises((ExplainerError, ValueError)):
        ExplanationResult(**_kwargs(**over))


def test_record_writes_to_parquet(tmp_path: Any) -> None:
    pytest.importorskip("pyarrow")
    rows = [ExplanationResult(**_kwargs()).to_record(include_trace=True),
            ExplanationResult(**_kwargs(agreement=None, explanation=(), final_logit=2.0,
                                        is_counterfactual=False)).to_record(True)]
    path = tmp_path / "r.parquet"
    pd.DataFrame(rows).to_parquet(path)
    back = pd.read_parquet(path)
    assert list(back["explanation"][0]) == [5, 1]
    assert back["schema_version"].tolist() == [SCHEMA_VERSION] * 2


def test_coalitions_are_checked_sorted_and_not_recorded() -> None:
    result = ExplanationResult(**_kwargs(candidate_ids=(1, 2, 3, 5),
                                         coalitions=[((3, 1), 0.5), ((2,), -1)]))
    assert result.coalitions == (((1, 3), 0.5), ((2,), -1.0))
    assert "coalitions" not in result.to_record()
    for bad in ([((1, 1), 0.0)], [((9,), 0.0)], [((1,), float("nan"))]):
        with pytest.raises(ExplainerError, match="coalition"):
            ExplanationResult(**_kwargs(candidate_ids=(1, 2, 3, 5), coalitions=bad))
