"""Comparisons of memory rows with the recording, on the rows' device: the test by which the
cone replay's pruning (``cftgnn.replay.tgn.rows.RowTable.prune``, ``merge``) decides that a
perturbed row holds the recorded state.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn import jit
from cftgnn.arrays import as_int64
from cftgnn.replay.tgn.record import SharedRows

#: Up to this many rows, ``memory_equal`` compares whole rows at once: the two-step
#: comparison (first coordinate, then the rest of the rows it leaves) saves arithmetic only
#: on many rows, and costs a second gather and host copy per batch (the single call's case).
ONE_PASS_ROWS = 64


def bits(t: Tensor) -> Tensor:
    """The bit patterns of a float tensor (so that ``0.0`` and ``-0.0`` differ)."""
    return t.view(torch.int64 if t.element_size() == 8 else torch.int32)


@lru_cache(maxsize=16)
def probe_columns(dim: int, count: int = 16, device: torch.device | str = "cpu") -> Tensor:
    """The coordinates ``merge`` reads first to tell memory rows apart: ``0`` and ``1`` (the
    leading pair it groups rows by), then every ``dim // count``-th one. Rows of one node whose
    leading coordinates agree often differ in a third of the others (UCI and Wikipedia · TGN),
    so a dozen spread coordinates rule out nearly every unequal pair before the whole rows
    are compared; equal rows agree on every coordinate, so the answer is the same. (With
    the compiled loops, ``merge_steps.merge_groups``, ``merge`` reads only the leading pair:
    its whole-row comparison stops at the first differing coordinate. Made once per device
    and size: callers only read it.)"""
    step = max(1, dim // count)  # made on the device: no upload
    return torch.cat([torch.arange(min(dim, 2), device=device),
                      torch.arange(min(max(2, step), dim), dim, step, device=device)])


def memory_equal(mem: Tensor, rt: Tensor | npt.NDArray[np.int64], recorded: Tensor,
                 lt: Tensor | npt.NDArray[np.int64], tolerance: float) -> npt.NDArray[np.bool_]:
    """Which rows ``mem[rt]`` count as equal to ``recorded[lt]``: bit for bit when
    ``tolerance`` is ``0.0`` (exact), else when no coordinate differs by more than
    ``tolerance`` (not exact, see "Tolerance pruning" in ``cftgnn.replay.tgn.cone``).

    Args:
        mem: Perturbed rows, ``[R', d]``.
        rt: The rows of ``mem`` compared, ``int64 [R]`` (on ``mem``'s device, or host
            indices: the compiled loop reads those as they are, other paths upload them).
        recorded: Recorded rows (a tensor or a recording's ``SharedRows``), ``[V, d]``.
        lt: The row of ``recorded`` each is compared with, ``int64 [R]`` (as ``rt``).
        tolerance: ``0.0`` (bitwise), or the largest absolute difference that counts as equal.

    Returns:
        ``bool [R]``, on the host.
    """
    if tolerance == 0.0:
        return _bitwise_equal(mem, rt, recorded, lt)
    return _torch_equal(mem, rt, recorded, lt, tolerance)


def _host_rows(rt: Tensor | npt.NDArray[np.int64], recorded: Tensor,
               lt: Tensor | npt.NDArray[np.int64]
               ) -> tuple[npt.NDArray[np.int64], Tensor, npt.NDArray[np.int64]]:
    """``memory_equal``'s rows on the host: ``rt`` as an array, and the table of recorded
    rows with each one's row in it (``SharedRows`` read through their pointers)."""
    r_np, l_np = (i.numpy() if isinstance(i, Tensor) else np.asarray(i) for i in (rt, lt))
    if isinstance(recorded, SharedRows):
        return r_np, recorded.table, as_int64(recorded.ptr.numpy()[l_np])
    return r_np, recorded, l_np


def _bitwise_equal_numpy(mem: Tensor, rt: Tensor | npt.NDArray[np.int64], recorded: Tensor,
                         lt: Tensor | npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    if mem.device.type == "cpu" and len(rt) <= ONE_PASS_ROWS:
        # few rows, no numba (a single call's search): NumPy's gather and comparison, the
        # same booleans as torch's below at a tenth of its fixed cost (no index upload, no
        # tensors made: about 0.9 ms of a 9 ms Wikipedia · TGN single call, profiled)
        r_np, table, at = _host_rows(rt, recorded, lt)
        equal: npt.NDArray[np.bool_] = (bits(mem).numpy()[r_np]
                                        == bits(table).numpy()[at]).all(axis=1)
        return equal
    return _torch_equal(mem, rt, recorded, lt, 0.0)


@jit.twins(numpy=_bitwise_equal_numpy, host=True)
def _bitwise_equal(mem: Tensor, rt: Tensor | npt.NDArray[np.int64], recorded: Tensor,
                   lt: Tensor | npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """``memory_equal`` bit for bit: a compiled loop, no rows copied."""
    r_np, table, at = _host_rows(rt, recorded, lt)
    return _equal_rows(bits(mem).numpy(), r_np, bits(table).numpy(), at)


def _torch_equal(mem: Tensor, rt: Tensor | npt.NDArray[np.int64], recorded: Tensor,
                 lt: Tensor | npt.NDArray[np.int64], tolerance: float) -> npt.NDArray[np.bool_]:
    """``memory_equal`` by torch on ``mem``'s device."""
    if not isinstance(rt, Tensor) or not isinstance(lt, Tensor):  # one upload for both
        rt, lt = torch.as_tensor(np.stack([np.asarray(rt), np.asarray(lt)]), device=mem.device)

    def same(a: Tensor, b: Tensor) -> Tensor:
        if tolerance == 0.0:
            return bits(a) == bits(b)
        return (a - b).abs() <= tolerance

    if len(rt) <= ONE_PASS_ROWS:  # few rows: one comparison, the same answer
        whole: npt.NDArray[np.bool_] = same(mem[rt], recorded[lt]).all(dim=1).cpu().numpy()
        return whole
    # the first coordinate tells most differing rows apart; compare the rest after it
    eq: npt.NDArray[np.bool_] = same(mem[rt, 0], recorded[lt, 0]).cpu().numpy()
    e = np.flatnonzero(eq)
    if len(e):
        et = torch.as_tensor(e, device=mem.device)
        eq[e] = same(mem[rt[et]], recorded[lt[et]]).all(dim=1).cpu().numpy()
    return eq


def _probed_bits_torch(mem: Tensor, rows: npt.NDArray[np.int64], cols: Tensor
                       ) -> npt.NDArray[np.integer]:
    rt = torch.as_tensor(rows, device=mem.device)
    probe: npt.NDArray[np.integer] = bits(mem[rt[:, None], cols[None, :]]).cpu().numpy()
    return probe


@jit.twins(numpy=_probed_bits_torch, host=True)
def probed_bits(mem: Tensor, rows: npt.NDArray[np.int64], cols: Tensor) -> npt.NDArray[np.integer]:
    """The bit patterns of ``mem[rows][:, cols]`` on the host, ``[R, k]`` (one gather and one
    download; on the CPU a gather from ``mem``'s memory, no tensor made)."""
    return _gather(bits(mem).numpy(), rows, cols.numpy())


def _rows_equal_torch(mem: Tensor, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
                      ) -> npt.NDArray[np.bool_]:
    at = torch.as_tensor(a, device=mem.device)
    bt = torch.as_tensor(b, device=mem.device)
    same: npt.NDArray[np.bool_] = (bits(mem[at]) == bits(mem[bt])).all(dim=1).cpu().numpy()
    return same


@jit.twins(numpy=_rows_equal_torch, host=True)
def rows_equal(mem: Tensor, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
               ) -> npt.NDArray[np.bool_]:
    """Whether rows ``mem[a[m]]`` and ``mem[b[m]]`` are equal bit for bit, ``bool [M]`` on the
    host. With the compiled loops, a loop over ``mem``'s memory that stops at a pair's first
    differing coordinate and copies no row: about a third of the CPU seconds of gathering
    both sides and comparing them (``merge`` on UCI · TGN 56484, K = 3: 0.1 s against 0.3 s
    over the search, profiled), else (the twin) that gather, on ``mem``'s device."""
    mb = bits(mem).numpy()
    return _equal_rows(mb, a, mb, b)


@jit.compiled
def _gather(m: npt.NDArray[np.integer], rows: npt.NDArray[np.int64],
            cols: npt.NDArray[np.int64]) -> npt.NDArray[np.integer]:
    out = np.empty((len(rows), len(cols)), dtype=m.dtype)
    for i in range(len(rows)):
        for j in range(len(cols)):
            out[i, j] = m[rows[i], cols[j]]
    return out


@jit.compiled
def same_row(x: npt.NDArray[np.integer], i: int, y: npt.NDArray[np.integer], j: int) -> bool:
    """Whether rows ``x[i]`` and ``y[j]`` hold the same bits, read until their first
    differing coordinate (the bitwise comparison of the compiled loops: ``_equal_rows``,
    ``prune_steps``)."""
    for c in range(x.shape[1]):  # noqa: SIM110  (a plain loop: numba compiles no all(...))
        if x[i, c] != y[j, c]:
            return False
    return True


@jit.compiled
def _equal_rows(x: npt.NDArray[np.integer], a: npt.NDArray[np.int64],
                y: npt.NDArray[np.integer], b: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Whether ``x[a[m]]`` and ``y[b[m]]`` hold the same bits (``same_row``)."""
    out = np.empty(len(a), dtype=np.bool_)
    for i in range(len(a)):
        out[i] = same_row(x, a[i], y, b[i])
    return out


__all__ = ["ONE_PASS_ROWS", "bits", "memory_equal", "probe_columns", "probed_bits",
           "rows_equal", "same_row"]
