"""The rank target's plan reuses the recorded unperturbed embeddings of the queries below
its top layer (``cftgnn.replay.reads.LayerWindows``) only where a set cannot change them: a
removal inside a neighbour's window (not the destination's own) changes the destination, a
removal inside a window pulls an older event in, and a plan reading another plan's recorded
queries (``WindowPlan``'s ``like``: the approximate plan after the exact one) gives what a
plan of its own gives. Each column is checked against the one-destination pair plan (which
records nothing) and a fresh replay (``naive_logit``, 1e-6)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import cftgnn.replay.batched as batched
from cftgnn.models.base import eval_mode
from cftgnn.models.neighbors import recent_kept_neighbors_where
from cftgnn.oracle.engine import EventReplay, ReplayEngine, naive_logit
from cftgnn.oracle.target import RankTarget
from cftgnn.replay.generic import GenericReplay
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.reads import LayerWindows, tree_reads
from cftgnn.replay.tgat import TGATPlan
from tests.oracle.test_pair_plans import removal_sets, tiny
from tests.oracle.test_pair_plans import stream as stream  # noqa: F401 (the fixture)
from tests.oracle.test_pairs_plans import some_destinations

ATOL = 1e-6
EVENT = 260


def window(model, node: int, before: int) -> tuple[np.ndarray, np.ndarray]:
    """``(neighbours, events)`` of ``node``'s unperturbed window before ``before``."""
    nbr, eid, valid = recent_kept_neighbors_where(
        model.index, np.array([node]), np.array([before]), model.num_neighbors,
        lambda e: np.zeros(e.shape, dtype=bool), 0)
    return nbr[0][valid[0]], eid[0][valid[0]]


def per_destination(model, sets, dsts, shared) -> np.ndarray:
    """The one-destination pair plans' logits, ``[P, D]`` (no recorded queries)."""
    with eval_mode(model), torch.no_grad():
        return np.stack([TGATPlan(model, EVENT, shared, int(d)).logits(
            RemovalSets.from_sets(sets)).double().numpy() for d in dsts], axis=1)


def a_neighbours_event(stream, model) -> tuple[int, int, int]:
    """``(destination, event)``: an event in the window of one of the destination's
    neighbours, outside its own window and outside the source's tree."""
    src = int(stream.src[EVENT])
    near = set(window(model, src, EVENT)[1].tolist())
    for nb, e in zip(*window(model, src, EVENT), strict=True):
        near |= set(window(model, int(nb), int(e))[1].tolist())
    for dst in np.unique(stream.dst[:EVENT])[::-1].tolist():
        nbrs, events = window(model, dst, EVENT)
        for nb, e in zip(nbrs.tolist(), events.tolist(), strict=True):
            for inner in window(model, nb, e)[1].tolist():
                if inner not in events and inner not in near and dst != src:
                    return dst, inner, e
    raise AssertionError("no such event in the stream")


def test_a_removal_in_a_neighbours_window_changes_the_destination(stream):
    model = tiny("tgat", stream)
    ReplayEngine(model, stream, checkpoint_every=2)  # attaches the model
    dst, inner, _ = a_neighbours_event(stream, model)
    dsts = np.unique(np.concatenate([[dst], some_destinations(stream, EVENT)]))
    shared = np.zeros(stream.num_events, dtype=bool)
    plan = TGATPlan(model, EVENT, shared, dsts)
    j = int(np.flatnonzero(dsts == dst)[0])
    own = window(model, dst, EVENT)[1]
    sets = [frozenset(), frozenset([inner]), frozenset([int(own[-1])]),  # inner; own newest
            frozenset(own.tolist()[:2])]  # older ones pulled into the window
    with eval_mode(model), torch.no_grad():
        first = plan.logits(RemovalSets.from_sets(sets[:1])).double().numpy()  # records
        got = plan.logits(RemovalSets.from_sets(sets)).double().numpy()
    np.testing.assert_allclose(got[0], first[0], atol=ATOL)
    np.testing.assert_allclose(got, per_destination(model, sets, dsts, shared), atol=ATOL)
    ref = [naive_logit(model, stream, EVENT, sorted(s), dst=dst) for s in sets]
    np.testing.assert_allclose(got[:, j], ref, atol=ATOL)
    assert abs(got[1, j] - got[0, j]) > 1e-5  # the neighbour's window moved it
    assert (np.abs(got[3] - got[0]) > 1e-5).any()


def test_random_sets_equal_the_pair_plans_after_the_first_call(stream):
    model = tiny("tgat", stream)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    replay = EventReplay(engine, EVENT, m_max=60)
    sets = removal_sets(replay.candidates.ids, np.random.default_rng(3))
    dsts = some_destinations(stream, EVENT)
    uniq = np.unique(dsts)
    shared = np.zeros(stream.num_events, dtype=bool)
    plan = TGATPlan(model, EVENT, shared, uniq)
    with eval_mode(model), torch.no_grad():
        rows = [plan.logits(RemovalSets.from_sets([s])).double().numpy()[0] for s in sets]
    np.testing.assert_allclose(np.stack(rows), per_destination(model, sets, uniq, shared),
                               atol=ATOL)


@pytest.mark.parametrize("exact_first", [True, False])
def test_the_approximate_plan_reading_the_exact_ones_gives_its_own_logits(stream, monkeypatch,
                                                                            exact_first):
    model = tiny("tgat", stream)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    dsts = some_destinations(stream, EVENT)
    target = RankTarget(dsts[1:], k=1)
    seen: list[bool] = []  # per call: whether it read another plan's recorded queries
    spy = batched.batched_logits
    unremoved = LayerWindows.unremoved

    def spied(*args, **kw):
        seen.append(False)
        return spy(*args, **kw)

    def reads(self, c, p, sets, extra=None):
        seen[-1] |= extra is not None
        return unremoved(self, c, p, sets, extra)

    monkeypatch.setattr(batched, "batched_logits", spied)
    monkeypatch.setattr(LayerWindows, "unremoved", reads)
    # the exact pairs plan (the rank target's, recorded with the replay) called first, or not
    replay = EventReplay(engine, EVENT, k=1, m_max=20, target=target)
    sets = removal_sets(replay.candidates.ids, np.random.default_rng(0))
    if exact_first:
        exact = replay.pairs_logits(sets, dsts)
    got = replay.pairs_logits(sets, dsts, approximate=True)
    assert seen[-1] == exact_first  # read the exact plan's recorded queries
    mask = replay._mask(frozenset(), approximate=True)
    assert mask[:EVENT].sum() > 20  # the approximate history removes events the exact one keeps
    for j in range(1, len(dsts) - 1):
        ref = GenericReplay(model).pair_plan(replay.base, replay.start, EVENT, int(dsts[j]), mask)
        with eval_mode(model), torch.no_grad():
            want = ref.logits(RemovalSets.from_sets(sets)).double().numpy()
        np.testing.assert_allclose(got[:, j], want, atol=ATOL)
    if not exact_first:  # then the exact plan: its shared removals are fewer, it reads none
        exact = replay.pairs_logits(sets, dsts)
        assert not seen[-1]
    for j in (1, 3):
        ref = [naive_logit(model, stream, EVENT, sorted(s), dst=int(dsts[j])) for s in sets[:3]]
        np.testing.assert_allclose(exact[:3, j], ref, atol=ATOL)


def test_a_plan_reads_no_recorded_plan_with_removals_it_keeps(stream):
    model = tiny("tgat", stream)
    ReplayEngine(model, stream, checkpoint_every=2)
    dst, _, slot = a_neighbours_event(stream, model)
    dsts = np.unique(np.concatenate([[dst], some_destinations(stream, EVENT)]))
    more = np.zeros(stream.num_events, dtype=bool)
    more[slot] = True  # removed for every set of the first plan, kept by the second
    fewer = np.zeros(stream.num_events, dtype=bool)
    sets = [frozenset(), frozenset([slot - 1])]
    with eval_mode(model), torch.no_grad():
        TGATPlan(model, EVENT, more, dsts).logits(RemovalSets.from_sets(sets))
        got = TGATPlan(model, EVENT, fewer, dsts).logits(RemovalSets.from_sets(sets)).double()
    np.testing.assert_allclose(got.numpy(), per_destination(model, sets, dsts, fewer),
                               atol=ATOL)
    j = int(np.flatnonzero(dsts == dst)[0])
    ref = naive_logit(model, stream, EVENT, [], dst=dst)
    np.testing.assert_allclose(got[0, j].item(), ref, atol=ATOL)



def as_pairs(reads) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """A ``TreeReads``'s (query, event) and (query, node) pairs."""
    return ({(int(q), int(e)) for q, e in zip(reads.event_query, reads.event, strict=True)},
            {(int(q), int(n)) for q, n in zip(reads.node_query, reads.node, strict=True)})


def test_the_trees_read_from_the_recorded_windows_are_the_sampled_ones(stream):
    model = tiny("tgat", stream)
    ReplayEngine(model, stream, checkpoint_every=2)
    dsts = np.unique(some_destinations(stream, EVENT))
    link = np.concatenate([[stream.src[EVENT]], dsts])
    some = np.zeros(stream.num_events, dtype=bool)
    some[EVENT - 40:EVENT:3] = True
    for shared in (np.zeros(stream.num_events, dtype=bool), some):
        plan = TGATPlan(model, EVENT, shared, dsts)
        with eval_mode(model), torch.no_grad():
            plan.logits(RemovalSets.from_sets([frozenset()]))
        want = tree_reads(model.index, model.num_neighbors, 2, link, EVENT, shared)
        assert as_pairs(plan.unperturbed["reads"]) == as_pairs(want)
