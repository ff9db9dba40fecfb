"""Which entries of ``cftgnn.replay.tgn.rows.RowTable``'s row map hold a row: one bit each.

``occupied [C, W]`` (``uint64``, ``W = cftgnn.arrays.mask_words(P)``: ``ceil(P / 64)``, at
least one) has bit ``p % 64`` of word
``[c, p // 64]`` set exactly where ``rowmap[p, c] >= 0`` (``occupancy``; the table's
``check`` asserts it). Every write of the row map sets or clears the entries' bits where it
writes them (``write_entries``; ``rows_kernels.remap_columns`` with ``occupied``), so the
scans of whole columns whose hits are the entries holding a row can visit only the set bits
(``set_bits``), in the same order (column by column, sets ascending), instead of reading
every entry of the columns: on the far-back tail (UCI · TGN 56484, K = 3) the columns
``RowTable.split_mixed`` and ``RowTable.revive`` scan hold a row in about one entry of ten
(before 2026-11-27: 171 million entries read by ``mixed_pairs`` in one search for 18 million hits).

The bitmap costs ``P * C / 8`` bytes, 1/32 of the row map (counted by ``RowTable.nbytes``).
Its loops are compiled (``cftgnn.jit``), paired with NumPy twins that give the same bits
(``cftgnn.jit.twins``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cftgnn import jit
from cftgnn.arrays import as_int64, mask_words

IntArray = npt.NDArray[np.int64]
Bits = npt.NDArray[np.uint64]

#: The de Bruijn constant of ``set_bits``: ``(low * _MAGIC) >> 58`` is distinct for each of
#: the 64 one-bit words ``low``, and ``_LOWEST`` maps it back to the bit's index.
_MAGIC = np.uint64(0x03F79D71B4CB0A89)
_LOWEST = np.zeros(64, dtype=np.int64)
_LOWEST[[((1 << i) * int(_MAGIC) % 2**64) >> 58 for i in range(64)]] = np.arange(64)
assert len({((1 << i) * int(_MAGIC) % 2**64) >> 58 for i in range(64)}) == 64


def occupancy(rowmap: npt.NDArray[np.int32]) -> Bits:
    """The bitmap of the entries of ``rowmap [P, C]`` that hold a row (``>= 0``),
    ``uint64 [C, mask_words(P)]``, computed from the whole map (the twins, ``check``)."""
    num_p, num_c = rowmap.shape
    width = mask_words(num_p)
    held = np.zeros((num_c, 64 * width), dtype=bool)
    held[:, :num_p] = rowmap.T >= 0
    packed = np.packbits(held, axis=1, bitorder="little")  # [C, 8 W]: bit p at byte p // 8
    return np.ascontiguousarray(packed).view("<u8").astype(np.uint64, copy=False)


def set_columns(rowmap: npt.NDArray[np.int32], occupied: Bits, cols: IntArray) -> None:
    """Set the bits of columns ``cols`` from the row map (the twins' bookkeeping)."""
    if len(cols):
        occupied[cols] = occupancy(rowmap[:, cols])


@jit.compiled
def _write(view: npt.NDArray[np.int32], num_p: int, occupied: Bits, p: IntArray, c: IntArray,
           values: IntArray) -> None:
    for m in range(len(p)):
        view[c[m] * num_p + p[m]] = values[m]
        bit = np.uint64(1) << np.uint64(p[m] & 63)
        if values[m] >= 0:
            occupied[c[m], p[m] >> 6] |= bit
        else:
            occupied[c[m], p[m] >> 6] &= ~bit


def _write_entries_numpy(rowmap: npt.NDArray[np.int32], occupied: Bits, p: IntArray,
                         c: IntArray, values: npt.NDArray[np.integer]) -> None:
    assert rowmap.flags.f_contiguous, "the row map must be column-major (order='F')"
    rowmap.T.reshape(-1)[c * rowmap.shape[0] + p] = values
    set_columns(rowmap, occupied, np.unique(c))


@jit.twins(numpy=_write_entries_numpy)
def write_entries(rowmap: npt.NDArray[np.int32], occupied: Bits, p: IntArray, c: IntArray,
                  values: npt.NDArray[np.integer]) -> None:
    """``rowmap[p[m], c[m]] = values[m]`` (a column-major map; the pairs distinct), and the
    entries' bits of ``occupied`` set where the value is a row (``>= 0``), cleared where it
    is ``-1``."""
    assert rowmap.flags.f_contiguous, "the row map must be column-major (order='F')"
    _write(rowmap.T.reshape(-1), rowmap.shape[0], occupied, as_int64(p), as_int64(c),
           as_int64(values))


@jit.compiled
def lowest_bit(word: np.uint64) -> int:
    """Index of the lowest set bit of a word that is not 0: the lowest bit alone times
    ``_MAGIC`` (modulo 2**64), its top 6 bits looked up in ``_LOWEST`` (the compiled scans
    call it for every entry they visit; a loop to call from compiled loops, and the tests)."""
    low = word & ~(word - np.uint64(1))
    return int(_LOWEST[(low * _MAGIC) >> np.uint64(58)])


def set_bits(occupied: Bits, cols: IntArray, num_p: int) -> tuple[IntArray, IntArray]:
    """The set bits of columns ``cols`` in the order of the scans (column by column, sets
    ascending): ``(pp, jj)``, each one's set and index into ``cols`` (what the compiled
    scans visit, for the tests; the scans iterate the words themselves)."""
    block = occupied[cols]  # [k, W]
    bits = np.unpackbits(block.astype("<u8").view(np.uint8), axis=1, bitorder="little")
    jj, pp = np.nonzero(bits[:, :num_p])
    return pp.astype(np.int64), jj.astype(np.int64)


__all__ = ["lowest_bit", "occupancy", "set_bits", "set_columns", "write_entries"]
