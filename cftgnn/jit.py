"""Optional compilation of the cone replay's bookkeeping loops with numba.

``compiled(f)`` is ``numba.njit(cache=True, nogil=True)(f)`` where numba is installed (a
dependency of the package) and ``f`` itself where it is not (the GPU machine's image, whose
offline wheels leave out numba's 57 MiB llvmlite, see ``scripts/gpu/requirements.txt``). The
callers (``cftgnn.replay.tgn.rows_kernels``, ``row_steps``, ``compare``) read ``ENABLED``
at each call: where it is false they run their NumPy (or torch) twin of the loop instead,
which gives the same integers and booleans, so the logits are the same bit for bit either
way (``tests/replay/test_rows_kernels.py`` compares the twins, and a cone replay with and
without).

Why compiled loops: on the far-back tail events (docs/benchmarks.md, "The far-back tail")
the bookkeeping is a few dozen NumPy calls per batch over arrays of thousands of entries,
each a pass of its own; the loops here fuse them (row lookups, grouping equal rows by
hashing, comparing rows until their first differing coordinate). Their cost: numba's start
in a process (about 0.3-0.5 CPU seconds at the first compiled call, loading the kernels
from numba's cache in ``__pycache__``), and, the first time after an install or an edit of
the module, compiling them (a few seconds, then cached). ``warm_up`` pays the start ahead,
once: ``cftgnn.oracle.workers.ForkedWorkers`` calls it before forking, so that its worker
processes inherit a started numba rather than each starting it again for every event.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

F = TypeVar("F", bound=Callable[..., Any])

#: Set to ``0`` to run the NumPy twins without importing numba: numba costs about 0.1 GiB of
#: resident memory in a process (its start and the kernels, measured), which matters only
#: where the memory is tight (the 1M-event stream of docs/benchmarks.md: 1.54 GiB peak
#: with the compiled loops, 1.44 with CFTGNN_JIT=0); the twins give the same logits, slower. Only
#: ``0`` turns them off; unset or any other value leaves them on.
ENV = "CFTGNN_JIT"

_numba = (importlib.import_module("numba")
          if os.environ.get(ENV, "1").strip() != "0" and importlib.util.find_spec("numba")
          else None)

#: Whether the compiled loops run (numba is installed and ``CFTGNN_JIT`` is not ``0``); tests
#: set it false to run the twins.
ENABLED = _numba is not None


def compiled(f: F) -> F:
    """``f`` compiled by numba (``nopython``, cached on disk, releasing the GIL), or ``f``
    unchanged without numba (then its callers run their twins, see the module docstring)."""
    if _numba is None:
        return f
    try:
        out: F = _numba.njit(cache=True, nogil=True)(f)
    except RuntimeError:  # no writable cache (``__pycache__`` nor numba's user cache dir):
        out = _numba.njit(nogil=True)(f)  # compiled in every process instead
    return out


@compiled
def _first(x: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    out = np.empty(len(x), dtype=np.int64)  # arrays in and out: numba's NumPy support too
    for i in range(len(x)):
        out[i] = x[i] + 1
    return out


def warm_up() -> None:
    """Start numba in this process now (most of its first call's cost, see the module
    docstring); nothing without numba or once started."""
    if ENABLED and _numba is not None:
        _first(np.zeros(1, dtype=np.int64))


__all__ = ["ENABLED", "ENV", "compiled", "warm_up"]
