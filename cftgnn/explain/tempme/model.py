"""TempME's motif encoder, its event importances and its information-bottleneck loss.

**Encoder** (``MotifEncoder``; the reference's ``TempME`` class for TGN and GraphMixer, our own
code). Each walk event ``e = (a, b)`` at step ``j`` gets an event feature ``x_e = [edge
features of e, position counts of e (``position_counts``), time encoding of t_i − t_e]`` and
its endpoints node features: the one-hot of their anonymous ids (the reference reads the
datasets' raw node features; the streams here have none, and the anonymous ids carry the
walk's structure). A GINE-style layer gives ``h(a→b) = MLP(n_a + ReLU(n_b + W x_e))`` and
``h(b→a)``, concatenated; an attention pooling with the first step (the event next to the
root) as the query sums the steps into a walk embedding; the one-hot of the walk's motif class
is appended and an MLP with dropout gives the walk's importance ``p ∈ (0, 1)``.

**Event importance**: the largest importance of the walks that contain the event (the
reference's ``scatter(..., reduce="max")``), 0 for an event on no walk. In training the
importances pass through the concrete (relaxed Bernoulli) distribution with temperature
``temp`` (``concrete``), as in the reference.

**Loss** (``tempme_loss``): ``BCE(soft logit, original label) + beta · Σ_roots KL``, with the
prior term of the reference's ``kl_loss`` (``prior="empirical"``): for one root's ``W`` walks
with importances ``p_j`` and classes ``c_j``, ``s = mean p``, ``q_c = (1/W) Σ_{c_j = c} p_j``
and ``KL = (1 − s) log((1 − s)/(1 − ρ)) + Σ_c q_c log(q_c / (ρ π_c))`` over the classes
present, with ``ρ`` the prior share of motifs kept (``prior_p``) and ``π`` the null-model prior
(``cftgnn.explain.tempme.walks.null_prior``): the KL divergence between two distributions over
"dropped" and the motif classes (``Σ_c q_c = s``), smallest when ``s = ρ`` and the kept
motifs' classes follow ``π``. The reference takes ``q_c = s · mean_{c_j = c} p_j``, which does
not sum to ``s``, and averages the terms over its 12 classes; with the sum of its
unnormalised terms every importance collapses to 0 (tried on the planted stream).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor, nn

from cftgnn.explain.tempme.walks import Walks, motif_classes, position_counts

#: Keeps logarithms finite (the reference's 1e-6).
EPS = 1e-6


@dataclass(frozen=True)
class EncoderShape:
    """What fixes a ``MotifEncoder``'s parameters (stored with its weights)."""

    edge_dim: int
    length: int = 3
    hidden: int = 64
    time_dim: int = 16
    dropout: float = 0.1


class TimeEncoder(nn.Module):
    """``cos(Δt · ω + φ)`` with ``ω = 10^{-linspace(0, 9, T)}`` at start (learnable, TGAT's)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.freq = nn.Parameter(torch.from_numpy(1 / 10 ** np.linspace(0, 9, dim)).float())
        self.phase = nn.Parameter(torch.zeros(dim))

    def forward(self, dt: Tensor) -> Tensor:
        """``float [..., T]`` of ``float [...]``."""
        out: Tensor = torch.cos(dt.unsqueeze(-1) * self.freq + self.phase)
        return out


class MotifEncoder(nn.Module):
    """Scores temporal walks (see the module docstring).

    Args:
        shape: Widths and walk length.
    """

    def __init__(self, shape: EncoderShape) -> None:
        super().__init__()
        self.shape = shape
        length, hid = int(shape.length), int(shape.hidden)
        self.node_dim = length + 1  # anonymous ids 0..L
        self.n_classes = len(motif_classes(length))
        event_dim = int(shape.edge_dim) + length + int(shape.time_dim)
        self.time = TimeEncoder(int(shape.time_dim))
        self.lin_event = nn.Linear(event_dim, self.node_dim)
        self.conv = nn.Sequential(nn.Linear(self.node_dim, hid), nn.ReLU(), nn.Linear(hid, hid))
        self.w_query = nn.Linear(2 * hid, 2 * hid)
        self.w_key = nn.Linear(2 * hid, 2 * hid)
        self.pool = nn.Sequential(nn.Linear(2 * hid, hid), nn.ReLU(), nn.Linear(hid, hid))
        mlp = hid + self.n_classes
        self.head = nn.Sequential(nn.Linear(mlp, mlp), nn.ReLU(), nn.Dropout(shape.dropout),
                                  nn.Linear(mlp, hid), nn.ReLU(), nn.Linear(hid, 1))

    def inputs(self, walks: Walks, edge_feat: np.ndarray, t: np.ndarray, t_now: float
               ) -> dict[str, Tensor]:
        """The tensors ``forward`` reads of one root's walks.

        Args:
            walks: The walks.
            edge_feat: The stream's edge features, ``float [E, F]``.
            t: The stream's timestamps, ``float [E]``.
            t_now: The explained event's time.
        """
        ev = walks.events
        valid = ev >= 0
        safe = np.where(valid, ev, 0)
        feat = np.asarray(edge_feat[safe.reshape(-1)], dtype=np.float32).reshape(
            *ev.shape, -1) * valid[..., None]
        dt = np.where(valid, float(t_now) - np.asarray(t, dtype=np.float64)[safe], 0.0)
        return {"feat": torch.from_numpy(np.ascontiguousarray(feat, dtype=np.float32)),
                "counts": torch.from_numpy(position_counts(walks).astype(np.float32)),
                "dt": torch.from_numpy(dt.astype(np.float32)),
                "anon": torch.from_numpy(walks.anon),
                "valid": torch.from_numpy(valid),
                "classes": torch.from_numpy(walks.classes)}

    def forward(self, x: dict[str, Tensor]) -> Tensor:
        """Walk importances ``float [W]`` in ``(0, 1)`` of ``inputs``' tensors."""
        valid = x["valid"]
        mask = valid.unsqueeze(-1).float()
        event = torch.cat([x["feat"], x["counts"], self.time(x["dt"]) * mask], dim=-1)
        onehot = nn.functional.one_hot(x["anon"].clamp(min=0), self.node_dim).float()
        onehot = onehot * mask.unsqueeze(-1)  # [W, L, 2, node_dim]
        n_a, n_b = onehot[:, :, 0], onehot[:, :, 1]
        msg = self.lin_event(event)
        h_ab = self.conv(n_a + torch.relu(n_b + msg))
        h_ba = self.conv(n_b + torch.relu(n_a + msg))
        h = torch.cat([h_ab, h_ba], dim=-1) * mask  # [W, L, 2·hid]
        query = self.w_query(h[:, :1])  # the step next to the root
        keys = self.w_key(h)
        score = (query * keys).sum(-1).masked_fill(~valid, -1e9)  # [W, L]
        alpha = torch.softmax(score, dim=-1) * valid.float()
        pooled = h[:, 0] + (alpha.unsqueeze(-1) * keys).sum(1)
        emb = self.pool(pooled)
        cls = nn.functional.one_hot(x["classes"], self.n_classes).float()
        out: Tensor = torch.sigmoid(self.head(torch.cat([emb, cls], dim=-1)).squeeze(-1))
        return out


def event_importance(removable: np.ndarray, walk_sets: list[tuple[Walks, Tensor]]) -> Tensor:
    """Each removable event's importance: the largest importance of a walk that contains it,
    0 for an event on no walk, ``float [|R|]``.

    Args:
        removable: The removable events, ``int [m]``.
        walk_sets: ``(walks, importances [W])`` per root.
    """
    parts = []
    ids = np.asarray(removable, dtype=np.int64)
    for walks, p in walk_sets:
        hit = (walks.events[None, :, :] == ids[:, None, None]).any(axis=2)  # [m, W]
        parts.append(torch.from_numpy(hit).float() * p.unsqueeze(0))
    hits = torch.cat(parts, dim=1) if parts else torch.zeros(len(ids), 0)
    if hits.shape[1] == 0:
        return torch.zeros(len(ids))
    out: Tensor = hits.amax(dim=1)
    return out

def concrete(prob: Tensor, temp: float, generator: torch.Generator | None = None) -> Tensor:
    """A relaxed Bernoulli sample of ``prob`` at temperature ``temp`` (the reference's
    ``concrete_bern``): ``sigmoid((logit(prob) + logit(u)) / temp)``, ``u ~ U(0, 1)``."""
    u = torch.rand(prob.shape, generator=generator).clamp(1e-10, 1 - 1e-10)
    noise = torch.log(u) - torch.log(1 - u)
    logit = torch.log(prob + 1e-10) - torch.log(1 - prob + 1e-10)
    return torch.sigmoid((logit + noise) / temp)


def prior_kl(p: Tensor, classes: Tensor, prior: Tensor, prior_p: float) -> Tensor:
    """The prior term of one root's walks (module docstring).

    Args:
        p: Walk importances, ``float [W]``.
        classes: Their motif classes, ``int [W]``.
        prior: The null-model prior ``π``, ``float [C]``.
        prior_p: ``ρ``, the prior share of walks kept.

    Returns:
        ``[]``.
    """
    if p.numel() == 0:
        return p.sum()
    s = p.mean()
    n = len(prior)
    total = torch.zeros(n, dtype=p.dtype).index_add(0, classes, p)
    present = torch.bincount(classes, minlength=n) > 0
    q = total[present] / len(p)  # Σ q = s
    drop = (1 - s) * torch.log((1 - s) / (1 - prior_p + EPS) + EPS)
    keep = (q * torch.log(q / (prior_p * prior[present] + EPS) + EPS)).sum()
    return drop + keep


def tempme_loss(logit: Tensor, label: float, roots: list[tuple[Tensor, Tensor]], prior: Tensor,
                prior_p: float, beta: float) -> Tensor:
    """TempME's loss of one explained event: ``BCE(logit, label) + beta · Σ prior_kl``.

    Args:
        logit: The soft-removal logit with the event importances as weights, ``[]``.
        label: The original prediction, 1.0 (positive logit) or 0.0.
        roots: ``(importances [W], classes [W])`` of each root's walks (source,
            destination, negative destination).
        prior: The null-model prior, ``float [C]``.
        prior_p: ``ρ``.
        beta: Weight of the prior term.
    """
    fit = nn.functional.binary_cross_entropy_with_logits(logit, torch.full_like(logit, label))
    kl = sum((prior_kl(p, c, prior, prior_p) for p, c in roots), torch.zeros(()))
    return fit + beta * kl


def shape_dict(shape: EncoderShape) -> dict[str, float | int]:
    """``shape`` as a plain dict (stored in checkpoints)."""
    return asdict(shape)


__all__ = ["EncoderShape", "MotifEncoder", "concrete", "event_importance", "prior_kl",
           "shape_dict", "tempme_loss"]
