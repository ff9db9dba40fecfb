"""A removal set's walk from ``scripts/explain.py`` to the logit (docs/design.md §5, "A removal
set's walk"), measured: ``scripts/explain.py`` runs CF-TGNN on the debug stream with an exact
search oracle, and one exact call of the search that reaches the model (the third whose sets
the cache lacks: the plan is recorded by then) is traced with ``sys.settrace``, the cone
replay's loops as their NumPy twins (numba's compiled bodies, in the same files, run no
Python frame a trace could see).

The walk is the files on the stack when the search asks the oracle, then, below it, every file
with a function that receives the set in one of its forms, under the names the set travels by
(``removed``, ``sets``, ``missing``, ``words``, ``masks``, ``rem``): a ``frozenset`` (one set, or
a list of them for a batch), ``RemovalSets``' boolean table, its ``uint64`` words, and a history
batch's ``bool [P, K]`` removals. Decorators that hand a step's arguments on unread
(``*args``: the twins' choice, the steps' timer) are listed apart. The test holds the walk to
the list docs/design.md gives and every cftgnn file the call runs (helpers and the model
included) to the count it gives.
"""

from __future__ import annotations

import inspect
import runpy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pytest
import torch

from cftgnn import jit
from cftgnn.oracle.oracle import Oracle
from cftgnn.replay.masks import RemovalSets

ROOT = Path(__file__).resolve().parents[2]

#: The walk today (docs/design.md §5), in the order a set meets the files.
WALK = (
    "scripts/explain.py",  # the command: main_guard runs hydra's main
    "cftgnn/cli/guard.py",  # friendly errors around the run
    "cftgnn/runs/pipeline.py",  # run(cfg): the explainer once, then explain_events
    "cftgnn/explain/base.py",  # explain_events: one oracle per event; Explainer.explain
    "cftgnn/explain/mcts.py",  # the search makes the set (frozenset), asks a batch
    "cftgnn/oracle/oracle.py",  # _evaluate: cache, misses (missing)
    "cftgnn/oracle/engine.py",  # EventReplay.exact -> _logits -> the plan
    "cftgnn/replay/masks.py",  # RemovalSets.from_sets: the bool table; words, columns
    "cftgnn/replay/tgn/__init__.py",  # TGNPlan.logits: passes
    "cftgnn/replay/tgn/cone.py",  # cone_replay: words over the candidates, rem per batch
    "cftgnn/replay/tgn/rows.py",  # RowTable's steps read words and rem
    "cftgnn/replay/tgn/row_steps.py",  # the steps' pairs read them
    "cftgnn/replay/tgn/rows_kernels.py",  # last_kept reads rem
    "cftgnn/replay/batched.py",  # batched_logits: the bool table's lookups -> the logit
)
#: The decorators that hand the set's forms on unread (``*args``).
PASSED_ON = ("cftgnn/replay/tgn/row_times.py", "cftgnn/jit.py")
#: The forms the set takes on the walk.
FORMS = {"frozenset", "bool table", "uint64 words", "per-batch mask"}
#: Every cftgnn (and scripts) file the traced call runs or is called from, at most.
MAX_FILES = 32
#: The names a set's forms travel by (docs/design.md §5).
SET_NAMES = frozenset({"removed", "sets", "missing", "words", "masks", "rem"})


def form(value: Any) -> str | None:
    """The form of a removal set ``value`` is in, or None."""
    if isinstance(value, frozenset) or (isinstance(value, list | tuple) and value
                                        and all(isinstance(v, frozenset) for v in value)):
        return "frozenset"
    if isinstance(value, RemovalSets):
        return "bool table"
    if isinstance(value, np.ndarray) and value.dtype == np.uint64:
        return "uint64 words"
    if (isinstance(value, np.ndarray | torch.Tensor) and value.ndim == 2
            and value.dtype in (np.bool_, torch.bool)):
        return "per-batch mask"
    return None


class Walk:
    """What one traced oracle call met: the stack above it, and each call below it with the
    set forms among its arguments."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.handed_on: list[str] = []

    def tracer(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
            forms = {n: f for n in names if n in SET_NAMES
                     and (f := form(frame.f_locals.get(n))) is not None}
            self.calls.append((code.co_filename, forms))
            if code.co_flags & inspect.CO_VARARGS:
                rest = frame.f_locals.get(code.co_varnames[len(names)], ())
                if any(form(v) is not None for v in rest):
                    self.handed_on.append(code.co_filename)

    def files(self) -> list[str]:
        """The walk's files (relative to the repository), in order."""
        below = [f for f, forms in self.calls if forms]
        return _ours([*self.stack, *below])

    def passed_on(self) -> list[str]:
        """The files whose functions only hand a form on (``*args``), not on the walk."""
        walk = set(self.files())
        return [f for f in _ours(self.handed_on) if f not in walk]

    def forms(self) -> set[str]:
        return {f for _, forms in self.calls for f in forms.values()}

    def ran(self) -> list[str]:
        """Every file of ours on the stack or run below it."""
        return _ours([*self.stack, *(f for f, _ in self.calls)])


def _ours(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if p.startswith(str(ROOT) + "/") and not p.startswith(str(ROOT / "tests")):
            rel = str(Path(p).relative_to(ROOT))
            if rel not in out:
                out.append(rel)
    return out


@contextmanager
def traced_call(nth: int) -> Iterator[Walk]:
    """Trace the ``nth`` exact oracle call asked by CF-TGNN's search whose sets the cache
    lacks."""
    walk, seen = Walk(), [0]
    evaluate = Oracle._evaluate

    def tracing(self: Oracle, channel: Any, sets: Any) -> Any:
        if walk.calls or channel.cache is not self._exact.cache or all(
                frozenset(s) in channel.cache for s in sets):
            return evaluate(self, channel, sets)
        stack = [f.filename for f in inspect.stack()]
        if not any(p.endswith("cftgnn/explain/mcts.py") for p in stack):
            return evaluate(self, channel, sets)
        seen[0] += 1
        if seen[0] < nth:
            return evaluate(self, channel, sets)
        walk.stack = stack[::-1]
        sys.settrace(walk.tracer)
        try:
            return evaluate(self, channel, sets)
        finally:
            sys.settrace(None)

    Oracle._evaluate = tracing  # type: ignore[method-assign]
    try:
        yield walk
    finally:
        Oracle._evaluate = evaluate  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    out = tmp_path_factory.mktemp("walk")
    script = ROOT / "scripts" / "explain.py"
    saved, compiled = sys.argv, jit.ENABLED
    sys.argv = [str(script), "debug=default", "checkpoint=null", "n_events=1", "mode=exact",
                "explainer.it_max=10", "curves=none", "progress=false", f"out_dir={out}"]
    jit.ENABLED = False  # the twins: Python frames
    try:
        with traced_call(3) as traced:
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv, jit.ENABLED = saved, compiled
    assert traced.calls, "no exact call of the search was traced"
    yield traced


def test_the_walk_is_the_documented_one(walk: Walk) -> None:
    assert walk.files() == list(WALK)
    assert walk.passed_on() == list(PASSED_ON)
    assert len(WALK) <= 14  # the target (docs/design.md §5)


def test_the_set_takes_four_forms(walk: Walk) -> None:
    assert walk.forms() == FORMS


def test_the_call_runs_no_more_files_than_measured(walk: Walk) -> None:
    ran = walk.ran()
    assert set(WALK) <= set(ran)
    assert len(ran) <= MAX_FILES, "\n".join(ran)


def test_the_design_notes_list_the_walk() -> None:
    text = (ROOT / "docs" / "design.md").read_text()
    section = text[text.index("**A removal set's walk"):]
    for i, name in enumerate(WALK, start=1):
        assert f"{i}. `{name}`" in section, name
