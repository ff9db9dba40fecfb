"""The replay engine: masked replay of P removal sets of one explained event at once.

* :mod:`cftgnn.replay.masks`: :class:`RemovalSets`, P sets as a small table over the events
  they remove.
* :mod:`cftgnn.replay.plans`: the typed contract with the oracle (:class:`ReplayPlan`, one
  method; :class:`ReplayBackend`; :class:`BatchedReplay` for a model's own replay).
* :mod:`cftgnn.replay.cone` and :mod:`cftgnn.replay.local`: TGN's causal-cone and local
  replays, through the TGN memory's public interface; :mod:`cftgnn.replay.tgn` picks one.
* :mod:`cftgnn.replay.batched`: the embedding pass over the distinct embeddings of P sets;
  :mod:`cftgnn.replay.tgat` is TGAT's whole replay.

The one batching rule is the models' (:meth:`cftgnn.models.base.TemporalModel.history_steps`,
over :func:`cftgnn.models.protocol.kept_batches`); every replay here follows it.
"""

from cftgnn.replay.masks import RemovalSets
from cftgnn.replay.plans import BatchedReplay, ReplayBackend, ReplayPlan

__all__ = ["BatchedReplay", "RemovalSets", "ReplayBackend", "ReplayPlan"]
