"""``cftgnn.reporting.orderings`` and ``scripts/orderings.py``: our orderings of the explainers
beside the published ones, on hand-made values and on three tiny synthetic runs."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.reporting import orderings as o
from cftgnn.runs import pipeline
from cftgnn.scoring.summaries import summarize

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
TINY = ["debug=default", "checkpoint=null", "model=tgat", "progress=false", "picture=false",
        "sample.prediction=any", "n_events=6", "seed=0", "protocol=[common,tgnnexplainer]"]


def test_run_labels_name_the_published_rows():
    def fp(target, **options):
        return {"explainer": {"_target_": f"cftgnn.explain.x.{target}", **options}}

    assert o.run_label(fp("AttentionExplainer")) == "ATTN"
    assert o.run_label(fp("PerturbOneExplainer")) == "PBONE"
    assert o.run_label(fp("PGExplainer")) == "PG"
    assert o.run_label(fp("TGNNExplainer", search="published", navigator="pgexplainer")) \
        == "PGNavigator"
    assert o.run_label(fp("TGNNExplainer", search="published", navigator="mlp")) \
        == "MLPNavigator"
    assert o.run_label(fp("TGNNExplainer", search="published", navigator="none")) \
        == "T-GNNExplainer (none navigator)"
    assert o.run_label(fp("TGNNExplainer", search="narrowed", navigator="mlp")) \
        == "T-GNNExplainer narrowed (mlp)"
    assert o.run_label(fp("SomethingNew")) == "SomethingNew"


def test_pair_labels_tell_a_two_layer_tgn_apart():
    def fp(target, layers):
        return {"dataset": {"name": "wikipedia"},
                "model": {"config": {"_target_": f"cftgnn.models.{target}",
                                     "num_layers": layers}}}

    assert o.pair_label(fp("TGN", 1)) == ("wikipedia", "tgn")
    assert o.pair_label(fp("TGN", 2)) == ("wikipedia", "tgn-2l")
    assert o.pair_label(fp("TGAT", 2)) == ("wikipedia", "tgat")


def test_ordering_and_rank_agreement_by_hand():
    values = {"a": 0.1, "b": 0.5, "c": math.nan, "d": 0.5, "e": -1.0}
    assert o.ordering(values) == ["b", "d", "a", "e"]  # NaN out, the tie keeps its order
    same = {"a": 1.0, "b": 2.0, "c": 3.0}
    assert o.rank_agreement(same, {"a": 10.0, "b": 20.0, "c": 30.0, "z": 0.0}) == (1.0, 3)
    tau, n = o.rank_agreement(same, {"a": 3.0, "b": 2.0, "c": 1.0})
    assert (tau, n) == (-1.0, 3)
    # one discordant pair of three: tau = (2 - 1) / 3
    tau, _ = o.rank_agreement(same, {"a": 1.0, "b": 3.0, "c": 2.0})
    assert tau == pytest.approx(1 / 3)
    tau, n = o.rank_agreement(same, {"a": 1.0, "q": 2.0})
    assert math.isnan(tau) and n == 1


def test_shared_ordering_and_comparison_rows_use_the_shared_explainers():
    table = o.PublishedTable("paper", "here", "wikipedia", "tgn",
                             {"ATTN": (0.5, 0.1), "PBONE": (0.3, 0.2), "PG": (0.9, -0.1)})
    ours = {"ATTN": 0.2, "PBONE": 0.8, "random": 0.9, "PG": math.nan}
    mine, theirs, tau, n = o.shared_ordering(ours, table, metric=0)
    assert mine == "PBONE > ATTN" and theirs == "ATTN > PBONE" and (tau, n) == (-1.0, 2)
    rows = o.comparison_rows(ours, [table], metric=1)
    assert list(rows.index) == ["ATTN", "PBONE", "random", "PG"]
    assert rows.loc["random", "ours rank"] == 1 and rows.loc["PBONE", "ours rank"] == 2
    assert rows.loc["PBONE", "paper"] == 0.2 and rows.loc["PBONE", "paper rank"] == 1
    assert pd.isna(rows.loc["PG", "ours rank"]) and pd.isna(rows.loc["random", "paper"])


def test_the_published_tables_are_the_sources_orderings():
    paper = {(t.source, t.model): t for t in o.PUBLISHED}
    tgat = paper[("paper", "tgat")].values
    assert o.ordering({n: v[0] for n, v in tgat.items()}) == ["PGNavigator", "PG", "ATTN",
                                                              "PBONE"]
    repro = paper[("reproduction", "tgn")].values
    assert o.ordering({n: v[1] for n, v in repro.items()})[:2] == ["MLPNavigator",
                                                                  "PGNavigator"]


def _records(values: dict[int, list[float]], p0: float = 1.0) -> pd.DataFrame:
    """Records whose tgnnexplainer curve is ``p0 + value`` at every level (fidelity = value)."""
    return pd.DataFrame({"event_id": list(values), "original_logit": [p0] * len(values),
                         "tgnnexplainer_curve_logits": [np.full(21, p0 + v[0])
                                                        for v in values.values()]})


def test_bootstrap_wins_are_one_for_a_dominating_explainer_and_paired():
    a = _records({1: [0.5], 2: [0.2], 3: [0.9]})
    b = _records({1: [0.4], 2: [0.1], 3: [0.8], 4: [5.0]})  # event 4 not shared: left out
    wins = o.bootstrap_wins({"A": a, "B": b}, "tgnnexplainer", 0, n_boot=50)
    assert wins.loc["A", "B"] == 1.0 and wins.loc["B", "A"] == 0.0
    assert math.isnan(wins.loc["A", "A"])
    assert o.metric_value(a, "tgnnexplainer", 0) == pytest.approx((0.5 + 0.2 + 0.9) / 3)
    assert math.isnan(o.metric_value(a, "common", 0))  # no common curves in these records


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("orderings")
    for explainer in ("attention", "perturb_one", "random"):
        with initialize_config_dir(str(CONF), version_base="1.3"):
            cfg = compose("explain", overrides=[*TINY, f"explainer={explainer}",
                                                f"out_dir={root / explainer}"])
        pipeline.run(cfg)
    return root


def test_orderings_of_real_runs_match_the_summaries(runs, tmp_path):
    records = o.labelled_records([runs])
    assert set(records["label"]) == {"ATTN", "PBONE", "random"}
    assert set(records["pair"]) == {("synthetic", "tgat")}
    for label, group in records.groupby("label"):
        summary = summarize(group).iloc[0]
        for protocol in ("tgnnexplainer", "common"):
            for metric in (0, 1):
                assert np.nanmean(o.event_values(group, protocol, metric)) == pytest.approx(
                    o.metric_value(group, protocol, metric))
        assert o.metric_value(group, "tgnnexplainer", 0) == pytest.approx(
            summary["tgnnexplainer_best_fid"], nan_ok=True)
        assert o.metric_value(group, "common", 1) == pytest.approx(
            summary["aufsc_keep"], nan_ok=True), label
    out = tmp_path / "orderings.md"
    text = o.main([str(runs), "--boot", "20", "--out", str(out)])
    assert out.read_text() == text
    assert "### synthetic · tgat, protocol tgnnexplainer (6 events explained by every" in text
    assert "### synthetic · tgat, protocol common" in text
    assert "bootstrap draws" in text


def test_explainers_are_compared_on_the_events_all_of_them_explained(runs):
    records = o.labelled_records([runs])
    fewer = records[~((records["label"] == "PBONE")
                      & records["event_id"].isin(sorted(set(records["event_id"]))[:2]))]
    text = o.orderings_markdown(fewer, ["common"], n_boot=0)
    assert "(4 events explained by every explainer)" in text
    kept = fewer[fewer["event_id"].isin(sorted(set(records["event_id"]))[2:])]
    attention = kept[kept["label"] == "ATTN"]
    assert f"| ATTN | {o.metric_value(attention, 'common', 0):.3f} |" in text


@pytest.fixture(scope="module")
def common_runs(tmp_path_factory) -> Path:
    """Two runs scored under the common protocol only (``explain.py``'s default)."""
    root = tmp_path_factory.mktemp("orderings_common")
    for explainer in ("attention", "random"):
        with initialize_config_dir(str(CONF), version_base="1.3"):
            cfg = compose("explain", overrides=[*TINY[:-1], "protocol=common",
                                                f"explainer={explainer}",
                                                f"out_dir={root / explainer}"])
        pipeline.run(cfg)
    return root


def test_a_protocol_no_run_holds_is_one_warning_line_and_no_table(common_runs, capsys):
    """Runs without T-GNNExplainer's protocol printed its tables full of '–', saying nothing."""
    text = o.main([str(common_runs), "--boot", "0"])
    warned = capsys.readouterr().err
    assert warned == (
        "warning: no tgnnexplainer tables for synthetic · tgat: no run of it holds the curves "
        "of protocol tgnnexplainer; explain with protocol=tgnnexplainer or protocol=all (and "
        "curves other than none), or add it to finished runs with `python scripts/rescore.py "
        "RUN --protocol tgnnexplainer` (T-GNNExplainer's own runs only by explaining again: "
        "its protocol reads the coalitions its search scored)\n")
    assert "protocol tgnnexplainer" not in text and "–" not in text
    assert "### synthetic · tgat, protocol common (6 events explained by every" in text


def test_no_run_serving_any_table_is_one_error_line(common_runs):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "orderings.py"),
                           str(common_runs), "--protocol", "tgnnexplainer"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        f"error: no run below {common_runs} holds the curves of protocol tgnnexplainer that the "
        "tables need; explain with protocol=tgnnexplainer or protocol=all"), done.stderr


@pytest.mark.parametrize("args, message", [
    (["--boot", "-1"], "--boot must be >= 0, got -1"),
    (["--protocol", "bogus"], "invalid choice: 'bogus'"),
])
def test_bad_arguments_are_one_error_line(runs, args, message):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "orderings.py"), str(runs),
                           *args], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ")
    assert message in done.stderr


def test_a_folder_without_runs_is_one_error_line(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "orderings.py"),
                           str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and done.stderr.startswith("error: no run directories")
