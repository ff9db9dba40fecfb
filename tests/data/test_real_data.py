"""Counts of the real streams (marked ``dataset``; CI reads ../shared/data)."""

from __future__ import annotations

import numpy as np
import pytest

from cftgnn.data import TemporalIndex, load_uci, load_wikipedia

pytestmark = pytest.mark.dataset


def test_uci_counts(real_data_dir, tmp_path):
    s = load_uci(data_dir=real_data_dir, cache_dir=tmp_path, download=False)
    assert (s.num_events, s.num_nodes, s.feat_dim) == (59_835, 1_899, 0)
    assert s.t[0] == 0 and np.all(np.diff(s.t) >= 0)
    used = np.union1d(s.src, s.dst)
    np.testing.assert_array_equal(used, np.arange(1_899))  # 0-based and contiguous
    assert s.meta["sha256"] == "e00ba2415373dee52c00616065bcceaa4750e78de60d1855c76470600f10740f"


def test_wikipedia_counts_and_cache(real_data_dir, tmp_path):
    s = load_wikipedia(data_dir=real_data_dir, cache_dir=tmp_path, download=False)
    assert (s.num_events, s.num_nodes, s.feat_dim) == (157_474, 9_227, 0)
    assert s.meta["num_users"] == 8_227 and s.meta["num_items"] == 1_000
    assert s.src.max() < 8_227 <= s.dst.min()  # bipartite: pages offset by the users
    assert int(s.labels.sum()) == 217
    again = load_wikipedia(data_dir=real_data_dir, cache_dir=tmp_path, download=False)
    assert "from_cache" in again.meta
    np.testing.assert_array_equal(again.dst, s.dst)
    np.testing.assert_array_equal(again.t, s.t)


def test_real_candidates_are_recent_and_local(real_data_dir, tmp_path):
    s = load_uci(data_dir=real_data_dir, cache_dir=tmp_path, download=False)
    index = TemporalIndex(s)
    c = index.candidates(50_000, k=2, m_max=64)
    assert len(c) == 64 and c.ids.max() < 50_000
    assert set(c.hops.tolist()) <= {0, 1, 2}
