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


def test_a_frozen_array_is_kept_and_any_other_copied():
    """The stream keeps a read-only array of its dtype whose memory nothing can write (no
    second copy of a long stream's arrays); a writable array, a read-only view of a writable
    one, or another dtype is copied, so later writes by the caller do not reach the
    stream."""
    frozen = np.array([0, 1], dtype=np.int64)
    frozen.setflags(write=False)
    writable = np.array([1, 2], dtype=np.int64)
    base = np.array([0.0, 1.0])
    view = base[:]
    view.setflags(write=False)
    s = EventStream(frozen, writable, view, None, None, 3, "toy")
    assert s.src is frozen
    assert not np.shares_memory(s.dst, writable) and not np.shares_memory(s.t, base)
    writable[0], base[0] = 0, 5.0
    assert s.dst.tolist() == [1, 2] and s.t.tolist() == [0.0, 1.0]
    as_int32 = np.array([0, 1], dtype=np.int32)
    as_int32.setflags(write=False)
    assert make(src=as_int32).src.dtype == np.int64
    # a prefix views the frozen arrays it is cut from
    stream = make_synthetic_stream(20, 300, seed=0, feat_dim=2)
    part = stream.prefix(100)
    for name in ("src", "dst", "t", "edge_feat", "labels"):
        assert np.shares_memory(getattr(part, name), getattr(stream, name)), name
        assert not getattr(part, name).flags.writeable


def test_synthetic_features_drawn_in_chunks_equal_one_draw(monkeypatch):
    """The generator draws the features' noise a chunk of rows at a time (bounded
    temporaries on long streams): the stream is the one a single draw gives."""
    from cftgnn.data import synthetic

    whole = make_synthetic_stream(30, 1000, seed=2, feat_dim=5)
    monkeypatch.setattr(synthetic, "_FEATURE_ROWS", 7)
    chunked = make_synthetic_stream(30, 1000, seed=2, feat_dim=5)
    for name in ("src", "dst", "t", "edge_feat", "labels"):
        np.testing.assert_array_equal(getattr(chunked, name), getattr(whole, name))


def test_the_generator_makes_no_second_copy_of_its_arrays():
    """Its peak allocation stays within 1.5 times the stream it returns (with 16 features:
    96 bytes per event; before 2026-12-02, 218 at the peak: a float64 draw of all the
    noise, and the stream's copy of every array)."""
    import tracemalloc

    tracemalloc.start()
    try:
        stream = make_synthetic_stream(2000, 200_000, seed=0, feat_dim=16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    held = sum(getattr(stream, n).nbytes for n in ("src", "dst", "t", "edge_feat", "labels"))
    assert held == 96 * stream.num_events
    assert peak < 1.5 * held, peak / stream.num_events
