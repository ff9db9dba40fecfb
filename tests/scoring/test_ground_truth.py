"""Ground-truth metrics against hand-computed values: ties, no cause among the candidates,
one-event causes, set relations and the model-side flip rate."""

from __future__ import annotations

import math

import pytest

from cftgnn.scoring.ground_truth import (
    cause_auc,
    cause_flip_rate,
    cause_precision_at_k,
    cause_set_relation,
    cause_set_shares,
    ground_truth_row,
)


def test_auc_perfect_reversed_and_hand_computed():
    events = [10, 11, 12, 13]
    assert cause_auc(events, [4.0, 3.0, 2.0, 1.0], {10, 11}) == 1.0
    assert cause_auc(events, [1.0, 2.0, 3.0, 4.0], {10, 11}) == 0.0
    # causes score 4 and 2, others 3 and 1: pairs (4>3, 4>1, 2<3, 2>1) -> 3/4
    assert cause_auc(events, [4.0, 3.0, 2.0, 1.0], [10, 12]) == pytest.approx(0.75)


def test_auc_counts_a_tie_one_half():
    # cause 10 ties with non-cause 11 (0.5) and beats 12 (1): (0.5 + 1) / 2
    assert cause_auc([10, 11, 12], [2.0, 2.0, 1.0], [10]) == pytest.approx(0.75)
    assert cause_auc([10, 11, 12], [5.0, 5.0, 5.0], [11]) == pytest.approx(0.5)  # constant


def test_auc_is_nan_without_a_pair_to_compare():
    assert math.isnan(cause_auc([1, 2, 3], [3.0, 2.0, 1.0], [7]))  # no cause among them
    assert math.isnan(cause_auc([1, 2], [3.0, 2.0], [1, 2]))  # every candidate a cause
    assert math.isnan(cause_auc([], [], [1]))


def test_precision_at_the_cause_size():
    events = [1, 2, 3, 4, 5]
    scores = [0.9, 0.8, 0.7, 0.6, 0.5]
    assert cause_precision_at_k(events, scores, [1]) == 1.0  # one-event cause ranked first
    assert cause_precision_at_k(events, scores, [2]) == 0.0  # ranked second, k = 1
    assert cause_precision_at_k(events, scores, [1, 4]) == pytest.approx(0.5)  # top 2: {1, 2}
    assert cause_precision_at_k(events, scores, [1, 4, 99]) == pytest.approx(0.5)  # 99 ignored
    assert cause_precision_at_k(events, scores, [1, 4], k=4) == pytest.approx(0.5)
    assert math.isnan(cause_precision_at_k(events, scores, [42]))  # no cause among them


def test_precision_breaks_ties_at_the_cut_in_expectation():
    # k = 2; 1 is above the cut, {2, 3, 4} tie at it with one cause (3): 1 + 1 * 1/3 causes
    scores = [0.9, 0.5, 0.5, 0.5]
    assert cause_precision_at_k([1, 2, 3, 4], scores, [1, 3]) == pytest.approx((1 + 1 / 3) / 2)
    # a constant scorer gets the base rate whatever the order
    assert cause_precision_at_k([5, 6, 7, 8], [0.0] * 4, [8]) == pytest.approx(0.25)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: cause_auc([1, 2], [1.0], [1]), "2 events but 1 scores"),
    (lambda: cause_auc([1, 1], [1.0, 2.0], [1]), "distinct"),
    (lambda: cause_auc([1, 2], [1.0, float("nan")], [1]), "finite"),
    (lambda: cause_precision_at_k([1, 2], [1.0, 2.0], [1], k=3), r"k must be in \[0, 2\]"),
    (lambda: cause_auc([1.5, 2], [1.0, 2.0], [1]), "integer event ids"),
    (lambda: cause_set_shares([[1]], [[1], [2]]), "one entry per event"),
])
def test_bad_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_set_relation_of_one_answer():
    assert cause_set_relation([3, 5], [3, 5]) == {"contains": True, "contained": True,
                                                  "equal": True}
    assert cause_set_relation([3, 5, 8], [3, 5]) == {"contains": True, "contained": False,
                                                     "equal": False}
    assert cause_set_relation([5], [3, 5]) == {"contains": False, "contained": True,
                                               "equal": False}
    assert cause_set_relation([8], [3]) == {"contains": False, "contained": False,
                                            "equal": False}
    assert cause_set_relation(None, [3]) is None  # no answer
    assert cause_set_relation([3], []) is None  # no cause
    # a cause outside the candidates cannot be found: compared without it
    assert cause_set_relation([3], [3, 9], candidates=[1, 2, 3])["equal"] is True  # type: ignore[index]
    assert cause_set_relation([3], [9], candidates=[1, 2, 3]) is None


def test_set_shares_over_events():
    answers = [[1, 2], [1, 2, 3], [2], None, [7], (4,)]
    causes = [[1, 2], [1, 2], [1, 2], [1], [], {4}]
    shares = cause_set_shares(answers, causes)
    # scored: events 0, 1, 2, 5 (3 has no answer, 4 no cause)
    assert shares["answered"] == 4 and shares["no_answer"] == 1 and shares["no_cause"] == 1
    assert shares["equal"] == pytest.approx(2 / 4)  # 0 and 5
    assert shares["contains"] == pytest.approx(3 / 4)  # 0, 1, 5
    assert shares["contained"] == pytest.approx(3 / 4)  # 0, 2, 5
    empty = cause_set_shares([None], [[1]])
    assert math.isnan(empty["equal"]) and empty["no_answer"] == 1


def test_cause_flip_rate_shows_a_model_that_ignores_the_cause():
    assert cause_flip_rate([2.0, -1.0, 3.0, 0.5], [-1.0, 2.0, -0.1, 0.4]) == pytest.approx(0.75)
    assert cause_flip_rate([2.0, 1.0], [1.9, 1.0]) == 0.0  # the cause changes nothing
    assert cause_flip_rate([1.0], [0.0]) == 0.0  # a logit of exactly 0 is not a flip
    assert math.isnan(cause_flip_rate([], []))
    with pytest.raises(ValueError, match="length"):
        cause_flip_rate([1.0], [1.0, 2.0])


def test_row_of_one_explained_event():
    row = ground_truth_row(ranking=[7, 3, 5], importance=[0.9, 0.4, 0.1], explanation=[7],
                           cause=[7, 42])  # 42 is not a candidate: the cause is {7}
    assert row == {"cause_size": 1, "cause_auc": 1.0, "cause_precision": 1.0,
                   "cause_contains": True, "cause_contained": True, "cause_equal": True}
    row = ground_truth_row(ranking=(), importance=(), explanation=None, cause=[3],
                           candidates=[1, 2, 3])  # a set-only explainer without an answer
    assert row["cause_size"] == 1 and math.isnan(row["cause_auc"])
    assert math.isnan(row["cause_precision"]) and row["cause_equal"] is None
