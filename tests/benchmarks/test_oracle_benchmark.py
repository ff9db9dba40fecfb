"""The oracle benchmark runs end to end on a tiny stream and reports consistent figures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.benchmarks.oracle import run

CONF = Path(__file__).resolve().parents[2] / "conf"


def test_benchmark_oracle_on_a_synthetic_stream(tmp_path, capsys):
    out = tmp_path / "oracle.json"
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("benchmark_oracle", overrides=[
            "dataset=synthetic", "dataset.num_events=600", "dataset.num_nodes=30",
            "checkpoint=null", "n_events=3", "sets_per_event=3", "batch_size=8",
            "min_event=300", "progress=false", f"out={out}"])
    res = run(cfg)
    assert json.loads(out.read_text())["events"] == 3
    for name in ("naive", "exact", "approximate", "batched", "batched_approximate"):
        assert res["per_call"][name]["n"] > 0 and res["per_call"][name]["median_ms"] > 0
    assert set(res["batch_in_single_calls"]) == {"exact", "approximate"}
    assert all(np.isfinite(v) and v > 0 for v in res["batch_in_single_calls"].values())
    for mode in ("exact", "approximate"):  # one figure per event with candidates, both units
        per_event = res["batch_in_single_calls_per_event"][mode]
        assert len(per_event) == len(res["batch_in_same_set_calls_per_event"][mode]) > 0
        assert res["batch_in_single_calls"][mode] == np.median(per_event)
        assert all(v > 0 for v in res["batch_in_same_set_calls_per_event"][mode])
    for mode in ("exact", "approximate"):  # explainer-like batches: one figure per event
        sib = res["sibling_batch_in_same_set_calls_per_event"][mode]
        assert len(sib) == len(res["batch_in_single_calls_per_event"][mode])
        assert all(v > 0 for v in sib)
        assert res["sibling_batch_in_same_set_calls"][mode] == np.median(sib)
    setup = res["setup_per_event"]  # amortised cost = the mean over the explained events
    assert setup["n"] == 3 and setup["min_ms"] <= setup["mean_ms"] <= setup["max_ms"]
    assert res["max_abs_exact_vs_naive"] < 1e-5  # the exact oracle equals the fresh replay
    assert 0.0 <= res["approx_exact_sign_agreement"] <= 1.0
    text = capsys.readouterr().out
    assert "batched approx. (per set)" in text and "median single approximate calls" in text
    assert "mean single calls on its own P sets" in text
    assert "batch of P siblings" in text


def test_benchmark_times_every_small_set(tmp_path, capsys):
    from math import comb

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("benchmark_oracle", overrides=[
            "dataset=synthetic", "dataset.num_events=600", "dataset.num_nodes=30",
            "checkpoint=null", "n_events=2", "sets_per_event=2", "batch_size=4",
            "min_event=300", "progress=false", "exhaustive_max_size=2", "exhaustive_chunk=50",
            "naive_per_event=0", "same_sets_singles=false", "sibling_batches=false"])
    res = run(cfg)
    ex = res["exhaustive"]
    assert len(ex["sets_per_event"]) == len(ex["seconds_per_event"]) > 0
    for n_sets in ex["sets_per_event"]:  # every set of size 1 and 2 of some |C|
        assert any(n_sets == m + comb(m, 2) for m in range(1, 65))
    assert ex["sets_per_s"] > 0 and ex["peak_rss_mib"] > 0
    assert "every set of size <= 2" in capsys.readouterr().out


def test_without_naive_replays_the_exact_vs_naive_check_says_not_compared(capsys):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("benchmark_oracle", overrides=[
            "dataset=synthetic", "dataset.num_events=400", "dataset.num_nodes=20",
            "checkpoint=null", "n_events=2", "sets_per_event=2", "batch_size=4",
            "min_event=200", "naive_per_event=0", "same_sets_singles=false",
            "sibling_batches=false", "population_batches=false", "progress=false"])
    res = run(cfg)
    assert np.isnan(res["max_abs_exact_vs_naive"])  # nothing compared: not a measured 0
    text = capsys.readouterr().out
    assert "exact vs naive not compared" in text and "max |exact - naive|" not in text
