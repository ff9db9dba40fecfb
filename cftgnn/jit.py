"""Optional compilation of the cone replay's bookkeeping loops with numba.

``compiled(f)`` is ``numba.njit(cache=True, nogil=True)(f)`` where numba is installed (a
dependency of the package; the GPU machine's image has its own, its offline wheels leave out
numba's 57 MiB llvmlite, see ``scripts/gpu/requirements.txt``) and ``f`` itself where it is
not; a numba that is installed but will not import (built for another NumPy, say) warns once
at the first compiled call and leaves the twins running (``start``). Each step that runs
compiled loops is a pair of twins (``twins``): its compiled body and a NumPy (or torch) twin
with the same arguments, which gives the same integers and booleans, so the logits are the
same bit for bit either way. ``twins`` is the one place that decides which runs, at each
call: the compiled body where ``ENABLED`` (and, for a step that reads a tensor's memory in
place, where the tensor is on the CPU), else the twin. ``tests/replay/test_twins.py`` finds
every compiled loop in a pair and compares each pair's bodies on a cone replay's calls;
``tests/replay/test_rows_kernels.py`` holds each step, both ways, to what it must find.

numba is imported only when a compiled loop is first called (``start``), not when this
module is imported: every script imports the replay's modules to check its options, and a
run that never replays a TGN cone (TGAT, GraphMixer, the approximate oracle) would otherwise
pay numba's import (about 0.25 s and 0.06 GiB) for nothing. A cone replay of few sets calls
none before numba has started (``for_sets``, ``MIN_SETS``). At the start every compiled loop
is handed to ``numba.njit`` and put in the namespaces of the modules that hold compiled
loops in place of the lazy one, so compiled loops calling each other (``rows_kernels._row_at``,
``merge_steps`` calling ``rows_kernels.hash_groups``) call numba's, and later calls skip the lazy
indirection.

Why compiled loops: on the far-back tail events (docs/benchmarks.md, "The far-back tail")
the bookkeeping is a few dozen NumPy calls per batch over arrays of thousands of entries,
each a pass of its own; the loops here fuse them (row lookups, grouping equal rows by
hashing, comparing rows until their first differing coordinate). Their cost: numba's start
in a process (about 0.3-0.5 CPU seconds at the first compiled call, loading the kernels
from numba's cache in ``__pycache__``), and, the first time after an install or an edit of
the module, compiling them (a few seconds, then cached: ``explain.py`` says so in one line when
numba's cache holds none of them, ``cache_is_cold``, and ``python -m cftgnn.runs.warm``
compiles them ahead). ``warm_up`` pays the start ahead,
once: ``cftgnn.oracle.workers.ForkedWorkers`` calls it before forking, so that its worker
processes inherit a started numba rather than each starting it again for every event.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from cftgnn.errors import ConfigError
from cftgnn.options import JIT_ENV, environment_switch

F = TypeVar("F", bound=Callable[..., Any])

#: Set to ``0`` (or ``false``, ``no``, ``off``) to run the NumPy twins without importing
#: numba: numba costs about 0.1 GiB of resident memory in a process (its start and the
#: kernels, measured), which matters only where the memory is tight (the 1M-event stream of
#: docs/benchmarks.md: 1.54 GiB peak with the compiled loops, 1.44 with CFTGNN_JIT=0; since
#: ``for_sets`` its small replays of short histories start none); the twins give the same
#: logits, slower.
#: Unset, empty, ``1``, ``true``, ``yes`` or ``on`` leave them on; any other value is an
#: error (``ConfigError`` at the first compiled call; the scripts refuse it before they
#: start, ``cftgnn.cli.friendly_errors``).
ENV = JIT_ENV

try:
    _SWITCH, _PROBLEM = environment_switch(ENV), None
except ConfigError as problem:  # raised by ``start``, not by an import
    _SWITCH, _PROBLEM = True, problem

#: Whether the compiled loops run (numba is installed and ``CFTGNN_JIT`` is not off); tests
#: set it false to run the twins.
ENABLED = _SWITCH and importlib.util.find_spec("numba") is not None
#: ``ENABLED`` as it was at import: whether ``compiled`` hands its loops to numba, whatever
#: ``for_sets`` or a test makes of ``ENABLED`` while a module is being imported.
_AVAILABLE = ENABLED

#: A cone replay of fewer sets runs the twins while numba has not started in the process
#: (``for_sets``): measured on 10 Wikipedia · TGN events (docs/benchmarks.md), the compiled
#: loops make a single exact call no faster (0.95-1.02x) and a batch of 64 sets 16 % faster,
#: so numba's start (0.3-0.45 s) and memory (0.1 GiB) are paid only where they buy
#: something: the exhaustive search's and ``certify``'s chunks (4,096 sets, 64 under a time
#: cap) and the baselines' batches, not a greedy or CF-TGNN search's small batches.
MIN_SETS = 64
#: ... or of any number of sets through at least this many recorded history batches: on a
#: long history the twins' per-batch NumPy calls add up (a synthetic 400,000-event,
#: 50,000-node stream, one set through 2,000 batches: 2.5-3.8 s a call with the twins,
#: 2.0-2.9 s compiled, numba's start 0.32 s once: docs/benchmarks.md, 2026-12-03).
MIN_BATCHES = 2000

_numba: Any = None  # the numba module, once started
_lazy: list[_Lazy] = []
_lock = threading.Lock()

#: Every compiled loop's Python function, in the order they were defined (with or without
#: numba: ``tests/replay/test_twins.py`` finds each one's twin through ``PAIRS``).
LOOPS: list[Callable[..., Any]] = []


@dataclass(frozen=True)
class Twins:
    """A step's two bodies, named as a pair (``twins``): ``compiled``, which calls compiled
    loops, and ``numpy``, its NumPy (or torch) twin, with the same arguments and the same
    answer (the same integers and booleans, in the same order unless its docstring says
    otherwise). ``host``: the compiled loops read the first argument's memory (a tensor) in
    place, so they run only where it lies on the CPU."""

    name: str
    compiled: Callable[..., Any]
    numpy: Callable[..., Any]
    host: bool


#: Every pair of twins (``twins``), in the order they were defined.
PAIRS: list[Twins] = []


def twins(numpy: Callable[..., Any], *, host: bool = False) -> Callable[[F], F]:
    """Name a step's compiled body (the decorated function) and its NumPy twin ``numpy`` as
    a pair, and decide at each call which runs: the one place that decides. The compiled
    body runs where ``ENABLED`` (numba is installed, ``CFTGNN_JIT`` is not off, ``for_sets``)
    and, with ``host``, the first argument (a tensor) lies on the CPU; the twin runs
    everywhere else. Positional arguments only (the decision is one test and one call).

    The pair is listed in ``PAIRS`` (``Twins``); the function returned has the body's name
    and docstring."""

    def decorate(body: F) -> F:
        pair = Twins(f"{body.__module__}.{body.__qualname__}", body, numpy, host)
        PAIRS.append(pair)
        compiled_body = body
        if host:
            def run(*args: Any) -> Any:
                if ENABLED and args[0].device.type == "cpu":
                    return compiled_body(*args)
                return numpy(*args)
        else:
            def run(*args: Any) -> Any:
                if ENABLED:
                    return compiled_body(*args)
                return numpy(*args)
        functools.update_wrapper(run, body)
        run.twins = pair  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate


class _Lazy:
    """A loop to compile at numba's start: calling it starts numba (``start``)."""

    def __init__(self, f: Callable[..., Any]) -> None:
        functools.update_wrapper(self, f)
        self.python = f
        self.dispatcher: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self.dispatcher is None:
            start()
        if self.dispatcher is None:  # numba would not import (``start``): plain Python
            return self.python(*args)
        return self.dispatcher(*args)


def _njit(numba: Any, f: Callable[..., Any]) -> Callable[..., Any]:
    """``numba.njit(cache=True, nogil=True)(f)``, uncached where no cache is writable."""
    try:
        out: Callable[..., Any] = numba.njit(cache=True, nogil=True)(f)
    except RuntimeError:  # no writable cache (``__pycache__`` nor numba's user cache dir):
        out = numba.njit(nogil=True)(f)  # compiled in every process instead
    return out


def compiled(f: F) -> F:
    """``f``, compiled by numba (``nopython``, cached on disk, releasing the GIL) when it is
    first called, or ``f`` unchanged without numba (then its callers run their twins, see
    the module docstring). Listed in ``LOOPS``; a compiled loop runs only in the compiled
    body of a pair (``twins``), directly or called by another loop."""
    LOOPS.append(f)
    if not _AVAILABLE:
        return f
    with _lock:
        if _numba is not None:  # a module imported after numba's start: compiled now
            return _njit(_numba, f)  # type: ignore[return-value]
        lazy = _Lazy(f)
        _lazy.append(lazy)
    return lazy  # type: ignore[return-value]


def start() -> None:
    """Import numba and hand it every compiled loop (each module's name now names numba's);
    nothing without numba or once started.

    Raises:
        ConfigError: ``CFTGNN_JIT`` is not an on/off word.
    """
    global _numba
    if not ENABLED or _numba is not None:
        return
    if _PROBLEM is not None:
        raise _PROBLEM
    with _lock:
        if _numba is not None:
            return
        try:
            numba = importlib.import_module("numba")
        except Exception as exc:  # installed but broken (built for another NumPy, say):
            _give_up(exc)  # the twins run, as without numba
            return
        for lazy in _lazy:
            lazy.dispatcher = _njit(numba, lazy.python)
        # every module holding compiled loops now names numba's dispatchers, also for the
        # loops it imported from another (``merge_steps`` calls ``rows_kernels.hash_groups``):
        # numba compiles a call to a dispatcher, not to a lazy loop
        for namespace in {id(lazy.python.__globals__): lazy.python.__globals__
                          for lazy in _lazy}.values():
            for name, value in list(namespace.items()):
                if isinstance(value, _Lazy) and value.dispatcher is not None:
                    namespace[name] = value.dispatcher
        _numba = numba


def _give_up(exc: BaseException) -> None:
    """numba is installed but would not import: warn once and run the twins from now on."""
    global ENABLED
    ENABLED = False
    warnings.warn(f"numba is installed but could not be imported ({type(exc).__name__}: "
                  f"{exc}); the cone replay's bookkeeping runs its NumPy twins (the same "
                  f"logits, slower). Set {ENV}=0 to skip numba without this warning.",
                  RuntimeWarning, stacklevel=3)


@contextmanager
def for_sets(num_sets: int, num_batches: int = 0) -> Iterator[None]:
    """Within it, the compiled loops run (``ENABLED`` as it is) when a replay of
    ``num_sets`` sets through ``num_batches`` recorded batches pays for them (at least
    ``MIN_SETS`` sets, or ``MIN_BATCHES`` batches) or numba has started already (nothing
    more to pay); otherwise ``ENABLED`` is false, and the twins run. Either way the same
    integers, so the same logits."""
    global ENABLED
    if (not ENABLED or num_sets >= MIN_SETS or num_batches >= MIN_BATCHES
            or started()):
        yield
        return
    ENABLED = False
    try:
        yield
    finally:
        ENABLED = True


def started() -> bool:
    """Whether numba has started in this process."""
    return _numba is not None


@compiled
def _first(x: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    out = np.empty(len(x), dtype=np.int64)  # arrays in and out: numba's NumPy support too
    for i in range(len(x)):
        out[i] = x[i] + 1
    return out


#: ``_first`` itself (numba's start puts its dispatcher in its name's place).
_PROBE = _first.python if isinstance(_first, _Lazy) else _first


#: What ``warm_up`` says when numba's on-disk cache holds none of the compiled loops
#: (``cache_is_cold``): the first exact run after an install pays their compilation.
COLD_NOTICE = ("note: compiling the replay's loops with numba (the first run after an install "
               "or an update: 10-25 s, once; cached afterwards; "
               "`python -m cftgnn.runs.warm` compiles them ahead)")


def cache_is_cold() -> bool:
    """Whether numba's on-disk cache holds a compiled version of none of the loops (for
    their current source; ``warm_up``'s own probe left out): their first calls compile
    them, a few seconds in all. False before numba's start, without a loop, or where
    numba's cache cannot be read (its internals change, no cache is writable)."""
    loops: list[Any] = [lazy.dispatcher for lazy in _lazy if lazy.python is not _PROBE]
    if _numba is None or not loops:
        return False
    try:  # numba (0.68) has no public way to ask: its index of a loop, checked against
        # the source's stamp, holds nothing when cold, missing or stale
        return not any(d._cache._cache_file._load_index() for d in loops if d is not None)
    except Exception:  # a notice only: nothing said rather than a failure
        return False


def warm_up(notice: Callable[[str], None] | None = None) -> None:
    """Start numba in this process now (most of its first call's cost, see the module
    docstring); nothing without numba or once started.

    Args:
        notice: Handed ``COLD_NOTICE`` when numba starts here with its on-disk cache cold
            (``cache_is_cold``), before any loop compiles (``explain.py``: ``print``).
    """
    if not ENABLED:
        return
    if notice is not None and not started():
        start()
        if cache_is_cold():
            notice(COLD_NOTICE)
    _first(np.zeros(1, dtype=np.int64))


__all__ = ["COLD_NOTICE", "ENABLED", "ENV", "LOOPS", "MIN_BATCHES", "MIN_SETS", "PAIRS",
           "Twins",
           "cache_is_cold", "compiled", "for_sets", "start", "started", "twins", "warm_up"]
