"""How much arithmetic each form of TGN's exact cone replay does on one event
(``scripts/gpu/dense_work.py``): the GRU row updates of the dense replay
(``cftgnn.replay.tgn.dense``: every set, every column a batch applies), of the cone without
sharing (only the pairs a set's removals can reach, ``s ∩ D(n) ≠ ∅``), and of the row table
without pruning (one row per node and distinct key ``s ∩ D(n)``, ``cftgnn.replay.tgn.cone``).

The counts are read off the recording and the dependency sets alone (no replay runs), so
they say what a device would compute before one is available: a row of TGN's
``GRUCell(2d + F + T, d)`` costs about ``6 d (2d + F + T) + 6 d²`` multiply-adds.
"""

from __future__ import annotations

import numpy as np

from cftgnn.models.tgn import TGN
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.tgn.dense import DensePlan
from cftgnn.replay.tgn.trajectory import Trajectory


def replay_work(model: TGN, traj: Trajectory, sets: RemovalSets) -> dict[str, int]:
    """The row updates of the three forms of the cone replay for ``sets`` on ``traj``.

    Returns:
        ``{"sets", "batches", "columns", "dense", "cone", "keyed"}``: the number of sets,
        history batches and columns, and the GRU row updates of the dense replay, of the
        unshared cone, and of the row table without pruning (``keyed <= cone <= dense``;
        pruning only lowers ``keyed`` further).
    """
    deps = traj.dependencies_for(model, sets.events)
    plan = DensePlan(model, traj, deps, sets)
    words = sets.words(deps.universe)  # [P, W]
    dep = np.zeros((deps.num_columns, words.shape[1]), dtype=np.uint64)
    cone = keyed = 0
    for x in range(len(traj.batches) + 1):  # x = len(batches): the final inputs' messages
        if x > 0:  # the messages batch x applies: the columns with an event in batch x - 1
            prev = traj.batches[x - 1]
            nodes = prev.nodes[prev.inc_end > prev.inc_start]
            nodes = nodes[(deps.columns[nodes] >= 0) & (deps.need[nodes] >= x)]
            for mask in dep[deps.columns[nodes]]:
                key = words & mask  # [P, W]: each set's removals the node's state depends on
                hit = key.any(axis=1)
                cone += int(hit.sum())
                keys = key[hit]
                keyed += len(np.unique(keys[:, 0] if keys.shape[1] == 1 else keys, axis=0))
        if x < len(traj.batches):
            dep[deps.columns[deps.nodes[x]]] = deps.masks[x]
    return {"sets": sets.num_sets, "batches": len(traj.batches), "columns": deps.num_columns,
            "dense": sets.num_sets * plan.row_updates, "cone": cone, "keyed": keyed}


__all__ = ["replay_work"]
