"""Where do a model's CUDA logits part from the CPU's? (DyGFormer's by 1.9e-5 on an H100.)

Runs the `gpu` test's sets (tests/oracle/test_devices.py: a 480-event synthetic stream, three
events, 17 removal sets each) through the exact oracle of each test model on the CPU and on CUDA,
under variants of the CUDA numerics, and prints the largest absolute logit difference of each:
``default``; ``no-fastpath`` (``torch.backends.mha.set_fastpath_enabled(False)``, the
transformer layers' fused inference path off); ``math-sdpa`` (scaled-dot-product attention
forced to the plain math kernel); ``both``. Usage (on the GPU machine, from the repository root):
``python scripts/gpu/diagnose_precision.py``.
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

from testsupport.models import dygformer, graphmixer, tgat, tgn1  # noqa: E402

from cftgnn.data import make_synthetic_stream  # noqa: E402
from cftgnn.oracle.engine import EventReplay, ReplayEngine  # noqa: E402

EVENTS = (180, 333, 479)


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """The CUDA numerics of one variant, restored afterwards."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(name not in ("no-fastpath", "both"))
    try:
        if name in ("math-sdpa", "both"):
            with sdpa_kernel(SDPBackend.MATH):
                yield
        else:
            yield
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)


def sets_of(cand: np.ndarray, seed: int) -> list[frozenset[int]]:
    """The test's removal sets of one event."""
    rng = np.random.default_rng(seed)
    sets = [frozenset(), frozenset(cand.tolist())]
    sets += [frozenset(cand[rng.random(len(cand)) < q].tolist())
             for q in (0.05, 0.1, 0.3, 0.5, 0.8) for _ in range(3)]
    return sets


def main() -> None:
    """Print one line per model and variant."""
    stream = make_synthetic_stream(30, 480, seed=3, feat_dim=2, p_tie=0.2)
    factories = {"tgn1": tgn1, "tgat": tgat, "graphmixer": graphmixer, "dygformer": dygformer}
    print("torch", torch.__version__, "cuda", torch.version.cuda,
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA")
    print("matmul fp32 precision", torch.backends.cuda.matmul.allow_tf32,
          "cudnn tf32", torch.backends.cudnn.allow_tf32)
    for name, factory in factories.items():
        torch.manual_seed(0)
        model = factory(stream).eval()
        cpu = ReplayEngine(model, stream)
        want = {}
        for i in EVENTS:
            rep = EventReplay(cpu, i, m_max=16)
            sets = sets_of(rep.candidates.ids, i)
            want[i] = (sets, np.asarray(rep.exact(sets), dtype=np.float64))
        for v in ("default", "no-fastpath", "math-sdpa", "both"):
            with variant(v):
                other = ReplayEngine(copy.deepcopy(model).to("cuda"), stream)
                worst, scale = 0.0, 0.0
                for i in EVENTS:
                    sets, ref = want[i]
                    got = np.asarray(EventReplay(other, i, m_max=16).exact(sets), np.float64)
                    worst = max(worst, float(np.max(np.abs(got - ref))))
                    scale = max(scale, float(np.max(np.abs(ref))))
            print(f"{name:10s} {v:12s} max |cuda - cpu| {worst:.3g}  (max |logit| {scale:.3g})",
                  flush=True)


if __name__ == "__main__":
    main()
