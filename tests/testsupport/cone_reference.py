"""Reference logits of TGN's exact causal-cone replay, to hold refactorings to bitwise equality.

``cases()`` computes, on the small streams and models the cone tests use (and random dense
streams with random batches of removal sets, the ones that exercise the split of mixed rows),
the logits of the exact and approximate batched calls (``EventReplay.exact`` and
``.approximate`` through ``cftgnn.replay.tgn``'s cone replay, with pruning, without it, with
the opt-in tolerance, and as single calls), each as the array the call returns.
``tests/replay/data/cone_reference.npz`` holds them as computed by the code of commit
``4d53c0c`` (before the cone replay became the ``cftgnn.replay.tgn`` package, 2026-11-26);
``tests/replay/test_cone_reference.py`` computes them again and compares bit for bit (the
three files were written by that commit's code running this module).
``uci_cases`` and ``wikipedia_case`` do the same for UCI · TGN and Wikipedia · TGN tail
events (dataset tests).

Bits depend on how torch sums, on **one torch thread** (``one_thread`` pins the count while
they are computed again) and on the CPU's kernels. torch's capability name does not identify
those: two AVX512 CPUs, one with AMX, differ in the last bit of every case (1.2e-7 at most,
measured 2026-12-02). So each set of references is kept with the CPU it was computed on,
named by ``kernel_probe`` (the bits of a fixed GRU, linear and attention computation):
``references_for`` picks the folder ``data/<probe>/`` when this CPU's probe has one, else the
first references (``data/*.npz``, computed on an AVX512 CPU without AMX, ``REFERENCE_CPU``,
before the probe existed), else none and the test skips, saying why.

``data/d8030c068289/`` was computed on 2026-12-02 on an AVX512 CPU with AMX by the code of
commit ``62c1067`` (the first that held the references, bitwise, on their CPU) running that
commit's copy of this module; the code of main then reproduced them bit for bit.

Add a CPU's references (only on purpose, and from the code of a commit that held them: a
change of the references is a change of behaviour)::

    PYTHONPATH=.:tests python tests/testsupport/cone_reference.py \\
        [--uci DATA_DIR] [--wikipedia DATA_DIR]
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.models import TGN
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.replay.tgn import TGNReplay, TGNReplayOptions
from testsupport.streams import dense_stream

DATA = Path(__file__).resolve().parents[1] / "replay" / "data"
#: The CPU capability (torch's kernel choice) the first references (``DATA/*.npz``) were
#: computed with, on a CPU without AMX.
REFERENCE_CPU = "AVX512"


def kernel_probe() -> str:
    """12 hex digits naming this CPU's float32 kernels on one thread: a hash of the bits of
    a seeded ``GRUCell(300, 100)``, ``Linear(200, 100)`` and two-head attention, the
    operations of TGN's memory, embedding and decoder. Two CPUs with one probe sum alike."""
    gen = torch.Generator().manual_seed(0)
    x, h = torch.randn(64, 300, generator=gen), torch.randn(64, 100, generator=gen)
    q, kv = torch.randn(64, 1, 100, generator=gen), torch.randn(64, 10, 100, generator=gen)
    torch.manual_seed(0)
    gru, lin = torch.nn.GRUCell(300, 100), torch.nn.Linear(200, 100)
    att = torch.nn.MultiheadAttention(100, 2, batch_first=True)
    with one_thread(), torch.no_grad():
        h2 = gru(x, h)
        out = [h2, lin(torch.cat([h2, h], dim=1)), att(q, kv, kv)[0]]
    digest = hashlib.sha256(b"".join(t.contiguous().numpy().tobytes() for t in out))
    return digest.hexdigest()[:12]


def has_amx() -> bool:
    """Whether the CPU has AMX tiles (``amx_tile`` in ``/proc/cpuinfo``; False elsewhere)."""
    try:
        return "amx_tile" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def references_for() -> Path | None:
    """The folder of this CPU's references (see the module docstring), or None."""
    probed = DATA / kernel_probe()
    if probed.is_dir():
        return probed
    if torch.backends.cpu.get_cpu_capability() == REFERENCE_CPU and not has_amx():
        return DATA
    return None


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Compute on one torch thread (the references' summation order), restoring the count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
REFERENCE = DATA / "cone_reference.npz"
UCI_REFERENCE = DATA / "cone_reference_uci.npz"
#: UCI · TGN tail events (54454: the one whose sets once shared a mixed row) and
#: the number of sets of at most two candidates compared on each.
UCI_EVENTS, UCI_SETS = (56484, 54454), 300
WIKIPEDIA_REFERENCE = DATA / "cone_reference_wikipedia.npz"
#: The Wikipedia · TGN tail event (its history 131,000 events back) and the
#: number of its sets of at most two candidates compared (about 35 s on a loaded machine).
WIKIPEDIA_EVENT, WIKIPEDIA_SETS = 141227, 200

Logits = npt.NDArray[np.float64]


def _tgn(stream: EventStream, num_layers: int, seed: int = 0, **kw: int) -> TGN:
    torch.manual_seed(seed)
    size = {"memory_dim": 16, "time_dim": 8, "embedding_dim": 16, "num_heads": 2,
            "num_neighbors": 5, "batch_size": 20} | kw
    return TGN(stream.num_nodes, stream.feat_dim, num_layers=num_layers, **size)


def _replay(model: TGN, stream: EventStream, event: int, m_max: int = 64,
            **options: object) -> EventReplay:
    engine = ReplayEngine(model, stream)
    assert isinstance(engine.replay, TGNReplay)
    engine.replay.options = TGNReplayOptions(local_max_events=0, **options)  # type: ignore[arg-type]
    return EventReplay(engine, event, m_max=m_max)


def _small_sets(cand: list[int], k: int) -> list[frozenset[int]]:
    return [frozenset(c) for s in range(1, k + 1) for c in itertools.combinations(cand, s)]


def _random_sets(rng: np.random.Generator, pool: npt.NDArray[np.int64], count: int,
                 largest: int) -> list[frozenset[int]]:
    return [frozenset(rng.choice(pool, size=int(rng.integers(1, min(largest, len(pool)) + 1)),
                                 replace=False).tolist()) for _ in range(count)]


def _mixed_row_stream() -> EventStream:
    """``tests/replay/test_cone_pruning.py``'s stream whose two sets share a mixed row."""
    src = np.array([9, 6, 2, 1, 1, 6, 0, 0, 6, 0, 6, 9])
    dst = np.array([0, 7, 5, 3, 4, 7, 1, 2, 7, 1, 7, 10])
    return EventStream(src, dst, np.arange(1.0, 13.0), np.zeros((12, 0), np.float32),
                       np.zeros(12, np.int64), 11, "mixed_row")


def cases() -> Iterator[tuple[str, Logits]]:
    """Every reference case: ``(name, logits as the call returns them)``."""
    stream = make_synthetic_stream(40, 900, seed=11, feat_dim=1, p_tie=0.2)
    for layers in (1, 2):  # tests/replay/test_cone.py: every set of up to two candidates
        replay = _replay(_tgn(stream, layers), stream, 899, m_max=16)
        sets = _small_sets(replay.candidates.ids.tolist(), 2)
        yield f"pairs_l{layers}_exact", replay.exact(sets)
        yield f"pairs_l{layers}_approximate", replay.approximate(sets)
    sparse = make_synthetic_stream(60, 2000, seed=3, feat_dim=1, p_tie=0.3)
    for layers in (1, 2):  # far-back removals whose effects pruning retires
        model = _tgn(sparse, layers)
        rng = np.random.default_rng(layers)
        for name, opts in (("pruned", {}), ("unpruned", {"prune_perturbations": False}),
                           ("tolerance", {"prune_tolerance": 1e-4})):
            replay = _replay(model, sparse, 1999, m_max=24, **opts)
            cand = replay.candidates.ids
            batch = _random_sets(np.random.default_rng(layers), cand, 64, 6)
            yield f"sparse_l{layers}_{name}", replay.exact(batch)
        singles = _random_sets(rng, cand, 12, 3)
        replay = _replay(model, sparse, 1999, m_max=24)
        yield f"sparse_l{layers}_single", np.concatenate([replay.exact([s]) for s in singles])
    ties = make_synthetic_stream(12, 1500, seed=5, feat_dim=0, p_tie=0.6)
    replay = _replay(_tgn(ties, 2, seed=1), ties, 1499, m_max=32)
    cand = replay.candidates.ids
    sets = _small_sets(cand[:10].tolist(), 2) + _random_sets(np.random.default_rng(0), cand, 40,
                                                               len(cand))
    yield "ties_exact", replay.exact(sets)
    mixed = _mixed_row_stream()
    for seed in range(4):
        torch.manual_seed(seed)
        model = TGN(11, 0, memory_dim=8, time_dim=4, embedding_dim=8, num_layers=1,
                    num_heads=2, num_neighbors=3, batch_size=2)
        replay = _replay(model, mixed, 11)
        sets = [frozenset({3, 2}), frozenset({4, 2}), frozenset({7})]
        yield f"mixed_s{seed}", np.concatenate([replay.exact(sets), replay.exact(sets[::-1])])
    for seed, batch_size in ((25, 4), (25, 5), (71, 5), (3, 4), (7, 5), (44, 4), (60, 5)):
        dense = dense_stream(seed, 12, 100)
        torch.manual_seed(seed)
        model = TGN(12, 0, memory_dim=4, time_dim=2, embedding_dim=4, num_layers=1,
                    num_heads=1, num_neighbors=3, batch_size=batch_size)
        replay = _replay(model, dense, 99)
        rng = np.random.default_rng(seed)
        removable = np.arange(replay.start, 99)
        yield f"dense_{seed}_{batch_size}_exact", replay.exact(_random_sets(rng, removable,
                                                                            80, 3))
        yield (f"dense_{seed}_{batch_size}_approximate",
               replay.approximate(_random_sets(rng, replay.candidates.ids, 40, 4)))


def _tail_sets(replay: EventReplay, count: int) -> list[frozenset[int]]:
    """Every single candidate of ``replay``, then pairs chosen at random: ``count`` sets."""
    cand = replay.candidates.ids.tolist()
    pairs = list(itertools.combinations(cand, 2))
    chosen = np.random.default_rng(0).choice(len(pairs), size=count - len(cand), replace=False)
    return [frozenset({c}) for c in cand] + [frozenset(pairs[i]) for i in sorted(chosen)]


def uci_cases(data_dir: Path, cache_dir: Path) -> Iterator[tuple[str, Logits]]:
    """Exact logits of ``UCI_SETS`` sets of at most two candidates of each UCI · TGN tail
    event of ``UCI_EVENTS`` (``_tail_sets``), in one batched call per event:
    ``(f"event_{event}", logits)``."""
    from cftgnn.data import load_uci

    ckpt = Path(__file__).resolve().parents[2] / "checkpoints" / "tgn_uci.pt"
    stream = load_uci(data_dir=data_dir, cache_dir=cache_dir, download=False)
    engine = ReplayEngine.from_checkpoint(ckpt, stream)
    for event in UCI_EVENTS:
        replay = EventReplay(engine, event)
        yield f"event_{event}", replay.exact(_tail_sets(replay, UCI_SETS))


def wikipedia_case(data_dir: Path, cache_dir: Path) -> Logits:
    """Exact logits of ``WIKIPEDIA_SETS`` sets of at most two candidates of the Wikipedia ·
    TGN tail event ``WIKIPEDIA_EVENT`` (``_tail_sets``), in one batched call."""
    from cftgnn.data import load_wikipedia

    ckpt = Path(__file__).resolve().parents[2] / "checkpoints" / "tgn_wikipedia.pt"
    stream = load_wikipedia(data_dir=data_dir, cache_dir=cache_dir, download=False)
    replay = EventReplay(ReplayEngine.from_checkpoint(ckpt, stream), WIKIPEDIA_EVENT)
    return replay.exact(_tail_sets(replay, WIKIPEDIA_SETS))


def main(argv: list[str]) -> None:
    """Write the references (``--uci DATA_DIR`` and ``--wikipedia DATA_DIR`` for the tail
    events too)."""
    import tempfile

    folder = DATA / kernel_probe()
    folder.mkdir(parents=True, exist_ok=True)
    print(f"CPU capability {torch.backends.cpu.get_cpu_capability()}, AMX {has_amx()}: "
          f"writing {folder}")
    with one_thread(), tempfile.TemporaryDirectory() as cache:
        np.savez_compressed(folder / REFERENCE.name, **dict(cases()))
        if "--uci" in argv:
            data_dir = Path(argv[argv.index("--uci") + 1])
            np.savez_compressed(folder / UCI_REFERENCE.name,
                                **dict(uci_cases(data_dir, Path(cache))))
        if "--wikipedia" in argv:
            data_dir = Path(argv[argv.index("--wikipedia") + 1])
            np.savez_compressed(folder / WIKIPEDIA_REFERENCE.name,
                                logits=wikipedia_case(data_dir, Path(cache)))


if __name__ == "__main__":
    main(sys.argv[1:])
