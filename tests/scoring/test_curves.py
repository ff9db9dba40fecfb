"""Curve metrics (cftgnn.scoring.curves) against hand-computed curves."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cftgnn.explain.factual import rank_by_importance
from cftgnn.scoring.curves import (
    ACC_SHARES,
    FID_SHARES,
    acc_auc,
    acc_curve,
    agreement,
    aufsc_keep,
    best_fid,
    best_so_far,
    curve_removal_plan,
    fidelity,
    kept_count,
    kept_removal_sets,
    mean_fidelity_curve,
)
from cftgnn.scoring.summaries import summarize

S = np.asarray(FID_SHARES)


def test_the_grids() -> None:
    assert len(FID_SHARES) == 21 and FID_SHARES[0] == 0.0 and FID_SHARES[-1] == 1.0
    assert np.allclose(np.diff(FID_SHARES), 0.05)
    assert len(ACC_SHARES) == 16 and ACC_SHARES[0] == 0.0 and ACC_SHARES[-1] == 0.3
    assert np.allclose(np.diff(ACC_SHARES), 0.02)


@pytest.mark.parametrize(("share", "m", "at_least_one", "want"), [
    (0.0, 4, True, 1), (0.0, 4, False, 0),  # share 0: the top event, or nothing
    (1.0, 4, True, 4), (1.0, 1, True, 1),  # share 1: everything
    (0.05, 1, True, 1), (0.5, 1, False, 1), (0.3, 1, False, 1),  # m = 1: ⌈s⌉
    (0.15, 20, True, 3),  # 0.15 · 20 is 3.0000000000000004 in floats: still 3
    (0.5, 3, True, 2), (0.3, 7, True, 3), (0.02, 7, True, 1),  # m not divisible: ceiling
    (0.5, 0, True, 0),  # an empty ranking keeps nothing
])
def test_kept_count(share: float, m: int, at_least_one: bool, want: int) -> None:
    assert kept_count(share, m, at_least_one) == want


def test_kept_count_refuses_a_share_outside_0_1() -> None:
    with pytest.raises(ValueError, match="share"):
        kept_count(1.5, 3)


def test_kept_removal_sets_by_hand() -> None:
    ranking = [9, 7, 5, 3]  # m = 4
    got = kept_removal_sets(ranking, [0.0, 0.25, 0.3, 0.5, 0.8, 1.0])
    assert got == [(3, 5, 7), (3, 5, 7), (3, 5), (3, 5), (), ()]  # keep 1, 1, 2, 2, 4, 4
    assert kept_removal_sets(ranking, [0.0], at_least_one=False) == [(3, 5, 7, 9)]
    # events of R outside the ranking count as ranked last: always removed
    assert kept_removal_sets([9, 7], [0.0, 1.0], removable=[3, 7, 9]) == [(3, 7), (3,)]
    assert kept_removal_sets([], [0.0, 1.0], removable=[3]) == [(3,), (3,)]


def test_kept_sets_of_tied_importances_follow_the_rankings_tie_break() -> None:
    ranking, _ = rank_by_importance([1, 2, 3], [0.5, 0.5, 0.1])
    assert ranking == (2, 1, 3)  # the tie: the more recent event first
    assert kept_removal_sets(ranking, [1 / 3, 0.5]) == [(1, 3), (3,)]


def test_curve_removal_plan_deduplicates_both_grids() -> None:
    sets, fid, acc = curve_removal_plan([3, 1, 2])  # m = 3
    assert sets == [(1, 2), (2,), ()]
    # ⌈3s⌉: 1 up to s = 0.3, 2 from 0.35 to 0.65, 3 from 0.7
    assert fid.tolist() == [0] * 7 + [1] * 7 + [2] * 7
    assert acc.tolist() == [0] * 16  # 3 · 0.3 < 1: the top event only
    for grid, index in ((FID_SHARES, fid), (ACC_SHARES, acc)):
        assert [sets[i] for i in index] == kept_removal_sets([3, 1, 2], grid)


def test_fidelity_is_the_signed_move_towards_the_original_side() -> None:
    assert fidelity(1.0, 1.5) == pytest.approx(0.5)
    assert fidelity(1.0, -0.5) == pytest.approx(-1.5)
    assert fidelity(-1.0, -1.5) == pytest.approx(0.5)
    assert fidelity(-1.0, 0.5) == pytest.approx(-1.5)
    assert fidelity(0.0, -0.25) == pytest.approx(-0.25)  # p_orig = 0 counts as positive
    assert fidelity([1.0, -1.0], [2.0, 0.0]).tolist() == [1.0, -1.0]


def _two_events() -> tuple[list[float], list[list[float]]]:
    """A: p0 = 1, fid(s) = s (rises); B: p0 = −2, fid = 1 at s = 0, then −1 (falls)."""
    a = [1.0 + s for s in FID_SHARES]
    b = [-3.0] + [-1.0] * 20
    return [1.0, -2.0], [a, b]


def test_best_fid_and_aufsc_keep_by_hand() -> None:
    p0, kept = _two_events()
    # best-so-far: A's is s itself (area 0.5, max 1); B's stays 1 (area 1, max 1)
    assert best_so_far([[0.0, -1.0, 2.0, 1.0]]).tolist() == [[0.0, 0.0, 2.0, 2.0]]
    assert best_fid(p0, kept) == pytest.approx(1.0)
    assert aufsc_keep(p0, kept) == pytest.approx(0.75)
    # the mean raw curve: (s + 1) / 2 at s = 0, (s − 1) / 2 after
    mean = mean_fidelity_curve(p0, kept)
    assert mean[0] == pytest.approx(0.5) and mean[-1] == pytest.approx(0.0)
    assert np.allclose(mean[1:], (S[1:] - 1) / 2)
    # Best-FID is the mean of each event's best, not the best of the mean curve (0.5)
    assert mean.max() == pytest.approx(0.5)


def test_a_single_event_is_its_own_mean() -> None:
    p0, kept = _two_events()
    assert best_fid(p0[:1], kept[:1]) == pytest.approx(1.0)
    assert aufsc_keep(p0[:1], kept[:1]) == pytest.approx(0.5)
    assert aufsc_keep(p0[1:], kept[1:]) == pytest.approx(1.0)


def test_events_without_a_curve_are_left_out() -> None:
    p0, kept = _two_events()
    with_empty = ([*p0, 0.7, 0.4], [*kept, [], None])
    assert best_fid(*with_empty) == pytest.approx(best_fid(p0, kept))
    assert aufsc_keep(*with_empty) == pytest.approx(aufsc_keep(p0, kept))
    for metric in (best_fid, aufsc_keep, acc_auc):
        assert math.isnan(metric([0.5], [[]]))
        assert math.isnan(metric([], []))
    assert np.isnan(mean_fidelity_curve([0.5], [[]])).all()
    assert np.isnan(acc_curve([], [])).all()


def test_a_curve_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="points"):
        best_fid([1.0], [[1.0, 2.0]])
    with pytest.raises(ValueError, match="curves"):
        acc_auc([1.0, 2.0], [[1.0] * 16])


def test_agreement_needs_the_same_sign() -> None:
    assert agreement([1.0, 1.0, -1.0, -1.0, 1.0], [0.5, -0.5, -2.0, 0.1, 0.0]).tolist() == [
        True, False, True, False, False]  # a logit of exactly 0 agrees with nothing


def test_acc_auc_by_hand() -> None:
    p0 = [1.0, -1.0, 2.0]
    kept = [
        [0.3] * 16,  # agrees everywhere
        [-1.0] * 6 + [1.0] * 10,  # agrees up to s = 0.1, flips after
        [0.0] * 16,  # a zero logit: never agrees
    ]
    acc = acc_curve(p0, kept)
    assert np.allclose(acc, [2 / 3] * 6 + [1 / 3] * 10)
    # trapezoids of width 0.02: 5 at 2/3, one from 2/3 to 1/3, 9 at 1/3; over 0.3
    assert acc_auc(p0, kept) == pytest.approx(0.02 * (5 * 2 / 3 + 0.5 + 9 / 3) / 0.3)
    assert acc_auc(p0, kept) == pytest.approx(41 / 90)
    assert acc_auc([1.0], [[1.0] * 16]) == pytest.approx(1.0)
    assert acc_auc([1.0], [[-1.0] * 16]) == pytest.approx(0.0)


def test_summary_has_the_curve_columns() -> None:
    p0, kept = _two_events()
    acc = [[1.0] * 16, [1.0] * 16]  # A agrees, B (p0 < 0) never does
    rows = [
        {"status": "ok", "original_logit": p, "final_logit": p, "size": 0,
         "num_candidates": 21, "fid_curve_logits": f, "acc_curve_logits": a}
        for p, f, a in zip(p0, kept, acc, strict=True)
    ] + [{"status": "ok", "original_logit": 0.5, "final_logit": 0.5, "size": 0,
          "num_candidates": 3, "fid_curve_logits": [], "acc_curve_logits": []},
         {"status": "no_candidates", "original_logit": 0.5, "final_logit": 0.5, "size": 0,
          "num_candidates": 0, "fid_curve_logits": [], "acc_curve_logits": []}]
    row = summarize(rows).iloc[0]
    assert row["best_fid"] == pytest.approx(1.0)
    assert row["aufsc_keep"] == pytest.approx(0.75)
    assert row["acc_auc"] == pytest.approx(0.5)
    old = summarize([{k: v for k, v in r.items() if not k.endswith("curve_logits")}
                     for r in rows]).iloc[0]  # records before schema 4
    assert all(math.isnan(old[c]) for c in ("best_fid", "aufsc_keep", "acc_auc"))
