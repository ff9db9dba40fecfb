"""The factual explainers' timing benchmark: its parts give the explainers' own answers."""

from __future__ import annotations

import pytest
import torch
from testsupport.models import named_model

from cftgnn.benchmarks.explainers import benchmark_explainers, format_summary, summarize
from cftgnn.data import make_synthetic_stream
from cftgnn.explain.attention import AttentionExplainer
from cftgnn.explain.pgexplainer import EdgeScorer, PGExplainer, TrainedScorer
from cftgnn.explain.ranking import PerturbOneExplainer, RandomExplainer
from cftgnn.oracle.engine import ReplayEngine


@pytest.mark.parametrize("name", ["tgn1", "tgat2"])
def test_each_part_is_timed_and_the_answer_is_the_explainers_own(name):
    stream = make_synthetic_stream(25, 400, seed=7, feat_dim=2, p_tie=0.3)
    model = named_model(stream, name)
    events = [123, 261, 399]
    probe = ReplayEngine(model, stream).oracle(events[0], None, 12, "exact").probe
    assert probe is not None
    torch.manual_seed(0)
    scorer = TrainedScorer(EdgeScorer(int(probe.features().shape[1]), 8), {})
    explainers = {"random": RandomExplainer(), "attention": AttentionExplainer(),
                  "perturb_one": PerturbOneExplainer(), "pgexplainer": PGExplainer(trained=scorer)}
    table = benchmark_explainers(model, stream, events, explainers, m_max=12, progress=False)
    assert len(table) == len(events) * len(explainers)
    ok = table.dropna(subset=["inference_s"])
    assert len(ok) > 0 and (ok[["setup_s", "inference_s", "prefix_s"]] > 0).all().all()
    assert (ok["event_s"] - ok[["setup_s", "inference_s", "prefix_s"]].sum(axis=1)
            ).abs().max() < 1e-9
    # the size the benchmark found is the answer explain() gives on a fresh oracle
    engine = ReplayEngine(model, stream)
    for row in ok.itertuples(index=False):
        result = explainers[row.explainer].explain(engine.oracle(row.event_id, None, 12,
                                                                 "exact"))
        assert row.size == len(result.explanation)
    table.insert(0, "pair", f"synthetic · {name}")
    summary = summarize(table)
    assert sorted(summary["explainer"]) == sorted(explainers)
    text = format_summary(summary, 1)
    assert "| synthetic · " in text and "pgexplainer" in text
