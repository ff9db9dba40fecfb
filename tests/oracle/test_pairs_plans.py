"""D pairs in one batched call (``EventReplay.pairs_logits``, the rank target's positive and
negatives): for every model kind, each column equals a fresh replay with that destination
(``naive_logit(..., dst=)``, 1e-6 where the replay is the model's own arithmetic) and the
one-destination pair plan, for removals near the query and far back, the empty set, repeated
destinations and a destination never seen; the approximate history's columns equal the
approximate per-set replay's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cftgnn.models.base import eval_mode
from cftgnn.oracle.engine import EventReplay, ReplayEngine, naive_logit
from cftgnn.oracle.target import RankTarget
from cftgnn.replay.generic import GenericReplay
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.plans import PairsReplay
from cftgnn.replay.tgn import TGNPlan
from tests.oracle.test_pair_plans import KINDS, removal_sets, tiny
from tests.oracle.test_pair_plans import stream as stream  # noqa: F401 (the fixture)

ATOL = 1e-6


def some_destinations(stream, i: int) -> np.ndarray:
    """The event's own destination first, then nodes of the history, one never seen, and a
    repeat."""
    own = int(stream.dst[i])
    seen = np.unique(np.concatenate([stream.src[:i], stream.dst[:i]]))
    rng = np.random.default_rng(1)
    picked = rng.choice(seen[seen != own], size=6, replace=False)
    return np.concatenate([[own], picked, [stream.num_nodes - 1], picked[:1]]).astype(np.int64)


@pytest.mark.parametrize(("name", "history"), [*((k, "event") for k in KINDS),
                                                ("tgn2", "batch_start")])
def test_pairs_logits_equal_fresh_replays_for_every_destination(stream, name, history):
    model = tiny(name, stream)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    i = 260
    replay = EventReplay(engine, i, m_max=60, history=history)
    sets = removal_sets(replay.candidates.ids, np.random.default_rng(0))
    dsts = some_destinations(stream, i)
    got = replay.pairs_logits(sets, dsts)
    assert got.shape == (len(sets), len(dsts))
    # column 0 is the event's own exact logit; a repeated destination repeats its column
    np.testing.assert_allclose(got[:, 0], replay.exact(sets), atol=ATOL)
    np.testing.assert_array_equal(got[:, -1], got[:, 1])
    for j, dst in enumerate(dsts.tolist()):
        np.testing.assert_allclose(got[:, j], replay.pair_logits(sets, dst), atol=ATOL)
    checked = [0, 1, 2, 4]  # nothing, near the query, far back, everything
    for j in (1, len(dsts) - 2):
        ref = [naive_logit(model, stream, i, sorted(sets[s]), history, dst=int(dsts[j]))
               for s in checked]
        np.testing.assert_allclose(got[checked, j], ref, atol=ATOL)
    # single calls and a second call reuse the plan and give the same logits
    np.testing.assert_allclose(replay.pairs_logits(sets[2:3], dsts)[0], got[2], atol=ATOL)
    assert float(np.abs(got - got[:1]).max()) > 1e-4  # the removals move the pairs
    if name != "dygformer":
        assert isinstance(engine.replay, PairsReplay)


@pytest.mark.parametrize("name", ["tgn2", "tgat"])
def test_approximate_pairs_logits_equal_the_approximate_per_set_replay(stream, name):
    model = tiny(name, stream)
    engine = ReplayEngine(model, stream, checkpoint_every=2)
    i = 260
    replay = EventReplay(engine, i, m_max=60)
    sets = removal_sets(replay.candidates.ids, np.random.default_rng(0))
    dsts = some_destinations(stream, i)
    got = replay.pairs_logits(sets, dsts, approximate=True)
    np.testing.assert_allclose(got[:, 0], replay.approximate(sets), atol=ATOL)
    # single sets (TGN: the local replay, relative to the empty set's rows) agree
    for s, row in zip(sets, got, strict=True):
        np.testing.assert_allclose(replay.pairs_logits([s], dsts, approximate=True)[0], row,
                                   atol=ATOL)
    mask = replay._mask(frozenset(), approximate=True)
    for j in (1, 3):
        plan = GenericReplay(model).pair_plan(replay.base, replay.start, i, int(dsts[j]), mask)
        with eval_mode(model), torch.no_grad():
            ref = plan.logits(RemovalSets.from_sets(sets)).double().numpy()
        np.testing.assert_allclose(got[:, j], ref, atol=ATOL)


def test_the_dense_cone_replay_gives_the_same_pairs(stream):
    from cftgnn.replay.tgn import TGNReplay, TGNReplayOptions

    model = tiny("tgn2", stream)
    rows = EventReplay(ReplayEngine(model, stream, checkpoint_every=2), 260, m_max=60)
    engine = ReplayEngine(model, stream, checkpoint_every=2,
                          replay=TGNReplay(model, TGNReplayOptions(cone="dense")))
    dense = EventReplay(engine, 260, m_max=60)
    sets = removal_sets(dense.candidates.ids, np.random.default_rng(0))
    dsts = some_destinations(stream, 260)
    got = dense.pairs_logits(sets, dsts)
    np.testing.assert_allclose(got, rows.pairs_logits(sets, dsts), atol=ATOL)
    for j in (1, 4):
        ref = [naive_logit(model, stream, 260, sorted(s), dst=int(dsts[j])) for s in sets[:3]]
        np.testing.assert_allclose(got[:3, j], ref, atol=ATOL)


class Counting:
    """The engine's replay, counting the plans it records (by kind)."""

    def __init__(self, replay) -> None:
        self.replay, self.made = replay, {"plan": 0, "pairs_plan": 0}
        for verb in self.made:
            setattr(self, verb, self._counted(verb))

    def _counted(self, verb):
        def made(*args, **kw):
            self.made[verb] += 1
            return getattr(self.replay, verb)(*args, **kw)
        return made

    def __getattr__(self, name):
        return getattr(self.replay, name)


@pytest.mark.parametrize(("name", "history"), [("tgn1", "event"), ("tgn2", "event"),
                                                ("tgn2", "batch_start"), ("tgat", "event")])
def test_a_rank_oracle_records_its_exact_plan_once_and_answers_as_before(stream, name,
                                                                         history):
    """With its rank target given at construction, an event's replay records the pairs plan
    in place of the logit's (one exact recording, not two), takes the probe's state from it,
    and every margin, rank, logit and probe answer is bit for bit the replay's that recorded
    both (the target given to ``oracle`` only)."""
    model = tiny(name, stream)
    i = 260
    negatives = np.random.default_rng(2).integers(0, stream.num_nodes, size=40)
    target = RankTarget(negatives.astype(np.int64), k=2)
    answers = []
    for given in (None, target):
        engine = ReplayEngine(model, stream, checkpoint_every=2)
        engine.replay = counting = Counting(engine.replay)
        replay = EventReplay(engine, i, m_max=60, history=history, target=given)
        oracle = replay.oracle("approximate", target=target)
        sets = removal_sets(replay.candidates.ids, np.random.default_rng(0))
        made = dict(counting.made)
        got = [oracle.original_logit, oracle.target.exact(sets), oracle.target.approximate(sets),
               [oracle.target.rank(s) for s in sets]]
        probe = oracle.probe
        if probe is not None:
            got.append(probe.logit())
        got.append(replay.exact(sets))  # an exact logit asked for: the logit's plan, made now
        answers.append(got)
        if given is None:
            assert made == {"plan": 1, "pairs_plan": 1}
        else:
            assert made == {"plan": 0, "pairs_plan": 1}  # the pairs plan alone
            assert counting.made == {"plan": 1, "pairs_plan": 2}  # + the approximate one
            exact_pairs = next(p for (a, _), p in replay._pairs_plans.items() if not a)
            if isinstance(exact_pairs, TGNPlan) and history == "event":
                assert probe is not None and probe._state is exact_pairs.trajectory.final
    before, after = answers
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        np.testing.assert_array_equal(np.asarray(new), np.asarray(old))
    assert np.ptp(before[1]) > 0  # the removals move the margins
