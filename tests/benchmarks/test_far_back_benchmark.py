"""The far-back benchmark (``cftgnn.benchmarks.far_back``) on a tiny far-back stream: every
part runs, its counters mean what they say, and the row table's step clocks change no logit."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from testsupport.errors import refused, script_refused
from testsupport.planted import huge_cone_stream

from cftgnn.benchmarks.far_back import (
    benchmark_far_back,
    changed_at,
    format_far_back,
    most_changed,
)
from cftgnn.benchmarks.tail import search_event
from cftgnn.data import EventStream
from cftgnn.errors import ConfigError
from cftgnn.models import TGAT, TGN
from cftgnn.oracle.engine import ReplayEngine
from cftgnn.replay.tgn.row_times import RowStepTimes


def tgn(stream: EventStream) -> TGN:
    torch.manual_seed(3)
    return TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8, embedding_dim=16,
               num_layers=1, num_heads=2, num_neighbors=5, batch_size=20)


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """One torch thread, as the benchmark runs (a logit's last bits depend on the count)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def far_back(one_thread: None) -> tuple[EventStream, TGN, dict]:
    # the explained link is the last event; its only candidates are the first 60 events,
    # and one node then talks to everyone, so every removal travels through the whole stream
    stream = huge_cone_stream(12, 300, name="far_back")
    model = tgn(stream)
    res = benchmark_far_back(model, stream, [299], max_size=2, tolerances=[1e-4], n_pairs=5,
                             m_max=8, jacobian_rows=40, memory_budget_gb=None)
    return stream, model, res


def test_every_part_runs_on_a_far_back_event(far_back):
    _, _, res = far_back
    assert res["summary"]["parts"] == ["effects", "flips", "bookkeeping", "jacobian"]
    (ev,) = res["events"]
    assert ev["event_id"] == 299 and ev["candidates"] == 8 and ev["span"] > 200
    text = format_far_back(res)
    assert "## event 299" in text and "NOT EXACT" in text
    assert "own memory" in text and "split_mixed" in text


def test_effects_count_what_pruning_and_tolerance_save(far_back):
    _, _, res = far_back
    effects = res["events"][0]["effects"]
    assert effects["singles"]["sets"] == 8
    assert 0 <= effects["singles"]["with_effect"] <= 8
    rows = {(r["kind"], r["replay"]): r for r in effects["rows"]}
    assert set(rows) == {(kind, name) for kind in ("single", "pair")
                         for name in ("pruning off", "exact", "τ=0.0001")}
    for kind, n in (("single", 8), ("pair", 5)):
        off, on, tau = rows[kind, "pruning off"], rows[kind, "exact"], rows[kind, "τ=0.0001"]
        assert off["sets"] == on["sets"] == tau["sets"] == n
        assert on["max_abs_logit_diff"] == 0.0  # the reference
        assert off["max_abs_logit_diff"] <= 1e-5  # both exact: float noise at most
        assert tau["max_abs_logit_diff"] <= 1e-3  # not exact, close on this stream
        assert tau["row_updates"] <= on["row_updates"] < off["row_updates"]  # pruning saves
        assert off["rows_pruned"] == off["settled_sets"] == 0  # without it nothing retires
        assert on["settled_sets"] > 0  # and with it, some perturbations die out


def test_flips_compare_set_orders_and_tolerance_with_the_time_order(far_back):
    _, _, res = far_back
    rows = res["events"][0]["flips"]
    assert [r["replay"] for r in rows] == ["exact, time order", "exact, ranking order",
                                           "τ=0.0001"]
    assert {r["sets"] for r in rows} == {8 + 28}
    ref = rows[0]
    assert ref["max_abs_logit_diff"] == 0.0 and ref["changed_at_worst"] == 0
    assert rows[1]["max_abs_logit_diff"] <= 1e-5  # two exact replays: float noise
    for r in rows:
        assert r["row_updates"] > 0 and r["rows_made"] > 0
        assert r["p99_abs_logit_diff"] <= r["max_abs_logit_diff"]
        assert r["changed_at_median"] <= r["changed_at_worst"] <= r["sets"]
    assert rows[2]["row_updates"] <= ref["row_updates"]


def test_bookkeeping_times_each_row_table_step_without_changing_a_logit(far_back):
    stream, model, res = far_back
    book = res["events"][0]["bookkeeping"]
    assert book["status"] == "ok"
    steps = book["step_cpu_s"]
    assert list(steps) == [f.name for f in dataclasses.fields(RowStepTimes)]
    assert all(v >= 0.0 for v in steps.values()) and steps["split"] > 0.0
    assert steps["prune"] >= steps["merge"] + steps["revive"] - 1e-9  # prune calls them
    assert sum(steps.values()) <= book["replay_cpu_s"] * 2  # prune counted with its parts
    # the clocks change nothing: the same search untimed gives the same logits, bitwise
    plain = search_event(ReplayEngine(model, stream, memory_budget_gb=None), 299, 2, None, 8,
                         logits_digest=True)
    assert "step_cpu_s" not in plain
    assert plain["logits_sha256"] == book["logits_sha256"]


def test_jacobian_norms_sample_the_rows_of_the_history(far_back):
    _, _, res = far_back
    jac = res["events"][0]["jacobian"]
    assert 0 < jac["rows"] <= 40 and jac["batches"] > 1
    for part in ("self", "other"):
        q = [jac[part][f"p{p}"] for p in (10, 50, 90, 99)]
        assert q[0] > 0.0 and q == sorted(q)
    assert 0.0 <= jac["share_self_at_least_1"] <= 1.0


def test_most_changed_counts_the_sets_on_either_side_of_the_worst_threshold():
    a = np.array([0.0, 1.0, 2.0, 3.0, 5.0])
    b = np.array([1.5, 1.2, 2.0, 2.5, 5.0])  # (0, 1.5) and (1, 1.2) overlap; (2.5, 3) apart
    assert most_changed(a, b) == 2
    assert most_changed(a, a) == 0
    assert changed_at(a, b, 1.1) == 2 and changed_at(a, b, 2.7) == 1
    assert changed_at(a, b, 4.0) == 0


def test_a_model_without_the_cone_replay_is_refused(capsys):
    stream = huge_cone_stream(12, 300, name="far_back")
    torch.manual_seed(0)
    model = TGAT(stream.num_nodes, stream.feat_dim, time_dim=8, embedding_dim=16,
                 num_layers=1, num_heads=2, num_neighbors=5, batch_size=20)
    with pytest.raises(ConfigError, match="measures TGN's cone replay; TGAT has none"):
        benchmark_far_back(model, stream, [299], parts=["effects"])
    line = refused(capsys, benchmark_far_back, model, stream, [299])
    assert line.startswith("error: the far-back benchmark measures TGN's cone replay")


@pytest.mark.parametrize(("arg", "message"), [
    ("events=[]", "error: events is empty; name at least one event id, e.g. events=[56484]"),
    ("parts=[effects,nope]",
     "error: parts: unknown 'nope' (choose from: effects, flips, bookkeeping, jacobian)"),
    ("tolerances=[0]", "error: tolerances must be finite numbers > 0, got 0 in [0]"),
    ("max_size=0", "error: max_size must be an integer >= 1, got 0"),
])
def test_bad_options_end_in_one_line_before_anything_loads(arg, message, tmp_path):
    line, imported = script_refused("benchmark_far_back.py", arg, cwd=tmp_path)
    assert line == message
    assert "torch" not in imported and "cftgnn.benchmarks.far_back" not in imported
    assert not any(tmp_path.iterdir())
