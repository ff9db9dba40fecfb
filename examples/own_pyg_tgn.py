"""Explain your own TGN, trained with PyG's modules, end to end (docs/own_model.md).

    python examples/own_pyg_tgn.py --out outputs/own_pyg_tgn

1. Write an event stream as a CSV (a small synthetic one here; use your own file).
2. Load it with ``cftgnn.data.load_csv``: the stream the model is trained on and explained on
   (its checksum goes into the checkpoint).
3. Train PyG's TGN the way PyG's ``examples/tgn.py`` does: ``TGNMemory`` with
   ``IdentityMessage`` and ``LastAggregator``, a ``LastNeighborLoader``, one
   ``TransformerConv`` layer and a link predictor, batches of ``BATCH`` events.
4. Save it with ``cftgnn.training.checkpoint.save_pyg_tgn``.
5. Explain it with ``scripts/explain.py history=batch_start``: the prediction PyG's
   evaluation loop makes (a batch's events reach memory and loader after the batch).

It runs in a few seconds on a CPU; ``tests/runs/test_own_pyg_tgn_example.py`` runs it
and checks the records against PyG's evaluation loop written without cftgnn.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from torch_geometric.nn import TGNMemory, TransformerConv
from torch_geometric.nn.models.tgn import (
    IdentityMessage,
    LastAggregator,
    LastNeighborLoader,
    TimeEncoder,
)

ROOT = Path(__file__).resolve().parents[1]
BATCH = 50  # events per batch, in training and in the evaluation loop alike
SIZE = 10  # the neighbour loader's size
DIM = 32  # memory, time encoding and embedding size


class GraphAttentionEmbedding(nn.Module):
    """PyG's ``examples/tgn.py`` embedding: one ``TransformerConv`` over the last neighbours."""

    def __init__(self, in_channels: int, out_channels: int, msg_dim: int,
                 time_enc: TimeEncoder) -> None:
        super().__init__()
        self.time_enc = time_enc
        edge_dim = msg_dim + time_enc.out_channels
        self.conv = TransformerConv(in_channels, out_channels // 2, heads=2, dropout=0.1,
                                    edge_dim=edge_dim)

    def forward(self, x: Tensor, last_update: Tensor, edge_index: Tensor, t: Tensor,
                msg: Tensor) -> Tensor:
        rel_t = last_update[edge_index[0]] - t
        rel_t_enc = self.time_enc(rel_t.to(x.dtype))
        edge_attr = torch.cat([rel_t_enc, msg], dim=-1)
        out: Tensor = self.conv(x, edge_index, edge_attr)
        return out


class LinkPredictor(nn.Module):
    """PyG's ``examples/tgn.py`` link predictor."""

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.lin_src = nn.Linear(in_channels, in_channels)
        self.lin_dst = nn.Linear(in_channels, in_channels)
        self.lin_final = nn.Linear(in_channels, 1)

    def forward(self, z_src: Tensor, z_dst: Tensor) -> Tensor:
        h = self.lin_src(z_src) + self.lin_dst(z_dst)
        out: Tensor = self.lin_final(h.relu())
        return out


def write_events(path: Path, num_nodes: int = 40, num_events: int = 800) -> None:
    """A CSV of events (``src,dst,t,f0,f1``; integer times, as PyG's memory keeps them)."""
    from cftgnn.data.synthetic import make_synthetic_stream

    s = make_synthetic_stream(num_nodes=num_nodes, num_events=num_events, feat_dim=2, seed=0)
    pd.DataFrame({"src": s.src, "dst": s.dst, "t": s.t.astype(np.int64),
                  "f0": s.edge_feat[:, 0], "f1": s.edge_feat[:, 1]}).to_csv(path, index=False)


def modules(num_nodes: int, msg_dim: int) -> tuple[TGNMemory, GraphAttentionEmbedding,
                                                   LinkPredictor]:
    """Memory, embedding and predictor as PyG's example builds them."""
    memory = TGNMemory(num_nodes, msg_dim, DIM, DIM,
                       message_module=IdentityMessage(msg_dim, DIM, DIM),
                       aggregator_module=LastAggregator())
    gnn = GraphAttentionEmbedding(DIM, DIM, msg_dim, memory.time_enc)
    return memory, gnn, LinkPredictor(DIM)


def train(src: Tensor, dst: Tensor, t: Tensor, msg: Tensor, num_nodes: int, train_end: int,
          epochs: int) -> tuple[TGNMemory, GraphAttentionEmbedding, LinkPredictor]:
    """PyG's example training loop over the first ``train_end`` events."""
    torch.manual_seed(0)
    memory, gnn, link_pred = modules(num_nodes, msg.size(-1))
    loader = LastNeighborLoader(num_nodes, size=SIZE)
    params = set(memory.parameters()) | set(gnn.parameters()) | set(link_pred.parameters())
    optimizer = torch.optim.Adam(params, lr=1e-3)
    criterion = nn.BCEWithLogitsLoss()
    assoc = torch.empty(num_nodes, dtype=torch.long)
    for _ in range(epochs):
        memory.train(), gnn.train(), link_pred.train()
        memory.reset_state()
        loader.reset_state()
        for lo in range(0, train_end, BATCH):
            hi = min(lo + BATCH, train_end)
            optimizer.zero_grad()
            b_src, b_dst, b_t, b_msg = src[lo:hi], dst[lo:hi], t[lo:hi], msg[lo:hi]
            neg = torch.randint(0, num_nodes, (hi - lo,), dtype=torch.long)
            n_id, edge_index, e_id = loader(torch.cat([b_src, b_dst, neg]).unique())
            assoc[n_id] = torch.arange(n_id.size(0))
            z, last_update = memory(n_id)
            z = gnn(z, last_update, edge_index, t[e_id], msg[e_id])
            pos_out = link_pred(z[assoc[b_src]], z[assoc[b_dst]])
            neg_out = link_pred(z[assoc[b_src]], z[assoc[neg]])
            loss = criterion(pos_out, torch.ones_like(pos_out))
            loss = loss + criterion(neg_out, torch.zeros_like(neg_out))
            memory.update_state(b_src, b_dst, b_t, b_msg)
            loader.insert(b_src, b_dst)
            loss.backward()
            optimizer.step()
            memory.detach()
    return memory, gnn, link_pred


def explain_command(csv: Path, checkpoint: Path, out: Path, n_events: int) -> list[str]:
    """The ``scripts/explain.py`` command line that explains the saved model."""
    return [sys.executable, str(ROOT / "scripts" / "explain.py"), "dataset=csv",
            f"dataset.path={csv}", "dataset.feature_cols=rest", "model=pyg_tgn",
            f"checkpoint={checkpoint}", "history=batch_start", f"n_events={n_events}",
            "m_max=16", "progress=false", f"paths.cache_dir={out / 'cache'}",
            f"out_dir={out / 'run'}"]


def main(argv: list[str] | None = None) -> int:
    from cftgnn.cli import ArgumentParser, friendly_errors

    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "own_pyg_tgn")
    parser.add_argument("--epochs", type=_positive, default=3)
    parser.add_argument("--n-events", type=_positive, default=8)
    args = parser.parse_args(argv)
    with friendly_errors():
        return _run(args.out, args.epochs, args.n_events)


def _positive(text: str) -> int:
    """An integer >= 1 (argparse type: a bad one is an ``error:`` line, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def _run(out: Path, epochs: int, n_events: int) -> int:
    """Train, save, then explain ``n_events`` events with ``explain.py``."""
    from cftgnn.files import check_writable_dir

    check_writable_dir(out, "--out")
    torch.set_num_threads(1)

    from cftgnn.data import load_csv
    from cftgnn.training.checkpoint import save_pyg_tgn

    csv = out / "events.csv"
    write_events(csv)
    # the stream save_pyg_tgn needs: the CSV loaded as explain.py's dataset=csv loads it
    stream = load_csv(csv, feature_cols="rest", cache_dir=out / "cache")
    src, dst = torch.from_numpy(stream.src.copy()), torch.from_numpy(stream.dst.copy())
    t = torch.from_numpy(stream.t.astype(np.int64))
    msg = torch.from_numpy(stream.edge_feat.astype(np.float32))
    train_end = int(0.7 * stream.num_events)
    memory, gnn, link_pred = train(src, dst, t, msg, stream.num_nodes, train_end, epochs)
    checkpoint = out / f"pyg_tgn_{stream.name}.pt"
    save_pyg_tgn(checkpoint, memory, gnn, link_pred, stream, num_neighbors=SIZE,
                 batch_size=BATCH)
    print(f"saved {checkpoint}")
    cmd = explain_command(csv, checkpoint, out, n_events)
    print("explaining:", " ".join(cmd[1:]))
    return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
