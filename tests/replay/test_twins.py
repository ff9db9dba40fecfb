"""Every compiled loop of the package runs in a pair of twins (``cftgnn.jit.twins``), and
every pair's two bodies give the same answer on what a cone replay hands them.

The loops are found in the source (every function decorated ``@jit.compiled`` under
``cftgnn/``), the pairs in ``jit.PAIRS``; a loop belongs to a pair when the pair's compiled
body calls it, or calls a loop that does. The twins are compared on the arguments of their
real calls: a small cone replay (``testsupport.cone_cases``: far-back removals that pruning
retires and revives, a batch of 64 sets, and single calls) runs its NumPy twins once with each
pair's calls recorded, then each recorded call is made again with both bodies, on copies, and
their answers (and what they write in place) are compared.
"""

from __future__ import annotations

import ast
import copy
import importlib
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from testsupport.cone_cases import exact_logits, sparse_case
from testsupport.streams import dense_stream

from cftgnn import jit
from cftgnn.models import TGN
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.replay.tgn import TGNReplayOptions, rows

PACKAGE = Path(__file__).resolve().parents[2] / "cftgnn"

#: Compiled without a twin, on purpose: ``warm_up``'s probe, which starts numba and runs
#: nothing of the replay.
NO_TWIN = {"cftgnn.jit._first"}


def compiled_in_source(root: Path = PACKAGE) -> list[str]:
    """``module.function`` of every function decorated ``@jit.compiled`` under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef) and any(
                    ast.unparse(d) in ("jit.compiled", "compiled") for d in node.decorator_list):
                found.append(f"{'.'.join(parts)}.{node.name}")
    return found


def _python(value: Any) -> Callable[..., Any] | None:
    """The Python function of a compiled loop (lazy, numba's dispatcher, or itself without
    numba), or None for anything that is not one."""
    f = getattr(value, "python", None) or getattr(value, "py_func", None) or value
    return f if any(f is loop for loop in jit.LOOPS) else None


def _called_loops(f: Callable[..., Any]) -> set[Callable[..., Any]]:
    """The compiled loops ``f``'s code names (its nested code too), and those they call."""
    out: set[Callable[..., Any]] = set()
    todo = [f]
    while todo:
        g = todo.pop()
        codes = [g.__code__]
        while codes:
            code = codes.pop()
            codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
            for name in code.co_names:
                loop = _python(g.__globals__.get(name))
                if loop is not None and loop not in out:
                    out.add(loop)
                    todo.append(loop)
    return out


def _name(f: Callable[..., Any]) -> str:
    return f"{f.__module__}.{f.__qualname__}"


def unpaired(loops: list[Callable[..., Any]], pairs: list[jit.Twins]) -> list[str]:
    """The compiled loops of ``loops`` that no pair's compiled body calls (``NO_TWIN`` left
    out), and the pairs whose NumPy twin calls a compiled loop itself."""
    covered = set().union(*(_called_loops(pair.compiled) for pair in pairs))
    bad = [_name(f) for f in loops if f not in covered and _name(f) not in NO_TWIN]
    bad += [f"{pair.name}: its twin calls {sorted(map(_name, _called_loops(pair.numpy)))}"
            for pair in pairs if _called_loops(pair.numpy)]
    return bad


def _import_all() -> None:
    for name in sorted({n.rsplit(".", 1)[0] for n in compiled_in_source()}):
        importlib.import_module(name)


_import_all()  # the pairs are listed when the tests are collected


def test_every_compiled_loop_runs_in_a_pair_of_twins():
    _import_all()
    in_source = compiled_in_source()
    assert sorted(in_source) == sorted(map(_name, jit.LOOPS))  # every one is registered
    assert len(in_source) >= 24 and len(jit.PAIRS) >= 20
    assert unpaired(jit.LOOPS, jit.PAIRS) == []
    assert len({pair.name for pair in jit.PAIRS}) == len(jit.PAIRS)


_PLANTED = '''
import numpy as np
from cftgnn import jit


@jit.compiled
def _helper(x):
    return x + 1


@jit.compiled
def _paired(x):
    out = np.empty(len(x), dtype=np.int64)
    for i in range(len(x)):
        out[i] = _helper(x[i])
    return out


@jit.compiled
def _orphan(x):
    return x


def _plus_one_numpy(x):
    return x + 1


@jit.twins(numpy=_plus_one_numpy)
def plus_one(x):
    return _paired(x)


def _lazy_numpy(x):
    return _orphan(x)


@jit.twins(numpy=_lazy_numpy)
def lazy(x):
    return _paired(x)
'''


def test_the_check_finds_a_compiled_loop_without_a_twin(tmp_path, monkeypatch):
    """A planted module: ``_orphan`` is compiled but runs in no pair's compiled body (its
    only caller is a NumPy twin, which must not call compiled loops)."""
    for name in ("LOOPS", "PAIRS", "_lazy"):  # the planted loops stay out of the registry
        monkeypatch.setattr(jit, name, list(getattr(jit, name)))
    planted = tmp_path / "planted_pkg"
    planted.mkdir()
    (planted / "loops.py").write_text(_PLANTED)
    assert compiled_in_source(planted) == ["planted_pkg.loops._helper",
                                           "planted_pkg.loops._paired",
                                           "planted_pkg.loops._orphan"]
    module = types.ModuleType("planted_pkg.loops")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(_PLANTED, str(planted / "loops.py"), "exec"), module.__dict__)
    loops = [f for f in jit.LOOPS if f.__module__ == module.__name__]
    pairs = [p for p in jit.PAIRS if p.name.startswith(module.__name__)]
    assert [p.name for p in pairs] == ["planted_pkg.loops.plus_one", "planted_pkg.loops.lazy"]
    assert unpaired(loops, pairs) == [
        "planted_pkg.loops._orphan",
        "planted_pkg.loops.lazy: its twin calls ['planted_pkg.loops._orphan']"]
    assert unpaired(loops, pairs[:1])[0] == "planted_pkg.loops._orphan"
    assert np.array_equal(module.plus_one(np.arange(3)), [1, 2, 3])  # (the pair runs)


#: Recorded calls per pair (a uniform sample of its calls, seeded).
_RECORDED = 12


def _dispatchers() -> dict[int, jit.Twins]:
    return {id(f): f.twins for m in list(sys.modules.values())
            if getattr(m, "__name__", "").startswith("cftgnn.")
            for f in vars(m).values() if isinstance(getattr(f, "twins", None), jit.Twins)}


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[tuple[Any, ...]]]:
    """Each pair's name -> the arguments of some of its calls in a small cone replay, run
    with the NumPy twins (copied as each call starts: some steps write in place)."""
    _import_all()
    calls: dict[str, list[tuple[Any, ...]]] = {pair.name: [] for pair in jit.PAIRS}
    seen: dict[str, int] = dict.fromkeys(calls, 0)
    pairs = _dispatchers()

    rng = np.random.default_rng(0)

    def recording(run: Callable[..., Any], pair: jit.Twins) -> Callable[..., Any]:
        def spy(*args: Any) -> Any:
            count = seen[pair.name]
            seen[pair.name] += 1
            kept = calls[pair.name]
            if count < _RECORDED:
                kept.append(copy.deepcopy(args))
            elif (slot := int(rng.integers(0, count + 1))) < _RECORDED:  # a uniform sample
                kept[slot] = copy.deepcopy(args)
            return run(*args)
        return spy

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jit, "ENABLED", False)
        for module in [m for m in list(sys.modules.values())
                       if getattr(m, "__name__", "").startswith("cftgnn.")]:
            for key, value in list(vars(module).items()):
                if id(value) in pairs:
                    patch.setattr(module, key, recording(value, pairs[id(value)]))
        patch.setattr(rows, "_COMPACT_MIN_ROWS", 0)  # compactions too (exact: no logit moves)
        for layers in (1, 2):
            exact_logits(*sparse_case(layers))
        _dense_sets()
    return calls


def _dense_sets() -> None:
    """``testsupport.cone_reference``'s dense stream whose sets share rows that a later
    message splits (``RowTable.split_mixed``): 80 sets of up to three removals."""
    stream = dense_stream(25, 12, 100)
    torch.manual_seed(25)
    model = TGN(12, 0, memory_dim=4, time_dim=2, embedding_dim=4, num_layers=1, num_heads=1,
                num_neighbors=3, batch_size=4)
    engine = ReplayEngine(model, stream)
    engine.replay.options = TGNReplayOptions(local_max_events=0)  # type: ignore[attr-defined]
    replay = EventReplay(engine, 99, m_max=64)
    rng = np.random.default_rng(25)
    removable = np.arange(replay.start, 99)
    replay.exact([frozenset(rng.choice(removable, int(rng.integers(1, 4)),
                                       replace=False).tolist()) for _ in range(80)])


def _canonical(name: str, out: Any) -> Any:
    """What of a pair's answer must be equal: the groups' partition and first rows, not
    their numbers (``groups``, ``merge_groups``); ``mixed_rows``' sender rows of the rows it
    finds only (the others are unset)."""
    short = name.rsplit(".", 1)[1]
    if short == "groups":
        first, inverse = out
        return first[inverse]
    if short == "merge_groups":
        rows, head, group = out
        return rows, rows[head[group]]
    if short == "mixed_rows":
        is_m, mine, cols = out
        return is_m, mine[np.flatnonzero(is_m[:-1])], cols
    return out


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, or the same bits (buffers past a table's rows hold what was there, NaN
    among it)."""
    return a.shape == b.shape and (np.array_equal(a, b) or (
        a.dtype == b.dtype and np.ascontiguousarray(a).tobytes()
        == np.ascontiguousarray(b).tobytes()))


def _differences(a: Any, b: Any, where: str = "") -> Iterator[str]:
    if isinstance(a, tuple | list):
        if not isinstance(b, tuple | list) or len(a) != len(b):
            yield f"{where}: {type(a).__name__} of {len(a)} against {b!r:.60}"
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _differences(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        if not (isinstance(b, torch.Tensor) and _same_array(a.numpy(), b.numpy())):
            yield f"{where}: tensors differ"
    elif isinstance(a, np.ndarray):
        if not (isinstance(b, np.ndarray) and _same_array(a, b)):
            yield f"{where}: {a!r:.80} against {b!r:.80}"
    elif hasattr(a, "__dict__") and not callable(a):  # a batch's record: what it holds
        yield from _differences(list(vars(a).values()), list(vars(b).values()), where)
    elif a != b:
        yield f"{where}: {a!r:.60} against {b!r:.60}"


@pytest.mark.parametrize("name", [pair.name for pair in jit.PAIRS])
def test_each_pairs_twins_give_the_same_answer_on_a_replays_calls(name, recorded):
    pair = next(p for p in jit.PAIRS if p.name == name)
    assert recorded[name], f"the replay never called {name}: its twins are compared on nothing"
    for k, args in enumerate(recorded[name]):
        mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
        with np.errstate(over="ignore"):  # (numba's wrapping arithmetic, as plain Python)
            got = pair.compiled(*mine)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(jit, "ENABLED", False)  # the twin's own calls run twins too
            want = pair.numpy(*theirs)
        assert not list(_differences(_canonical(name, got), _canonical(name, want),
                                     f"call {k}: answer")), name
        assert not list(_differences(mine, theirs, f"call {k}: arguments written")), name



def test_the_package_and_the_design_notes_name_every_module_of_the_cone_replay():
    import cftgnn.replay.tgn as package

    root = Path(package.__file__).parent
    modules = sorted(p.stem for p in root.glob("*.py") if p.stem != "__init__")
    design = (PACKAGE.parent / "docs" / "design.md").read_text()
    section = design[design.index("## 5. The replay engine"):design.index("## 6. Metrics")]
    assert len(modules) >= 12
    assert [m for m in modules if f"cftgnn.replay.tgn.{m}``:" not in (package.__doc__ or "")] \
        == []
    assert [m for m in modules if f"`{m}`" not in section] == []
