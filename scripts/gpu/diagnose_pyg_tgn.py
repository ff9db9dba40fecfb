"""Why do PyG's TGN (``model=pyg_tgn``) CUDA logits part from the CPU's? (2026-11-27: the
fake-device suite's ``cuda`` run found up to 7.6e-3, the unperturbed logit included.)

Runs the suite's oracle check (tests/oracle/test_fake_device.py: a 480-event synthetic stream,
event 333, four removal sets) for PyG's TGN on the CPU and on CUDA, on that stream (``p_tie``
0.2: a fifth of the events repeat the previous timestamp) and on one without equal timestamps
(``p_tie`` 0), under variants of PyG's and torch's ordering, the wrapper's own
(``cftgnn.models.pyg_tgn._as_on_the_cpu``) switched off in all but the last: ``default``
(PyG as it is); ``stable-sort`` (``Tensor.sort`` made stable: ``LastNeighborLoader.insert``
sorts a batch's events by node); ``deterministic`` (``torch.use_deterministic_algorithms``,
warnings only); ``both``; ``wrapper`` (the wrapper as it is: both, in PyG's calls). It prints
the largest absolute logit difference of each, and that of two CUDA runs of the same variant
(run to run). Usage (on the GPU machine, from the repository root):
``python scripts/gpu/diagnose_pyg_tgn.py``. Outputs: docs/results/gpu/diagnose_pyg_tgn_*.txt.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from cftgnn.data import make_synthetic_stream  # noqa: E402
from cftgnn.models import pyg_tgn  # noqa: E402
from cftgnn.models.pyg_tgn import PyGTGN  # noqa: E402
from cftgnn.oracle.engine import EventReplay, ReplayEngine  # noqa: E402

EVENT = 333


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """torch's ordering of one variant, restored afterwards."""
    sort, own = torch.Tensor.sort, pyg_tgn._as_on_the_cpu
    if name != "wrapper":
        pyg_tgn._as_on_the_cpu = lambda device: contextlib.nullcontext()  # type: ignore
    if name in ("stable-sort", "both"):
        torch.Tensor.sort = pyg_tgn._stable_sort  # type: ignore[method-assign,assignment]
    torch.use_deterministic_algorithms(name in ("deterministic", "both"), warn_only=True)
    try:
        yield
    finally:
        torch.Tensor.sort = sort  # type: ignore[method-assign]
        torch.use_deterministic_algorithms(False)
        pyg_tgn._as_on_the_cpu = own


def logits(p_tie: float, device: torch.device) -> np.ndarray:
    stream = make_synthetic_stream(30, 480, seed=3, feat_dim=2, p_tie=p_tie)
    torch.manual_seed(0)
    model = PyGTGN(stream.num_nodes, stream.feat_dim, memory_dim=12, time_dim=8,
                   embedding_dim=12, num_neighbors=4, batch_size=16).eval()
    model = copy.deepcopy(model).to(device)
    replay = EventReplay(ReplayEngine(model, stream), EVENT, m_max=10)
    cand = replay.candidates.ids
    rng = np.random.default_rng(0)
    sets = [frozenset(), frozenset([int(cand[0])]), frozenset(cand.tolist()),
            frozenset(cand[rng.random(len(cand)) < 0.4].tolist())]
    return np.asarray(replay.exact(sets), dtype=np.float64)


def main() -> None:
    cuda = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(cuda)}")
    for p_tie in (0.2, 0.0):
        for name in ("default", "stable-sort", "deterministic", "both", "wrapper"):
            with variant(name):
                cpu, one, two = logits(p_tie, torch.device("cpu")), logits(p_tie, cuda), \
                    logits(p_tie, cuda)
            print(f"p_tie {p_tie}  {name:14s} CPU vs CUDA {np.abs(cpu - one).max():.1e}"
                  f"  CUDA run to run {np.abs(one - two).max():.1e}")


if __name__ == "__main__":
    main()
