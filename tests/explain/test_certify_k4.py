"""Exact enumerations up to K = 4 (``certify=4``, ``explainer=exhaustive
explainer.max_size=4``): chunked calls and passes split by the memory budget give the same
answer and certificate as one call; the per-event bar; a pass that cannot hold one set is
refused before any work."""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from testsupport.models import tgn1
from testsupport.streams import dense_stream

import cftgnn.config  # noqa: F401
from cftgnn.errors import ConfigError
from cftgnn.explain import search_by_size
from cftgnn.explain.post import PostProcessing
from cftgnn.explain.strategies import ClosestStrategy
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.replay.tgn import TGNReplay
from cftgnn.replay.tgn.cone import ConeStats
from cftgnn.replay.tgn.passes import (
    DEVICE_PASS_SHARE,
    check_one_set,
    pass_budget_bytes,
    set_nbytes,
)
from cftgnn.runs import pipeline

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
M = 11  # candidates: 561 sets of at most four (C(11,1..4))
#: Events of that stream: no counterfactual of at most four (230), the smallest of four (211).
NONE, FOUR = 230, 211


def _oracle(cone: str, budget_bytes: float | None, progress: bool = False,
            event: int = NONE):
    """The exact oracle of a late event of a small dense stream under a TGN with ``cone``
    and a pass budget of ``budget_bytes`` (set past the 1 GiB floor, as a test may), and
    the cone replay's counters."""
    stream = dense_stream(3, 9, 240)
    torch.manual_seed(0)
    engine = ReplayEngine(tgn1(stream), stream)
    assert isinstance(engine.replay, TGNReplay)
    stats = ConeStats()
    engine.replay.options.cone = cone
    engine.replay.options.stats = stats
    engine.replay.options.memory_budget_gb = (None if budget_bytes is None
                                              else budget_bytes / 2**30)
    engine.progress = progress
    oracle = EventReplay(engine, event, m_max=M).oracle("exact")
    assert len(oracle.removable) == M
    return oracle, stats


def _ranked(oracle):
    strategy = ClosestStrategy()
    strategy.prepare(oracle)
    return strategy.rank(oracle.removable)


def _k4(oracle, chunk_size: int):
    found = search_by_size(oracle, _ranked(oracle), 4, chunk_size=chunk_size)
    logits = np.array([oracle.cached_exact(s) for s in _sets(oracle)])
    return found, oracle.certificate(), logits


def _sets(oracle):
    ids = sorted(int(e) for e in oracle.removable)
    return [frozenset(c) for k in range(1, 5) for c in itertools.combinations(ids, k)]


@pytest.mark.parametrize(("cone", "event", "bound"), [("rows", NONE, 5), ("dense", NONE, 5),
                                                      ("rows", FOUR, 4), ("dense", FOUR, 4)])
def test_chunks_and_passes_give_one_calls_answer_and_certificate(cone, event, bound):
    one, one_stats = _oracle(cone, None, event=event)
    whole, got, logits = _k4(one, chunk_size=10_000)  # every size in one call
    assert got == bound and whole.sizes_done == 4
    assert whole.evaluated == sum(math.comb(M, k) for k in range(1, 5))
    assert (whole.explanation is None) == (bound == 5)
    # chunks of 37 sets, each split into passes of at most a few sets by the budget
    small, small_stats = _oracle(cone, 40_000, event=event)
    chunked, bound2, logits2 = _k4(small, chunk_size=37)
    assert small_stats.calls > 3 * one_stats.calls  # the budget split the passes
    assert (chunked.explanation, chunked.sizes_done, chunked.cut_short, bound2) == \
        (whole.explanation, whole.sizes_done, whole.cut_short, got)
    known = ~np.isnan(logits.astype(float))
    assert known.sum() == whole.evaluated and np.array_equal(known, ~np.isnan(
        logits2.astype(float)))
    np.testing.assert_allclose(logits2[known].astype(float), logits[known].astype(float),
                               rtol=0, atol=1e-6)


def test_certify_4_is_the_exhaustive_searchs_answer():
    """``certify=4`` after an answer of nothing enumerates the same sets as the exhaustive
    search up to 4 and proves the same bound."""
    oracle, _ = _oracle("rows", None, event=FOUR)
    strategy = ClosestStrategy()
    strategy.prepare(oracle)
    done = PostProcessing(certify=4).apply(oracle, strategy, (), oracle.original_logit, False)
    other, _ = _oracle("rows", 40_000, event=FOUR)
    found = search_by_size(other, _ranked(other), 4, chunk_size=64)
    assert len(done.explanation) == 4 and done.certify_replaced
    assert done.explanation == found.explanation
    assert oracle.certificate() == other.certificate() == 4


def test_the_bar_shows_the_events_sets_when_progress_is_on(capsys):
    oracle, _ = _oracle("rows", None, progress=True)
    search_by_size(oracle, _ranked(oracle), 4, chunk_size=100)
    err = capsys.readouterr().err
    assert "event 230: exact sets of <= 4" in err and "set/s" in err
    quiet, _ = _oracle("rows", None, progress=False)
    search_by_size(quiet, _ranked(quiet), 4, chunk_size=100)
    assert "exact sets" not in capsys.readouterr().err
    one_chunk, _ = _oracle("rows", None, progress=True)  # one call: no bar
    search_by_size(one_chunk, _ranked(one_chunk), 4, chunk_size=10_000)
    assert "exact sets" not in capsys.readouterr().err


@pytest.mark.parametrize("progress", ["true", "false"])
def test_explain_py_shows_the_bar_with_progress(progress, tmp_path, capfd):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=[
            "debug=default", "checkpoint=null", "sample.prediction=any", "n_events=2",
            f"progress={progress}", "explainer=exhaustive", "explainer.max_size=2",
            "explainer.chunk_size=8", "picture=false", f"out_dir={tmp_path}"])
    pipeline.run(cfg)
    err = capfd.readouterr().err
    assert ("exact sets of <= 2" in err) == (progress == "true")


def test_a_gpus_pass_budget_is_a_share_of_its_memory():
    gpu, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert pass_budget_bytes(0.5, cpu, 1.0) == 2**29  # the host budget as it is
    assert pass_budget_bytes(None, cpu, 1.0) is None
    assert pass_budget_bytes(0.5, gpu, 1.0, device_memory=80 * 2**30) == \
        int(DEVICE_PASS_SHARE * 80 * 2**30)
    assert pass_budget_bytes(None, gpu, 1.0, device_memory=2**30) == 2**30  # the floor


def test_a_pass_that_cannot_hold_one_set_is_refused():
    stream = dense_stream(3, 9, 240)
    model = tgn1(stream)
    dense, rows = set_nbytes(model, 9, True), set_nbytes(model, 9, False)
    assert dense > rows > 0
    check_one_set(model, dense, True, "a test")  # fits exactly
    check_one_set(model, None, True, "a test")  # no bound
    with pytest.raises(ConfigError, match=r"one removal set's exact evaluation may need .* "
                                          r"\(the dense cone replay: a row of 12 floats for "
                                          r"each of the stream's 9 nodes\), more than a pass "
                                          r"may hold .*a test\); use replay.cone=rows"):
        check_one_set(model, dense - 1, True, "a test")
    with pytest.raises(ConfigError, match="use a larger memory_budget_gb"):
        check_one_set(model, rows - 1, False, "a test")


def test_explain_py_refuses_a_budget_one_set_cannot_fit_before_any_work(tmp_path):
    """With the 1 GiB floor of a pass lifted (as only a test may), ``memory_budget_gb``
    below one set's evaluation is one ``error:`` line and exit status 2, before the sampling
    pass; nothing is recorded."""
    code = ("import runpy, sys; import cftgnn.replay.tgn as t; t.MIN_PASS_BUDGET_GB = 0.0; "
            "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "scripts" / "explain.py"), "debug=default",
         "checkpoint=null", "progress=false", "certify=4", "replay.cone=dense",
         "memory_budget_gb=1e-6", f"out_dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: one removal set's exact evaluation may need"), done.stderr
    assert "memory_budget_gb, at least 1 GiB" in lines[0]
    assert not (tmp_path / "records").exists() or not any((tmp_path / "records").iterdir())
