"""The exact cone replay computes bit for bit the logits it computed before it became the
``cftgnn.replay.tgn`` package (2026-11-26): references stored by ``testsupport.cone_reference``
from the code of commit ``4d53c0c``, computed again and compared with ``np.array_equal``, on a
CPU that has references (``cone_reference.references_for``: a CPU's kernels decide the last
bits)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from testsupport import cone_reference

from cftgnn import jit


@pytest.fixture
def references():
    """This CPU's references (one torch thread while the test runs), else a stated skip."""
    folder = cone_reference.references_for()
    if folder is None:
        here = torch.backends.cpu.get_cpu_capability()
        pytest.skip(f"no references for this CPU's kernels ({here}, AMX "
                    f"{cone_reference.has_amx()}, probe {cone_reference.kernel_probe()}): "
                    "add them as tests/testsupport/cone_reference.py says")
    with cone_reference.one_thread():
        yield folder


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
def test_cone_logits_are_bitwise_the_references(compiled, monkeypatch, references):
    if compiled and not jit.ENABLED:
        pytest.skip("numba is not installed: only the NumPy twins of the loops run here")
    monkeypatch.setattr(jit, "ENABLED", compiled)  # without: the NumPy (and torch) twins
    jit.warm_up()  # started: replays of few sets run the compiled loops too (jit.for_sets)
    stored = np.load(references / cone_reference.REFERENCE.name)
    got = dict(cone_reference.cases())
    assert sorted(got) == sorted(stored.files)
    differ = [name for name, logits in got.items()
              if logits.dtype != stored[name].dtype or not np.array_equal(logits, stored[name])]
    assert not differ, f"logits no longer bitwise the references: {differ}"


@pytest.mark.dataset
def test_uci_tail_logits_are_bitwise_the_references(real_data_dir, tmp_path, references):
    stored = np.load(references / cone_reference.UCI_REFERENCE.name)
    got = dict(cone_reference.uci_cases(real_data_dir, tmp_path))
    assert sorted(got) == sorted(stored.files)
    for name, logits in got.items():
        assert logits.dtype == stored[name].dtype and np.array_equal(logits, stored[name]), name


@pytest.mark.dataset
def test_wikipedia_tail_logits_are_bitwise_the_references(real_data_dir, tmp_path,
                                                         references):
    stored = np.load(references / cone_reference.WIKIPEDIA_REFERENCE.name)["logits"]
    got = cone_reference.wikipedia_case(real_data_dir, tmp_path)
    assert got.dtype == stored.dtype and np.array_equal(got, stored)


def test_the_kernel_probe_names_this_cpu_alike_every_time():
    probe = cone_reference.kernel_probe()
    assert len(probe) == 12 and int(probe, 16) >= 0
    assert cone_reference.kernel_probe() == probe
    with cone_reference.one_thread():  # nested: the count is restored by the outer one
        assert cone_reference.kernel_probe() == probe


def test_a_cpu_without_references_is_told_apart(monkeypatch):
    monkeypatch.setattr(cone_reference, "kernel_probe", lambda: "000000000000")
    monkeypatch.setattr(cone_reference, "has_amx", lambda: True)
    assert cone_reference.references_for() is None
    monkeypatch.setattr(cone_reference, "has_amx", lambda: False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert cone_reference.references_for() == cone_reference.DATA
