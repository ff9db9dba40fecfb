"""``cftgnn._compat``: torch_geometric is imported without numba, which it would load for
two helpers cftgnn never calls (about 50 MB of resident memory)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest


@pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                    reason="numba is not installed: nothing to keep out")
def test_numba_stays_out_of_the_import_and_can_be_imported_later():
    code = ("import sys, cftgnn.models\n"
            "print('numba' in sys.modules)\n"
            "import numba\n"
            "print(numba.__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300).stdout.split()
    assert out == ["False", "numba"]
