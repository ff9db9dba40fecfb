"""Small array helpers shared by the models and the replay engine."""

from __future__ import annotations

import os

import numpy as np
import numpy.typing as npt

from cftgnn.errors import ConfigError

IntArray = npt.NDArray[np.int64]


def distinct_rows(key: npt.NDArray[np.int64]) -> tuple[IntArray, IntArray]:
    """``(first, inverse)``: the first row of each distinct row of ``key [M, C]`` and the
    distinct row of every row (``key[first][inverse] == key``)."""
    # rows as opaque byte strings: several times faster than np.unique(axis=0) on small keys
    key = np.ascontiguousarray(key, dtype=np.int64)
    rows = key.view(np.dtype((np.void, 8 * key.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return first.astype(np.int64), inverse.reshape(-1).astype(np.int64)


def physical_memory() -> int | None:
    """The machine's physical memory in bytes (None where the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows) or no such name
        return None


def format_bytes(nbytes: float) -> str:
    """``nbytes`` in binary units, e.g. ``1.5 GiB``."""
    size = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def check_fits_memory(nbytes: int, what: str) -> None:
    """Refuse, before allocating, arrays of ``nbytes`` bytes that exceed the machine's
    physical memory (where the system reports it).

    Args:
        nbytes: The bytes the arrays would need.
        what: What would be allocated, for the message (``a synthetic stream of ...``).

    Raises:
        ConfigError: Saying how much ``what`` would need and how much the machine has.
    """
    total = physical_memory()
    if total is not None and nbytes > total:
        raise ConfigError(f"{what} would need {format_bytes(nbytes)} of memory, more than "
                          f"this machine's {format_bytes(total)}; choose smaller sizes")


__all__ = ["check_fits_memory", "distinct_rows", "format_bytes", "physical_memory"]
