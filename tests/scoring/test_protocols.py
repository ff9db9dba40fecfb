"""Each paper's curve protocol beside the common one (``protocol=``): the
kept sets and metrics against hand computations, the negative pairs' exact logits against a
fresh replay, and the option's checks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import cftgnn.config  # noqa: F401
from cftgnn.errors import ConfigError
from cftgnn.explain.result import ExplanationResult
from cftgnn.oracle.oracle import Oracle
from cftgnn.runs import pipeline
from cftgnn.runs.options import protocols_choice
from cftgnn.runs.records import read_records, upgrade_records
from cftgnn.scoring import checks
from cftgnn.scoring.curves import FID_SHARES, aufsc_keep, best_fid
from cftgnn.scoring.protocols import (
    TEMPME_RATIOS,
    CurveSet,
    Protocol,
    negative_destination,
    run_protocols,
    sampled_slots,
    temgx_removal_sets,
    tempme_acc_auc,
    tempme_accuracy,
    tempme_kept_count,
    tempme_removal_sets,
    tgx_best_coalitions,
    tgx_candidates,
    tgx_coalition_removal_sets,
    tgx_kept_count,
    tgx_removal_sets,
)
from cftgnn.testing.backends import AdditiveBackend
from cftgnn.testing.search import make_candidates

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


def result(candidates, ranking=(), coalitions=None, p0=1.0) -> ExplanationResult:
    ranking = tuple(ranking)
    return ExplanationResult(
        explainer="toy", event_id=max(candidates) + 1, original_logit=p0,
        candidate_ids=tuple(candidates), explanation=(), final_logit=p0,
        is_counterfactual=False, iterations=0, search_calls=0, exact_calls=0, cache_hits=0,
        agreement=None, agreement_n=0, wall_time_s=0.0, oracle_time_s=0.0, ranking=ranking,
        importance=tuple(float(len(ranking) - j) for j in range(len(ranking))),
        coalitions=coalitions)


# --------------------------------------------------------------------------- tgnnexplainer


def test_kept_counts_are_the_authors_float_grid_for_every_m_up_to_20():
    grid = np.arange(0, 1.05, 0.05)  # EvaluatorAttenTG / EvaluatorMCTSTG's sparsity levels
    assert len(grid) == len(FID_SHARES) == 21
    for m in range(1, 21):
        # a ranking: candidates[:int(spar * candidate_num) + 1]
        assert [tgx_kept_count(s, m) for s in FID_SHARES] == [
            min(int(s * m) + 1, m) for s in grid]
        # a search: the coalitions with len(c) / m <= s
        from cftgnn.scoring.protocols import tgx_coalition_size_limit
        assert [tgx_coalition_size_limit(s, m) for s in FID_SHARES] == [
            max(k for k in range(m + 1) if k / m <= s) for s in grid]
    # by hand, m = 20: 1, 2, 3, 4, ... kept; all 20 from s = 0.95 on
    assert [tgx_kept_count(s, 20) for s in FID_SHARES[:4]] == [1, 2, 3, 4]
    assert tgx_kept_count(0.95, 20) == tgx_kept_count(1.0, 20) == 20


def test_a_ranking_keeps_floor_s_m_plus_one_of_the_20_most_recent_and_every_base_event():
    removable = list(range(1, 26))  # 25 events: 6..25 are the candidates, 1..5 base events
    assert tgx_candidates(removable) == list(range(6, 26))
    # the ranking puts two base events first; they are never removed nor kept by count
    ranking = [1, 2, 25, 7, 6, *range(8, 25), 3, 4, 5]
    sets = tgx_removal_sets(ranking, removable)
    assert len(sets) == 21
    assert all(not set(s) & {1, 2, 3, 4, 5} for s in sets)  # base events kept
    cand = set(range(6, 26))
    assert set(sets[0]) == cand - {25}  # s = 0: 1 kept
    assert set(sets[1]) == cand - {25, 7}  # s = 0.05: ⌊1⌋ + 1 = 2 kept
    assert set(sets[2]) == cand - {25, 7, 6}  # s = 0.10: 3 kept
    assert set(sets[10]) == cand - {25, 7, 6, *range(8, 16)}  # s = 0.5: 11 kept
    assert sets[19] == sets[20] == ()  # s = 0.95: 20 kept, nothing removed
    # fewer removable events than 20: m is their number (here 4, s = 0.5 keeps 3)
    assert tgx_removal_sets([3, 1, 2, 4], [1, 2, 3, 4])[10] == (4,)
    # an event of the candidates the ranking leaves out is ranked last (most recent first)
    assert tgx_removal_sets([2], [1, 2, 3])[0] == (1, 3)
    assert tgx_removal_sets([2], [1, 2, 3])[10] == (1,)  # ⌊1.5⌋ + 1 = 2 kept: 2, then 3


def test_a_search_is_scored_by_its_best_coalition_per_level():
    removable = list(range(1, 23))  # candidates 3..22, base events 1, 2
    coalitions = [
        ((22,), 0.5),  # size 1
        ((21, 22), 0.9),  # size 2, the best reward
        ((20,), 0.7),  # size 1, the best of size 1
        ((1, 20), 0.8),  # a base event: counted as the coalition (20,) among candidates
        (tuple(range(3, 13)), 0.2),  # size 10
        ((5, 6), 0.9),  # size 2, as good as (21, 22) but scored later
        (tuple(range(3, 23)), 0.0),  # the root: everything kept
    ]
    best = tgx_best_coalitions(coalitions, removable)
    assert best[0] == ()  # s = 0: no scored coalition fits, the empty one (nothing kept)
    assert best[1] == (20,)  # s = 0.05: |c| <= 1: (20,) at 0.8 (its base event left out)
    assert best[2] == (21, 22)  # s = 0.10: |c| <= 2: 0.9, the first scored of the tie
    assert all(b == (21, 22) for b in best[2:])  # no larger coalition does better
    sets = tgx_coalition_removal_sets(coalitions, removable)
    assert sets[0] == tuple(range(3, 23))  # every candidate removed, base events kept
    assert sets[2] == tuple(range(3, 21))
    # a tie in reward goes to the smaller coalition
    assert tgx_best_coalitions([((3, 4), 1.0), ((5,), 1.0)], removable)[-1] == (5,)


def test_tgx_curve_logits_are_exact_logits_of_those_sets_in_one_batch():
    weights = {e: 0.1 * e for e in range(1, 26)}
    backend = AdditiveBackend(2.0, weights)
    oracle = Oracle(make_candidates(list(range(1, 26))), 2.0, exact=backend)
    ranking = list(range(25, 0, -1))
    got = checks.tgx_curve_logits(oracle, result(range(1, 26), ranking))
    sets = tgx_removal_sets(ranking, list(range(1, 26)))
    assert backend.batches == 1
    assert got == pytest.approx([backend.logit(frozenset(s)) for s in sets])
    # s = 0 keeps 25 only: 6..24 removed, the base events 1..5 stay
    assert got[0] == pytest.approx(2.0 - sum(0.1 * e for e in range(6, 25)))
    assert got[-1] == pytest.approx(2.0)
    # a search explainer: its coalitions, not its ranking
    coalitions = (((25,), 0.3), ((24, 25), 0.1))
    got = checks.tgx_curve_logits(oracle, result(range(1, 26), ranking, coalitions))
    assert got[0] == pytest.approx(2.0 - sum(0.1 * e for e in range(6, 26)))  # empty kept
    assert got[1] == got[-1] == pytest.approx(2.0 - sum(0.1 * e for e in range(6, 25)))
    assert checks.tgx_curve_logits(oracle, result(range(1, 26))) == ()
    # Best-FID and AUFSC over those logits are the common functions on another grid
    p0 = np.array([2.0])
    fid = np.array(got) - 2.0
    assert best_fid(p0, [got]) == pytest.approx(fid.max())
    assert aufsc_keep(p0, [got]) == pytest.approx(
        np.trapezoid(np.maximum.accumulate(fid), FID_SHARES))


# --------------------------------------------------------------------------- tempme


def test_the_ratio_grid_and_the_kept_counts_at_its_edges():
    assert len(TEMPME_RATIOS) == 16
    assert TEMPME_RATIOS[0] == 0.01 and TEMPME_RATIOS[1] == 0.02
    assert TEMPME_RATIOS[-1] == 0.30
    assert np.allclose(np.diff(TEMPME_RATIOS[1:]), 0.02)
    # TGN (1 layer, 10 neighbours): 2 endpoints x 10 slots; TGAT (2 layers): 2 x (10 + 100)
    assert sampled_slots(10, 1) == 20 and sampled_slots(10, 2) == 220
    assert sampled_slots(20, 2) == 2 * 420  # TempME's Wikipedia num_edge, per endpoint
    assert tempme_kept_count(0.01, 20) == 1  # ⌈0.2⌉
    assert tempme_kept_count(0.30, 20) == 6
    assert tempme_kept_count(0.01, 220) == 3  # ⌈2.2⌉
    assert tempme_kept_count(0.30, 220) == 66
    assert tempme_kept_count(0.01, 1) == 1 and tempme_kept_count(0.3, 1) == 1  # at least 1
    with pytest.raises(ValueError):
        sampled_slots(0, 1)


def test_tempme_removal_sets_keep_the_top_of_the_ranking_and_all_of_it_past_r():
    removable = [1, 2, 3, 4, 5, 6, 7, 8]
    ranking = [8, 3, 5, 1, 2]  # 4, 6, 7 unranked: always removed
    sets = tempme_removal_sets(ranking, removable, slots=20)
    assert sets[0] == (1, 2, 3, 4, 5, 6, 7)  # 0.01: 1 kept (8)
    assert sets[TEMPME_RATIOS.index(0.10)] == (1, 2, 4, 5, 6, 7)  # ⌈2⌉ = 2 kept
    assert sets[TEMPME_RATIOS.index(0.14)] == (1, 2, 4, 6, 7)  # ⌈2.8⌉ = 3 kept
    assert sets[-1] == (4, 6, 7)  # ⌈6⌉ = 6 > 5 ranked: all of the ranking kept


def test_tempme_accuracy_counts_positive_and_negative_pairs_by_label():
    width = len(TEMPME_RATIOS)
    p0 = [2.0, -1.0]
    pos = [[1.0] * width, [-0.5] * (width - 1) + [0.5]]
    n0 = [-3.0, 0.0]  # a logit of exactly 0 is label 0, as sigmoid(0) > 0.5 is false
    neg = [[-1.0] * (width - 1) + [1.0], [-2.0] * width]
    acc = tempme_accuracy(p0, pos, n0, neg)
    # 4 pairs; at the last ratio two change label (event 2's pair, event 1's negative)
    assert acc[:-1] == pytest.approx([1.0] * (width - 1))
    assert acc[-1] == pytest.approx(0.5)
    assert tempme_acc_auc(p0, pos, n0, neg) == pytest.approx((width - 1 + 0.5) / width)
    # positives only would read 1.0 and 0.5 too, but a negative that flips counts:
    neg_flip = [[1.0] * width, [-2.0] * width]
    assert tempme_accuracy(p0, pos, n0, neg_flip)[0] == pytest.approx(0.75)
    # an event without its negative row is left out entirely (both of its pairs)
    acc_one = tempme_accuracy(p0, pos, n0, [neg[0], []])
    assert acc_one[0] == pytest.approx(1.0)
    assert acc_one[-1] == pytest.approx(0.5)  # event 1's negative changed, its pair did not
    assert math.isnan(tempme_acc_auc(p0, [[], []], n0, [[], []]))
    with pytest.raises(ValueError):
        tempme_accuracy(p0, pos, n0, neg[:1])


def test_the_negative_destination_is_drawn_from_the_pool_reproducibly():
    pool = np.array([3, 7, 11])
    draws = {negative_destination(pool, e, 0) for e in range(50)}
    assert draws <= {3, 7, 11} and len(draws) > 1
    assert negative_destination(pool, 5, 0) == negative_destination(pool, 5, 0)


def test_tempme_curve_logits_score_the_negative_pair_under_the_same_sets():
    weights = {1: 0.5, 2: -0.25, 3: 1.0, 4: 0.125}
    backend = AdditiveBackend(1.0, weights)
    oracle = Oracle(make_candidates([1, 2, 3, 4]), 1.0, exact=backend)
    seen: list[tuple[frozenset[int], int]] = []

    def pair(sets, dst):  # a toy negative pair: -1 minus the removed events' weights x 2
        seen.extend((frozenset(s), dst) for s in sets)
        return np.array([-1.0 - 2 * sum(weights[e] for e in s) for s in sets])

    oracle.pair = pair
    ranking = [3, 1, 2, 4]
    pos, n0, neg = checks.tempme_curve_logits(oracle, ranking, slots=20, negative_dst=9)
    sets = tempme_removal_sets(ranking, [1, 2, 3, 4], 20)
    assert pos == pytest.approx([backend.logit(frozenset(s)) for s in sets])
    assert n0 == -1.0
    assert neg == pytest.approx([-1.0 - 2 * sum(weights[e] for e in s) for s in sets])
    assert {d for _, d in seen} == {9}
    assert len(seen) == len(set(seen))  # each distinct set once, the empty one included
    oracle.pair = None  # a toy oracle without pairs: no negative part
    assert checks.tempme_curve_logits(oracle, ranking, 20, 9)[1:] == (
        pytest.approx(float("nan"), nan_ok=True), ())


# --------------------------------------------------------------------------- the oracle's pairs


def test_pair_logits_equal_a_fresh_replay_with_the_negative_destination():
    from cftgnn.data import make_synthetic_stream
    from cftgnn.models import TGAT, TGN
    from cftgnn.oracle.engine import ReplayEngine, naive_logit

    stream = make_synthetic_stream(15, 120, seed=3, feat_dim=2, p_tie=0.3)
    torch.manual_seed(0)
    small = dict(time_dim=8, embedding_dim=16, num_heads=2, num_neighbors=4, batch_size=20)
    models = [TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, num_layers=1, **small),
              TGAT(stream.num_nodes, stream.feat_dim, node_dim=8, num_layers=2, **small)]
    rng = np.random.default_rng(1)
    for model in models:
        engine = ReplayEngine(model, stream, checkpoint_every=2)
        for i in (111,):
            oracle = engine.oracle(i, m_max=10, mode="exact")
            assert oracle.pair is not None
            cand = oracle.removable
            assert len(cand) > 0
            dst = int(stream.dst[7]) if int(stream.dst[7]) != int(stream.dst[i]) else 0
            sets = [frozenset(), frozenset(cand.tolist()),
                    frozenset(cand[rng.random(len(cand)) < 0.5].tolist())]
            got = np.asarray(oracle.pair(sets, dst))
            ref = [naive_logit(model, stream, i, sorted(s), dst=dst) for s in sets]
            assert got == pytest.approx(ref, abs=1e-5)
            # the true destination gives the explained event's own exact logits
            own = np.asarray(oracle.pair(sets, int(stream.dst[i])))
            assert own == pytest.approx(oracle.exact_batch(sets), abs=1e-5)
        if model.has_memory:  # history=batch_start: the event's own batch removed too
            oracle = engine.oracle(111, m_max=10, mode="exact", history="batch_start")
            s = frozenset(oracle.removable[:2].tolist())
            assert oracle.pair([s], dst)[0] == pytest.approx(
                naive_logit(model, stream, 111, sorted(s), "batch_start", dst=dst), abs=1e-5)


# --------------------------------------------------------------------------- options


def test_the_protocol_option_takes_a_name_a_list_or_all():
    assert protocols_choice("common") == (Protocol.COMMON,)
    assert protocols_choice(["tempme", "common", "tempme"]) == (Protocol.COMMON,
                                                                Protocol.TEMPME)
    assert protocols_choice("all") == tuple(Protocol)
    for bad in ("bogus", ["common", "bogus"], [], 3):
        with pytest.raises(ConfigError, match="protocol must be one of"):
            protocols_choice(bad)
    # curves says whether, protocol which; curves=all is every protocol
    assert run_protocols(CurveSet.NONE, tuple(Protocol)) == ()
    assert run_protocols(CurveSet.COMMON, (Protocol.TEMPME,)) == (Protocol.TEMPME,)
    assert run_protocols(CurveSet.ALL, (Protocol.COMMON,)) == tuple(Protocol)


def test_a_protocol_an_explainer_cannot_serve_is_refused():
    from cftgnn.explain import GreedyExplainer

    class CommonOnly(GreedyExplainer):
        name = "common_only"
        protocols = frozenset({"common"})

    CommonOnly().supports(None, (Protocol.COMMON,))
    with pytest.raises(ConfigError, match="common_only cannot be scored under "
                                          "protocol=tempme") as refused:
        CommonOnly().supports(None, (Protocol.COMMON, Protocol.TEMPME))
    assert "\n" not in str(refused.value)
    GreedyExplainer().supports(None, tuple(Protocol))  # every explainer serves every one


# --------------------------------------------------------------------------- a run


def cfg_for(tmp_path: Path, *overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("explain", overrides=[
            "debug=default", "checkpoint=null", "progress=false", "sample.prediction=any",
            "n_events=2", "picture=false", f"out_dir={tmp_path}", *overrides])


def test_a_run_under_every_protocol_records_and_summarises_each(tmp_path, monkeypatch):
    from cftgnn.explain import GreedyExplainer
    from cftgnn.oracle.engine import naive_logit
    from cftgnn.training.resolve import resolve_model

    table = pipeline.run(cfg_for(tmp_path / "all", "explainer=greedy", "protocol=all"))
    records = read_records(tmp_path / "all")
    ok = records[records.status == "ok"]
    assert len(ok) >= 1
    cfg = cfg_for(tmp_path / "all")
    stream = instantiate(cfg.dataset)
    model, _ = resolve_model(cfg.model, stream, None, ".", "cpu", cfg.seed)
    slots = sampled_slots(model.num_neighbors, model.num_layers)
    rec = ok.iloc[0]
    assert list(rec.curve_protocols) == ["common", "tgnnexplainer", "tempme", "temgx"]
    assert len(rec.fid_curve_logits) == 21 and len(rec.tgnnexplainer_curve_logits) == 21
    assert len(rec.temgx_curve_logits) == 21
    assert len(rec.single_removal_logits) == len(rec.ranking)
    # temgx: the top round(s·m) removed, and each ranked event alone, as fresh replays give
    removed = temgx_removal_sets(list(rec.ranking))
    for j in (4, 20):
        ref = naive_logit(model, stream, int(rec.event_id), list(removed[j]))
        assert rec.temgx_curve_logits[j] == pytest.approx(ref, abs=1e-5)
    first = int(rec.ranking[0])
    assert rec.single_removal_logits[0] == pytest.approx(
        naive_logit(model, stream, int(rec.event_id), [first]), abs=1e-5)
    assert len(rec.tempme_curve_logits) == len(rec.tempme_neg_curve_logits) == 16
    # the negative pair's logits are a fresh replay's with its destination
    dst = int(rec.tempme_neg_dst)
    assert dst == negative_destination(np.unique(stream.dst), int(rec.event_id), cfg.seed)
    sets = tempme_removal_sets(list(rec.ranking), list(rec.candidate_ids), slots)
    for j in (0, 15):
        ref = naive_logit(model, stream, int(rec.event_id), list(sets[j]), dst=dst)
        assert rec.tempme_neg_curve_logits[j] == pytest.approx(ref, abs=1e-5)
    assert rec.tempme_neg_logit == pytest.approx(
        naive_logit(model, stream, int(rec.event_id), [], dst=dst), abs=1e-5)
    sets = tgx_removal_sets(list(rec.ranking), list(rec.candidate_ids))
    ref = naive_logit(model, stream, int(rec.event_id), list(sets[0]))
    assert rec.tgnnexplainer_curve_logits[0] == pytest.approx(ref, abs=1e-5)
    for name in ("best_fid", "tgnnexplainer_best_fid", "tgnnexplainer_aufsc",
                 "tempme_acc_auc", "temgx_aufsc", "temgx_fidelity_minus", "monotonicity"):
        assert np.isfinite(table[name].iloc[-1]), name
    fp = json.loads((tmp_path / "all" / "run.json").read_text())
    assert fp["protocols"] == ["common", "tgnnexplainer", "tempme", "temgx"]
    # the report shows the protocols side by side, labelled
    from cftgnn.reporting.report import write_report
    report = write_report([tmp_path / "all"], tmp_path / "report")
    text = report.files[0].read_text()
    assert "## Curve metrics by protocol" in text
    head = next(ln for ln in text.splitlines() if "Best-FID · T-GNNExplainer" in ln)
    assert "Best-FID · common" in head and "ACC-AUC · TempME (± pairs)" in head
    assert "AUFSC · TemGX (removed)" in head and "## The benchmark's metrics" in text
    row = text.splitlines()[text.splitlines().index(head) + 2]
    assert f"{table['tempme_acc_auc'].iloc[-1]:.3f}" in row

    # the common protocol alone: today's curves, and nothing of the others
    pipeline.run(cfg_for(tmp_path / "common", "explainer=greedy"))
    common = read_records(tmp_path / "common")
    assert "protocols" not in json.loads((tmp_path / "common" / "run.json").read_text())
    for a, b in zip(common.fid_curve_logits, records.fid_curve_logits, strict=True):
        assert list(a) == list(b)  # bitwise: the same calls whatever else is computed
    assert all(list(p) == ["common"] for p in common.curve_protocols[common.status == "ok"])
    assert all(len(x) == 0 for x in common.tempme_curve_logits)
    assert common.tempme_neg_dst.isna().all()

    # an explainer that cannot serve the protocol: refused before anything is written
    monkeypatch.setattr(GreedyExplainer, "protocols", frozenset({"common"}))
    with pytest.raises(ConfigError, match="cannot be scored under protocol=tgnnexplainer"):
        pipeline.run(cfg_for(tmp_path / "refused", "explainer=greedy",
                             "protocol=tgnnexplainer"))
    assert not (tmp_path / "refused" / "run.json").exists()


def test_records_of_schema_6_read_with_the_common_protocol_only():
    old = pd.DataFrame({"event_id": [1, 2], "status": ["ok", "ok"],
                        "fid_curve_logits": [[0.1] * 21, []],
                        "acc_curve_logits": [[0.1] * 16, []]})
    new = upgrade_records(old)
    assert list(new.curve_protocols.iloc[0]) == ["common"]
    assert list(new.curve_protocols.iloc[1]) == []
    assert all(len(x) == 0 for x in new.tgnnexplainer_curve_logits)
    assert all(len(x) == 0 for x in new.tempme_neg_curve_logits)
    assert new.tempme_neg_logit.isna().all()


def test_a_schema_6_file_next_to_a_schema_7_one_reads_as_one_table(tmp_path):
    """Mixed run directories: the old row gets the common protocol (it has curves), the new
    one keeps its protocols and its negative pair."""
    from cftgnn.runs.records import RECORD_SCHEMA, arrow_table

    base = {**result([1, 2, 3], [3, 1, 2]).to_record(), "fid_curve_logits": [0.5] * 21,
            "acc_curve_logits": [0.5] * 16}
    old = {**base, "event_id": 4, "schema_version": 6}
    new = {**base, "event_id": 5, "schema_version": 7,
           "curve_protocols": ["common", "tempme"], "tempme_curve_logits": [1.0] * 16,
           "tempme_neg_dst": 4, "tempme_neg_logit": -2.0,
           "tempme_neg_curve_logits": [-1.0] * 16}
    (tmp_path / "records").mkdir()
    pd.DataFrame([old]).to_parquet(tmp_path / "records" / "0000000004.parquet")
    import pyarrow.parquet as pq
    pq.write_table(arrow_table([new], RECORD_SCHEMA), tmp_path / "records" / "0000000005.parquet")
    df = read_records(tmp_path)
    assert [list(p) for p in df.curve_protocols] == [["common"], ["common", "tempme"]]
    assert list(df.tempme_curve_logits.iloc[0]) == [] and len(df.tempme_curve_logits.iloc[1]) == 16
    assert np.isnan(df.tempme_neg_logit.iloc[0]) and df.tempme_neg_logit.iloc[1] == -2.0
    assert df.tempme_neg_dst.iloc[1] == 4


EXPLAINERS = [p.stem for p in sorted((CONF / "explainer").glob("*.yaml"))
              if p.stem != "pgexplainer"]  # a trained PGExplainer exists for UCI / Wikipedia only


@pytest.mark.slow  # one tiny run per explainer (about 10 s each on a loaded machine)
@pytest.mark.parametrize("explainer", EXPLAINERS)
def test_every_explainer_gets_every_protocol(tmp_path, explainer):
    extra = ["explainer.navigator=perturb_one"] if explainer == "tgnnexplainer" else []
    table = pipeline.run(cfg_for(tmp_path, f"explainer={explainer}", "protocol=all", *extra))
    records = read_records(tmp_path)
    ok = records[records.status == "ok"]
    assert len(ok) >= 1
    for rec in ok.itertuples():
        assert list(rec.curve_protocols) == ["common", "tgnnexplainer", "tempme"]
        assert len(rec.tgnnexplainer_curve_logits) == 21
        assert len(rec.tempme_curve_logits) == len(rec.tempme_neg_curve_logits) == 16
    for name in ("tgnnexplainer_best_fid", "tgnnexplainer_aufsc", "tempme_acc_auc"):
        assert np.isfinite(table[name].iloc[-1]), name
