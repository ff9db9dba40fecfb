"""The exact oracle of two versions of the code, interleaved in one run.

```bash
git worktree add --detach /work/scratch/old 1d04895     # the other version, outside the tree
python scripts/benchmark_oracle_versions.py /work/scratch/old . --n-events 5
python scripts/benchmark_oracle_versions.py /work/scratch/old . --n-events 5 --profile prof/
```

Each version runs in a subprocess of its own (``PYTHONPATH`` = its tree, one torch thread),
loads the same stream and checkpoint, and answers the parent's requests: explain event ``i``
(its ``EventReplay``), time ``exact(sets)``. The parent draws the events and the removal sets
as ``benchmark_oracle.py`` does (same seed: the same events and, per event, the same 8 single
sets and the batch of ``P``), and times every call on both sides back to back, alternating
which side goes first, ``--repeats`` times. A loaded machine slows both sides alike within a
pair, so the figures are **ratios** (second / first) of per-call medians over the repeats:
per set for single calls, per event for the batch, and of their totals (what a search making
these calls pays). Before the first timed call both sides answer one batch of
``--batch-size`` sets, untimed, so that numba's start (where a version has it) is paid there.
With ``--profile DIR`` every timed exact call
is also run under ``cProfile`` (in separate passes, after the timed ones) and the per-function
totals of the two versions are printed side by side.

Not a Hydra entry point on purpose: it must run the code of commits whose options differ.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


# ------------------------------------------------------------------------------------ worker
def _worker(tree: str, dataset: str, model_name: str) -> None:
    """Serve requests (JSON lines on stdin) with the code of ``tree``."""
    import cProfile

    if sys.path and Path(sys.path[0]).resolve() == HERE.parent:
        del sys.path[0]  # this script's folder: not the tree's code
    sys.path.insert(0, tree)
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # whatever the library prints goes to stderr, not the protocol
    import numpy as np
    import torch
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    import cftgnn
    import cftgnn.config  # noqa: F401  (the ${cftgnn_root:} resolver)

    assert Path(cftgnn.__file__).resolve().is_relative_to(Path(tree).resolve()), cftgnn.__file__
    try:
        from cftgnn.oracle.engine import EventReplay, ReplayEngine
        from cftgnn.training.resolve import resolve_model
    except ImportError:  # the code before cftgnn.oracle (2026-11-23)
        from cftgnn.explain.replay import (  # type: ignore[no-redef]
            EventReplay,
            ReplayEngine,
        )
        from cftgnn.models.resolve import resolve_model  # type: ignore[no-redef]
    from cftgnn.data.index import TemporalIndex

    torch.set_num_threads(1)
    with initialize_config_dir(config_dir=str(Path(tree) / "conf"), version_base="1.3"):
        cfg = compose("benchmark_oracle", overrides=[f"dataset={dataset}", f"model={model_name}"])
    stream = instantiate(cfg.dataset)
    model, source = resolve_model(cfg.model, stream, "auto", cfg.paths.checkpoint_dir, "cpu", 0)
    engine = ReplayEngine(model, stream, TemporalIndex(stream))
    replays: dict[int, Any] = {}
    profiles = {"single": cProfile.Profile(), "batch": cProfile.Profile()}
    timers: dict[str, dict[str, float]] = {"single": {}, "batch": {}}
    timing: list[str] = []  # the kind being timed, when a profiled call runs
    _wrap_steps(timers, timing)
    out.write(json.dumps({"num_events": int(stream.num_events), "model": str(source),
                          "code": str(Path(cftgnn.__file__).parent)}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        if op == "setup":
            start = time.perf_counter()
            replay = EventReplay(engine, int(req["event"]), None, 64)
            replays[int(req["event"])] = replay
            reply: dict[str, Any] = {"seconds": time.perf_counter() - start,
                                     "candidates": replay.candidates.ids.tolist()}
        elif op == "exact":
            replay = replays[int(req["event"])]
            sets = [frozenset(s) for s in req["sets"]]
            prof = profiles[req["profile"]] if req.get("profile") else None
            if prof is not None and req.get("timers"):
                timing.append(req["profile"])
                prof = None
            start = time.perf_counter()
            if prof is not None:
                prof.enable()
            logits = replay.exact(sets)
            if prof is not None:
                prof.disable()
            timing.clear()
            reply = {"seconds": time.perf_counter() - start,
                     "logits": np.asarray(logits, dtype=np.float64).tolist()}
        elif op == "no_prune":  # measurement only: the cone replay without pruning
            engine.replay.options.prune_perturbations = False
            reply = {}
        elif op == "drop":
            replays.pop(int(req["event"]), None)
            reply = {}
        elif op == "dump":
            for kind, prof in profiles.items():
                prof.dump_stats(str(Path(req["dir"]) / f"{req['label']}_{kind}.pstats"))
            (Path(req["dir"]) / f"{req['label']}_timers.json").write_text(json.dumps(timers))
            reply = {}
        else:
            raise ValueError(op)
        out.write(json.dumps(reply) + "\n")


def _wrap_steps(timers: dict[str, dict[str, float]], timing: list[str]) -> None:
    """Time the cone replay's step functions (and TGN's message update) with
    ``perf_counter`` while ``timing`` names a kind: inclusive seconds per function, without
    cProfile's per-call overhead on the NumPy calls inside them."""
    import functools
    import importlib

    # the step functions of the versions before the replay.tgn package, then its driver's
    # and the methods of its table of rows
    targets: list[tuple[Any, str]] = []
    for name in ("cftgnn.replay.cone", "cftgnn.models.cone", "cftgnn.replay.tgn.cone",
                 "cftgnn.replay.tgn.rows"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        targets.append((mod, name))
        if hasattr(mod, "RowTable"):
            targets.append((mod.RowTable, name))
    for mod, name in targets:
        for attr, fn in list(vars(mod).items()):
            if not (callable(fn) and getattr(fn, "__module__", None) == name
                    and not attr.startswith("__") and not isinstance(fn, type)
                    and (attr.startswith("_") or isinstance(mod, type))):
                continue

            def timed(*a: Any, _fn: Any = fn, _key: str = attr, **k: Any) -> Any:
                if not timing:
                    return _fn(*a, **k)
                start = time.perf_counter()
                try:
                    return _fn(*a, **k)
                finally:
                    acc = timers[timing[0]]
                    acc[_key] = acc.get(_key, 0.0) + time.perf_counter() - start

            setattr(mod, attr, functools.wraps(fn)(timed))


# ------------------------------------------------------------------------------------ parent
class _Side:
    """One version's worker process."""

    def __init__(self, label: str, tree: Path, dataset: str, model: str) -> None:
        self.label = label
        env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE), "--worker", str(tree), "--dataset", dataset,
             "--model", model],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, bufsize=1)
        self.hello = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"error: the {self.label} worker ended (see its stderr above)")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def ask(self, **req: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        return self._read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def _median(values: list[float]) -> float:
    import statistics

    return float(statistics.median(values)) if values else float("nan")


def _pairs(sides: list[_Side], rep: int, **req: Any) -> dict[str, dict[str, Any]]:
    """The same request to both sides back to back, the first side alternating with ``rep``."""
    order = sides if rep % 2 == 0 else sides[::-1]
    return {side.label: side.ask(**req) for side in order}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    sides = [_Side("A", args.a, args.dataset, args.model),
             _Side("B", args.b, args.dataset, args.model)]
    for side in sides:
        print(f"{side.label}: {side.hello['code']} ({side.hello['model']})", file=sys.stderr)
        if side.label in args.no_prune:
            side.ask(op="no_prune")
    num_events = sides[0].hello["num_events"]
    assert num_events == sides[1].hello["num_events"]
    # drawn as cftgnn.benchmarks.oracle draws them (same seed: same events and sets)
    rng = np.random.default_rng(args.seed)
    events = np.sort(rng.choice(np.arange(min(args.min_event, num_events - 1), num_events),
                                size=args.n_events, replace=False)).tolist()
    if args.events:  # these instead (the sets are still drawn after the sampled events)
        events = sorted(int(e) for e in args.events.split(","))

    def draw(cand: Any) -> list[int]:
        size = int(rng.integers(1, max(2, len(cand) // 4 + 1)))
        return sorted(rng.choice(cand, size=size, replace=False).tolist())

    single_ratios: list[float] = []  # per set: median B / median A over the repeats
    single_ms: dict[str, list[float]] = {"A": [], "B": []}
    batch_ratios: list[float] = []  # per event
    batch_ms: dict[str, list[float]] = {"A": [], "B": []}
    setup: dict[str, list[float]] = {"A": [], "B": []}
    max_dev = 0.0
    profiling = args.profile is not None
    warm_rng, warmed = np.random.default_rng(args.seed + 1), False  # the draws stay as they were
    for n, i in enumerate(events):
        setups = _pairs(sides, n, op="setup", event=i)
        for label, reply in setups.items():
            setup[label].append(reply["seconds"])
        cand = np.asarray(setups["A"]["candidates"], dtype=np.int64)
        assert cand.tolist() == setups["B"]["candidates"], f"event {i}: other candidates"
        if len(cand) == 0:
            continue
        sets = [draw(cand) for _ in range(args.sets_per_event)]
        big = sets + [draw(cand) for _ in range(max(0, args.batch_size - len(sets)))]
        big = big[: args.batch_size]
        _pairs(sides, n, op="exact", event=i, sets=[[]])  # warm: first call of each event
        if not warmed:  # once, untimed: numba's start and its compiled loops (they run from
            # cftgnn.jit.MIN_SETS sets on), which the first timed batch paid otherwise
            warm = [sorted(warm_rng.choice(cand, size=min(len(cand), 3), replace=False)
                           .tolist()) for _ in range(args.batch_size)]
            _pairs(sides, n, op="exact", event=i, sets=warm)
            warmed = True
        for s in sets:
            times: dict[str, list[float]] = {"A": [], "B": []}
            for rep in range(args.repeats):
                replies = _pairs(sides, rep, op="exact", event=i, sets=[s])
                for label, reply in replies.items():
                    times[label].append(reply["seconds"])
                max_dev = max(max_dev, abs(replies["B"]["logits"][0]
                                           - replies["A"]["logits"][0]))
            a, b = _median(times["A"]), _median(times["B"])
            single_ms["A"].append(a * 1e3)
            single_ms["B"].append(b * 1e3)
            single_ratios.append(b / a)
        times = {"A": [], "B": []}
        for rep in range(args.repeats):
            replies = _pairs(sides, rep, op="exact", event=i, sets=big)
            for label, reply in replies.items():
                times[label].append(reply["seconds"])
            max_dev = max(max_dev, float(np.max(np.abs(np.subtract(replies["B"]["logits"],
                                                                   replies["A"]["logits"])))))
        a, b = _median(times["A"]), _median(times["B"])
        batch_ms["A"].append(a * 1e3 / len(big))
        batch_ms["B"].append(b * 1e3 / len(big))
        batch_ratios.append(b / a)
        if profiling:  # separate passes: the profiler's overhead stays out of the timings
            for side in sides:
                for timers in (False, True):
                    for s in sets:
                        side.ask(op="exact", event=i, sets=[s], profile="single", timers=timers)
                    side.ask(op="exact", event=i, sets=big, profile="batch", timers=timers)
        for side in sides:
            side.ask(op="drop", event=i)
        print(f"event {i}: |C| {len(cand)}, single B/A {_median(single_ratios[-len(sets):]):.2f}"
              f", batch B/A {batch_ratios[-1]:.2f}", file=sys.stderr)
    if profiling:
        args.profile.mkdir(parents=True, exist_ok=True)
        for side in sides:
            side.ask(op="dump", dir=str(args.profile), label=side.label)
    for side in sides:
        side.close()
    res = {
        "A": str(args.a), "B": str(args.b), "dataset": args.dataset, "model": args.model,
        "events": events, "repeats": args.repeats, "no_prune": args.no_prune,
        "batch_size": args.batch_size,
        "single_ratio_B_over_A": {"median_over_sets": _median(single_ratios),
                                  "of_median_calls": _median(single_ms["B"])
                                  / _median(single_ms["A"])},
        "single_ms_median": {k: _median(v) for k, v in single_ms.items()},
        # what a search making these calls pays: the sum of the per-set medians
        "single_ratio_of_totals": sum(single_ms["B"]) / max(sum(single_ms["A"]), 1e-12),
        "batch_ratio_B_over_A": {"median_over_events": _median(batch_ratios),
                                 "of_median_sets": _median(batch_ms["B"])
                                 / _median(batch_ms["A"])},
        "batch_ms_per_set_median": {k: _median(v) for k, v in batch_ms.items()},
        "batch_ratio_of_totals": sum(batch_ms["B"]) / max(sum(batch_ms["A"]), 1e-12),
        "setup_ms_median": {k: _median(v) * 1e3 for k, v in setup.items()},
        "max_abs_logit_B_minus_A": max_dev,
        "load_average": os.getloadavg(),
    }
    if profiling:
        res["profile"] = {kind: _profile_table(args.profile, kind, args.top)
                          for kind in ("single", "batch")}
        res["step_seconds"] = {
            label: json.loads((args.profile / f"{label}_timers.json").read_text())
            for label in ("A", "B")}
    return res


def _profile_table(folder: Path, kind: str, top: int) -> list[str]:
    """The functions with the largest own time on either side, A and B side by side (s)."""
    import pstats

    def own(label: str) -> dict[str, float]:
        stats = pstats.Stats(str(folder / f"{label}_{kind}.pstats")).stats  # type: ignore[attr-defined]
        acc: dict[str, float] = {}
        for (file, _line, func), (_, _, tottime, _, _) in stats.items():
            key = f"{Path(file).name}:{func}"  # modules moved between versions
            acc[key] = acc.get(key, 0.0) + tottime
        return acc

    a, b = own("A"), own("B")
    keys = sorted(set(a) | set(b), key=lambda k: -max(a.get(k, 0.0), b.get(k, 0.0)))[:top]
    rows = [f"{kind}: total A {sum(a.values()):.3f} s, B {sum(b.values()):.3f} s"]
    rows += [f"{a.get(k, 0.0):8.3f} {b.get(k, 0.0):8.3f} {b.get(k, 0.0) - a.get(k, 0.0):+8.3f}  {k}"
             for k in keys]
    return rows


class _Parser(argparse.ArgumentParser):
    """A bad command line ends in one ``error: …`` line and exit status 2 (the project's
    rule), not argparse's usage block."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main() -> None:
    parser = _Parser(description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path, nargs="?", help="tree of the first version (A)")
    parser.add_argument("b", type=Path, nargs="?", help="tree of the second version (B)")
    parser.add_argument("--dataset", default="wikipedia")
    parser.add_argument("--model", default="tgn")
    parser.add_argument("--n-events", type=int, default=5)
    parser.add_argument("--sets-per-event", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--min-event", type=int, default=1000)
    parser.add_argument("--events", default="", help="comma-separated events to explain "
                        "instead of the sampled ones")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-prune", default="", choices=["", "A", "B", "AB"],
                        help="sides whose cone replay runs without perturbation pruning "
                             "(a measurement of what pruning buys; not today's logits)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        _worker(args.worker, args.dataset, args.model)
        return
    # this checkout's helpers (the parent runs neither tree's code), whichever cftgnn is
    # installed, or none: checked before the run, not found missing after it
    sys.path.insert(0, str(HERE.parents[1]))
    from cftgnn.cli import friendly_errors
    from cftgnn.errors import ConfigError
    from cftgnn.files import atomic_write, check_can_write

    with friendly_errors():  # the environment checked first, as by every script
        if args.a is None or args.b is None:
            parser.error("two trees are needed: A (e.g. the old code's worktree) and B")
        for tree in (args.a, args.b):
            if not (tree / "cftgnn" / "__init__.py").is_file():
                parser.error(f"{tree} holds no cftgnn package")
        try:
            if args.out is not None:
                check_can_write(args.out, "--out", file=True)
            if args.profile is not None:
                check_can_write(args.profile, "--profile")
        except ConfigError as exc:
            parser.error(str(exc))
        res = run(args)
        text = json.dumps(res, indent=2)
        print(text)
        if args.out is not None:
            atomic_write(args.out, (text + "\n").encode())


if __name__ == "__main__":
    main()
