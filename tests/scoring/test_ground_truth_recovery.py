"""End to end on a toy rule stream: a hand-built model that reads only the motif, the
explainers, and the ground-truth metrics (a check that the pieces fit)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cftgnn.data.planted import make_rule_stream, motif_matches
from cftgnn.data.stream import EventStream
from cftgnn.explain import (
    BeamExplainer,
    CFTGNNExplainer,
    ExhaustiveExplainer,
    Explainer,
    GreedyExplainer,
    NSGA2Explainer,
    PerturbOneExplainer,
    PSOExplainer,
    RecentStrategy,
)
from cftgnn.oracle.oracle import Oracle
from cftgnn.scoring.ground_truth import cause_flip_rate, ground_truth_row
from cftgnn.testing import AdditiveBackend, make_candidates, make_oracle

WINDOW, DELAY = 20, 1


@pytest.fixture(scope="module")
def stream() -> EventStream:
    return make_rule_stream(num_nodes=30, num_events=300, seed=5, window=WINDOW, delay=DELAY,
                            motif_share=0.3, mean_gap=2.0)


def motif_model(s: EventStream, event: int) -> tuple[list[int], AdditiveBackend]:
    """The candidates of ``event`` (its history within the motif's reach) and a model that
    reads only the motif: the logit counts the kept legs of the motifs that predict
    ``src -> dst`` at this time (found from the events, not from ``s.causes``), less 1.5, so
    it flips only when both legs of a single motif are removed."""
    first, second = np.flatnonzero(s.labels == 1), np.flatnonzero(s.labels == 2)
    a, b = motif_matches(s.src, s.dst, s.t, first, second, WINDOW)
    hit = (s.src[a] == s.src[event]) & (s.dst[b] == s.dst[event]) \
        & (s.t[b] + DELAY == s.t[event])
    legs = sorted({int(x) for x in np.concatenate([a[hit], b[hit]])})
    reach = s.t[event] - DELAY - WINDOW
    candidates = [i for i in range(event) if s.t[i] >= reach]
    return candidates, AdditiveBackend(len(legs) - 0.5, dict.fromkeys(legs, 1.0))


def explained(s: EventStream) -> list[int]:
    """Effects with exactly one motif, among the first few."""
    assert s.causes is not None
    out = []
    for e in np.flatnonzero(s.labels == 3):
        candidates, model = motif_model(s, int(e))
        if len(model.weights) == 2 and len(candidates) <= 14:
            out.append(int(e))
    return out[:4]


def oracle(s: EventStream, event: int) -> Oracle:
    candidates, model = motif_model(s, event)
    return make_oracle(make_candidates(candidates, event_id=event), model)


EXACT: dict[str, Explainer] = {
    "exhaustive": ExhaustiveExplainer(RecentStrategy(), max_size=3),
    "greedy": GreedyExplainer(RecentStrategy()),
    "beam": BeamExplainer(RecentStrategy()),
    "cftgnn": CFTGNNExplainer(RecentStrategy()),
    "nsga2": NSGA2Explainer(RecentStrategy(), pop_size=8),
    "pso": PSOExplainer(RecentStrategy(), n_particles=8),
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_every_searcher_answers_the_cause_set(stream, name):
    events = explained(stream)
    assert len(events) >= 2
    for e in events:
        result = EXACT[name].explain(oracle(stream, e))
        row = ground_truth_row((), (), result.explanation if result.is_counterfactual else None,
                               stream.causes.of(e), result.candidate_ids)
        assert row["cause_size"] == 2 and row["cause_equal"] is True, (e, result.explanation)


def test_perturb_one_ranks_the_cause_first(stream):
    for e in explained(stream):
        result = PerturbOneExplainer().explain(oracle(stream, e))
        row = ground_truth_row(result.ranking, result.importance, result.explanation,
                               stream.causes.of(e))
        assert set(result.ranking[:2]) == set(stream.causes.of(e).tolist())
        assert row["cause_auc"] == 1.0 and row["cause_precision"] == 1.0


def test_the_flip_rate_tells_a_model_that_ignores_the_cause(stream):
    events = explained(stream)
    reads, ignores = [], []
    for e in events:
        cause = frozenset(int(x) for x in stream.causes.of(e))
        _, model = motif_model(stream, e)
        reads.append(model([frozenset(), cause]))
        ignores.append(AdditiveBackend(0.7, {})([frozenset(), cause]))
    assert cause_flip_rate(*np.array(reads).T) == 1.0
    assert cause_flip_rate(*np.array(ignores).T) == 0.0


def test_records_of_a_run_are_scored_and_summarized_per_explainer(stream):
    from cftgnn.scoring.ground_truth import score_records, summarize_ground_truth

    records = []
    for e in explained(stream):
        records.append(PerturbOneExplainer().explain(oracle(stream, e)).to_record())
        records.append(EXACT["greedy"].explain(oracle(stream, e)).to_record())
    # a row with no answer and one whose event has no cause
    records.append({**records[-1], "is_counterfactual": False, "explanation": []})
    noise = int(np.flatnonzero(stream.labels == 0)[5])
    records.append({**records[0], "event_id": noise})
    scored = score_records(records, stream.causes)
    assert len(scored) == len(records)
    summary = summarize_ground_truth(scored)
    n = len(explained(stream))
    assert summary["perturb_one"]["events"] == n + 1
    assert summary["perturb_one"]["cause_auc"] == 1.0  # the noise event (NaN) is left out
    assert summary["perturb_one"]["cause_equal"] == 1.0
    assert summary["greedy"]["cause_equal"] == 1.0 and summary["greedy"]["events"] == n + 1
    # a search's ranking puts its answer first (docs/design.md §8): the cause, here
    assert summary["greedy"]["cause_auc"] == 1.0


def test_a_run_directory_on_a_planted_stream_is_scored(tmp_path):
    """``explain.py``'s pipeline on a toy planted stream (fresh weights), then ``score_run``
    generates the stream again from ``run.json`` and scores the records."""
    import json

    from hydra import compose, initialize_config_dir

    import cftgnn.config  # noqa: F401  (the ${cftgnn_root:} resolver)
    from cftgnn.analysis.planted import score_run
    from cftgnn.errors import ConfigError
    from cftgnn.runs import pipeline

    s = make_rule_stream(num_events=400, feat_dim=3)
    effects = [int(e) for e in np.flatnonzero(s.labels == 3)[-3:]]
    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(str(conf), version_base="1.3"):
        cfg = compose("explain", overrides=[
            "dataset=planted", "dataset.num_events=400", "dataset.feat_dim=3",
            "checkpoint=null", "explainer=perturb_one", "progress=false",
            f"events=[{','.join(map(str, effects))}]", f"out_dir={tmp_path / 'run'}"])
    pipeline.run(cfg)
    scored, summary = score_run(tmp_path / "run")
    assert sorted(r["event_id"] for r in scored) == effects
    assert all(r["cause_size"] == 2 for r in scored)  # both legs are candidates
    assert all(0.0 <= r["cause_auc"] <= 1.0 for r in scored)
    assert summary["perturb_one"]["events"] == 3
    # a run whose stream has no causes is refused
    fingerprint = json.loads((tmp_path / "run" / "run.json").read_text())
    fingerprint["dataset"] = {"config": {"_target_": "cftgnn.data.make_synthetic_stream",
                                         "num_events": 50}, "num_events": 50}
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "run.json").write_text(json.dumps(fingerprint))
    with pytest.raises(ConfigError, match="has no planted causes"):
        score_run(tmp_path / "other")
