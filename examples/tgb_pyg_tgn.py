"""Train PyG's TGN on a TGB dataset as TGB's own example does, score it with TGB's MRR, and
explain it (docs/own_model.md, "A TGN trained on TGB").

    python examples/tgb_pyg_tgn.py --data-dir /my/tgb --name tgbl-wiki --out outputs/tgb_pyg_tgn

``--data-dir`` is the folder of a TGB download (holding ``tgbl_wiki/`` with
``tgbl-wiki_edgelist_v2.csv`` and the ``*_ns_v2.pkl`` negatives), or
``$CFTGNN_TGB_DIR``, or py-tgb's package folder (``cftgnn.data.load_tgb``).

1. Load the stream with ``cftgnn.data.load_tgb``: TGB's node ids, timestamps, edge features
   and its split (``stream.meta["tgb"]``). The model is trained and explained on this stream.
2. Train as TGB's ``examples/linkproppred/tgbl-wiki/tgn.py`` does: ``TGNMemory`` with
   ``IdentityMessage`` and ``LastAggregator``, a ``LastNeighborLoader`` of 10 neighbours,
   ``GraphAttentionEmbedding`` (one ``TransformerConv``), ``LinkPredictor``; one random
   destination in ``[min dst, max dst]`` per training event; BCE; Adam; the weights of the
   best validation MRR kept.
3. Score each validation (then test) event as TGB's example does: the source against its
   true destination and its TGB negatives in one call of the modules, from the memory and
   loader of the batches before its own, ranked with TGB's rule
   (``cftgnn.training.metrics.tgb_ranks``). Unlike TGB's example, the evaluation replays
   the history in evaluation mode in the stream's own batches (``[kB, (k+1)B)``, from event
   0): the state cftgnn's replay rebuilds, so that the explained prediction is the one
   scored (TGB's example carries the training pass's memory into validation and starts its
   batches at the split point).
4. Save it with ``cftgnn.training.checkpoint.save_pyg_tgn`` (the MRRs on its card).
5. Explain test events with ``scripts/explain.py model=pyg_tgn dataset=tgb
   history=batch_start``: the prediction of that evaluation loop.

``tests/runs/test_tgb_pyg_tgn_example.py`` runs it on a tiny TGB-layout stream and
checks its MRRs against ``scripts/train.py``'s ranking of the saved checkpoint.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
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
SIZE = 10  # the neighbour loader's size (TGB's NUM_NEIGHBORS)


class GraphAttentionEmbedding(nn.Module):
    """TGB's (and PyG's) embedding: one ``TransformerConv`` over the last neighbours."""

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
    """TGB's (and PyG's) link predictor."""

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.lin_src = nn.Linear(in_channels, in_channels)
        self.lin_dst = nn.Linear(in_channels, in_channels)
        self.lin_final = nn.Linear(in_channels, 1)

    def forward(self, z_src: Tensor, z_dst: Tensor) -> Tensor:
        h = self.lin_src(z_src) + self.lin_dst(z_dst)
        out: Tensor = self.lin_final(h.relu())
        return out


class Events:
    """The stream's events as tensors (TGB's ``TemporalData``: src, dst, t, msg)."""

    def __init__(self, stream: Any) -> None:
        self.src = torch.from_numpy(stream.src.astype(np.int64))
        self.dst = torch.from_numpy(stream.dst.astype(np.int64))
        self.t = torch.from_numpy(stream.t.astype(np.int64))
        feat = stream.edge_feat if stream.feat_dim else np.zeros((stream.num_events, 1))
        self.msg = torch.from_numpy(np.array(feat, dtype=np.float32))  # a writable copy
        self.num_nodes = stream.num_nodes


def modules(num_nodes: int, msg_dim: int, dim: int) -> dict[str, nn.Module]:
    """Memory, embedding and predictor as TGB's example builds them."""
    memory = TGNMemory(num_nodes, msg_dim, dim, dim,
                       message_module=IdentityMessage(msg_dim, dim, dim),
                       aggregator_module=LastAggregator())
    gnn = GraphAttentionEmbedding(dim, dim, msg_dim, memory.time_enc)
    return {"memory": memory, "gnn": gnn, "link_pred": LinkPredictor(dim)}


def train_epoch(model: dict[str, Any], ev: Events, end: int, batch: int,
                optimizer: torch.optim.Optimizer) -> float:
    """TGB's ``train()``: the events ``[0, end)`` in batches, fresh memory and loader."""
    memory, gnn, link_pred = model["memory"], model["gnn"], model["link_pred"]
    memory.train(), gnn.train(), link_pred.train()
    memory.reset_state()
    loader = LastNeighborLoader(ev.num_nodes, size=SIZE)
    assoc = torch.empty(ev.num_nodes, dtype=torch.long)
    lo_dst, hi_dst = int(ev.dst.min()), int(ev.dst.max())
    criterion = nn.BCEWithLogitsLoss()
    total = 0.0
    for lo in range(0, end, batch):
        hi = min(lo + batch, end)
        src, dst, t, msg = ev.src[lo:hi], ev.dst[lo:hi], ev.t[lo:hi], ev.msg[lo:hi]
        optimizer.zero_grad()
        neg = torch.randint(lo_dst, hi_dst + 1, (hi - lo,), dtype=torch.long)
        n_id, edge_index, e_id = loader(torch.cat([src, dst, neg]).unique())
        assoc[n_id] = torch.arange(n_id.size(0))
        z, last_update = memory(n_id)
        z = gnn(z, last_update, edge_index, ev.t[e_id], ev.msg[e_id])
        pos_out = link_pred(z[assoc[src]], z[assoc[dst]])
        neg_out = link_pred(z[assoc[src]], z[assoc[neg]])
        loss = criterion(pos_out, torch.ones_like(pos_out))
        loss = loss + criterion(neg_out, torch.zeros_like(neg_out))
        memory.update_state(src, dst, t, msg)
        loader.insert(src, dst)
        loss.backward()
        optimizer.step()
        memory.detach()
        total += float(loss.detach()) * (hi - lo)
    return total / max(end, 1)


@torch.no_grad()
def tgb_mrr(model: dict[str, Any], ev: Events, negatives: Any, batch: int,
            k: int = 10) -> dict[str, float]:
    """TGB's ``test()``: each event with negatives scored against them from the state of the
    batches before its own, then its batch fed to memory and loader; MRR and hits@k.

    The history is replayed in evaluation mode from event 0 in the stream's batches.
    """
    from cftgnn.training.metrics import hits_at, mrr, tgb_ranks

    memory, gnn, link_pred = model["memory"], model["gnn"], model["link_pred"]
    memory.eval(), gnn.eval(), link_pred.eval()
    memory.reset_state()
    loader = LastNeighborLoader(ev.num_nodes, size=SIZE)
    assoc = torch.empty(ev.num_nodes, dtype=torch.long)
    events = negatives.event_ids
    ranks = []
    for lo in range(0, int(events[-1]) + 1, batch):
        hi = min(lo + batch, len(ev.src))
        for e in events[(events >= lo) & (events < hi)]:
            dst = torch.cat([ev.dst[e:e + 1], torch.from_numpy(negatives.of(int(e)).copy())])
            src = ev.src[e].repeat(len(dst))
            n_id, edge_index, e_id = loader(torch.cat([src, dst]).unique())
            assoc[n_id] = torch.arange(n_id.size(0))
            z, last_update = memory(n_id)
            z = gnn(z, last_update, edge_index, ev.t[e_id], ev.msg[e_id])
            y = link_pred(z[assoc[src]], z[assoc[dst]]).reshape(-1).numpy()
            ranks.append(tgb_ranks(y[:1], y[None, 1:])[0])
        memory.update_state(ev.src[lo:hi], ev.dst[lo:hi], ev.t[lo:hi], ev.msg[lo:hi])
        loader.insert(ev.src[lo:hi], ev.dst[lo:hi])
    return {"mrr": mrr(ranks), f"hits@{k}": hits_at(ranks, k), "n": len(ranks)}


def explain_command(name: str, data_dir: Path | None, checkpoint: Path, out: Path,
                    events: list[int]) -> list[str]:
    """The ``scripts/explain.py`` command line that explains ``events`` of the model."""
    where = [] if data_dir is None else [f"dataset.data_dir={data_dir}"]
    return [sys.executable, str(ROOT / "scripts" / "explain.py"), "dataset=tgb",
            f"dataset.name={name}", *where, "model=pyg_tgn", f"checkpoint={checkpoint}",
            "history=batch_start", f"events=[{','.join(map(str, events))}]", "m_max=16",
            "progress=false", f"paths.cache_dir={out / 'cache'}", f"out_dir={out / 'run'}"]


def main(argv: list[str] | None = None) -> int:
    from cftgnn.cli import ArgumentParser, friendly_errors

    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="tgbl-wiki")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "tgb_pyg_tgn")
    parser.add_argument("--epochs", type=_positive, default=3)
    parser.add_argument("--batch", type=_positive, default=200)  # TGB's --bs
    parser.add_argument("--dim", type=_positive, default=100)  # TGB's mem, time, emb dims
    parser.add_argument("--lr", type=float, default=1e-4)  # TGB's --lr
    parser.add_argument("--n-events", type=_positive, default=4)
    args = parser.parse_args(argv)
    with friendly_errors():
        return _run(args)


def _positive(text: str) -> int:
    """An integer >= 1 (argparse type: a bad one is an ``error:`` line, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def _run(args: argparse.Namespace) -> int:
    """Load, train, score, save, then explain ``--n-events`` test events."""
    from cftgnn.data import load_tgb, load_tgb_negatives
    from cftgnn.files import check_writable_dir
    from cftgnn.training.checkpoint import save_pyg_tgn

    check_writable_dir(args.out, "--out")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    stream = load_tgb(args.name, args.data_dir, cache_dir=args.out / "cache")
    info = stream.meta["tgb"]
    val, test = (load_tgb_negatives(stream, s) for s in ("val", "test"))  # before training
    ev = Events(stream)
    model = modules(stream.num_nodes, ev.msg.size(-1), args.dim)
    params = set().union(*(m.parameters() for m in model.values()))
    optimizer = torch.optim.Adam(params, lr=args.lr)
    best, best_state = -1.0, None
    for epoch in range(1, args.epochs + 1):
        loss = train_epoch(model, ev, int(info["val_start"]), args.batch, optimizer)
        score = tgb_mrr(model, ev, val, args.batch)
        print(f"epoch {epoch}: loss {loss:.4f}, validation MRR {score['mrr']:.4f}")
        if score["mrr"] > best:
            best, best_state = score["mrr"], copy.deepcopy({k: m.state_dict()
                                                           for k, m in model.items()})
    assert best_state is not None
    for key, module in model.items():
        module.load_state_dict(best_state[key])
    scores = {"val": tgb_mrr(model, ev, val, args.batch),
              "test": tgb_mrr(model, ev, test, args.batch)}
    print("TGB:", json.dumps(scores))
    checkpoint = args.out / f"pyg_tgn_{stream.name}.pt"
    save_pyg_tgn(checkpoint, model["memory"], model["gnn"], model["link_pred"], stream,
                 num_neighbors=SIZE, batch_size=args.batch,
                 card={"tgb": scores, "trained_as": "TGB's examples/linkproppred tgn.py"})
    print(f"saved {checkpoint}")
    events = np.linspace(int(info["test_start"]), stream.num_events - 1, args.n_events)
    cmd = explain_command(args.name, args.data_dir, checkpoint, args.out,
                          sorted({int(e) for e in events}))
    print("explaining:", " ".join(cmd[1:]))
    return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
