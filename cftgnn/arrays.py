"""Small array helpers shared by the models and the replay engine."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import numpy.typing as npt

from cftgnn.errors import ConfigError

IntArray = npt.NDArray[np.int64]

#: Up to this many entries, ``distinct_rows`` and ``unique`` sort in Python rather than
#: call ``np.unique``: the same answer, several times cheaper on the few rows of a single
#: removal set's batch in the cone replay (a ``np.unique`` call costs 10-20 µs whatever its
#: size; measured 2026-11-27).
SMALL = 16


def mask_words(num_bits: int) -> int:
    """The 64-bit words of a bitmask of ``num_bits`` bits (bit ``j`` at bit ``j % 64`` of word
    ``j // 64``): ``⌈num_bits / 64⌉``, and at least one, so that a table of masks
    ``[R, mask_words(n)]`` always has a column (the removal sets' words, the dependency sets,
    the row map's occupancy bits)."""
    return max(1, -(-num_bits // 64))


def as_int64(a: npt.NDArray[np.integer]) -> IntArray:
    """``a`` as ``int64`` (a copy only when it is of another type): the compiled loops are
    compiled for ``int64`` indices (one kernel each, not one per index type)."""
    return np.asarray(a, dtype=np.int64)


def index_dtype(bound: int) -> type[np.signedinteger]:
    """``int32`` for indices of at most ``bound`` where they fit (half the bytes of the
    replay's held index arrays), else ``int64``."""
    return np.int32 if int(bound) <= np.iinfo(np.int32).max else np.int64


def distinct_rows(key: npt.NDArray[np.int64]) -> tuple[IntArray, IntArray]:
    """``(first, inverse)``: the first row of each distinct row of ``key [M, C]`` and the
    distinct row of every row (``key[first][inverse] == key``), the distinct rows in the
    order of their bytes (``np.unique`` of the rows as opaque byte strings)."""
    # rows as opaque byte strings: several times faster than np.unique(axis=0) on small keys
    key = np.ascontiguousarray(key, dtype=np.int64)
    if len(key) <= SMALL:
        # the same order: Python compares bytes as NumPy compares opaque ones (memcmp)
        width = 8 * key.shape[1]
        data = key.tobytes()
        return _sorted_distinct([data[i:i + width] for i in range(0, len(data), width)])
    rows = key.view(np.dtype((np.void, 8 * key.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return first.astype(np.int64), inverse.reshape(-1).astype(np.int64)


def unique(values: npt.NDArray[np.integer], return_index: bool = False,
           return_inverse: bool = False) -> Any:
    """``np.unique(values, return_index=..., return_inverse=...)`` of a 1-D integer array,
    sorted in Python up to ``SMALL`` entries (the same arrays, cheaper; see ``SMALL``)."""
    if len(values) > SMALL:
        np_unique: Any = np.unique  # its overloads want literal flags
        return np_unique(values, return_index=return_index, return_inverse=return_inverse)
    first, inverse = _sorted_distinct(values.tolist())
    out: tuple[npt.NDArray[Any], ...] = (values[first],)
    if return_index:
        out += (first,)
    if return_inverse:
        out += (inverse,)
    return out if len(out) > 1 else out[0]


def _sorted_distinct(items: list[Any]) -> tuple[IntArray, IntArray]:
    """``(first, inverse)`` of ``items`` (comparable values): the first position of each
    distinct value, the values ascending, and each item's rank among them."""
    ranks = {v: g for g, v in enumerate(sorted(set(items)))}
    first = np.empty(len(ranks), dtype=np.int64)
    inverse = np.empty(len(items), dtype=np.int64)
    for i in range(len(items) - 1, -1, -1):  # backwards: the first position is written last
        g = ranks[items[i]]
        first[g] = i
        inverse[i] = g
    return first, inverse


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


__all__ = ["SMALL", "as_int64", "check_fits_memory", "distinct_rows", "format_bytes",
           "index_dtype", "mask_words", "physical_memory", "unique"]
