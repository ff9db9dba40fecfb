"""``explain.py``'s ``replay.cone``: composed, checked before torch loads, handed to TGN's
replay, and the dense replay's records equal the row table's on a tiny stream."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from testsupport.models import tgn1

import cftgnn.config  # noqa: F401
import cftgnn.replay.tgn as tgn_replay
from cftgnn.errors import ConfigError
from cftgnn.runs import pipeline
from cftgnn.runs.build import apply_replay_options
from cftgnn.runs.options import CONE_OPTIONS, check_explain_options
from cftgnn.runs.records import read_records

CONF = Path(__file__).resolve().parents[2] / "conf"
TINY = ["debug=default", "checkpoint=null", "progress=false", "sample.prediction=any"]


def test_the_options_values_are_the_replays():
    assert tuple(c.value for c in tgn_replay.Cone) == CONE_OPTIONS


@pytest.mark.parametrize("value", CONE_OPTIONS)
def test_every_value_composes_and_reaches_the_tgn_replay(value):
    from cftgnn.data import make_synthetic_stream
    from cftgnn.oracle.engine import ReplayEngine

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=[f"replay.cone={value}"])
    check_explain_options(cfg)
    stream = make_synthetic_stream(num_nodes=10, num_events=60, seed=0)
    model = tgn1(stream)
    engine = ReplayEngine(model, stream)
    apply_replay_options(cfg, engine)
    assert engine.replay.options.cone is tgn_replay.Cone(value)


def test_a_bad_value_is_refused():
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=["replay.cone=sparse"])
    with pytest.raises(ConfigError, match="replay.cone must be one of auto, rows, dense, "
                                          "got 'sparse'"):
        check_explain_options(cfg)


def _run(tmp_path, *overrides):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=[*TINY, f"out_dir={tmp_path}", "mode=exact",
                                            "certify=2", "n_events=6", *overrides])
    pipeline.run(cfg)
    return read_records(tmp_path).sort_values("event_id").reset_index(drop=True)


def test_the_dense_replay_gives_the_row_tables_records(tmp_path, monkeypatch):
    calls: list[int] = []
    dense = tgn_replay.dense_replay

    def counted(model, traj, sets, *args, **kwargs):
        calls.append(sets.num_sets)
        return dense(model, traj, sets, *args, **kwargs)

    rows = _run(tmp_path / "rows")
    assert calls == []  # the default on the CPU: the row table
    monkeypatch.setattr(tgn_replay, "dense_replay", counted)
    got = _run(tmp_path / "dense", "replay.cone=dense")
    assert len(calls) > 0 and sum(calls) > len(calls)  # batched calls went through it
    assert (got.status == "ok").sum() >= 3
    for name in ("event_id", "status", "explanation", "is_counterfactual",
                 "min_size_lower_bound", "certified_minimal", "exact_calls", "cache_hits"):
        assert [np.asarray(v).tolist() for v in got[name]] == \
            [np.asarray(v).tolist() for v in rows[name]], name
    ok = rows.status == "ok"
    np.testing.assert_allclose(got.final_logit[ok], rows.final_logit[ok], rtol=0, atol=1e-5)
