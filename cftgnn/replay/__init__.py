"""The replay engine: masked replay of P removal sets of one explained event at once.

* ``cftgnn.replay.masks``: ``RemovalSets``, P sets as a small table over the events
  they remove.
* ``cftgnn.replay.plans``: the typed contract with the oracle (``ReplayPlan``, one
  method; ``ModelReplay``, which makes it; ``PairReplay``, whose plans can predict another
  destination, a negative pair; ``BatchedReplay`` for a model's own replay).
* ``cftgnn.replay.registry``: ``replay_for``, the replay of a model (the one registered
  for its class with ``register_replay``, its own batched replay, or the generic one
  replay per set of ``cftgnn.replay.generic``).
* ``cftgnn.replay.tgn`` (a package: the recording, the table of perturbed rows and the
  driver of the exact causal-cone replay) and ``cftgnn.replay.local``: TGN's causal-cone
  and local replays, through the TGN memory's public interface; ``cftgnn.replay.tgn``
  picks one.
* ``cftgnn.replay.batched``: the embedding pass over the distinct embeddings of P sets;
  ``cftgnn.replay.tgat`` is TGAT's whole replay, ``cftgnn.replay.graphmixer``
  GraphMixer's; ``cftgnn.replay.dygformer`` runs DyGFormer once per distinct pair of
  endpoint windows.

The one batching rule is the models' (``cftgnn.models.base.TemporalModel.history_steps``,
over ``cftgnn.models.protocol.kept_batches``); every replay here follows it.
"""

from cftgnn.replay import dygformer as _dygformer  # noqa: F401  (registers DyGFormer's)
from cftgnn.replay import graphmixer as _graphmixer  # noqa: F401  (registers GraphMixer's)
from cftgnn.replay import tgat as _tgat  # noqa: F401  (registers TGAT's replay)
from cftgnn.replay import tgn as _tgn  # noqa: F401  (registers TGN's replay)
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.plans import BatchedReplay, ModelReplay, PairReplay, ReplayPlan
from cftgnn.replay.registry import register_replay, replay_for

__all__ = ["BatchedReplay", "ModelReplay", "PairReplay", "RemovalSets", "ReplayPlan",
           "register_replay", "replay_for"]
