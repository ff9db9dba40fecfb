import numpy as np
import pytest

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.errors import CftgnnError, DataFormatError


def make(src=(0, 1), dst=(1, 2), t=(0.0, 1.0), feat=None, labels=None, n=3):
    return EventStream(np.array(src), np.array(dst), np.array(t), feat, labels, n, "toy")


def test_valid_stream_is_read_only_and_typed():
    s = make()
    assert s.num_events == 2 and s.feat_dim == 0 and s.src.dtype == np.int64
    with pytest.raises(ValueError):
        s.src[0] = 2


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"dst": (1,)}, "differ in length"),
        ({"src": (0, 3)}, "src[1] = 3 is outside [0, 3)"),
        ({"dst": (-1, 2)}, "dst[0] = -1"),
        ({"t": (1.0, 0.5)}, "non-decreasing"),
        ({"t": (0.0, np.nan)}, "not finite"),
        ({"src": (0.5, 1.0)}, "not an integer"),
        ({"feat": np.array([[1.0], [np.inf]])}, "edge_feat row 1"),
    ],
)
def test_invalid_streams_raise_naming_the_value(kwargs, fragment):
    with pytest.raises(DataFormatError, match=None) as info:
        make(**kwargs)
    assert fragment in str(info.value)
    assert isinstance(info.value, CftgnnError)


def test_without_keeps_original_ids():
    s = make_synthetic_stream(10, 50, seed=1)
    sub, kept = s.without([0, 7, 49])
    assert sub.num_events == 47
    assert list(kept[:7]) == [1, 2, 3, 4, 5, 6, 8]
    np.testing.assert_array_equal(sub.src, s.src[kept])


def test_synthetic_is_seeded_and_has_ties():
    a, b = make_synthetic_stream(40, 500, seed=3), make_synthetic_stream(40, 500, seed=3)
    c = make_synthetic_stream(40, 500, seed=4)
    np.testing.assert_array_equal(a.dst, b.dst)
    assert not np.array_equal(a.dst, c.dst)
    assert (np.diff(a.t) == 0).any()
    big = make_synthetic_stream(1000, 20000, seed=0, feat_dim=4)
    assert big.num_events == 20000 and big.feat_dim == 4
