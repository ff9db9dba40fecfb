"""How much memory a pass of TGN's exact cone replay may hold, and what one set needs.

A batched call is evaluated in passes (``cftgnn.replay.tgn.TGNPlan``): as many sets at once
as the pass budget holds. On the CPU, and on any device but a GPU, that budget is the
engine's ``memory_budget_gb`` (at least ``MIN_PASS_BUDGET_GB``, which the replay sets,
``TGNReplay.set_memory_budget``); on a GPU the pass's buffers live in the device's memory,
not the host's, so the budget is a share of the device's memory instead
(``DEVICE_PASS_SHARE``), which lets a K = 4 certification's chunks of 4,096 sets go through
in few passes there rather than in the few hundred sets a host budget allows.

One set is always evaluated whole (a pass is never smaller), so a set whose evaluation
cannot fit the budget is refused before any work (``check_one_set``): an upper estimate with
a row for every node of the stream, which no event's cone exceeds.
"""

from __future__ import annotations

import torch

from cftgnn.errors import ConfigError
from cftgnn.models.tgn import TGN
from cftgnn.replay.tgn.dense import dense_nbytes_per_set

#: The share of a GPU's memory one pass of the cone replay may take (the rest: the model,
#: the plans, the embedding pass, the allocator's slack). Waits for the device measurement
#: (``scripts/gpu/check.sh``: the peak memory of a 4,096-set pass): 0.5 is a
#: guess, not measured.
DEVICE_PASS_SHARE = 0.5

#: Bytes of a row of the row table beyond its memory: last update, pending event,
#: representative set, node (8 bytes each) and two flags (``RowStore``).
ROW_EXTRA_BYTES = 8 * 4 + 2


def device_memory_bytes(device: torch.device) -> int | None:
    """The total memory of ``device`` when it is a GPU (CUDA), else None."""
    if device.type != "cuda":
        return None
    return int(torch.cuda.get_device_properties(device).total_memory)


def pass_budget_bytes(memory_budget_gb: float | None, device: torch.device, floor_gb: float,
                      device_memory: int | None = None) -> int | None:
    """The bytes a pass of the cone replay may hold on ``device``.

    Args:
        memory_budget_gb: The replay's ``TGNReplayOptions.memory_budget_gb`` (already at
            least ``MIN_PASS_BUDGET_GB``), or None for no bound.
        device: The trajectory's device.
        floor_gb: The least a pass gets on a GPU (``MIN_PASS_BUDGET_GB``).
        device_memory: The device's total memory in bytes (None: asked of torch for a GPU;
            tests inject one).

    Returns:
        ``DEVICE_PASS_SHARE`` of a GPU's memory (never below ``floor_gb``), the host
        budget elsewhere; None for no bound.
    """
    total = device_memory if device_memory is not None else device_memory_bytes(device)
    if total is None:
        return None if memory_budget_gb is None else int(memory_budget_gb * 2**30)
    return max(int(DEVICE_PASS_SHARE * total), int(floor_gb * 2**30))


def set_nbytes(model: TGN, columns: int, dense: bool) -> int:
    """An upper estimate of one set's bytes in a pass with ``columns`` nodes that can hold a
    perturbed row: its row-map entries, the embedding tables of its two endpoints'
    computation trees, and its rows (the dense replay's buffers, or at most one row of the
    row table per column)."""
    dim = model.memory_dim
    k, layers = model.num_neighbors, model.embedding.num_layers
    tree = sum(k ** layer for layer in range(layers + 1))
    base = 4 * columns + 2 * tree * dim * 4
    rows = (dense_nbytes_per_set(columns, dim) if dense
            else columns * (dim * 4 + ROW_EXTRA_BYTES))
    return base + rows


def check_one_set(model: TGN, budget: int | None, dense: bool, where: str) -> None:
    """Refuse a pass budget that cannot hold one set's evaluation, before any work: the
    estimate of ``set_nbytes`` with a column for every node of the model's stream.

    Args:
        model: The TGN (attached to its stream).
        budget: The pass budget in bytes (``pass_budget_bytes``), None for none.
        dense: Whether the dense replay runs (``TGNReplayOptions.dense_on``).
        where: What the budget is, for the message.

    Raises:
        ConfigError: Naming both sizes and what to change.
    """
    if budget is None:
        return
    need = set_nbytes(model, model.num_nodes, dense)
    if need > budget:
        form = "the dense cone replay" if dense else "the cone replay's row table"
        hint = ("replay.cone=rows, or a larger memory_budget_gb" if dense
                else "a larger memory_budget_gb")
        raise ConfigError(
            f"one removal set's exact evaluation may need {need / 2**30:.3g} GiB ({form}: "
            f"a row of {model.memory_dim} floats for each of the stream's "
            f"{model.num_nodes:,} nodes), more than a pass may hold ({budget / 2**30:.3g} "
            f"GiB, {where}); use {hint}")


__all__ = ["DEVICE_PASS_SHARE", "ROW_EXTRA_BYTES", "check_one_set", "device_memory_bytes",
           "pass_budget_bytes", "set_nbytes"]
