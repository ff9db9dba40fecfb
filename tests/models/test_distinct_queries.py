"""An embedding's distinct queries: the NumPy lexsort gives torch.unique's rows and order."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cftgnn.models.layers import _sorted_distinct_rows


@pytest.mark.parametrize("m", [0, 1, 7, 300])
def test_the_distinct_rows_are_torch_uniques(m):
    rng = np.random.default_rng(m)
    nodes = rng.integers(0, 6, m)  # few values: many repeats, ties in the first columns
    before = rng.integers(0, 4, m)
    t = rng.choice([0.0, 1.5, 2.25, 1e9], m)
    key = torch.from_numpy(np.stack([nodes, before, t], axis=1).astype(np.float64))
    want_rows, want_inverse = torch.unique(key, dim=0, return_inverse=True)
    rows, inverse = _sorted_distinct_rows(key)
    assert torch.equal(rows, want_rows) and torch.equal(inverse, want_inverse)
    assert torch.equal(rows[inverse], key)
