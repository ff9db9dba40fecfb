"""The table of perturbed state rows of TGN's cone replay, and the operations of a batch on it.

``RowTable`` holds the perturbed rows of P removal sets (``mem``, ``lu``, ``pend`` per
row) and the row map that says which row each (set, node) pair reads; its methods are the
steps of ``cftgnn.replay.tgn.cone.cone_replay`` that change rows: splitting rows by key
(``split``, ``split_mixed``), giving rows their next messages (``new_pending``), and the
exact perturbation pruning (``prune``, ``merge``, ``revive``, ``compact``). The algorithm
and why it is exact: ``cftgnn.replay.tgn.cone``'s module docstring. The invariants:
``RowTable``'s docstring, asserted by ``RowTable.check``. Where the bookkeeping's time goes,
step by step: ``cftgnn.replay.tgn.row_times`` (``RowTable.step_times``, which
``ConeStats.steps`` hands on).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.arrays import mask_words, unique
from cftgnn.models.tgn import TGN, other_endpoint
from cftgnn.replay.tgn.compare import bits
from cftgnn.replay.tgn.merge_steps import merge_groups
from cftgnn.replay.tgn.occupancy import occupancy, write_entries
from cftgnn.replay.tgn.prune_steps import prune_candidates
from cftgnn.replay.tgn.record import SharedRows
from cftgnn.replay.tgn.row_steps import (
    mixed_pairs,
    mixed_rows,
    new_pending,
    revive_receivers,
    split_pairs,
    unique_inverse,
)
from cftgnn.replay.tgn.row_store import RowStore
from cftgnn.replay.tgn.row_times import RowStepTimes
from cftgnn.replay.tgn.row_times import timed as _timed
from cftgnn.replay.tgn.rows_kernels import (
    key_groups,
    lookup,
    referenced,
    remap_columns,
    revive_pairs,
    sender_rows,
)
from cftgnn.replay.tgn.trajectory import BatchRecord, Words
from cftgnn.replay.tgn.trajectory import receivers as trajectory_receivers

_COMPACT_MIN_ROWS = 4096  # fewer rows are never worth a compaction pass


class RowTable(RowStore):
    """The perturbed state rows of a cone replay, each shared by the sets that agree on its
    node's past, and the operations of a batch on them.

    ``rowmap[p, columns[n]]`` is the row holding node ``n``'s state under set ``p``, or
    ``-1`` when that state is the recorded one (always for nodes without a column: their
    dependency set never grows). Row ``r`` (``r < size``) holds node ``n[r]``'s memory
    ``mem[r]``, last-update time ``lu[r]`` and pending event ``pend[r]`` (``-1``: none);
    ``rep[r]`` is one set using it (its *representative*, whose removals stand for the
    row's). The sets of a row made by splitting agree on every removal the row depends on,
    so any one will do; a row that perturbation pruning gave to sets whose keys differ,
    because their states were equal (``merge``, ``revive``), is ``mixed``: its sets may
    diverge when the node receives its next message, so ``split_mixed`` splits it by that
    message whenever its node has an event, whether or not its dependency set grows.

    A batch's steps, in order (``cftgnn.replay.tgn.cone.cone_replay``): the pending
    messages are applied (the cone's ``_apply_pending``), ``split`` gives the pairs whose
    dependency set grew the rows of their new keys, ``new_pending`` and ``split_mixed``
    give rows their next messages, and, with pruning, ``prune`` retires the rows equal to
    the recording, ``merge`` joins equal rows of a node and ``revive`` gives rows back to
    pairs a perturbed sender reaches; ``compact`` frees retired rows (``drop`` retires
    those never read again in a batch the cone replay skips).

    Invariants (``check`` asserts them; the tests call it after every batch):

    * every entry of ``rowmap`` is ``-1`` or a live row (``alive``, ``< size``) of the
      column's node: ``columns[n[rowmap[p, c]]] == c``;
    * a row some set uses is used by its representative:
      ``rowmap[rep[r], columns[n[r]]] == r`` (a live row no set uses any more may remain
      until ``compact`` frees it; it is never read);
    * retired rows hold no pending event (``pend[r] == -1`` where not ``alive``);
    * ``occupied`` marks exactly the entries of ``rowmap`` that hold a row (bit ``p % 64`` of
      word ``[c, p // 64]``: ``rowmap[p, c] >= 0``; ``cftgnn.replay.tgn.occupancy``): every
      write of the map goes through ``write`` or ``rows_kernels.remap_columns``, which keep
      it, and the compiled scans visit only its set bits;
    * a row that is not ``mixed`` holds the sets of one key: all of them agree on the
      removals of its node's dependency set (``words[p] & D(n)``) at the end of a batch;
      without pruning, moreover, a pair holds a row exactly when that key is not empty
      (with pruning, a pair whose state equals the recording holds none).

    The batch steps share their arguments' names: ``rec`` the batch's ``BatchRecord``;
    ``loc`` each node's position in ``rec.nodes`` (``-1`` for the others), ``int64 [N]``;
    ``rem`` which of the batch's events each set removes, ``bool [P, K]``; ``read`` whether
    a node's state after the batch is read, ``bool [N]``; ``x`` the batch's index and
    ``need`` the last batch whose state of each node is read (``Dependencies.need``),
    ``int64 [N]``; ``src`` and ``dst`` the stream's endpoints, ``int64 [E]``.

    Args:
        num_p: Number of removal sets P.
        columns: Column of each node in the row map, ``-1`` for nodes that never get a
            row, ``int64 [N]`` (``Dependencies.columns``).
        num_columns: Number of columns C.
        dim: Memory size d.
        device: Device of the rows' memory.

    Attributes:
        rowmap: Row of each (set, column), ``-1`` for the recorded state, ``int32 [P, C]``.
        occupied: Which entries of ``rowmap`` hold a row, a bit each, ``uint64 [C, W]``
            (``W = cftgnn.arrays.mask_words(P)``; counted by ``nbytes``).
        mem: Rows' memory, ``[capacity, d]`` (the first ``size`` in use).
        lu: Rows' last-update times, ``float64 [capacity]``.
        pend: Rows' pending events, ``-1`` for none, ``int64 [capacity]``.
        rep: Rows' representative sets, ``int64 [capacity]``.
        n: Rows' nodes, ``int64 [capacity]``.
        alive: Whether a row is live (not retired), ``bool [capacity]``.
        mixed: Whether a row may hold sets of several keys, ``bool [capacity]``.
        size: Rows allocated (live or retired, until ``compact``).
        capacity: Rows counted as held (``nbytes``; ``RowStore``).
        step_times: Where the steps' CPU seconds are added (``RowStepTimes``), or None (the
            default: no clock is read).
    """

    def __init__(self, num_p: int, columns: npt.NDArray[np.int64], num_columns: int, dim: int,
                 device: torch.device) -> None:
        self.columns = columns
        # column-major: the steps read whole columns (every set's row of a few nodes)
        self.rowmap = np.full((num_p, num_columns), -1, dtype=np.int32, order="F")
        # which entries hold a row, a bit each (``cftgnn.replay.tgn.occupancy``)
        self.occupied = np.zeros((num_columns, mask_words(num_p)), dtype=np.uint64)
        self.step_times: RowStepTimes | None = None
        super().__init__(dim, device)

    def write(self, p: npt.NDArray[np.int64], c: npt.NDArray[np.int64],
              rows: npt.NDArray[np.integer]) -> None:
        """``rowmap[p[m], c[m]] = rows[m]`` (distinct pairs; ``-1``: the recorded state), the
        bits of ``occupied`` with it: every write of an entry goes through here or
        ``rows_kernels.remap_columns``."""
        write_entries(self.rowmap, self.occupied, p, c, rows)

    def lookup(self, p: npt.NDArray[np.int64], n: npt.NDArray[np.int64]
               ) -> npt.NDArray[np.int64]:
        """Row of node ``n[m]`` under set ``p[m]``, ``-1`` for the recorded state, ``[M]``."""
        return lookup(self.rowmap, self.columns, p, n)

    @_timed
    def drop(self, dead: npt.NDArray[np.int64]) -> None:
        """Retire rows ``dead``: every set using one reads the recorded state again."""
        if not len(dead):
            return
        table = np.arange(self.size, dtype=np.int32)  # every row stays, but the dead
        table[dead] = -1
        remap_columns(self.rowmap, self.occupied, np.unique(self.columns[self.n[dead]]),
                      table)
        self.alive[dead] = False
        self.pend[dead] = -1

    def nbytes(self) -> int:
        """Bytes held: the row map, its occupancy bitmap and the rows' capacity
        (``RowStore.rows_nbytes``)."""
        return int(self.rowmap.nbytes) + int(self.occupied.nbytes) + self.rows_nbytes()

    @_timed
    def compact(self, force: bool = False) -> None:
        """Free the retired rows (and rows no set uses any more) once they are the
        majority (or, with ``force``, now), so memory follows the live rows rather than
        every row ever made."""
        size = self.size
        if not force and (size < _COMPACT_MIN_ROWS or 2 * int(self.alive[:size].sum()) > size):
            return
        # only the columns of live rows' nodes hold rows (every entry is -1 or a live row of
        # its column's node): the rest of the map is not read
        cols = np.unique(self.columns[self.n[np.flatnonzero(self.alive[:size])]])
        keep = np.flatnonzero(self.alive[:size] & referenced(self.rowmap, self.occupied,
                                                             cols, size))
        new_id = np.full(size, -1, dtype=np.int32)
        new_id[keep] = np.arange(len(keep), dtype=np.int32)
        remap_columns(self.rowmap, self.occupied, cols, new_id)
        self.keep_only(keep, force)  # new buffers with force, else in place

    @_timed
    def other_memory(self, rep: npt.NDArray[np.int64], other: npt.NDArray[np.int64],
                     recorded: Tensor, recorded_row: npt.NDArray[np.int64]
                     ) -> tuple[Tensor, npt.NDArray[np.int64]]:
        """Memory of nodes ``other`` under sets ``rep``, once per distinct value: their row
        where they have one, else ``recorded[recorded_row]`` (``recorded [V, d]``).

        Returns:
            ``(memory [O, d], of [M])``: query ``m`` reads ``memory[of[m]]``.
        """
        ro = self.lookup(rep, other)
        key = np.where(ro >= 0, ro, -1 - recorded_row)  # row ids, or recorded rows below 0
        uniq, of = unique_inverse(key, int(key.min(initial=0)), int(key.max(initial=0)) + 1)
        dev = self.mem.device
        k = int(np.searchsorted(uniq, 0))  # recorded rows first (keys below 0), then own rows
        # both row lists in one upload: recorded rows, then own rows
        idx = torch.as_tensor(np.concatenate([-1 - uniq[:k], uniq[k:]]), device=dev)
        if k == len(uniq):
            return recorded[idx], of  # only the rows read
        # both gathered into their places in one tensor (no copy of them by torch.cat)
        out = self.mem.new_empty(len(uniq), self.mem.shape[1])
        if isinstance(recorded, SharedRows):
            torch.index_select(recorded.table, 0, recorded.ptr.index_select(0, idx[:k]),
                               out=out[:k])
        else:
            torch.index_select(recorded, 0, idx[:k], out=out[:k])
        torch.index_select(self.mem, 0, idx[k:], out=out[k:])
        return out, of

    def check(self, words: Words | None = None, dep: Words | None = None,
              pruned: bool = True) -> None:
        """Assert the invariants of the class docstring (for tests: a few passes over the
        row map).

        Args:
            words: The sets' removals over the dependency universe, ``uint64 [P, W]``; with
                ``dep``, the keys of the rows that are not mixed are checked too.
            dep: Each column's dependency set after the batch, ``uint64 [C, W]``.
            pruned: Whether the replay prunes (without, a pair holds a row exactly when its
                key is not empty).

        Raises:
            AssertionError: An invariant does not hold.
        """
        size = self.size
        for name in ("lu", "pend", "rep", "n", "alive", "mixed"):
            assert len(getattr(self, name)) >= size, name
        assert self.mem.shape[0] >= size and self.rowmap.dtype == np.int32
        assert self.rowmap.flags.f_contiguous, "the row map is not column-major"
        assert np.array_equal(self.occupied, occupancy(self.rowmap)), (
            "the occupancy bitmap does not mark exactly the entries holding a row")
        pp, cc = np.nonzero(self.rowmap >= 0)
        rr = self.rowmap[pp, cc].astype(np.int64)
        assert (rr < size).all(), "a set's row index points past the table"
        assert self.alive[rr].all(), "a set's row index points at a retired row"
        assert (self.columns[self.n[rr]] == cc).all(), "a row sits in another node's column"
        used = np.unique(rr)
        assert (self.rowmap[self.rep[used], self.columns[self.n[used]]] == used).all(), (
            "a row's representative set does not use it")
        dead = np.flatnonzero(~self.alive[:size])
        assert (self.pend[dead] == -1).all(), "a retired row holds a pending event"
        if words is None or dep is None:
            return
        key = words[pp] & dep[cc]  # [Q, W]: each pair's key, the removals in D(n)
        one = ~self.mixed[rr]
        rep_key = words[self.rep[rr]] & dep[cc]
        assert (key[one] == rep_key[one]).all(), "a row that is not mixed holds several keys"
        if not pruned:
            has = np.zeros(self.rowmap.shape, dtype=bool)
            has[pp, cc] = True
            nonempty = ((words[:, None, :] & dep[None, :, :]) != 0).any(axis=2)  # [P, C]
            assert (has == nonempty).all(), "without pruning, a pair's row and key disagree"

    def sender_rows(self, p: npt.NDArray[np.int64], pend: npt.NDArray[np.int64],
                    n: npt.NDArray[np.int64], src: npt.NDArray[np.int64],
                    dst: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row of the sender of node ``n[m]``'s pending event ``pend[m]`` under set ``p[m]``:
        ``-1`` for the recorded state, ``-2`` where there is no pending event, ``[M]``."""
        return sender_rows(self.rowmap, self.columns, p, pend, n, src, dst)

    @_timed
    def split(self, rec: BatchRecord, loc: npt.NDArray[np.int64], words: Words,
              nodes: npt.NDArray[np.int64], masks: Words,
              rem: npt.NDArray[np.bool_] | None = None,
              touched: npt.NDArray[np.bool_] | None = None) -> None:
        """Step 2 of a batch: give every ``(set, node)`` pair whose dependency set grew in this
        batch the row of its new key ``(node, set ∩ D(node))``.

        Keys only refine (``D`` grows), so the sets of one new key all held the same old row:
        the first new key of an old row keeps it, the others get copies, and pairs that were
        unperturbed start from the recorded state after this batch's pending messages. (A mixed
        row, ``RowTable``, holds sets of several keys; it is split the same way, and every
        row this leaves holds the sets of one key.)

        With pruning (``rem``, the removals of the batch's events, ``[P, K]``), an unperturbed
        pair gets a row only when its set removes the node's recorded pending message of this
        batch: otherwise its state after the batch is the recorded one unless its pending
        message's sender differs, and ``prune`` gives it a row then. ``touched`` as for
        ``split_mixed``.
        """
        if len(nodes) == 0:
            return
        cols = self.columns[nodes]  # every node whose dependencies grow has a column
        if rem is None:
            sig = words[:, None, :] & masks[None, :, :]  # [P, k, W]
            pp, jj = np.nonzero(sig.any(axis=2))
            sg = sig[pp, jj]  # [Q, W]
        else:  # only pairs holding a row, or removing the node's pending message, can need one
            last = rec.inc_k[rec.inc_end[loc[nodes]] - 1]
            if touched is None:
                touched = np.asarray(rem.any(axis=0), dtype=bool)
            pp, jj, sg = split_pairs(self.rowmap, self.occupied, cols, rem, touched, last, words,
                                     masks)
        if len(pp) == 0:
            return
        # the keys of each node, by node, then key
        heads, group = key_groups(np.column_stack([jj, sg.view(np.int64)]), unsigned_from=1)
        g_p, g_n = pp[heads], nodes[jj[heads]]
        g_old = self.lookup(g_p, g_n)
        g_row = np.full(len(heads), -1, dtype=np.int64)
        had = np.flatnonzero(g_old >= 0)
        _, first = unique(g_old[had], return_index=True)
        keep = had[first]
        g_row[keep] = g_old[keep]
        self.rep[g_old[keep]] = g_p[keep]
        fresh = np.flatnonzero(g_row < 0)
        if rem is not None and len(fresh):
            unperturbed = g_old[fresh] < 0
            lf = loc[g_n[fresh]]
            last = rec.inc_k[rec.inc_end[lf] - 1]  # index of the node's last event of the batch
            fresh = fresh[~unperturbed | rem[g_p[fresh], last]]
        if len(fresh):
            old = g_old[fresh]
            copy = old >= 0
            lo_ = loc[g_n[fresh]]
            assert (lo_ >= 0).all(), "a node whose dependencies grow has an event in the batch"
            lu = rec.lu_post[lo_]
            lu[copy] = self.lu[old[copy]]
            g_row[fresh] = self.add(g_p[fresh], g_n[fresh], rec.mem_post, lu, at=lo_)
            if copy.any():  # copies of rows held before: their memory over the recorded one
                dev = self.mem.device
                self.mem.index_copy_(0, torch.as_tensor(g_row[fresh[copy]], device=dev),
                                     self.mem.index_select(
                                         0, torch.as_tensor(old[copy], device=dev)))
        self.write(pp, cols[jj], g_row[group])
        self.mixed[g_row[g_row >= 0]] = False  # every row of these nodes now holds one key

    @_timed
    def new_pending(self, rec: BatchRecord, rem: npt.NDArray[np.bool_],
                    loc: npt.NDArray[np.int64], read: npt.NDArray[np.bool_],
                    touched: npt.NDArray[np.bool_] | None = None) -> None:
        """Step 3 of a batch: every perturbed row of a node with events in the batch whose later
        state is read (``read``, ``bool [N]``) gets its last kept event as pending message
        (``rem``: removals of the batch's events, ``[P, K]``; ``touched`` as for
        ``split_mixed``); the other rows are left behind."""
        if self.size == 0:
            return
        if touched is None:
            touched = np.asarray(rem.any(axis=0), dtype=bool)
        new_pending(self.n, self.alive, self.rep, self.pend, self.size, read, loc, rec.events,
                    *rec.incidences(), rem, touched)

    @_timed
    def split_mixed(self, rec: BatchRecord, rem: npt.NDArray[np.bool_],
                    loc: npt.NDArray[np.int64], read: npt.NDArray[np.bool_],
                    src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64],
                    touched: npt.NDArray[np.bool_] | None = None) -> int:
        """Step 3b of a batch (with pruning): split every mixed row (``RowTable``) of a node
        with events in the batch whose later state is read (``read``, ``bool [N]``) by the
        message each of its sets now holds: the last event the set keeps (``rem``, ``[P, K]``)
        and the row of that message's sender under the set. ``new_pending`` gave the row
        its representative set's message, which it keeps; sets whose message or sender differs
        from that would diverge when it is applied in the next batch, so each such group gets its
        own copy of the row (mixed still: its sets may differ in the node's causal past). Returns
        the rows made. ``touched`` (``bool [K]``): which of the batch's events some set
        removes, or more (``rem.any(axis=0)`` when not given); a set's message is the node's
        last event at once where that is not touched.
        """
        # the rows to split, each one's own sender row, and their columns
        _, start, end = incidences = rec.incidences()
        is_m, mine, cols = mixed_rows(self.rowmap, self.columns, self.mixed, self.alive, self.n,
                                      self.size, read, loc, start, end, self.rep, self.pend,
                                      src, dst)
        if not len(cols):
            return 0
        if touched is None:
            touched = np.asarray(rem.any(axis=0), dtype=bool)
        # the row keeps the message new_pending gave it (its representative set's); of every
        # (set, row) pair of the mixed rows, those whose message (the last event the set
        # keeps) or its sender's row differs from that move to rows of their own
        pp, rr, pend, sender = mixed_pairs(
            self.rowmap, self.occupied, self.columns, cols, is_m, self.n, self.pend, mine, loc,
            rec.events, *incidences, rem, touched, src, dst)
        if not len(pp):
            return 0
        heads, group = key_groups(np.column_stack([rr, pend, sender]))
        new = self.add(pp[heads], self.n[rr[heads]], None, self.lu[rr[heads]], at=rr[heads])
        self.pend[new] = pend[heads]
        self.mixed[new] = True
        self.write(pp, self.columns[self.n[rr]], new[group])
        return len(new)

    @_timed
    def prune(self, model: TGN, rec: BatchRecord, loc: npt.NDArray[np.int64], x: int,
              need: npt.NDArray[np.int64], src: npt.NDArray[np.int64],
              dst: npt.NDArray[np.int64], tolerance: float = 0.0,
              receivers: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
              ) -> int:
        """Step 4 of a batch (perturbation pruning, exact): retire the rows whose state after
        the batch is the recorded one, and give a row back to the retired pairs that a
        perturbed sender reaches. Returns the number of rows retired.

        A row of node ``n`` may be retired when its memory equals the recorded memory bitwise,
        its last-update time is the recorded one, and its pending message is the recorded one
        or one with the same sender, time and edge features (the same message), the sender's
        memory under the row's sets being the recorded one too; a row whose state after this
        batch is never read (``need[n] < x``) is retired as well. Later batches then use the
        recorded state for those sets, which is what the row would have produced.

        With ``tolerance > 0`` "equals the recorded memory" means "within ``tolerance`` of it in
        every coordinate" (``memory_equal``), here, for the sender, and in
        ``merge`` and ``revive``, which read the same test; a row retired that way
        is snapped to the recorded memory, which is **not exact** (``cftgnn.replay.tgn.cone``).

        Conversely, a pair ``(set, n)`` without a row whose recorded pending message comes
        from a sender holding a perturbed memory under that set must differ in the next batch.
        Without pruning such pairs always hold a row (the sender's dependencies are in
        ``n``'s); after a retirement they get one again here: the recorded state and pending
        message, one row per distinct sender row. ``receivers`` are the batch's nodes such
        a sender can reach (``cftgnn.replay.tgn.trajectory.receivers``, made here when
        None; the cone replay passes them kept per batch, ``Dependencies.receivers``).
        """
        if not self.alive[:self.size].any():  # no perturbed row: nothing to retire, merge
            return 0  # or revive
        # the live rows never read again, and the others' comparisons with the recording
        stale, r, _, mem_eq, checked, same, theirs, reads_pending, pend_ok = prune_candidates(
            self.mem, self.alive, self.n, self.lu, self.pend, self.size, rec, loc, need, x,
            tolerance)
        n = self.n[r]
        retire = np.zeros(len(r), dtype=bool)
        if len(r):
            mine = self.pend[r]
            alt = same & ~pend_ok & (mine >= 0) & (theirs >= 0)
            if alt.any():  # another event carrying the same message?
                a = np.flatnonzero(alt)
                ea, eb, na = mine[a], theirs[a], n[a]
                feat = model.edge_features
                fa = feat[torch.as_tensor(ea, device=feat.device)]
                fb = feat[torch.as_tensor(eb, device=feat.device)]
                same_msg = ((other_endpoint(src, dst, ea, na)
                             == other_endpoint(src, dst, eb, na))
                            & (model.stream.t[ea] == model.stream.t[eb])
                            & (bits(fa) == bits(fb)).all(dim=1).cpu().numpy())
                pend_ok[a] = same_msg
            cand = np.flatnonzero(same & pend_ok)
            sends = cand[reads_pending[cand] & (theirs[cand] >= 0)]
            if len(sends):  # the message's sender must hold its recorded memory as well
                o = other_endpoint(src, dst, theirs[sends], n[sends])
                ro = self.lookup(self.rep[r[sends]], o)
                ok = (ro < 0) | (checked[np.maximum(ro, 0)] & mem_eq[np.maximum(ro, 0)])
                same[sends[~ok]] = False
            retire[cand] = same[cand]
        dead = np.concatenate([stale, r[retire]])
        self.drop(dead)
        merged = self.merge(r[~retire], need, x, mem_eq, checked, src, dst)
        if receivers is None:
            receivers = trajectory_receivers(rec, x, need, self.columns, src, dst)
        self.revive(rec, receivers, mem_eq, checked, src, dst)
        return int(retire.sum()) + merged

    @_timed
    def merge(self, r: npt.NDArray[np.int64], need: npt.NDArray[np.int64], x: int,
              mem_eq: npt.NDArray[np.bool_], checked: npt.NDArray[np.bool_],
              src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> int:
        """Merge rows ``r`` of one node whose states after the batch are equal bit for bit
        (memory, last-update time, pending event, and the sender's memory): their sets then
        share one row, as sets agreeing on the node's causal past do. Exact, like retiring a
        row: the state a row stands for is a function of those values only. Returns the
        number of rows merged away."""
        if len(r) < 2:
            return 0
        r, head, group = merge_groups(self.mem, r, self.n, mem_eq, checked, self.lu, self.pend,
                                      self.rep, need, x, self.rowmap, self.columns, src, dst,
                                      self.size)
        return self._merge_into(r, self.n[r], head, group)

    def _merge_into(self, r: npt.NDArray[np.int64], n: npt.NDArray[np.int64],
                    head: npt.NDArray[np.int64], group: npt.NDArray[np.int64]) -> int:
        """``merge``'s last step: the rows ``r`` (of nodes ``n``) of each group
        (``groups``' ``head`` and ``group`` over them) given to its first row. Returns the
        number of rows merged away."""
        if len(head) == len(r):
            return 0
        size = self.size
        target = r[head[group]]  # [R]
        moved = np.flatnonzero(target != r)
        remap = np.arange(size, dtype=np.int32)
        remap[r[moved]] = target[moved]
        remap_columns(self.rowmap, self.occupied, np.unique(self.columns[n[moved]]), remap)
        gone = r[moved]
        self.mixed[target[moved]] = True  # sets of several keys, equal states (see RowTable)
        self.alive[gone] = False
        self.pend[gone] = -1
        return len(moved)

    @_timed
    def revive(self, rec: BatchRecord,
               receivers: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
               mem_eq: npt.NDArray[np.bool_], checked: npt.NDArray[np.bool_],
               src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> None:
        """Rows for the pairs without one whose recorded pending message (applied in the next
        batch) comes from a sender with a perturbed memory (see ``prune``); ``receivers``:
        the batch's nodes a sender can reach that way, by sender
        (``cftgnn.replay.tgn.trajectory.receivers``)."""
        size = self.size
        differs = np.zeros(size + 1, dtype=bool)  # index -1 (no row) reads the last entry
        differs[:size] = self.alive[:size] & checked & ~mem_eq
        # the receivers of the nodes holding such a row, their pending messages and senders
        v, n, pend, senders, of = revive_receivers(differs, self.n, len(self.columns),
                                                   receivers, rec, src, dst)
        if not len(v):
            return
        # (set, receiver) pairs without a row whose sender's row under the set differs, and
        # that row
        pp, jj, key = revive_pairs(self.rowmap, self.occupied, self.columns, differs, senders,
                                   of.reshape(-1), n)
        if not len(pp):
            return
        heads, group = key_groups(np.column_stack([jj, key]))
        lo_ = v[jj[heads]]
        new = self.add(pp[heads], n[jj[heads]], rec.mem_post, rec.lu_post[lo_], at=lo_)
        self.pend[new] = pend[jj[heads]]
        self.write(pp, self.columns[n[jj]], new[group])
        self.mixed[new[np.bincount(group) > 1]] = True  # sets of several keys (see RowTable)


__all__ = ["RowTable"]
