"""The oracle's window onto the model for explainers trained by gradient or by attention.

Explainers see the model only through the oracle (docs/design.md §4). Some of the field's
explainers need more than logits of hard removals: PGExplainer trains an MLP on candidate
embeddings through soft edge weights, T-GNNExplainer and the attention baseline read the
model's attention. A ``ModelProbe`` gives exactly that, for one explained event and its
oracle's removable events ``R`` (in the order of ``oracle.removable``), and nothing else:

* ``ModelProbe.attention``: the model's aggregated attention on each event of ``R``,
  optionally with a bias per event added to the attention scores (``has_attention``);
* ``ModelProbe.soft_logit``: the explained logit with a weight in ``[0, 1]`` per event
  of ``R``, differentiable (soft removal, docs/design.md §8);
* ``ModelProbe.features``: a feature row per event of ``R`` for a PGExplainer;
* ``ModelProbe.node_embeddings``: the model's embeddings of given nodes (TemGX);
* ``ModelProbe.logit``: the explained logit itself (the model's prediction).

Each reads the model with the full history before the explained event: the state the
oracle's exact plan recorded there when it has one (TGN's trajectory,
``RecordedPlan``), else the event's base state (the unperturbed
state at the batch boundary ``b0``) advanced to the event on the first call and kept as a
snapshot. Every call saves the model's live state and restores
it afterwards, and puts the model back in its mode; the exact and approximate backends do
not rely on the live state anyway (every replay restores a snapshot first).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from cftgnn.models.protocol import ProbedModel


class ModelProbe:
    """Attention, soft-removal logits and candidate features of one explained event.

    Args:
        model: The engine's model (attached to the stream, event ids = stream positions).
        base: The unperturbed state at ``start`` (a snapshot of ``model``; never modified).
        start: The batch boundary ``base`` is at (``<=`` ``event_id``).
        event_id: The explained event ``i``.
        removable: The oracle's removable events ``R``, ``int64 [m]`` (the order of every
            per-event output).
        history_end: Where the prediction's history ends (default ``event_id``;
            ``history=batch_start``: the start of the event's batch,
            ``cftgnn.oracle.history``).
        state: The unperturbed state at ``history_end`` when the caller holds it already
            (the same snapshot ``base`` advanced there gives; never modified), or None to
            advance ``base`` on first use.
    """

    def __init__(self, model: ProbedModel, base: Any, start: int, event_id: int,
                 removable: npt.ArrayLike, history_end: int | None = None,
                 state: Any = None) -> None:
        self.model = model
        self.event_id = int(event_id)
        self.removable: npt.NDArray[np.int64] = np.asarray(removable, dtype=np.int64).copy()
        stream = model.stream
        self.src = int(stream.src[self.event_id])
        self.dst = int(stream.dst[self.event_id])
        self.t = float(stream.t[self.event_id])
        self._base = base
        self._start = int(start)
        self._end = self.event_id if history_end is None else int(history_end)
        self._state: Any = state  # the full history before the event (else built on use)

    @property
    def history_end(self) -> int:
        """Where the prediction's history ends (exclusive): the event, or the start of its
        batch with ``history=batch_start`` (TempME's walks stay before it)."""
        return self._end

    @contextmanager
    def _at_event(self, grad: bool) -> Iterator[ProbedModel]:
        """The model in eval mode holding the full history before the event; gradients on
        or off (whatever the caller's grad mode), reaching no model parameter. The model's
        live state, mode and parameters' ``requires_grad`` are restored afterwards."""
        model = self.model
        live = model.snapshot()
        was_training = model.training
        params = ([p for p in model.parameters() if p.requires_grad]
                  if isinstance(model, torch.nn.Module) else [])
        model.eval()
        try:
            if self._state is None:
                with torch.no_grad():
                    model.restore(self._base)
                    model.advance(self._start, self._end)
                    self._state = model.snapshot()
            else:
                model.restore(self._state)
            for p in params:
                p.requires_grad_(False)
            with torch.set_grad_enabled(grad):
                yield model
        finally:
            for p in params:
                p.requires_grad_(True)
            model.restore(live)
            if was_training:
                model.train()

    def _query(self) -> tuple[list[int], list[int], list[float]]:
        return [self.src], [self.dst], [self.t]

    def logit(self) -> float:
        """The explained logit with the full history: the model's own prediction at the
        probe's state (the oracle's original logit to float rounding; PGExplainer's training
        reads its sign without building an oracle)."""
        with self._at_event(grad=False) as model:
            return float(model.predict(*self._query())[0])

    @property
    def has_attention(self) -> bool:
        """Whether the model's ``attention`` is attention (TGN, TGAT), which a ``bias``
        re-weights, rather than pooling shares (GraphMixer, DyGFormer)."""
        return bool(self.model.has_attention)

    def attention(self, bias: npt.ArrayLike | None = None) -> npt.NDArray[np.float64]:
        """The model's aggregated attention on each event of ``R`` for the explained link
        (``attention_by_event``): summed over
        layers, targets and slots, averaged over heads; 0 for an event no slot reads,
        ``float64 [m]``.

        Args:
            bias: A bias per event of ``R`` added to the attention scores of the slots that
                read it before the softmax, ``float [m]`` (0: unchanged), or None; only
                where ``has_attention`` (T-GNNExplainer's PG navigator adds its
                PGExplainer's scores).

        Raises:
            ValueError: A ``bias`` of another length, or one on a model without attention.
        """
        b = None
        if bias is not None:
            b = torch.as_tensor(np.asarray(bias, dtype=np.float32).reshape(-1))
            if b.shape != (len(self.removable),):
                raise ValueError(f"attention needs {len(self.removable)} biases (one per "
                                 f"removable event), got shape {tuple(b.shape)}")
        with self._at_event(grad=False) as model:
            mass = model.attention_by_event(*self._query(), torch.from_numpy(self.removable),
                                            bias=b)
        return mass.detach().cpu().numpy().astype(np.float64)

    def soft_logit(self, weights: Tensor) -> Tensor:
        """The explained logit with the events of ``R`` weighted (soft removal).

        Weight 1 everywhere gives the original logit; weight 0 is the hard removal only
        where docs/design.md §8 ("Soft removal") says so (TGAT without full neighbour
        windows; never TGN's memory). Gradients flow to ``weights`` even under an outer
        ``torch.no_grad``; none reach the model's parameters.

        Args:
            weights: A weight in ``[0, 1]`` per event of ``R``, ``float [m]``.

        Returns:
            The logit, a 0-dim ``float32`` tensor.

        Raises:
            ValueError: If ``weights`` does not have one entry per event of ``R``.
        """
        if weights.shape != (len(self.removable),):
            raise ValueError(f"soft_logit needs {len(self.removable)} weights (one per "
                             f"removable event), got shape {tuple(weights.shape)}")
        with self._at_event(grad=True) as model:
            # index inside: a view taken under an outer no_grad would drop the graph
            return model.predict_soft(*self._query(), torch.from_numpy(self.removable),
                                      weights)[0]

    def node_embeddings(self, nodes: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The model's embeddings of ``nodes`` at the explained event's time with the full
        history before it (``embed``), ``float64 [B, d]`` (TemGX's similarity and temporal
        resistance distance)."""
        ids = np.asarray(nodes, dtype=np.int64).reshape(-1)
        with self._at_event(grad=False) as model:
            dev = model.device
            z = model.embed(torch.as_tensor(ids, dtype=torch.long, device=dev),
                            torch.full((len(ids),), self.t, dtype=torch.float64, device=dev))
        return z.detach().cpu().numpy().astype(np.float64)

    def features(self) -> Tensor:
        """A feature row per event ``e = (u_e, v_e, t_e)`` of ``R`` for a PGExplainer.

        ``[z(u_e), z(v_e), z(src_i), z(dst_i), edge_feat(e), time_enc(t_i − t_e)]``: the
        embeddings are the model's (``embed``) at the explained event's time ``t_i`` with
        the full history before it, the edge features are the stream's, and the time
        encoding is the model's attention time encoding. ``D = 4·d + F + T``.

        Returns:
            ``float32 [m, D]``, detached.
        """
        ev = self.removable
        with self._at_event(grad=False) as model:
            stream, dev = model.stream, model.device
            nodes = np.concatenate([stream.src[ev], stream.dst[ev], [self.src, self.dst]])
            z = model.embed(torch.as_tensor(nodes, dtype=torch.long, device=dev),
                            torch.full((len(nodes),), self.t, dtype=torch.float64,
                                       device=dev))  # [2m + 2, d]
            m = len(ev)
            pair = z[2 * m:].reshape(1, -1).expand(m, -1)  # [m, 2d]
            feat = torch.as_tensor(np.asarray(stream.edge_feat[ev], dtype=np.float32),
                                   device=dev)  # [m, F]
            dt = torch.as_tensor(self.t - np.asarray(stream.t[ev], dtype=np.float64),
                                 device=dev)
            out = torch.cat([z[:m], z[m:2 * m], pair, feat, model.encode_time(dt)], dim=1)
        return out.detach().float()


__all__ = ["ModelProbe"]
