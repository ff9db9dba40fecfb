"""TGN masked replay of short histories for P removal sets at once, on the touched nodes only.

The approximate oracle replays the events before ``ε_min`` in its batch plus the candidates:
a few hundred events at most, touching a few hundred nodes. ``local_replay`` keeps the
state of just those nodes for every perturbation as one ``[P·T, d]`` block and runs the
batches of the history once, each step vectorised over all P (messages, GRU, last-message
aggregation), so P removal sets cost about as much as one. Long histories (the exact oracle on
Wikipedia) use the causal-cone replay of ``cftgnn.replay.tgn.cone`` instead, which does not
recompute what a removal cannot change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.models.state import State
from cftgnn.models.tgn import TGN, other_endpoint
from cftgnn.replay.batched import NodeInputs
from cftgnn.replay.masks import RemovalSets


@dataclass
class LocalPlan:
    """A short masked history prepared for ``local_replay``.

    Attributes:
        base: Unperturbed state at the start (a batch boundary).
        end: Position of the explained event.
        removed_mask: Events removed in the plan, ``bool [E]``: the base state's removals and the
            plan's own (e.g. the approximate history's).
        nodes: Nodes touched by the kept events or pending at the base, sorted, ``[T]``.
        loc: Local index of every node in ``nodes``, ``-1`` elsewhere, ``[N]``.
        steps: The batches to apply, in order: kept event positions of one batch, or an
            empty array for an empty batch that applies the previous batch's messages.
        states: The local state ``(memory [T, d], last update [T], pending [T])`` before each
            step with only the plan's removals, so a replay starts at the first step that a
            removal set touches.
    """

    base: State
    end: int
    removed_mask: npt.NDArray[np.bool_]
    nodes: npt.NDArray[np.int64]
    loc: npt.NDArray[np.int64]
    steps: list[npt.NDArray[np.int64]]
    states: list[tuple[Tensor, Tensor, npt.NDArray[np.int64]]]


def local_plan(model: TGN, base: State, end: int, removed_mask: npt.NDArray[np.bool_] | None,
               max_events: int) -> LocalPlan | None:
    """The plan of ``[base.position, end)`` under ``removed_mask``, or None when more than
    ``max_events`` events are kept (then the cone replay is the better choice)."""
    src, dst = model.stream.src, model.stream.dst
    lo = base.position
    mask = base.removed.numpy().copy()  # the base's own removals stay removed
    if removed_mask is not None:
        mask[lo:end] = removed_mask[lo:end]
    # every empty batch is kept (idle=False): on a state without pending messages it is a
    # no-op, and a replay starts at the first step a removal set touches anyway
    steps = model.history_steps(lo, end, mask, idle=False)
    pos = np.concatenate(steps) if steps else np.zeros(0, dtype=np.int64)
    if len(pos) > max_events:
        return None
    pending = (base.pending >= 0).nonzero(as_tuple=True)[0].cpu().numpy()
    nodes = np.unique(np.concatenate([pending, src[pos], dst[pos]]))
    loc = np.full(model.num_nodes, -1, dtype=np.int64)
    loc[nodes] = np.arange(len(nodes))
    plan = LocalPlan(base.clone(), int(end), mask, nodes, loc, steps, [])
    state = _base_rows(plan)
    none_removed = RemovalSets.from_sets([()])
    with torch.no_grad():
        for step in range(len(steps)):
            plan.states.append((state[0].clone(), state[1].clone(), state[2].copy()))
            state = _step(model, plan, *state, step, none_removed)
    return plan


def local_replay(model: TGN, plan: LocalPlan, sets: RemovalSets) -> NodeInputs:
    """Replay the plan under P extra removal masks, all at once.

    Args:
        model: The TGN.
        plan: From ``local_plan``.
        sets: The P removal sets, added to the plan's removals.

    Returns:
        The node inputs under each set: the touched nodes read their replayed rows, the
        others the base state's memory (as ``cftgnn.replay.tgn.cone.cone_replay`` returns
        them).
    """
    src, dst = model.stream.src, model.stream.dst
    num_p, t_nodes = sets.num_sets, len(plan.nodes)
    # start at the first step holding a removed event (any earlier step would do as well)
    lowest = int(sets.events[0]) if len(sets.events) else plan.end
    first = next((k for k, ev in enumerate(plan.steps) if len(ev) and ev[-1] >= lowest),
                 len(plan.steps))
    if first < len(plan.steps):
        mem0, lu0, pend0 = plan.states[first]
    else:  # no set removes anything the plan keeps: the state after the last step
        mem0, lu0, pend0 = _final_state(model, plan)
    mem, lu, pend = mem0.repeat(num_p, 1), lu0.repeat(num_p), np.tile(pend0, num_p)
    with torch.no_grad():
        for step in range(first, len(plan.steps)):
            mem, lu, pend = _step(model, plan, mem, lu, pend, step, sets)
        final, _ = _apply(model, plan, mem, lu, pend, src, dst, store=False)
    rowmap = np.arange(num_p)[:, None] * t_nodes + np.arange(t_nodes)  # [P, T]
    return NodeInputs(plan.base.memory, final, rowmap, plan.loc)


def _final_state(model: TGN, plan: LocalPlan) -> tuple[Tensor, Tensor, npt.NDArray[np.int64]]:
    mem, lu, pend = plan.states[-1] if plan.states else _base_rows(plan)
    if plan.steps:
        none_removed = RemovalSets.from_sets([()])
        with torch.no_grad():
            mem, lu, pend = _step(model, plan, mem.clone(), lu.clone(), pend.copy(),
                                  len(plan.steps) - 1, none_removed)
    return mem, lu, pend


def _base_rows(plan: LocalPlan) -> tuple[Tensor, Tensor, npt.NDArray[np.int64]]:
    nt = torch.as_tensor(plan.nodes, device=plan.base.memory.device)
    return (plan.base.memory[nt].clone(), plan.base.last_update[nt].clone(),
            plan.base.pending[nt].cpu().numpy().copy())


def _step(model: TGN, plan: LocalPlan, mem: Tensor, lu: Tensor, pend: npt.NDArray[np.int64],
          step: int, sets: RemovalSets
          ) -> tuple[Tensor, Tensor, npt.NDArray[np.int64]]:
    """One batch for every perturbation: apply pending messages, then store the batch's
    last kept event per (perturbation, node) as the new pending message."""
    src, dst = model.stream.src, model.stream.dst
    t_nodes = len(plan.nodes)
    mem, lu = _apply(model, plan, mem, lu, pend, src, dst, store=True)
    pend[:] = -1
    events = plan.steps[step]
    p, k = np.nonzero(~sets.columns(events))
    if len(p):
        ev = events[k]
        keys = np.concatenate([p * t_nodes + plan.loc[src[ev]], p * t_nodes + plan.loc[dst[ev]]])
        vals = np.concatenate([ev, ev])
        order = np.lexsort((vals, keys))
        keys, vals = keys[order], vals[order]
        last = np.r_[keys[1:] != keys[:-1], True]  # the largest event of each key
        pend[keys[last]] = vals[last]
    return mem, lu, pend


def _apply(model: TGN, plan: LocalPlan, mem: Tensor, lu: Tensor, pend: npt.NDArray[np.int64],
           src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64], store: bool
           ) -> tuple[Tensor, Tensor]:
    """Apply the pending messages of every (perturbation, node) row: ``[P*T, d]``, ``[P*T]``.

    With ``store`` the new rows are written in place; otherwise a new memory is returned.
    """
    rows = np.flatnonzero(pend >= 0)
    if len(rows) == 0:
        return mem, lu
    t_nodes = len(plan.nodes)
    p, j = rows // t_nodes, rows % t_nodes
    ev = pend[rows]
    o = plan.loc[other_endpoint(src, dst, ev, plan.nodes[j])]
    dev = mem.device
    rt = torch.as_tensor(rows, device=dev)
    new, t = model.message_update(ev, mem[rt], lu[rt],
                                  mem[torch.as_tensor(p * t_nodes + o, device=dev)])
    if not store:
        mem = mem.clone()
        lu = lu.clone()
    mem[rt] = new
    lu[rt] = t
    return mem, lu
