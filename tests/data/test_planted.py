"""Planted streams (``dataset=planted``): causes precede effects, seeds reproduce, the rule
stream's effect happens iff its motif does, bad options are one ``error:`` line."""

from __future__ import annotations

import subprocess
import sys
import time
from itertools import product
from pathlib import Path

import numpy as np
import pytest

from cftgnn.data import EventCauses, EventStream, make_planted_stream
from cftgnn.data.planted import make_hawkes_stream, make_rule_stream, motif_matches
from cftgnn.errors import ConfigError, DataFormatError

ROOT = Path(__file__).resolve().parents[2]


def assert_same(a: EventStream, b: EventStream) -> None:
    for name in ("src", "dst", "t", "edge_feat", "labels"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.causes is not None and b.causes is not None
    np.testing.assert_array_equal(a.causes.indptr, b.causes.indptr)
    np.testing.assert_array_equal(a.causes.parents, b.causes.parents)


def brute_force_matches(s: EventStream, window: int) -> set[tuple[int, int]]:
    """Every (first leg, second leg) pair of the rule, by checking all pairs."""
    first = np.flatnonzero(s.labels == 1)
    second = np.flatnonzero(s.labels == 2)
    return {(int(a), int(b)) for a, b in product(first, second)
            if s.dst[a] == s.src[b] and s.t[a] < s.t[b] <= s.t[a] + window
            and s.src[a] != s.dst[b]}


@pytest.mark.parametrize("kind", ["hawkes", "rule"])
def test_causes_exist_and_precede_their_effects(kind):
    s = make_planted_stream(kind, num_events=600, seed=3, feat_dim=5)
    assert s.num_events == 600 and s.name == f"planted_{kind}" and s.feat_dim == 5
    c = s.causes
    assert c is not None and c.num_events == 600 and c.parents.size > 0
    child = c.children()
    assert np.all((c.parents >= 0) & (c.parents < s.num_events))  # the parent exists
    assert np.all(c.parents < child)  # earlier id
    assert np.all(s.t[c.parents] <= s.t[child])
    if kind == "rule":  # strictly earlier in time, two causes per effect, none otherwise
        assert np.all(s.t[c.parents] < s.t[child])
        np.testing.assert_array_equal(c.counts(), np.where(s.labels == 3, 2, 0))
    else:  # one parent at most, and only along the excitation matrix
        assert c.counts().max() == 1
        matrix = np.asarray(s.meta["excitation_matrix"])
        assert np.all(matrix[s.labels[c.parents], s.labels[child]] > 0)
        pairs = np.asarray(s.meta["pairs"])
        np.testing.assert_array_equal(pairs[s.labels], np.stack([s.src, s.dst], axis=1))


@pytest.mark.parametrize("kind", ["hawkes", "rule"])
def test_the_same_seed_gives_the_same_stream(kind):
    a = make_planted_stream(kind, num_events=400, seed=7, feat_dim=2)
    assert_same(a, make_planted_stream(kind, num_events=400, seed=7, feat_dim=2))
    b = make_planted_stream(kind, num_events=400, seed=8, feat_dim=2)
    assert not (np.array_equal(a.src, b.src) and np.array_equal(a.t, b.t))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_rule_effect_happens_iff_its_motif_does(seed):
    # a dense toy (few nodes, long window) so that chance motifs between legs occur too
    window, delay = 40, 3
    s = make_rule_stream(num_nodes=6, num_events=300, seed=seed, window=window, delay=delay,
                         motif_share=0.6, mean_gap=2.0, feat_dim=4)
    assert s.causes is not None
    effects = np.flatnonzero(s.labels == 3)
    found = {tuple(int(x) for x in sorted(s.causes.of(e), key=lambda i: s.labels[i]))
             for e in effects}
    expected = brute_force_matches(s, window)
    assert found == expected and len(effects) == len(expected)  # iff, one effect per motif
    for e in effects:
        a, b = sorted(s.causes.of(e), key=lambda i: s.labels[i])
        assert (s.src[e], s.dst[e], s.t[e]) == (s.src[a], s.dst[b], s.t[b] + delay)
    np.testing.assert_array_equal(s.edge_feat[:, :3], np.stack(
        [s.labels == k for k in (1, 2, 3)], axis=1).astype(np.float32))
    # removing a cause set removes the effect: no motif of the reduced stream makes it
    e = int(effects[0])
    cause = s.causes.of(e)
    reduced, kept = s.without(cause)
    assert reduced.causes is None  # the rule no longer describes the reduced stream
    left = {(int(kept[a]), int(kept[b])) for a, b in brute_force_matches(reduced, window)}
    assert tuple(int(x) for x in cause) not in left
    assert not any(set(pair) == set(cause.tolist()) for pair in left)
    assert left == {p for p in expected if not set(p) & set(cause.tolist())}


def test_motif_matches_on_hand_built_legs():
    # legs: 0: 1->2 @10, 1: 2->3 @10 (same time: no), 2: 2->3 @15 (yes), 3: 2->1 @12 (u == v),
    # 4: 2->4 @61 (51 > window 50: no), 5: 5->2 @60 (first leg), 4 then matches 5 (1 <= 50)
    src = np.array([1, 2, 2, 2, 2, 5])
    dst = np.array([2, 3, 3, 1, 4, 2])
    t = np.array([10, 10, 15, 12, 61, 60], dtype=np.float64)
    a, b = motif_matches(src, dst, t, np.array([0, 5]), np.array([1, 2, 3, 4]), window=50)
    assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == [(0, 2), (5, 4)]


def test_prefix_keeps_the_causes_and_the_table_checks_them():
    s = make_planted_stream("rule", num_events=300, seed=0)
    assert s.causes is not None
    p = s.prefix(150)
    assert p.causes is not None and p.causes.num_events == 150
    np.testing.assert_array_equal(p.causes.parents,
                                  s.causes.parents[: s.causes.indptr[150]])
    with pytest.raises(DataFormatError, match="not an earlier event"):
        EventCauses(np.array([0, 0, 1]), np.array([1]))  # event 1 caused by itself
    with pytest.raises(DataFormatError, match="cover 2 events"):
        EventStream([0, 1, 0], [1, 0, 1], [0, 1, 2], None, None, 2,
                    causes=EventCauses(np.array([0, 0, 1]), np.array([0])))
    plain = make_planted_stream("rule", num_events=300, seed=0).prefix(0)
    assert plain.causes is not None and plain.causes.num_events == 0


def test_hawkes_background_share_follows_the_branching_ratio():
    s = make_hawkes_stream(num_events=20_000, seed=1, excitation=0.6)
    assert s.causes is not None
    caused = float((s.causes.counts() > 0).mean())
    assert abs(caused - 0.6) < 0.05  # stationary share of excited events = branching ratio
    none = make_hawkes_stream(num_events=500, seed=1, excitation=0.0)
    assert none.causes is not None and none.causes.parents.size == 0


@pytest.mark.parametrize("kind", ["hawkes", "rule"])
def test_a_200k_event_stream_is_generated_within_the_target(kind):
    start = time.perf_counter()
    s = make_planted_stream(kind, num_events=200_000, seed=0)
    elapsed = time.perf_counter() - start
    assert s.num_events == 200_000 and s.causes is not None and s.causes.parents.size > 0
    assert elapsed < 30.0, f"{elapsed:.1f} s"


@pytest.mark.parametrize(("options", "fragment"), [
    ({"kind": "bogus"}, "dataset.kind must be one of hawkes, rule, got 'bogus'"),
    ({"kind": "hawkes", "base_rate": -1.0}, "dataset.base_rate must be a finite number > 0"),
    ({"kind": "hawkes", "excitation": 1.0}, "dataset.excitation must be < 1"),
    ({"kind": "hawkes", "decay": 0}, "dataset.decay must be a finite number > 0"),
    ({"kind": "hawkes", "num_types": 7, "num_nodes": 2}, "exceeds the 2 ordered node pairs"),
    ({"kind": "rule", "window": 0}, "dataset.window must be an integer >= 1, got 0"),
    ({"kind": "rule", "window": 2.5}, "dataset.window must be an integer >= 1"),
    ({"kind": "rule", "num_events": 9}, "too small to hold one motif"),
    ({"kind": "rule", "motif_share": 1.5}, "dataset.motif_share must be a finite number"),
    ({"kind": "rule", "num_nodes": 4, "motif_share": 1.0, "window": 1000, "num_events": 300},
     "chance motifs"),
    ({"kind": "rule", "fanout": 3}, "dataset=planted has no option 'fanout'"),
])
def test_bad_options_are_config_errors(options, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        make_planted_stream(**options)


def dataset_info(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "dataset_info.py"), "dataset=planted", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )


def test_the_script_prints_the_causes_and_refuses_bad_options_in_one_line():
    done = dataset_info("dataset.kind=hawkes", "dataset.num_events=300")
    assert done.returncode == 0, done.stderr
    assert "planted_hawkes" in done.stdout and "planted causes" in done.stdout
    for args, line in [
        (["dataset.kind=bogus"], "error: dataset.kind must be one of hawkes, rule, got 'bogus'"),
        (["dataset.kind=hawkes", "dataset.base_rate=-1"],
         "error: dataset.base_rate must be a finite number > 0.0, got -1"),
        (["dataset.window=0"], "error: dataset.window must be an integer >= 1, got 0"),
        (["dataset.num_events=5"], "error: dataset.num_events=5 with motif_share=0.3 is too "
         "small to hold one motif (3 events); raise num_events or motif_share"),
    ]:
        done = dataset_info(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.strip().splitlines() == [line]
