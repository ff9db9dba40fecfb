"""The exact cone replay computes bit for bit the logits it computed before it became the
``cftgnn.replay.tgn`` package (2026-11-26): references stored by ``testsupport.cone_reference``
from the code of commit ``4d53c0c``, computed again and compared with ``np.array_equal``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from testsupport import cone_reference

from cftgnn import jit


@pytest.fixture(autouse=True)
def reference_conditions():
    """One torch thread, on a CPU whose kernels are the references' (else a stated skip)."""
    here = torch.backends.cpu.get_cpu_capability()
    if here != cone_reference.REFERENCE_CPU:
        pytest.skip(f"the references' bits are those of a {cone_reference.REFERENCE_CPU} CPU's "
                    f"kernels; this one is {here} (regenerate them here: "
                    "tests/testsupport/cone_reference.py)")
    with cone_reference.one_thread():
        yield


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
def test_cone_logits_are_bitwise_the_references(compiled, monkeypatch):
    if compiled and not jit.ENABLED:
        pytest.skip("numba is not installed: only the NumPy twins of the loops run here")
    monkeypatch.setattr(jit, "ENABLED", compiled)  # without: the NumPy (and torch) twins
    jit.warm_up()  # started: replays of few sets run the compiled loops too (jit.for_sets)
    stored = np.load(cone_reference.REFERENCE)
    got = dict(cone_reference.cases())
    assert sorted(got) == sorted(stored.files)
    differ = [name for name, logits in got.items()
              if logits.dtype != stored[name].dtype or not np.array_equal(logits, stored[name])]
    assert not differ, f"logits no longer bitwise the references: {differ}"


@pytest.mark.dataset
def test_uci_tail_logits_are_bitwise_the_references(real_data_dir, tmp_path):
    stored = np.load(cone_reference.UCI_REFERENCE)
    got = dict(cone_reference.uci_cases(real_data_dir, tmp_path))
    assert sorted(got) == sorted(stored.files)
    for name, logits in got.items():
        assert logits.dtype == stored[name].dtype and np.array_equal(logits, stored[name]), name


@pytest.mark.dataset
def test_wikipedia_tail_logits_are_bitwise_the_references(real_data_dir, tmp_path):
    stored = np.load(cone_reference.WIKIPEDIA_REFERENCE)["logits"]
    got = cone_reference.wikipedia_case(real_data_dir, tmp_path)
    assert got.dtype == stored.dtype and np.array_equal(got, stored)
