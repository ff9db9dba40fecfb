"""Explanation metrics against hand-computed values."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from cftgnn.scoring.metrics import (
    approximation_agreement,
    aufsc_minus,
    aufsc_plus,
    cache_hit_rate,
    characterization_score,
    fidelity_minus,
    fidelity_plus,
    fidelity_sparsity_curve,
    flip_mask,
    runtime_percentiles,
    size_stats,
    sparsity,
)
from cftgnn.scoring.summaries import (
    SUMMARY_COLUMNS,
    format_summary,
    summarize,
    summary_metrics,
)

NAN = float("nan")


def close(a: float, b: float) -> bool:
    """Equal within 1e-12, NaN equal to NaN."""
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


# --------------------------------------------------------------------------- fidelity


def test_flip_mask_zero_logit_is_not_a_flip() -> None:
    # products: 2*-1 < 0, -1*0 = 0, 0*3 = 0, -2*-1 > 0, 1*-1e-9 < 0
    got = flip_mask([2.0, -1.0, 0.0, -2.0, 1.0], [-1.0, 0.0, 3.0, -1.0, -1e-9])
    assert got.tolist() == [True, False, False, False, True]


@pytest.mark.parametrize("fn", [fidelity_plus, fidelity_minus])
@pytest.mark.parametrize(
    ("original", "other", "expected"),
    [
        ([2.0, -1.0, 0.5, -3.0], [-1.0, 0.0, -0.2, 2.0], 3 / 4),  # flips: yes, no (0), yes, yes
        ([1.0, -1.0], [-1.0, 1.0], 1.0),  # all flipped
        ([1.0, -1.0, 2.0], [0.5, -4.0, 0.0], 0.0),  # none flipped (a logit of 0 is no flip)
        ([0.0, 1.0], [-1.0, -1.0], 1 / 2),  # p0 = 0 never flips
    ],
)
def test_fidelity_hand_computed(
    fn: Callable[[Any, Any], float], original: list[float], other: list[float], expected: float
) -> None:
    assert close(fn(original, other), expected)
    assert close(fn(np.array(original), pd.Series(other)), expected)


@pytest.mark.parametrize("fn", [fidelity_plus, fidelity_minus])
def test_fidelity_empty_is_nan_and_mismatch_raises(fn: Callable[[Any, Any], float]) -> None:
    assert math.isnan(fn([], []))
    with pytest.raises(ValueError, match="length mismatch"):
        fn([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        fn([1.0], [NAN])


# --------------------------------------------------------------------------- characterization


@pytest.mark.parametrize(
    ("fid_plus", "fid_minus", "weights", "expected"),
    [
        (0.8, 0.2, (0.5, 0.5), 0.8),  # 1 / (0.5/0.8 + 0.5/0.8) = 0.8
        (0.5, 0.5, (0.5, 0.5), 0.5),  # 1 / (0.5/0.5 + 0.5/0.5) = 0.5
        (0.6, 0.0, (0.5, 0.5), 0.75),  # 2 / (1/0.6 + 1/1) = 2 / (8/3) = 0.75
        (1.0, 0.5, (0.5, 0.5), 2 / 3),  # 1 / (0.5/1 + 0.5/0.5) = 1/1.5
        (0.8, 0.5, (1.0, 3.0), 4 / 7.25),  # (1+3) / (1/0.8 + 3/0.5) = 4 / (1.25 + 6)
        (0.8, 0.5, (2.0, 2.0), 1 / (0.5 / 0.8 + 0.5 / 0.5)),  # only the weight ratio matters
        (0.3, 0.4, (0.0, 1.0), 0.6),  # w+ = 0: 1 - fid-
        (0.3, 0.4, (1.0, 0.0), 0.3),  # w- = 0: fid+
        (0.0, 0.4, (0.0, 1.0), 0.6),  # fid+ = 0 does not matter with w+ = 0
        (0.0, 0.2, (0.5, 0.5), 0.0),  # fid+ = 0
        (0.7, 1.0, (0.5, 0.5), 0.0),  # fid- = 1
        (0.0, 1.0, (0.5, 0.5), 0.0),  # both
        (1.0, 0.0, (0.5, 0.5), 1.0),  # perfect
    ],
)
def test_characterization_score(
    fid_plus: float, fid_minus: float, weights: tuple[float, float], expected: float
) -> None:
    with np.errstate(all="raise"):
        got = characterization_score(fid_plus, fid_minus, *weights)
    assert isinstance(got, float)
    assert close(got, expected)


def test_characterization_nan_propagates() -> None:
    assert math.isnan(characterization_score(NAN, 0.2))
    assert math.isnan(characterization_score(0.5, NAN))


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0.5, 0.5, -0.1, 1.1), "non-negative"),
        ((0.5, 0.5, 0.0, 0.0), "positive"),
        ((0.5, 0.5, math.inf, 1.0), "finite"),
        ((1.2, 0.5), "fid_plus"),
        ((0.5, -0.1), "fid_minus"),
    ],
)
def test_characterization_validation(args: tuple[float, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        characterization_score(*args)


# --------------------------------------------------------------------------- sparsity and AUFSC


def test_sparsity() -> None:
    # 1/4, 3/3, 0/0 -> 0, 2/8
    got = sparsity([1, 3, 0, 2], [4, 3, 0, 8])
    np.testing.assert_allclose(got, [0.25, 1.0, 0.0, 0.25])
    assert sparsity([], []).shape == (0,)
    with pytest.raises(ValueError, match="length mismatch"):
        sparsity([1], [1, 2])


# flags and sparsities shared by the AUFSC tests
FLAGS = [True, False, True, True]
SPARS = [0.25, 1.0, 0.25, 0.5]


def test_fidelity_sparsity_curve_hand_computed() -> None:
    # flagged sparsities 0.25, 0.25, 0.5 out of N = 4
    got = fidelity_sparsity_curve(FLAGS, SPARS, [0.0, 0.2, 0.25, 0.4, 0.5, 1.0])
    np.testing.assert_allclose(got, [0, 0, 2 / 4, 2 / 4, 3 / 4, 3 / 4])
    assert np.isnan(fidelity_sparsity_curve([], [], [0.0, 1.0])).all()


def test_aufsc_plus_hand_computed() -> None:
    # (1 - 0.25) + 0 + (1 - 0.25) + (1 - 0.5) = 2.0, over 4 -> 0.5
    assert close(aufsc_plus(FLAGS, SPARS), 0.5)
    # a counterfactual of sparsity 0 scores 1, one using every candidate scores 0
    assert close(aufsc_plus([True, True], [0.0, 1.0]), 0.5)
    assert close(aufsc_plus([False, False], [0.1, 0.2]), 0.0)


def test_aufsc_minus_hand_computed() -> None:
    # sufficient: (1 - 0.25) + 0 + (1 - 0.25) + (1 - 0.5) = 2.0 -> 1 - 2/4 = 0.5
    assert close(aufsc_minus(FLAGS, SPARS), 0.5)
    # one sufficient explanation of sparsity 0.2 out of 2 -> 1 - 0.8/2 = 0.6
    assert close(aufsc_minus([1, 0], [0.2, 0.7]), 0.6)


@pytest.mark.parametrize("fn", [aufsc_plus, aufsc_minus])
def test_aufsc_edge_cases(fn: Callable[[Any, Any], float]) -> None:
    assert math.isnan(fn([], []))
    with pytest.raises(ValueError, match="length mismatch"):
        fn([True], [0.1, 0.2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fn([True], [1.5])
    with pytest.raises(ValueError, match="boolean"):
        fn([0.5], [0.1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_aufsc_closed_forms_equal_curve_integrals(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 50
    original = rng.normal(size=n)
    final = rng.normal(size=n)
    keep = rng.normal(size=n)
    cand = rng.integers(0, 12, size=n)
    size = np.minimum(rng.integers(0, 12, size=n), cand)
    sp = sparsity(size, cand)
    flips = flip_mask(original, final)
    sufficient = ~flip_mask(original, keep)
    grid = np.linspace(0.0, 1.0, 20001)

    f_plus = fidelity_sparsity_curve(flips, sp, grid)
    f_minus = 1.0 - fidelity_sparsity_curve(sufficient, sp, grid)
    assert abs(float(np.trapezoid(f_plus, grid)) - aufsc_plus(flips, sp)) < 1e-3
    assert abs(float(np.trapezoid(f_minus, grid)) - aufsc_minus(sufficient, sp)) < 1e-3
    # the curves end at the fidelities
    assert close(float(f_plus[-1]), fidelity_plus(original, final))
    assert close(float(f_minus[-1]), fidelity_minus(original, keep))
    # both curves are monotone: F+ rises, F- falls
    assert np.all(np.diff(f_plus) >= 0) and np.all(np.diff(f_minus) <= 0)


# --------------------------------------------------------------------------- size, time, cost


def test_size_stats() -> None:
    # counterfactual sizes 1, 4, 2 -> mean 7/3, median 2; all sizes 1,4,9,2 -> mean 4
    got = size_stats([1, 4, 9, 2], [True, True, False, True])
    assert got["count"] == 3
    assert close(got["mean"], 7 / 3)
    assert got["median"] == 2 and got["min"] == 1 and got["max"] == 4
    assert close(got["mean_all"], 4.0)


def test_size_stats_no_counterfactual_and_empty() -> None:
    got = size_stats([3, 5], [False, False])
    assert got["count"] == 0
    assert all(math.isnan(got[k]) for k in ("mean", "median", "min", "max"))
    assert got["mean_all"] == 4.0
    assert all(math.isnan(v) for k, v in size_stats([], []).items() if k != "count")
    with pytest.raises(ValueError, match="length mismatch"):
        size_stats([1, 2], [True])


def test_runtime_percentiles() -> None:
    # sorted 1..5: p50 = 3; p90 at index 0.9*4 = 3.6 -> 4 + 0.6 = 4.6; p99 at 3.96 -> 4.96
    got = runtime_percentiles([5.0, 1.0, 3.0, 2.0, 4.0])
    assert list(got) == ["p50", "p90", "p99", "mean"]
    assert close(got["p50"], 3.0) and close(got["p90"], 4.6) and close(got["p99"], 4.96)
    assert close(got["mean"], 3.0)
    assert list(runtime_percentiles([1.0], q=(25, 99.9))) == ["p25", "p99.9", "mean"]
    assert all(math.isnan(v) for v in runtime_percentiles([]).values())
    with pytest.raises(ValueError, match="percentiles"):
        runtime_percentiles([1.0], q=(101,))


def test_cache_hit_rate() -> None:
    # hits 5 + 0 + 15 = 20, calls 10 + 20 + 10 = 40 -> 20 / 60
    assert close(cache_hit_rate([5, 0, 15], [10, 20, 10]), 1 / 3)
    assert cache_hit_rate([0, 0], [3, 4]) == 0.0
    assert cache_hit_rate([2], [0]) == 1.0
    assert math.isnan(cache_hit_rate([0, 0], [0, 0]))
    assert math.isnan(cache_hit_rate([], []))
    with pytest.raises(ValueError, match="length mismatch"):
        cache_hit_rate([1], [1, 2])


def test_approximation_agreement() -> None:
    # (1.0*4 + 0.5*2 + 0.75*4) / (4 + 2 + 4) = 8 / 10; the n = 0 and None rows are ignored
    got = approximation_agreement([1.0, 0.5, None, 0.75, 0.0], [4, 2, 3, 4, 0])
    assert close(got, 0.8)
    assert math.isnan(approximation_agreement([None, 0.3], [0, 0]))
    assert math.isnan(approximation_agreement([], []))
    with pytest.raises(ValueError, match="length mismatch"):
        approximation_agreement([1.0], [])


# --------------------------------------------------------------------------- summarize


def records() -> pd.DataFrame:
    """Five events: three "correct" (one without candidates), two "incorrect"."""
    return pd.DataFrame(
        {
            "group": ["correct", "correct", "correct", "incorrect", "incorrect"],
            "status": ["ok", "ok", "no_candidates", "ok", "ok"],
            "original_logit": [2.0, -1.0, 1.0, 0.5, -3.0],
            "final_logit": [-1.0, 0.0, 1.0, -0.2, 2.0],  # flip, no (0), -, flip, flip
            "keep_logit": [1.5, 0.5, NAN, -0.1, -1.0],  # keeps, flips, -, flips, keeps
            "is_counterfactual": [True, False, False, True, True],
            "size": [1, 3, 0, 2, 1],
            "num_candidates": [4, 3, 0, 8, 2],
            "sparsity": [0.25, 1.0, 0.0, 0.25, 0.5],
            "oracle_calls": [10, 20, 1, 30, 40],
            "cache_hits": [5, 0, 0, 10, 30],
            "agreement": [1.0, 0.5, None, 0.75, None],
            "agreement_n": [4, 2, 0, 4, 0],
            "time_s": [1.0, 3.0, 0.5, 2.0, 4.0],
        }
    )


# correct (explained rows 1-2): fid+ 1/2; fid- 1/2; charact 1/(1+1) = 0.5;
#   AUFSC+ (0.75 + 0)/2; AUFSC- 1 - (0.75 + 0)/2; cf sizes [1], sparsities [0.25];
#   calls (10+20)/2; cache 5/(5+31); agreement (4*1 + 2*0.5)/6;
#   times [1, 3, 0.5] -> p50 1, p90 at index 1.8 -> 1 + 0.8*2 = 2.6, mean 1.5
# incorrect: fid+ 1; fid- 1/2; charact 1/(0.5/1 + 0.5/0.5) = 2/3;
#   AUFSC+ (0.75 + 0.5)/2; AUFSC- 1 - (0 + 0.5)/2; cf sizes [2, 1], sparsities [0.25, 0.5];
#   calls (30+40)/2; cache 40/(40+70); agreement 0.75; times [2, 4] -> 3, 3.8, 3
EXPECTED_BY_GROUP = {
    "correct": dict(
        events=3, explained=2, skipped=1, fidelity_plus=0.5, fidelity_minus=0.5,
        characterization=0.5, aufsc_plus=0.375, aufsc_minus=0.625, mean_size=1.0,
        median_size=1.0, mean_sparsity=0.25, oracle_calls=15.0, cache_hit_rate=5 / 36,
        agreement=5 / 6, time_p50=1.0, time_p90=2.6, time_mean=1.5,
    ),
    "incorrect": dict(
        events=2, explained=2, skipped=0, fidelity_plus=1.0, fidelity_minus=0.5,
        characterization=2 / 3, aufsc_plus=0.625, aufsc_minus=0.75, mean_size=1.5,
        median_size=1.5, mean_sparsity=0.375, oracle_calls=35.0, cache_hit_rate=4 / 11,
        agreement=0.75, time_p50=3.0, time_p90=3.8, time_mean=3.0,
    ),
}  # fmt: skip


def test_summarize_by_group_hand_computed() -> None:
    out = summarize(records(), by=["group"])
    assert list(out.columns) == ["group", *SUMMARY_COLUMNS]
    assert out["group"].tolist() == ["correct", "incorrect"]
    for _, row in out.iterrows():
        for name, value in EXPECTED_BY_GROUP[row["group"]].items():
            assert close(float(row[name]), value), (row["group"], name)


def test_summarize_keeps_first_appearance_order() -> None:
    df = records().iloc[::-1].reset_index(drop=True)
    assert summarize(df, by=["group"])["group"].tolist() == ["incorrect", "correct"]
    two = summarize(records().assign(model="tgn"), by=["model", "group"])
    assert two[["model", "group"]].values.tolist() == [["tgn", "correct"], ["tgn", "incorrect"]]


def test_summarize_all_rows_hand_computed() -> None:
    # explained rows: flips 1,0,1,1 -> fid+ 3/4; keep flips 0,1,1,0 -> fid- 1/2;
    # charact 1/(0.5/0.75 + 0.5/0.5) = 0.6; AUFSC+ (0.75 + 0 + 0.75 + 0.5)/4 = 0.5;
    # sufficient 1,0,0,1 -> AUFSC- 1 - (0.75 + 0.5)/4 = 0.6875
    got = summary_metrics(records())
    assert list(got) == list(SUMMARY_COLUMNS)
    assert (got["events"], got["explained"], got["skipped"]) == (5.0, 4.0, 1.0)
    assert close(got["fidelity_plus"], 0.75) and close(got["fidelity_minus"], 0.5)
    assert close(got["characterization"], 0.6)
    assert close(got["aufsc_plus"], 0.5) and close(got["aufsc_minus"], 0.6875)
    assert close(got["mean_size"], 4 / 3) and close(got["median_size"], 1.0)


def test_summarize_equals_individual_functions() -> None:
    df = records()
    row = summarize(df).iloc[0]
    ok = df[df["status"] == "ok"]
    flips = flip_mask(ok["original_logit"], ok["final_logit"])
    sp = sparsity(ok["size"], ok["num_candidates"])
    np.testing.assert_allclose(sp, ok["sparsity"])
    assert flips.tolist() == ok["is_counterfactual"].tolist()
    fp = fidelity_plus(ok["original_logit"], ok["final_logit"])
    fm = fidelity_minus(ok["original_logit"], ok["keep_logit"])
    sizes = size_stats(ok["size"], flips)
    times = runtime_percentiles(df["time_s"])
    expected = {
        "fidelity_plus": fp,
        "fidelity_minus": fm,
        "characterization": characterization_score(fp, fm),
        "aufsc_plus": aufsc_plus(flips, sp),
        "aufsc_minus": aufsc_minus(~flip_mask(ok["original_logit"], ok["keep_logit"]), sp),
        "mean_size": sizes["mean"],
        "median_size": sizes["median"],
        "mean_sparsity": float(sp[flips].mean()),
        "oracle_calls": float(ok["oracle_calls"].mean()),
        "cache_hit_rate": cache_hit_rate(df["cache_hits"], df["oracle_calls"]),
        "agreement": approximation_agreement(df["agreement"], df["agreement_n"]),
        "time_p50": times["p50"],
        "time_p90": times["p90"],
        "time_mean": times["mean"],
    }
    for name, value in expected.items():
        assert close(float(row[name]), value), name


def test_summarize_without_keep_logit_or_optional_columns() -> None:
    df = records().drop(columns=["keep_logit", "cache_hits", "agreement", "agreement_n"])
    got = summary_metrics(df)
    for name in ("fidelity_minus", "aufsc_minus", "characterization", "cache_hit_rate"):
        assert math.isnan(got[name]), name
    assert math.isnan(got["agreement"])
    assert close(got["fidelity_plus"], 0.75) and close(got["aufsc_plus"], 0.5)


def test_summarize_time_falls_back_to_setup_plus_wall() -> None:
    df = (
        records()
        .drop(columns=["time_s"])
        .assign(setup_time_s=[0.5, 0.5, 0.5, 0.5, 0.5], wall_time_s=[0.5, 2.5, 0.0, 1.5, 3.5])
    )
    # times 1, 3, 0.5, 2, 4 -> mean 10.5 / 5
    assert close(summary_metrics(df)["time_mean"], 2.1)


def test_summarize_accepts_record_dicts() -> None:
    recs = records().to_dict("records")
    assert close(summary_metrics(recs)["fidelity_plus"], 0.75)


def test_summarize_only_skipped_rows() -> None:
    df = records().iloc[[2]]
    got = summary_metrics(df)
    assert (got["events"], got["explained"], got["skipped"]) == (1.0, 0.0, 1.0)
    for name in ("fidelity_plus", "fidelity_minus", "characterization", "aufsc_plus",
                 "aufsc_minus", "mean_size", "mean_sparsity", "oracle_calls"):  # fmt: skip
        assert math.isnan(got[name]), name
    assert close(got["time_mean"], 0.5)


def test_summarize_empty() -> None:
    one = summarize(pd.DataFrame())
    assert len(one) == 1 and one["events"].iloc[0] == 0
    assert math.isnan(float(one["fidelity_plus"].iloc[0]))
    grouped = summarize(records().iloc[:0], by=["group"])
    assert len(grouped) == 0 and list(grouped.columns) == ["group", *SUMMARY_COLUMNS]


def test_summarize_missing_by_column() -> None:
    with pytest.raises(ValueError, match="group-by"):
        summarize(records(), by=["dataset"])


def test_format_summary() -> None:
    text = format_summary(summarize(records(), by=["group"]))
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[0].split()[:4] == ["group", "events", "explained", "skipped"]
    assert "0.375" in lines[1] and "0.667" in lines[2]  # aufsc_plus, characterization
    assert len({len(line) for line in lines}) == 1  # fixed width
    assert "group" in format_summary(summarize(records().iloc[:0], by=["group"]))


def test_the_summary_gives_the_median_share_of_the_size_cut_short() -> None:
    # explained rows only; NaN (not cut short) left out: median of 0.2, 0.5, 0.9 = 0.5
    df = records().assign(next_size_share=[0.2, NAN, 0.7, 0.9, 0.5])
    assert close(summary_metrics(df)["next_size_share_p50"], 0.5)
    assert np.isnan(summary_metrics(records())["next_size_share_p50"])  # no column: NaN
    none_cut = records().assign(next_size_share=NAN)
    assert np.isnan(summary_metrics(none_cut)["next_size_share_p50"])
