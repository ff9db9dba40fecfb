"""Predictions for P removal masks in one pass (the leading perturbation dimension).

P perturbations of one history embed the explained link P times, each with its own neighbour
sampling (its removal mask) and its own layer-0 input (TGN: the memory its replay produced).
Most of that work is the same in every perturbation: a removal changes the neighbour lists
of its two endpoints and, through them, the embeddings that attend to those nodes, and
nothing else. So every embedding is computed once per *distinct value*, not once per
perturbation: a query of layer ``l`` is identified by its time, the identity of its own layer
``l-1`` embedding and the events and layer ``l-1`` identities of its neighbour slots, which
together determine it; layer 0 is identified by the node and its input row. Perturbations
that agree on a query's whole computation tree share one row of every layer, and the
arithmetic grows with the number of distinct embeddings instead of with P.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.arrays import distinct_rows
from cftgnn.models.base import TemporalModel
from cftgnn.models.neighbors import recent_kept_neighbors_where
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.reads import LayerWindows, record_windows, recorded_windows, tree_reads

IntArray = npt.NDArray[np.int64]


def _on(a: IntArray, dev: torch.device) -> Tensor:
    """An index array as a tensor on ``dev``."""
    return torch.as_tensor(a, device=dev)


@dataclass(frozen=True)
class NodeInputs:
    """Layer-0 input of node ``n`` under perturbation ``p``.

    It is ``extra[rowmap[p, c]]`` where that row is ``>= 0`` (``c = columns[n]``, or ``n``
    without ``columns``), else ``base[n]``; two perturbations that map a node to the same
    row (or both to ``base``) share its input.

    Attributes:
        base: Unperturbed input of every node, ``[N, in_dim]`` (may be an expanded view).
        extra: Perturbed rows, ``[R, in_dim]``; each is the input of one node.
        rowmap: ``int [P, C]``, or None when every perturbation reads ``base``.
        columns: Column of each node in ``rowmap``, ``int64 [N]``: ``-1`` for nodes that
            read ``base`` under every perturbation, ``-2`` for nodes whose input was not
            computed (reading one is an error); None when ``rowmap`` is ``[P, N]``.
    """

    base: Tensor
    extra: Tensor
    rowmap: npt.NDArray[np.integer] | None = None
    columns: IntArray | None = None

    def rows(self, p: IntArray, n: IntArray) -> IntArray:
        """Row of ``extra`` per query, ``-1`` for ``base``, ``int64 [M]``; a perturbation
        ``-1`` is none (the unperturbed input, ``base``)."""
        if self.rowmap is None:
            return np.full(len(n), -1, dtype=np.int64)
        if (p < 0).any():
            out = np.full(len(n), -1, dtype=np.int64)
            some = np.flatnonzero(p >= 0)
            out[some] = self.rows(p[some], n[some])
            return out
        if self.columns is None:
            return self.rowmap[p, n].astype(np.int64, copy=False)
        col = self.columns[n]
        if (col < -1).any():
            raise RuntimeError(f"the inputs of nodes {np.unique(n[col < -1]).tolist()} were "
                               "not computed")
        out = np.full(len(n), -1, dtype=np.int64)
        has = np.flatnonzero(col >= 0)
        out[has] = self.rowmap[p[has], col[has]]
        return out

    def perturbed(self) -> tuple[IntArray, IntArray, IntArray]:
        """``(p, n, unknown)``: the perturbations ``p`` and nodes ``n`` whose input is a
        perturbed row (each pair once), and the nodes whose input was not computed
        (``columns == -2``), which may differ under any perturbation."""
        empty = np.zeros(0, dtype=np.int64)
        if self.rowmap is None:
            return empty, empty, empty
        p, c = np.nonzero(self.rowmap >= 0)
        if self.columns is None:
            return p.astype(np.int64), c.astype(np.int64), empty
        has = np.flatnonzero(self.columns >= 0)
        node_of = np.full(self.rowmap.shape[1], -1, dtype=np.int64)
        node_of[self.columns[has]] = has
        n = node_of[c]
        keep = n >= 0
        unknown = np.flatnonzero(self.columns < -1).astype(np.int64)
        return p[keep].astype(np.int64), n[keep], unknown

    def __call__(self, p: IntArray, n: IntArray) -> Tensor:
        """Inputs of nodes ``n`` under perturbations ``p``, ``[M, in_dim]``."""
        dev = self.base.device
        out = self.base[_on(n, dev)]
        rows = self.rows(p, n)
        ext = np.flatnonzero(rows >= 0)
        if len(ext):
            out[_on(ext, dev)] = self.extra[_on(rows[ext], dev)]
        return out


def _distinct_small(key: IntArray, size: int) -> tuple[IntArray, IntArray]:
    """``distinct_rows`` of a 1-D key with values in ``[0, size)``, without sorting: the
    distinct values are numbered in order of first occurrence."""
    m = len(key)
    seen = np.empty(size, dtype=np.int64)
    seen[key[::-1]] = np.arange(m - 1, -1, -1)  # the last write, the first occurrence, wins
    first_of = seen[key]  # [M]
    first = np.flatnonzero(first_of == np.arange(m))
    number = np.empty(m, dtype=np.int64)
    number[first] = np.arange(len(first))
    return first, number[first_of]


@dataclass
class _Pass:
    """One ``batched_logits`` call's embeddings: P sets, their shared removals and inputs.

    ``below`` maps a layer to its recorded unperturbed queries (``LayerWindows``), reused
    where a set cannot change them. ``recording`` (the unperturbed pass of the rank target's
    destinations, every perturbation ``-1``) fills ``recorded``, every layer's; it reads
    ``below`` (then another plan's, recorded with fewer shared removals) with ``extra``, the
    events this pass removes on top of those.
    """

    model: TemporalModel
    sets: RemovalSets
    shared: npt.NDArray[np.bool_] | None
    inputs: NodeInputs
    max_removed: int
    below: dict[int, LayerWindows] = field(default_factory=dict)
    recording: bool = False
    recorded: dict[int, LayerWindows] = field(default_factory=dict)
    extra: npt.NDArray[np.bool_] | None = None

    def __post_init__(self) -> None:
        self.times = np.asarray(self.model.stream.t, dtype=np.float64)  # host copy: keys, Δt
        self.stream_feat = self.model.edge_features  # [E, F] on the model's device
        self.dev = self.stream_feat.device

    def neighbors(self, p: IntArray, n: IntArray, before: IntArray
                  ) -> tuple[IntArray, IntArray, npt.NDArray[np.bool_]]:
        """The windows of queries ``(n, before)`` under sets ``p`` (``-1``: none)."""
        sets, shared = self.sets, self.shared

        def is_removed(eid: IntArray) -> npt.NDArray[np.bool_]:
            out = sets.lookup(np.maximum(p, 0), eid)  # p = -1: no set's removals
            out[p < 0] = False
            return out if shared is None else out | shared[eid]

        model = self.model
        return recent_kept_neighbors_where(model.index, n, before, model.num_neighbors,
                                           is_removed, self.max_removed)

    def windows(self, layer: int, p: IntArray, n: IntArray, before: IntArray,
                tq: npt.NDArray[np.float64]
                ) -> tuple[IntArray, IntArray, npt.NDArray[np.bool_], IntArray,
                           npt.NDArray[np.bool_]]:
        """``(nbr, eid, valid, c, reuse)``: the windows of distinct queries, ``c`` their
        recorded unperturbed query (``-1``: none) and ``reuse`` whether that one's window is
        theirs (no removal of their set in it: ``LayerWindows.unremoved``)."""
        rec = self.below.get(layer)
        if rec is None:
            return (*self.neighbors(p, n, before), np.full(len(n), -1, dtype=np.int64),
                    np.zeros(len(n), dtype=bool))
        c = rec.find(n, before, tq)
        reuse = rec.unremoved(c, p, self.sets, self.extra)
        k = self.model.num_neighbors
        nbr = np.full((len(n), k), -1, dtype=np.int64)
        eid = np.full((len(n), k), -1, dtype=np.int64)
        valid = np.zeros((len(n), k), dtype=bool)
        got = np.flatnonzero(reuse)
        nbr[got], eid[got], valid[got] = rec.nbr[c[got]], rec.eid[c[got]], rec.valid[c[got]]
        rest = np.flatnonzero(~reuse)
        if len(rest):
            nbr[rest], eid[rest], valid[rest] = self.neighbors(p[rest], n[rest], before[rest])
        return nbr, eid, valid, c, reuse

    def embed(self, layer: int, p: IntArray, n: IntArray, before: IntArray,
              tq: npt.NDArray[np.float64]) -> tuple[IntArray, Tensor, npt.NDArray[np.bool_]]:
        """``(ident [M], table [U, d], clean [M])``: query ``m``'s layer-``layer`` embedding
        is ``table[ident[m]]``, one row per distinct value; ``clean[m]``: it is the
        unperturbed one (its node's base input; below the top, a recorded query's row)."""
        inputs, dev = self.inputs, self.dev
        if layer == 0:  # a perturbed row belongs to one node: rows and nodes number them
            rows = inputs.rows(p, n)
            num_nodes = len(inputs.base)
            first, ident = _distinct_small(np.where(rows >= 0, rows + num_nodes, n),
                                           num_nodes + len(inputs.extra))
            return ident, inputs(p[first], n[first]), rows < 0
        # sample neighbours once per distinct query of one perturbation
        first, inv = distinct_rows(np.stack([p, n, before, tq.view(np.int64)], axis=1))
        if len(first) < len(n):
            ident, table, clean = self.embed(layer, p[first], n[first], before[first],
                                             tq[first])
            return ident[inv], table, clean[inv]
        times = self.times
        nbr, eid, valid, c, reuse = self.windows(layer, p, n, before, tq)
        rows, cols = np.nonzero(valid)
        nb_eid = eid[rows, cols]  # [K]
        # the targets and their neighbour slots one layer down, in one pass: [M + K]
        below, tab, below_clean = self.embed(
            layer - 1, np.concatenate([p, p[rows]]), np.concatenate([n, nbr[rows, cols]]),
            np.concatenate([before, nb_eid]), np.concatenate([tq, times[nb_eid]]))
        self_id, nb_id = below[:len(n)], below[len(n):]
        slot_id = np.full(eid.shape, -1, dtype=np.int64)
        slot_id[rows, cols] = nb_id
        slots = (rows, nb_eid, nb_id, eid, valid, self_id, slot_id)
        if layer not in self.below:  # nothing recorded: every query is computed
            clean = np.zeros(len(n), dtype=bool)
            ident, out = self.attend(layer, None, tq, slots, tab)
        else:  # a recorded window under which every embedding one layer down is
            # unperturbed: the recorded row; the others are computed
            dirty = np.ones(eid.shape, dtype=bool)
            dirty[rows, cols] = ~below_clean[len(n):]
            clean = reuse & below_clean[:len(n)] & ~(dirty & valid).any(axis=1)
            todo = np.flatnonzero(~clean)
            ident = np.empty(len(n), dtype=np.int64)
            parts = []
            if len(todo) < len(n):
                rec = self.below[layer]
                c_first, ident[clean] = _distinct_small(c[clean], len(rec.keys))
                parts.append(rec.rows[_on(c[clean][c_first], dev)])
            if len(todo):
                t_ident, table = self.attend(layer, todo, tq, slots, tab)
                ident[todo] = t_ident + (len(parts[0]) if parts else 0)
                parts.append(table)
            out = parts[0] if len(parts) == 1 else torch.cat(parts)
        if self.recording and layer not in self.recorded:
            self.recorded[layer] = record_windows(len(times) + 1, n, before, tq,
                                                  (nbr, eid, valid), out[_on(ident, dev)])
        return ident, out, clean

    def attend(self, layer: int, todo: IntArray | None, tq: npt.NDArray[np.float64],
               slots: tuple[IntArray, IntArray, IntArray, IntArray, npt.NDArray[np.bool_],
                            IntArray, IntArray], tab: Tensor) -> tuple[IntArray, Tensor]:
        """``(ident [T], table)``: the layer-``layer`` embeddings of queries ``todo`` (None:
        all), one row per distinct value; ``slots``: the valid slots' query rows, events and
        identities one layer down, then the windows (``eid``, ``valid``) and the own and slot
        identities one layer down per query."""
        dev, times = self.dev, self.times
        rows, nb_eid, nb_id, eid, valid, self_id, slot_id = slots
        # the embedding is a function of exactly these: time, own and slot identities
        if todo is None:
            key = np.column_stack([tq.view(np.int64), self_id, np.where(valid, eid, -1),
                                   slot_id])
            first, ident = distinct_rows(key)
        else:
            key = np.column_stack([tq[todo].view(np.int64), self_id[todo],
                                   np.where(valid[todo], eid[todo], -1), slot_id[todo]])
            first_t, ident = distinct_rows(key)
            first = todo[first_t]
        # compute the distinct queries only, and only the slots of those
        new = np.full(len(tq), -1, dtype=np.int64)
        new[first] = np.arange(len(first))
        keep = new[rows] >= 0
        kr, k_eid, k_nb = rows[keep], nb_eid[keep], nb_id[keep]
        # edge attributes are a function of (query time, event): project each once
        e_first, edge = distinct_rows(np.stack([tq[kr].view(np.int64), k_eid], axis=1))
        kf = kr[e_first]
        dt = torch.as_tensor(tq[kf] - times[k_eid[e_first]], device=dev).to(tab.dtype)
        table = self.model.embedding.attend(
            layer, tab[_on(self_id[first], dev)], tab, _on(k_nb, dev), _on(new[kr], dev), dt,
            self.stream_feat[_on(k_eid[e_first], dev)], _on(edge, dev))
        return ident, table

    def top(self, p: IntArray, nodes: IntArray, position: int) -> Tensor:
        """The top layer's embeddings of ``nodes`` under ``p`` at the explained position."""
        ident, table, _ = self.embed(self.model.embedding.num_layers, p, nodes,
                                     np.full(len(p), position),
                                     np.full(len(p), self.times[position]))
        return table[_on(ident, self.dev)]


def _record(run: _Pass, got: dict[str, Any], link: IntArray, position: int,
            like: tuple[npt.NDArray[np.bool_] | None, dict[str, Any]] | None) -> None:
    """Record the unperturbed trees and embeddings of ``link``'s queries into ``got``
    (``batched_logits``), reading ``like``'s recorded queries where they hold (see there):
    a query whose recorded window holds none of the removals this plan adds on top of
    ``like``'s has that window here too (this plan's kept events are a subset of ``like``'s
    that still contains it), and its embedding, where those one layer down are ``like``'s
    too, is ``like``'s."""
    model, shared = run.model, run.shared
    if like is not None and "below" in like[1]:
        num = len(run.times)
        # only the history before the explained event is read
        mine = np.zeros(num, dtype=bool) if shared is None else shared[:num].copy()
        mine[position:] = False
        theirs = np.zeros(num, dtype=bool) if like[0] is None else like[0][:num].copy()
        theirs[position:] = False
        if not (theirs & ~mine).any():
            run.below, run.extra = like[1]["below"], mine & ~theirs
    run.recording = True
    got["z"] = run.top(np.full(len(link), -1), link, position)  # [W, d]
    run.recording, run.extra = False, None
    got["below"] = run.recorded
    # the trees, from the windows just recorded (sampled again only where one is missing)
    args = (model.index, model.num_neighbors, model.embedding.num_layers, link, position,
            shared)
    got["reads"] = (tree_reads(*args, windows=recorded_windows(run.recorded, run.times))
                    or tree_reads(*args))


def batched_logits(model: TemporalModel, sets: RemovalSets,
                   shared: npt.NDArray[np.bool_] | None, position: int,
                   inputs: NodeInputs, dst: int | IntArray | None = None,
                   unperturbed: dict[str, Any] | None = None,
                   like: tuple[npt.NDArray[np.bool_] | None, dict[str, Any]] | None = None
                   ) -> Tensor:
    """Logits of the attached stream's event at ``position`` under P removal masks, ``[P]``
    (with ``dst`` a node, of the pair of its source and time with that destination instead;
    with ``dst`` an array of D nodes, of the D pairs at once, ``[P, D]``: the source's
    embedding is computed once per distinct value with the destinations', in one pass).

    Equal, up to float rounding, to embedding each perturbation on its own.

    Args:
        model: The attached model, with ``embedding`` (``TemporalAttentionEmbedding``)
            and ``decoder`` (``LinkDecoder``); its index, stream and edge features are
            read through its public properties.
        sets: The P removal sets; history is positions ``< position``.
        shared: Events removed for every set as well, ``bool [E]`` (e.g. the approximate
            oracle's history), or None.
        position: Stream position of the explained event (history bound).
        inputs: Layer-0 inputs per perturbation.
        dst: The query's destination, None for the event's own (another: a negative pair),
            or ``int64 [D]`` destinations (the rank target's positive and negatives).
        unperturbed: With D destinations, a dict the caller keeps between calls with the
            same destinations, ``shared`` and unperturbed inputs (``inputs`` of no set): the
            queries' unperturbed trees and embeddings, and those of the queries below
            their top layer (``LayerWindows``), are stored there on the first call and read
            by the next ones (None: computed in every call).
        like: With ``unperturbed``, the ``shared`` and the store of another plan of the
            same model, event, destinations and inputs (``WindowPlan``): where its shared
            removals are a subset of these, the first call reads its recorded queries whose
            windows hold none of the removals this plan adds (``_record``).
    """
    num_p = sets.num_sets
    dev = model.edge_features.device
    many = dst is not None and np.ndim(dst) == 1
    if num_p == 0:
        return torch.zeros((0, len(np.asarray(dst))) if many else 0, device=dev)
    stream = model.stream
    max_removed = int(sets.sizes(before=position).max())
    if shared is not None:
        max_removed += int(shared[:position].sum())
    run = _Pass(model, sets, shared, inputs, max_removed)
    if not many:
        link = np.array([stream.src[position], stream.dst[position] if dst is None else dst],
                        dtype=np.int64)
        z = run.top(np.repeat(np.arange(num_p, dtype=np.int64), 2), np.tile(link, num_p),
                    position).view(num_p, 2, -1)  # [P, 2, d]
        out: Tensor = model.decoder(z[:, 0], z[:, 1])
        return out
    # the source, then the D destinations: a query that no removal of a set reaches
    # (``cftgnn.replay.reads``) is its unperturbed embedding, computed once per plan, and so
    # is a query below the top layer that a set's removals do not reach (``LayerWindows``)
    link = np.concatenate([[stream.src[position]], np.asarray(dst, dtype=np.int64)])
    width = len(link)
    got = {} if unperturbed is None else unperturbed
    if "z" not in got:
        _record(run, got, link, position, like)
    run.below = got["below"]
    reads, z_base = got["reads"], got["z"]
    changed = reads.changed(sets, *inputs.perturbed())  # [P, W]
    pp, jj = np.nonzero(changed)
    rows = np.tile(np.arange(width, dtype=np.int64), (num_p, 1))  # [P, W] rows of z_all
    rows[pp, jj] = width + np.arange(len(pp))
    z_all = (torch.cat([z_base, run.top(pp.astype(np.int64), link[jj], position)])
             if len(pp) else z_base)
    # every set's source against the unperturbed destinations, [P, D], then the pairs
    # whose destination a set changes
    z_src = z_all[_on(rows[:, 0], dev)]  # [P, d]
    logits: Tensor = model.decoder.grid(z_src, z_base[1:])
    dp, dj = np.nonzero(rows[:, 1:] >= width)
    if len(dp):
        pt, jt = _on(dp, dev), _on(dj, dev)
        logits[pt, jt] = model.decoder(z_src[pt], z_all[_on(rows[dp, dj + 1], dev)])
    return logits


@dataclass(frozen=True)
class WindowPlan:
    """What the passes of one explained event of a memoryless model share, when its node
    inputs are zeros (``node_width`` of them: TGAT's node features, none for GraphMixer):
    all P masks of the event in one ``batched_logits`` pass (``MemorylessReplay.make_plan``).

    Attributes:
        model: The model.
        end: The explained event's id.
        removed_mask: Events removed for every set (the base state's and the plan's own),
            ``bool [E]``.
        dst: The query's destination, None for the explained event's own (another: a
            negative pair, ``MemorylessReplay.pair_plan``), or ``int64 [D]`` destinations
            (``MemorylessReplay.pairs_plan``: ``logits`` is then ``[P, D]``).
    """

    model: Any
    end: int
    removed_mask: npt.NDArray[np.bool_]
    dst: int | IntArray | None = None
    #: The D destinations' unperturbed embeddings, kept between calls (``batched_logits``).
    unperturbed: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: The latest recorded plan of D destinations per (model, event, destinations), held
    #: weakly: the next one's first call reads its recorded queries (``batched_logits``'s
    #: ``like``; the rank target's approximate plan after its exact one).
    _recent: ClassVar[weakref.WeakValueDictionary[tuple[int, int, bytes], WindowPlan]] = (
        weakref.WeakValueDictionary())

    def node_width(self) -> int:
        """Width of the zero node inputs (none by default)."""
        return 0

    def logits(self, sets: RemovalSets) -> Tensor:
        """All P masks in one pass, ``float32 [P]`` (``[P, D]`` for D destinations)."""
        model = self.model
        zeros = torch.zeros(1, self.node_width(), device=model.device).expand(
            model.num_nodes, -1)
        if not isinstance(self.dst, np.ndarray):
            return batched_logits(model, sets, self.removed_mask, self.end,
                                  NodeInputs(zeros, zeros[:0]), self.dst, self.unperturbed)
        key = (id(model), int(self.end), np.asarray(self.dst, dtype=np.int64).tobytes())
        like = None
        other = self._recent.get(key)
        if (other is not None and other is not self and type(other) is type(self)
                and other.model is model and "z" in other.unperturbed
                and "z" not in self.unperturbed):  # the same zero inputs: its rows hold
            like = (other.removed_mask, other.unperturbed)
        out = batched_logits(model, sets, self.removed_mask, self.end,
                             NodeInputs(zeros, zeros[:0]), self.dst, self.unperturbed, like)
        self._recent[key] = self
        return out
