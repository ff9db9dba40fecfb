"""The CSR table of TGB's negative destinations (cftgnn.data.tgb_negatives)."""

import pytest

from cftgnn.data import make_synthetic_stream
from cftgnn.data.tgb_negatives import TGB_KEY, TGBNegatives, tgb_split_points
from cftgnn.errors import DataFormatError


def test_rows_come_back_by_event_id():
    neg = TGBNegatives.from_lists("test", {7: [3, 1], 2: [5], 9: []})
    assert neg.event_ids.tolist() == [2, 7, 9]
    assert neg.of(7).tolist() == [3, 1]
    assert neg.of(2).tolist() == [5]
    assert neg.of(9).size == 0
    assert neg.counts().tolist() == [1, 2, 0]
    assert 7 in neg and 3 not in neg and "7" not in neg
    with pytest.raises(ValueError):
        neg.of(7)[0] = 0  # read-only


def test_an_event_outside_the_split_is_named():
    neg = TGBNegatives.from_lists("val", {4: [1]}, source="x_val_ns_v2.pkl")
    with pytest.raises(DataFormatError, match="event 5 has no TGB negatives in the val split"):
        neg.of(5)


@pytest.mark.parametrize("kwargs, match", [
    ({"split": "train"}, "split must be one of"),
    ({"indptr": [0, 2]}, "indptr must start at 0"),
    ({"dst": [1]}, "indptr ends at 2"),
    ({"event_ids": [3, 3]}, "strictly increasing"),
    ({"dst": [1, -2]}, "negative destination -2"),
])
def test_malformed_tables_are_refused(kwargs, match):
    args = {"split": "test", "event_ids": [1, 3], "indptr": [0, 1, 2], "dst": [4, 5]}
    args.update(kwargs)
    with pytest.raises(DataFormatError, match=match):
        TGBNegatives(**args)


def test_a_table_outside_the_stream_is_named():
    stream = make_synthetic_stream(num_nodes=10, num_events=20, seed=0)
    TGBNegatives.from_lists("test", {19: [9]}).check_within(stream)
    with pytest.raises(DataFormatError, match="event 20 is outside the stream"):
        TGBNegatives.from_lists("test", {20: [1]}).check_within(stream)
    with pytest.raises(DataFormatError, match=r"destination 10 is outside .* nodes \[0, 10\)"):
        TGBNegatives.from_lists("test", {3: [2, 10]}).check_within(stream)


def test_the_split_points_are_read_once_and_checked():
    stream = make_synthetic_stream(num_nodes=10, num_events=20, seed=0)
    assert tgb_split_points(stream) is None
    stream.meta[TGB_KEY] = {"name": "tgbl-x", "val_start": 14, "test_start": 17}
    assert tgb_split_points(stream) == (14, 17)
    for bad, match in (({"val_start": 14}, "lacks integer"), ([14, 17], "not a mapping"),
                       ({"val_start": 18, "test_start": 17}, "not within"),
                       ({"val_start": 14, "test_start": 21}, "not within")):
        stream.meta[TGB_KEY] = bad
        with pytest.raises(DataFormatError, match=match):
            tgb_split_points(stream)
