"""The replay engine: masked replay of P removal sets of one explained event at once.

* :mod:`cftgnn.replay.masks`: :class:`RemovalSets`, P sets as a small table over the events
  they remove.
* :mod:`cftgnn.replay.plans`: the typed contract with the oracle (:class:`ReplayPlan`, one
  method; :class:`ModelReplay`, which makes it; :class:`BatchedReplay` for a model's own replay).
* :mod:`cftgnn.replay.registry`: :func:`replay_for`, the replay of a model (the one registered
  for its class with :func:`register_replay`, its own batched replay, or the generic one
  replay per set of :mod:`cftgnn.replay.generic`).
* :mod:`cftgnn.replay.cone` and :mod:`cftgnn.replay.local`: TGN's causal-cone and local
  replays, through the TGN memory's public interface; :mod:`cftgnn.replay.tgn` picks one.
* :mod:`cftgnn.replay.batched`: the embedding pass over the distinct embeddings of P sets;
  :mod:`cftgnn.replay.tgat` is TGAT's whole replay, :mod:`cftgnn.replay.graphmixer`
  GraphMixer's; :mod:`cftgnn.replay.dygformer` runs DyGFormer once per distinct pair of
  endpoint windows.

The one batching rule is the models' (:meth:`cftgnn.models.base.TemporalModel.history_steps`,
over :func:`cftgnn.models.protocol.kept_batches`); every replay here follows it.
"""

from cftgnn.replay import dygformer as _dygformer  # noqa: F401  (registers DyGFormer's)
from cftgnn.replay import graphmixer as _graphmixer  # noqa: F401  (registers GraphMixer's)
from cftgnn.replay import tgat as _tgat  # noqa: F401  (registers TGAT's replay)
from cftgnn.replay import tgn as _tgn  # noqa: F401  (registers TGN's replay)
from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.plans import BatchedReplay, ModelReplay, ReplayPlan
from cftgnn.replay.registry import register_replay, replay_for

__all__ = ["BatchedReplay", "ModelReplay", "RemovalSets", "ReplayPlan", "register_replay",
           "replay_for"]
