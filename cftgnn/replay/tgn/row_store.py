"""The rows of ``cftgnn.replay.tgn.rows.RowTable``: each row's memory and values, in buffers
that grow by doubling, and the capacity counted as held (``RowTable.nbytes``, what the cone
replay's memory budget reads).

A compaction (``RowStore.keep_only``) moves the rows kept down in place and keeps the
buffers; the capacity it counts is then twice the rows kept, as when it allocated new
buffers of that size (measured 2026-11-27: new buffers cost a copy of every row kept and, in fresh
memory, a page fault per 4 KiB written, about a third of the compaction and growth of
UCI · TGN 54454). The buffers are never longer than the longest capacity counted since
the last compaction with ``force`` (which allocates buffers of the capacity, as the budget
asks), so a call holds no more memory at its peak than before, only for longer. The
capacity, so ``nbytes`` and everything the budget decides, follows the rule it followed
when every compaction allocated.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.replay.tgn.record import SharedRows
from cftgnn.replay.tgn.rows_kernels import move_rows

_MIN_CAPACITY = 256


class RowStore:
    """Rows of perturbed state: ``mem``, ``lu``, ``pend``, ``rep``, ``n``, ``alive`` and
    ``mixed`` per row (``RowTable``'s attributes), the first ``size`` in use.

    Args:
        dim: Memory size d.
        device: Device of the rows' memory.

    Attributes:
        capacity: Rows counted as held (``nbytes``); the buffers hold at least as many.
    """

    def __init__(self, dim: int, device: torch.device) -> None:
        cap = self.capacity = _MIN_CAPACITY
        self.mem = torch.empty(cap, dim, device=device)
        self.lu = np.empty(cap, dtype=np.float64)
        self.pend = np.full(cap, -1, dtype=np.int64)
        self.rep = np.empty(cap, dtype=np.int64)
        self.n = np.empty(cap, dtype=np.int64)
        self.alive = np.zeros(cap, dtype=bool)
        self.mixed = np.zeros(cap, dtype=bool)
        self.size = 0
        # bytes per row counted (``rows_nbytes``): its memory and the six per-row values
        self._row_bytes = dim * self.mem.element_size() + 8 * 4 + 2

    def add(self, rep: npt.NDArray[np.int64], n: npt.NDArray[np.int64],
            mem: Tensor | SharedRows | None, lu: npt.NDArray[np.float64],
            at: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.int64]:
        """Allocate rows of nodes ``n`` used by sets ``rep`` (pending none) holding memory
        ``mem [k, d]``, or with ``at`` the rows ``at`` of ``mem`` (``None``: of this table),
        gathered straight into place; returns their ids (``rowmap`` is left to the caller,
        which knows every set using them)."""
        begin, need = self.size, self.size + len(rep)
        if need > self.capacity:  # grow; the buffers too where they are shorter
            self.capacity = max(need, 2 * self.capacity)
            if self.capacity > len(self.pend):
                self._hold(self.capacity)
        out = self.mem[begin:need]  # the new rows are consecutive: a slice, no upload
        if at is None:
            assert isinstance(mem, Tensor)
            out[:] = mem
        else:  # one gather into place (no gathered copy to copy again)
            index = torch.as_tensor(at, device=out.device)
            if mem is None:  # this table's rows, all below the new ones
                torch.index_select(self.mem[:begin], 0, index, out=out)
            elif isinstance(mem, SharedRows):
                torch.index_select(mem.table, 0, mem.ptr.index_select(0, index), out=out)
            else:
                torch.index_select(mem, 0, index, out=out)
        self.lu[begin:need], self.pend[begin:need] = lu, -1
        self.rep[begin:need], self.n[begin:need] = rep, n
        self.alive[begin:need], self.mixed[begin:need] = True, False
        self.size = need
        return np.arange(begin, need, dtype=np.int64)

    def rows_nbytes(self) -> int:
        """Bytes of ``capacity`` rows."""
        return self.capacity * self._row_bytes

    def keep_only(self, keep: npt.NDArray[np.int64], force: bool = False) -> None:
        """Rows ``keep`` (ascending) become rows ``0..len(keep)-1``, the rest are freed, and
        the capacity counted is twice the rows kept; with ``force``, in new buffers of that
        capacity, else moved down in place (``keep[i] >= i``: a row moves over rows moved
        or freed already), no buffer allocated (see the module docstring)."""
        self.capacity = max(_MIN_CAPACITY, 2 * len(keep))
        if force:
            self._hold(self.capacity, keep)
        else:
            move_rows(self.mem, keep)
            for row in (self.lu, self.pend, self.rep, self.n, self.alive, self.mixed):
                row[:len(keep)] = row[keep]
        self.size = len(keep)

    def _hold(self, cap: int, keep: npt.NDArray[np.int64] | None = None) -> None:
        """New buffers of ``cap`` rows, the rows ``keep`` (ascending; None: the ``size``
        rows in use, one copy of a slice) copied to the first."""
        mem = self.mem.new_empty(cap, self.mem.shape[1])
        if keep is None:
            mem[:self.size] = self.mem[:self.size]
        else:  # one gather into place
            torch.index_select(self.mem, 0, torch.as_tensor(keep, device=mem.device),
                               out=mem[:len(keep)])
        self.mem = mem
        for name in ("lu", "pend", "rep", "n", "alive", "mixed"):  # the rows kept, then room
            row = getattr(self, name)
            setattr(self, name, np.resize(row[:self.size] if keep is None else row[keep], cap))


__all__ = ["RowStore"]
