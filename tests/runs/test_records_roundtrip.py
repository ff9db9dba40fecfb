"""A record reads back into the result it was written from (``ExplanationResult.from_record``),
for every explainer and every status, through the parquet files of a run directory; and the
record layout is the one declaration (``RESULT_COLUMNS``) the schema and upgrade derive from."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cftgnn.errors import ExplainerError
from cftgnn.explain import (
    BeamExplainer,
    CFTGNNExplainer,
    ExhaustiveExplainer,
    Explainer,
    ExplanationResult,
    GreedyExplainer,
    NSGA2Explainer,
    PerturbOneExplainer,
    PostProcessing,
    PSOExplainer,
    RandomExplainer,
    RecentStrategy,
    TGNNExplainer,
)
from cftgnn.explain.result import RECORD_DEFAULTS_V1, RESULT_COLUMNS, ExplanationStatus
from cftgnn.oracle import Oracle
from cftgnn.runs.records import (
    RECORD_SCHEMA,
    EventContext,
    RecordStore,
    event_record,
    read_records,
    upgrade_records,
)
from cftgnn.testing import AdditiveBackend, make_candidates

EXPLAINERS: dict[str, type[Explainer]] = {
    "cftgnn": CFTGNNExplainer, "greedy": GreedyExplainer, "beam": BeamExplainer,
    "exhaustive": ExhaustiveExplainer, "nsga2": NSGA2Explainer, "pso": PSOExplainer,
    "random": RandomExplainer, "perturb_one": PerturbOneExplainer,
    "tgnnexplainer": TGNNExplainer}
SMALL = {"nsga2": {"pop_size": 8, "max_iterations": 5},
         "pso": {"n_particles": 8, "max_iterations": 5},
         "tgnnexplainer": {"navigator": "perturb_one"}}
IDS = [1, 2, 3, 4, 5, 6]


def _batched_consequence(sets: list[frozenset[int]]) -> np.ndarray:
    return np.array([3 * len(s) for s in sets], dtype=np.int64)


def _oracle(status: str, event_id: int) -> Oracle:
    backend = AdditiveBackend(1.0, {e: (0.6 if e <= 3 else 0.1) for e in IDS})
    if status == "zero_logit":
        return Oracle(make_candidates(IDS), 0.0, exact=backend)
    if status == "no_candidates":
        return Oracle(make_candidates([]), 1.0, exact=AdditiveBackend(1.0, {}))
    oracle = Oracle(make_candidates(IDS), 1.0, exact=backend,
                    approximate=AdditiveBackend(1.0, {e: (0.55 if e <= 3 else 0.12)
                                                      for e in IDS}),
                    mode="approximate", removable=[] if status == "no_removable" else None,
                    consequence=_batched_consequence)
    return oracle


def _results() -> list[ExplanationResult]:
    out = []
    for n, (name, cls) in enumerate(sorted(EXPLAINERS.items())):
        for k, status in enumerate(s.value for s in ExplanationStatus):
            explainer = cls(RecentStrategy(), PostProcessing(prune=True, certify=1),
                            **SMALL.get(name, {}))
            result = explainer.explain(_oracle(status, 100 * n + k))
            out.append(dataclasses.replace(result, event_id=100 * n + k))
    return out


RESULTS = _results()


def test_every_explainer_and_status_is_covered() -> None:
    assert {(r.explainer, r.status) for r in RESULTS} == {
        (cls.name, s) for cls in EXPLAINERS.values() for s in ExplanationStatus}
    assert any(r.counterfactual_consequences for r in RESULTS)  # several, measured
    assert any(r.agreement is not None for r in RESULTS) and any(r.n_counterfactuals > 1
                                                                 for r in RESULTS)


@pytest.mark.parametrize("result", RESULTS, ids=lambda r: f"{r.explainer}-{r.status.value}")
def test_a_record_reads_back_into_its_result(result: ExplanationResult) -> None:
    assert ExplanationResult.from_record(result.to_record()) == result


def test_records_of_a_run_directory_read_back_into_their_results(tmp_path: Path) -> None:
    store = RecordStore(tmp_path, {"x": 1}, schema=RECORD_SCHEMA)
    context = EventContext(setup_time_s=0.25, time_s=1.0, group="correct",
                           screen_logit=1.0, dataset="toy", model="toy",
                           strategy_name="recent", constraints="{}", auto_mode_ratio=1.0,
                           shard=0)
    for r in RESULTS:
        store.write(event_record(r, context))
    back = [ExplanationResult.from_record(row) for _, row in read_records(tmp_path).iterrows()]
    want = sorted((dataclasses.replace(r, setup_time_s=0.25) for r in RESULTS),
                  key=lambda r: r.event_id)
    assert back == want


def test_the_trace_reads_back_too() -> None:
    oracle = _oracle("ok", 1)
    result = CFTGNNExplainer(RecentStrategy(), it_max=5, trace=True).explain(oracle)
    back = ExplanationResult.from_record(result.to_record(include_trace=True))
    assert back.trace == result.trace and back.trace


def test_a_record_that_contradicts_itself_is_refused() -> None:
    record = RESULTS[0].to_record()
    record["size"] += 1
    with pytest.raises(ExplainerError, match="size"):
        ExplanationResult.from_record(record)
    del record["explanation"]
    with pytest.raises(ExplainerError, match="lacks column 'explanation'"):
        ExplanationResult.from_record(record)


def test_the_schema_and_upgrade_derive_from_the_declaration() -> None:
    names = [c.name for c in RESULT_COLUMNS]
    assert RECORD_SCHEMA.names[: len(names)] == names == list(RESULTS[0].to_record())
    fields = [f.name for f in dataclasses.fields(ExplanationResult)
              if f.name not in ("trace", "coalitions")]  # the two kept out of records
    assert set(fields) <= set(names)  # every attribute is a column
    assert set(RECORD_DEFAULTS_V1) == {c.name for c in RESULT_COLUMNS if c.since == 2}


def test_rows_older_than_version_4_read_back_without_a_ranking() -> None:
    """A version-3 row (no ranking columns) next to a version-4 one: the old row reads as an
    empty ranking, the new one keeps its ranking."""
    old = {k: v for k, v in RESULTS[0].to_record().items() if k not in ("ranking", "importance")}
    old["schema_version"] = 3
    new = RESULTS[1].to_record()
    df = upgrade_records(pd.DataFrame([old, new]))
    assert list(df["ranking"].iloc[0]) == [] and list(df["importance"].iloc[0]) == []
    assert list(df["ranking"].iloc[1]) == list(RESULTS[1].ranking)
    assert ExplanationResult.from_record(df.iloc[0].to_dict()).ranking == ()


def test_records_older_than_version_6_read_back_with_unmeasured_check_times(
        tmp_path: Path) -> None:
    """A version-5 file (no ``keep_time_s`` / ``curve_time_s``) in a run directory next to
    a version-6 one: the old row reads NaN (not measured), the new one keeps its seconds."""
    new = {**RESULTS[0].to_record(), "keep_time_s": 0.25, "curve_time_s": 1.5}
    old = {**RESULTS[1].to_record(), "schema_version": 5}
    (tmp_path / "records").mkdir()
    for n, row in enumerate((old, new)):
        pd.DataFrame([row]).to_parquet(tmp_path / "records" / f"{n:010d}.parquet")
        if n == 0:  # a directory of old records only: the columns are there, NaN
            alone = read_records(tmp_path)
            assert alone[["keep_time_s", "curve_time_s"]].isna().all().all()
    df = read_records(tmp_path)
    assert np.isnan(df["keep_time_s"].iloc[0]) and np.isnan(df["curve_time_s"].iloc[0])
    assert (df["keep_time_s"].iloc[1], df["curve_time_s"].iloc[1]) == (0.25, 1.5)


def test_records_older_than_version_8_read_back_with_an_unknown_next_size_share(
        tmp_path: Path) -> None:
    """A version-7 file (no ``next_size_share``) next to a version-8 record of an exhaustive
    search cut mid-size: the old row reads NaN (not recorded: unknown), the new one keeps its
    share, and both read back into results."""
    oracle = Oracle(make_candidates(IDS), 1.0, exact=AdditiveBackend(1.0, dict.fromkeys(IDS,
                                                                                      0.1)))
    cut = ExhaustiveExplainer(max_size=3, max_oracle_calls=10).explain(oracle)
    assert cut.cut_short and cut.next_size_share == pytest.approx(4 / 15)  # 6 singles, 4 pairs
    old = {k: v for k, v in RESULTS[1].to_record().items() if k != "next_size_share"}
    old["schema_version"] = 7
    (tmp_path / "records").mkdir()
    for n, row in enumerate((old, {**cut.to_record(), "event_id": 999})):
        pd.DataFrame([row]).to_parquet(tmp_path / "records" / f"{n:010d}.parquet")
        if n == 0:  # a directory of old records only: the column is there, NaN
            assert read_records(tmp_path)["next_size_share"].isna().all()
    df = read_records(tmp_path).set_index("event_id", drop=False)
    assert np.isnan(df.loc[RESULTS[1].event_id, "next_size_share"])
    assert df.loc[999, "next_size_share"] == pytest.approx(4 / 15)
    assert ExplanationResult.from_record(df.loc[RESULTS[1].event_id].to_dict()
                                         ).next_size_share is None
    assert ExplanationResult.from_record(df.loc[999].to_dict()).next_size_share == \
        pytest.approx(4 / 15)
