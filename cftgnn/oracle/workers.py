"""Worker processes for one oracle's exact evaluations (``num_workers``).

[``ForkedWorkers``][cftgnn.oracle.workers.ForkedWorkers] forks ``N`` processes from the one
that built an [``Oracle``][cftgnn.oracle.Oracle] (POSIX ``fork``: each child holds a
copy-on-write copy of the model, the stream, the base state, the replay plans and the
oracle's cache, nothing is pickled or loaded again). Each child evaluates whole chunks of
removal sets with its copy's ``exact_batch``; the parent hands chunks to idle children and
enters every chunk's logits into its own oracle with
[``Oracle.record_exact``][cftgnn.oracle.Oracle.record_exact], so its cache, certificate and
counters (calls, cache hits, batches; backend seconds summed over the processes) end as if it
had evaluated them itself. Counters the backends update in place (``Oracle.tallies``, e.g.
the replay engine's ``ReplayCounters``) get each child's share added when the workers stop.

The parent must run one torch thread, and so does each child (``num_threads=1``, one worker
per core): a child forked from a process whose OpenMP threads ran cannot start threads of
its own (it hangs), and a child with another thread count than its parent could round a
logit differently (a reduction split otherwise; measured: a logit's last bits differ
between 2 threads and 1).

A chunk's logits do not depend on the process that computes them: the same code runs on the
same state for the same chunk. So a search that forms the same chunks as one process would
([``search_by_size``][cftgnn.explain.search_by_size] does) gets bitwise the same logits, and
merging by set, not by arrival, gives the same answer.

Linux and macOS only (where ``fork`` exists); a CUDA model cannot be forked (a child cannot
use its parent's CUDA context), so ``num_workers > 1`` is refused on a GPU (``explain.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import pickle
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from cftgnn import jit
from cftgnn.errors import ConfigError, OracleError, warn
from cftgnn.oracle.oracle import Oracle, RemovalSet


def fork_available() -> bool:
    """Whether this platform can fork worker processes (not on Windows)."""
    return "fork" in multiprocessing.get_all_start_methods()


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform says)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def check_workers(num_workers: int, device: str, num_threads: int = 1) -> None:
    """A run's ``num_workers`` against its machine, before any work: more than one process
    needs ``fork``, a model on the CPU and one torch thread (see the module docstring); more
    processes than usable cores is allowed, with a warning (they would share cores, so the
    split gains nothing).

    Args:
        num_workers: The option's value (already checked to be an integer ``>= 1``).
        device: The run's resolved torch device (``cpu``, ``cuda``, ``cuda:1``, …).
        num_threads: The run's torch threads (``num_threads``).

    Raises:
        ConfigError: For ``num_workers > 1`` without ``fork``, on a non-CPU device or with
            more than one torch thread.
    """
    if num_workers <= 1:
        return
    if num_threads != 1:
        raise ConfigError(f"num_workers={num_workers} needs num_threads=1, got "
                          f"num_threads={num_threads} (each worker runs one torch thread, and "
                          "logits must not depend on the thread count)")
    if not fork_available():
        raise ConfigError(f"num_workers={num_workers} needs the fork start method (Linux, "
                          "macOS); use num_workers=1 here")
    if str(device).split(":")[0] != "cpu":
        raise ConfigError(f"num_workers={num_workers} needs device=cpu (forked worker "
                          f"processes cannot share the {device} context); use num_workers=1 "
                          "on a GPU")
    cores = usable_cores()
    if num_workers > cores:
        warn(f"num_workers={num_workers} is more than the {cores} usable core(s): the "
             "workers share them, so a certification gets no faster")


@dataclass(frozen=True)
class ChunkDone:
    """One chunk evaluated by a worker.

    Attributes:
        tag: The caller's tag of the chunk (e.g. its position).
        sets: The chunk's removal sets, as sent.
        logits: Their exact logits, ``float64 [P]`` (bitwise as the worker computed them).
        seconds: The worker's wall seconds for the chunk.
    """

    tag: int
    sets: tuple[RemovalSet, ...]
    logits: npt.NDArray[np.float64]
    seconds: float


def _numbers(tally: object) -> dict[str, float]:
    """The numeric fields of a counter dataclass."""
    return {f.name: getattr(tally, f.name) for f in dataclasses.fields(tally)  # type: ignore[arg-type]
            if isinstance(getattr(tally, f.name), int | float)
            and not isinstance(getattr(tally, f.name), bool)}


def _add_tally(tally: object, share: dict[str, float]) -> None:
    """Add a worker's share to a counter dataclass (``peak_*`` fields: the maximum)."""
    for name, value in share.items():
        old = getattr(tally, name)
        setattr(tally, name, max(old, value) if name.startswith("peak_") else old + value)


def _torch_threads() -> int | None:
    """This process's torch intra-op threads (None when torch is not loaded)."""
    torch = sys.modules.get("torch")
    return None if torch is None else int(torch.get_num_threads())


def _serve(oracle: Oracle, conn: Connection) -> None:
    """A worker's loop: evaluate each chunk received, answer its logits and counters; on
    ``None``, answer the tallies' shares and leave (``os._exit``: nothing of the parent's
    state is finalised twice). It runs one torch thread, as its parent does."""
    code = 1
    try:
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)
        start = [_numbers(t) for t in oracle.tallies]
        while True:
            message = conn.recv()
            if message is None:
                shares = []
                for tally, before in zip(oracle.tallies, start, strict=True):
                    now = _numbers(tally)
                    shares.append({k: (v if k.startswith("peak_") else v - before[k])
                                   for k, v in now.items()})
                conn.send(("done", shares))
                code = 0
                return
            tag, sets = message
            stats0 = oracle.stats
            t0 = time.perf_counter()
            logits = oracle.exact_batch(sets)
            conn.send(("chunk", tag, logits, oracle.stats - stats0, time.perf_counter() - t0))
    except BaseException as exc:  # noqa: BLE001 (handed to the parent, which raises it)
        text = traceback.format_exc()
        try:
            pickle.loads(pickle.dumps(exc))  # the parent must be able to read it back
        except Exception:  # noqa: BLE001 (then it gets the traceback's text)
            exc = None  # type: ignore[assignment]
        with contextlib.suppress(BaseException):  # the parent may be gone: nothing to tell
            conn.send(("error", exc, text))
    finally:
        conn.close()
        os._exit(code)


class ForkedWorkers:
    """``num_workers`` processes forked from this one, each evaluating chunks of removal
    sets on its copy of ``oracle`` (see the module docstring). A context manager: the
    processes start on entry and stop on exit (terminated when the block raised).

    Args:
        oracle: The oracle whose exact backend the workers call; it receives every chunk's
            logits and counters ([``collect``][cftgnn.oracle.workers.ForkedWorkers.collect]).
        num_workers: How many processes (``>= 1``).

    Raises:
        OracleError: Where ``fork`` is unavailable, or for ``num_workers < 1``.
    """

    def __init__(self, oracle: Oracle, num_workers: int) -> None:
        if not fork_available():
            raise OracleError("num_workers > 1 needs the fork start method (Linux, macOS)")
        if num_workers < 1:
            raise OracleError(f"num_workers must be >= 1, got {num_workers}")
        self.oracle = oracle
        self.num_workers = int(num_workers)
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        self._busy: dict[Connection, tuple[int, tuple[RemovalSet, ...]]] = {}

    def __enter__(self) -> ForkedWorkers:
        threads = _torch_threads()
        if threads not in (None, 1):
            raise OracleError(f"num_workers > 1 needs one torch thread in this process, not "
                              f"{threads} (torch.set_num_threads(1); num_threads=1)")
        ctx = multiprocessing.get_context("fork")
        jit.warm_up()  # the children inherit a started numba instead of each starting it
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            for _ in range(self.num_workers):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(self.oracle, child), daemon=True)
                proc.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(proc)
        except BaseException:
            self._terminate()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None:
            self._terminate()
            return
        try:
            while self._busy:  # results no one collected: recorded, then the tallies
                self.collect()
            shares: list[list[dict[str, float]]] = []
            for conn in self._conns:
                conn.send(None)
                shares.append(self._receive(conn)[1])
            for worker_shares in shares:
                for tally, share in zip(self.oracle.tallies, worker_shares, strict=True):
                    _add_tally(tally, share)
        finally:
            self._terminate()

    @property
    def idle(self) -> int:
        """Workers without a chunk."""
        return len(self._conns) - len(self._busy)

    @property
    def in_flight(self) -> int:
        """Chunks sent and not yet collected."""
        return len(self._busy)

    def submit(self, tag: int, sets: Sequence[RemovalSet]) -> None:
        """Send a chunk to an idle worker.

        Raises:
            OracleError: When no worker is idle.
        """
        conn = next((c for c in self._conns if c not in self._busy), None)
        if conn is None:
            raise OracleError("no idle worker for a chunk (collect results first)")
        chunk = tuple(sets)
        conn.send((tag, chunk))
        self._busy[conn] = (tag, chunk)

    def collect(self) -> list[ChunkDone]:
        """Wait for at least one chunk in flight to finish; the finished chunks, their logits
        entered into the oracle (in the order they arrived; the caller merges by set).

        Raises:
            The worker's own error (an ``OracleError`` for a worker that died).
        """
        if not self._busy:
            return []
        done = []
        for conn in wait(list(self._busy)):
            assert isinstance(conn, Connection)
            tag, chunk = self._busy.pop(conn)
            _, got, logits, work, seconds = self._receive(conn)
            if got != tag or len(logits) != len(chunk):
                raise OracleError(f"a worker answered chunk {got} for chunk {tag}")
            self.oracle.record_exact(chunk, logits, work)
            done.append(ChunkDone(tag, chunk, logits, seconds))
        return done

    def _receive(self, conn: Connection) -> tuple[Any, ...]:
        """One message from a worker; its error raised here."""
        try:
            message = conn.recv()
        except (EOFError, OSError) as err:
            raise OracleError("a worker process of num_workers ended without answering "
                              "(killed, e.g. out of memory?)") from err
        if message[0] == "error":
            _, exc, text = message
            if isinstance(exc, BaseException):
                raise exc
            raise OracleError(f"a worker process failed:\n{text}")
        return tuple(message)

    def _terminate(self) -> None:
        for proc in self._procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self._procs:
            proc.join(timeout=5)
        for conn in self._conns:
            conn.close()
        self._procs, self._conns, self._busy = [], [], {}


__all__ = ["ChunkDone", "ForkedWorkers", "check_workers", "fork_available", "usable_cores"]
