"""The ``temgx`` protocol and the benchmark's CHARR, monotonicity, first-flip sparsity and seed
stability against hand computations on hand-built records."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cftgnn.runs.options import protocols_choice
from cftgnn.scoring.benchmark_metrics import (
    charr,
    first_flip,
    jaccard,
    monotonicity,
    ordinal_ranks,
    seed_stability,
    seed_stability_of_runs,
    spearman,
)
from cftgnn.scoring.curves import FID_SHARES
from cftgnn.scoring.protocols import (
    Protocol,
    single_removal_sets,
    temgx_answer_fidelity,
    temgx_aufsc,
    temgx_fidelity,
    temgx_removal_sets,
    temgx_removed_count,
    trapezoid_aufsc,
)
from cftgnn.scoring.summaries import summarize


def sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


# --------------------------------------------------------------------------- temgx protocol


def test_temgx_removes_the_rounded_top_share():
    # m = 10: round(0.05·10) = round(0.5) = 0 (half to even), round(0.15·10) = 2, 0.25 → 2
    counts = [temgx_removed_count(s, 10) for s in FID_SHARES]
    assert counts[:7] == [0, 0, 1, 2, 2, 2, 3]  # 0.5→0, 1.5→2, 2.5→2 (half to even)
    assert counts[-1] == 10
    sets = temgx_removal_sets([7, 3, 9, 1], shares=(0.0, 0.25, 0.5, 1.0))
    assert sets == [(), (7,), (3, 7), (1, 3, 7, 9)]
    assert single_removal_sets([7, 3]) == [(7,), (3,)]
    with pytest.raises(ValueError):
        temgx_removed_count(1.5, 4)


def test_trapezoid_aufsc_by_hand():
    assert trapezoid_aufsc([(0.0, 0.0), (0.5, 0.2), (1.0, 0.4)]) == pytest.approx(
        0.5 * (0.0 + 0.2) * 0.5 + 0.5 * (0.2 + 0.4) * 0.5)
    assert trapezoid_aufsc([(1.0, 1.0), (0.0, 0.0)]) == pytest.approx(0.5)  # sorted first
    assert trapezoid_aufsc([(0.3, 1.0)]) == 0.0


def test_temgx_aufsc_against_a_hand_computation():
    """Two events; the first's probability moves linearly from 0 to σ(2) − σ(−2) ... computed
    on the 21 shares by hand, the second has no curve and is left out."""
    p0 = 2.0
    logits = [2.0 - 4.0 * s for s in FID_SHARES]  # removing more moves the logit to −2
    fid = [abs(sig(p0) - sig(x)) for x in logits]
    by_hand = sum(0.5 * (fid[j] + fid[j + 1]) * 0.05 for j in range(20))
    assert temgx_aufsc([p0, 1.0], [logits, []]) == pytest.approx(by_hand)
    assert temgx_fidelity(0.0, [0.0, 2.0]) == pytest.approx([0.0, sig(2.0) - 0.5])
    assert math.isnan(temgx_aufsc([1.0], [[]]))


def test_temgx_answer_fidelity_is_one_sided():
    drop = temgx_answer_fidelity([2.0, -1.0, 0.0], [0.0, 1.0, 0.03])
    assert drop == pytest.approx([sig(2.0) - 0.5, 0.0, 0.0])
    assert (drop > 0.01).tolist() == [True, False, False]


def test_the_protocol_is_an_option():
    assert protocols_choice("temgx") == (Protocol.TEMGX,)
    assert Protocol.TEMGX in protocols_choice("all")


# --------------------------------------------------------------------------- the benchmark's


def test_charr_by_hand():
    # A+ = 0.4, A− = 0.3 (sufficiency area 0.7): 1 / (0.5/0.4 + 0.5/0.7)
    assert charr(0.4, 0.3) == pytest.approx(1 / (0.5 / 0.4 + 0.5 / 0.7))
    assert charr(0.4, 0.3, 0.25, 0.75) == pytest.approx(1 / (0.25 / 0.4 + 0.75 / 0.7))
    assert math.isnan(charr(0.0, 0.3)) and math.isnan(charr(0.4, 1.0))
    assert math.isnan(charr(float("nan"), 0.3))


def test_first_flip_by_hand():
    shares = (0.0, 0.5, 1.0)
    # event 1 (p0 > 0) flips at 0.5; event 2 (p0 < 0) at 0.0 (a logit 0 counts as positive);
    # event 3 never flips; event 4 has no curve
    rate, first = first_flip([1.0, -1.0, 2.0, 1.0],
                             [[0.5, -0.1, -2.0], [0.0, -1.0, 1.0], [1.0, 1.0, 1.0], []],
                             shares)
    assert rate == pytest.approx(2 / 3)
    assert first == pytest.approx((0.5 + 0.0) / 2)
    assert first_flip([1.0], [[1.0, 1.0, 1.0]], shares) == (0.0, 1.0)  # none flips: 1.0
    assert all(math.isnan(x) for x in first_flip([1.0], [[]], shares))


def test_monotonicity_by_hand():
    assert ordinal_ranks([0.3, 0.1, 0.2]).tolist() == [3.0, 1.0, 2.0]
    assert ordinal_ranks([0.5, 0.5, 0.1]).tolist() == [2.0, 3.0, 1.0]  # ties in order
    # importance 3 > 2 > 1, impacts |1 − p| = 0.9, 0.5, 0.1: ranks agree, ρ = 1
    assert spearman([3, 2, 1], [0.9, 0.5, 0.1]) == pytest.approx(1.0)
    # ranks (3, 2, 1) and (1, 3, 2): Pearson of ranks = −0.5
    assert spearman([3, 2, 1], [0.1, 0.9, 0.5]) == pytest.approx(-0.5)
    mono = monotonicity([1.0, 1.0, 1.0, 1.0],
                        [[3, 2, 1], [3, 2, 1], [1, 1], [2, 1]],
                        [[0.1, 0.5, 0.9], [0.9, 0.1, 0.5], [0.0, 0.5], []])
    # event 3: tied importance gets ordinal ranks (1, 2) in the given order, as the
    # benchmark's do, against impacts (1, 0.5): ρ = −1; event 4: no single-removal logits
    assert mono == pytest.approx((1.0 - 0.5 - 1.0) / 3)
    assert math.isnan(monotonicity([1.0], [[1.0]], [[0.0]]))


def test_seed_stability_by_hand():
    assert jaccard([1, 2], [2, 3]) == pytest.approx(1 / 3)
    assert jaccard([], []) == 1.0
    # event a: {1,2}, {1,2}, {2,3}: pairs 1, 1/3, 1/3; event b: one seed only (left out)
    assert seed_stability([[[1, 2], [1, 2], [2, 3]], [[5]]]) == pytest.approx(5 / 9)
    assert math.isnan(seed_stability([[[1]]]))
    runs = {seed: pd.DataFrame({"event_id": [10, 11], "status": ["ok", status],
                                "explanation": [answer, [4]]})
            for seed, answer, status in ((0, [1, 2], "ok"), (1, [2, 3], "ok"),
                                         (2, [1, 2], "no_candidates"))}
    # event 10 in every run: {1,2}, {2,3}, {1,2}; event 11 explained in two runs: {4}, {4}
    assert seed_stability_of_runs(runs) == pytest.approx(((1 / 3 + 1 + 1 / 3) / 3 + 1) / 2)


def test_summaries_carry_the_new_columns():
    """Two explained records with the temgx protocol's and the common protocol's curves."""
    curve = [[1.0] * 21, [2.0] + [-1.0] * 20]
    records = pd.DataFrame({
        "event_id": [1, 2], "status": ["ok", "ok"], "original_logit": [2.0, 2.0],
        "final_logit": [-1.0, 1.0], "keep_logit": [0.0, 1.99], "size": [1, 2],
        "num_candidates": [4, 4], "fid_curve_logits": curve,
        "temgx_curve_logits": [[2.0] * 21, [2.0] * 21],
        "importance": [[1.0, 0.5, 0.1], [1.0, 0.5]],
        "single_removal_logits": [[0.0, 1.0, 1.5], [2.0, 1.0]],
        "time_s": [1.0, 1.0], "oracle_calls": [1, 1]})
    row = summarize(records).iloc[0]
    assert row["temgx_fidelity_minus"] == pytest.approx((sig(2.0) - 0.5 + 0.0) / 2, abs=1e-3)
    assert row["temgx_cf_rate"] == pytest.approx(0.5)  # σ(2) − σ(1.99) < 0.01
    assert row["temgx_sparsity"] == pytest.approx((0.25 + 0.5) / 2)
    assert row["temgx_aufsc"] == pytest.approx(0.0)
    assert row["monotonicity"] == pytest.approx((1.0 - 1.0) / 2)
    assert row["flip_success"] == pytest.approx(0.5)
    assert row["first_flip_sparsity"] == pytest.approx(0.05)
    # CHARR from the row's own areas
    assert row["charr"] == pytest.approx(charr(row["aufsc_plus"], row["aufsc_minus"]))
    # a run without the temgx protocol: NaN there
    plain = summarize(records.drop(columns=["temgx_curve_logits",
                                            "single_removal_logits"])).iloc[0]
    assert np.isnan(plain["temgx_aufsc"]) and np.isnan(plain["monotonicity"])
