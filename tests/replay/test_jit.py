"""When numba starts (``cftgnn.jit``): at the first compiled call of a replay of enough sets,
never at import; and the ``CFTGNN_JIT`` switch. The loops themselves and their twins:
``test_rows_kernels.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cftgnn import jit

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, **env: str) -> list[str]:
    """What ``code`` prints, run in a fresh interpreter (numba not started), split."""
    environ = {k: v for k, v in os.environ.items() if k != jit.ENV} | env
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=environ, check=True, cwd=ROOT)
    return out.stdout.split()


#: A fresh interpreter's toy TGN replay (``engine``, event 399 of a 400-event stream), for
#: the tests that must start numba themselves.
_TOY = """
import sys, itertools, numpy as np, torch
from cftgnn.data.synthetic import make_synthetic_stream
from cftgnn.models.tgn import TGN
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn import jit
stream = make_synthetic_stream(40, 400, seed=11, feat_dim=1)
torch.manual_seed(0)
model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8, embedding_dim=16,
            num_layers=1, num_heads=2, num_neighbors=5, batch_size=20)
engine = ReplayEngine(model, stream)"""


def test_few_sets_run_the_twins_until_numba_has_started(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(jit, "ENABLED", True)
    monkeypatch.setattr(jit, "_numba", None)  # not started
    with jit.for_sets(jit.MIN_SETS - 1):
        assert not jit.ENABLED
    assert jit.ENABLED
    with jit.for_sets(jit.MIN_SETS):
        assert jit.ENABLED
    with jit.for_sets(1, jit.MIN_BATCHES - 1):
        assert not jit.ENABLED
    with jit.for_sets(1, jit.MIN_BATCHES):  # one set through a long history pays too
        assert jit.ENABLED
    monkeypatch.setattr(jit, "_numba", object())  # started: nothing more to pay
    with jit.for_sets(1):
        assert jit.ENABLED
    monkeypatch.setattr(jit, "ENABLED", False)  # CFTGNN_JIT=0 or no numba: stays off
    with jit.for_sets(jit.MIN_SETS):
        assert not jit.ENABLED


@pytest.mark.skipif(not jit.ENABLED, reason="numba is not installed (or CFTGNN_JIT=0) here")
def test_a_replay_of_few_sets_leaves_numba_unloaded_and_one_of_many_starts_it():
    """The 1M-event run of docs/benchmarks.md makes calls of 1 and 10 sets only: numba's
    0.1 GiB stays out of it; an exhaustive chunk starts numba, with the same logits."""
    code = _TOY + """
replay = EventReplay(engine, 399, m_max=16)
cand = replay.candidates.ids.tolist()
pairs = [frozenset(c) for c in itertools.combinations(cand, 2)][:jit.MIN_SETS]
replay.exact(pairs[:jit.MIN_SETS - 1])
print('numba' in sys.modules, len(pairs) == jit.MIN_SETS)
jit.ENABLED = False
twins = EventReplay(engine, 399, m_max=16).exact(pairs)
jit.ENABLED = True
compiled = EventReplay(engine, 399, m_max=16).exact(pairs)
print('numba' in sys.modules, jit.started(), np.array_equal(twins, compiled))
"""
    assert _python(code) == ["False", "True", "True", "True", "True"]


@pytest.mark.skipif(not jit.ENABLED, reason="numba is not installed (or CFTGNN_JIT=0) here")
def test_one_set_through_a_long_history_starts_numba_with_the_twins_logits():
    """A far-back event's single exact calls (a search's, fidelity's) replay many batches:
    from ``MIN_BATCHES`` of them on the compiled loops run (here lowered to the toy's
    history), with the twins' logits."""
    code = _TOY + """
replay = EventReplay(engine, 399, m_max=16)
one = [frozenset(replay.candidates.ids.tolist()[:3])]
batches = len(replay._plan.trajectory.batches)
jit.MIN_BATCHES = batches + 1
short = replay.exact(one)
print('numba' in sys.modules)
jit.MIN_BATCHES = batches
long = EventReplay(engine, 399, m_max=16).exact(one)
print('numba' in sys.modules, jit.started(), np.array_equal(short, long))
"""
    assert _python(code) == ["False", "True", "True", "True"]


@pytest.mark.skipif(not jit.ENABLED, reason="numba is not installed (or CFTGNN_JIT=0) here")
def test_a_numba_that_will_not_import_runs_the_twins_with_one_warning():
    """The GPU machine's image has a numba of its own: were it broken (built for another
    NumPy, say), a replay of many sets warns once and runs the twins, with their logits."""
    code = _TOY + """
import warnings
cand = EventReplay(engine, 399, m_max=16).candidates.ids.tolist()
pairs = [frozenset(c) for c in itertools.combinations(cand, 2)][:jit.MIN_SETS]
jit.ENABLED = False
twins = EventReplay(engine, 399, m_max=16).exact(pairs)
jit.ENABLED = True
sys.modules['numba'] = None  # import numba now raises ImportError
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    broken = EventReplay(engine, 399, m_max=16).exact(pairs)
    again = EventReplay(engine, 399, m_max=16).exact(pairs)
print(jit.ENABLED, jit.started(), np.array_equal(twins, broken), np.array_equal(twins, again),
      sum('could not be imported' in str(w.message) for w in caught))
"""
    assert _python(code) == ["False", "False", "True", "True", "1"]


def test_numba_starts_at_the_first_compiled_call_not_at_import():
    """Scripts import the replay to check their options; numba (0.25 s, 0.06 GiB) loads only
    when a compiled loop runs, and then the module's names are numba's own dispatchers."""
    import subprocess
    import sys

    code = ("import sys, numpy as np, cftgnn.replay.tgn.rows_kernels as k, cftgnn.jit as j; "
            "a = 'numba' in sys.modules; lazy = type(k.hash_groups).__name__; "
            "k.groups(np.arange(6, dtype=np.int64).reshape(3, 2) % 2); "
            "print(a, lazy, 'numba' in sys.modules, j.started(), type(k.hash_groups).__name__)")
    env = {**__import__("os").environ}
    env.pop("CFTGNN_JIT", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.split() == ["False", "_Lazy", "True", "True", "CPUDispatcher"]




@pytest.mark.parametrize(("value", "on"), [(None, True), ("", True), (" On ", True),
                                           ("1", True), ("0", False), ("FALSE", False),
                                           ("off", False), ("no", False)])
def test_the_jit_switch_reads_on_and_off_words(monkeypatch: pytest.MonkeyPatch,
                                                value: str | None, on: bool) -> None:
    from cftgnn.options import JIT_ENV, environment_switch

    if value is None:
        monkeypatch.delenv(JIT_ENV, raising=False)
    else:
        monkeypatch.setenv(JIT_ENV, value)
    assert environment_switch(JIT_ENV) is on


def test_a_mistyped_jit_switch_is_one_error_line_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``CFTGNN_JIT=of`` used to leave the compiled loops on without a word."""
    import os
    import subprocess
    import sys

    from cftgnn.errors import ConfigError
    from cftgnn.options import JIT_ENV, environment_switch

    monkeypatch.setenv(JIT_ENV, "of")
    with pytest.raises(ConfigError, match="CFTGNN_JIT must be one of .*got 'of'"):
        environment_switch(JIT_ENV)
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "scripts" / "explain.py"), "n_events=1",
                          f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True,
                         env=dict(os.environ), cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: environment variable CFTGNN_JIT must be one of 1, true, yes, on, 0, false, "
        "no, off, got 'of'"]
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(not jit.ENABLED, reason="numba is not installed (or CFTGNN_JIT=0) here")
def test_a_module_imported_after_numbas_start_gets_compiled_loops():
    """A module of compiled loops first imported once numba has started used to keep its
    lazy wrappers (found by a helper): its loops would have run as plain Python. Also while
    a small replay runs the twins (``for_sets`` sets ``ENABLED`` false): the loops are still
    handed to numba."""
    code = ("from cftgnn import jit; jit.start(); "
            "from cftgnn.replay.tgn import rows_kernels as rk; "
            "print(type(rk.hash_groups).__name__)")
    assert _python(code) == ["CPUDispatcher"]
    code = ("from cftgnn import jit\n"
            "with jit.for_sets(1):\n"
            "    from cftgnn.replay.tgn import rows_kernels as rk\n"
            "print(type(rk.hash_groups).__name__)\n"
            "jit.start(); print(type(rk.hash_groups).__name__)")
    assert _python(code) == ["_Lazy", "CPUDispatcher"]


_PROBE_LOOPS = '''
import numpy as np
from cftgnn import jit


@jit.compiled
def twice(x):
    out = np.empty(len(x), dtype=np.int64)
    for i in range(len(x)):
        out[i] = 2 * x[i]
    return out
'''


@pytest.mark.skipif(not jit.ENABLED, reason="numba is not installed (or CFTGNN_JIT=0) here")
def test_a_cold_numba_cache_is_announced_in_one_line_and_a_warm_one_is_not(tmp_path):
    """The first exact run after an install compiles the loops (seconds): ``warm_up`` says so
    when numba's on-disk cache (here an empty ``NUMBA_CACHE_DIR``) holds none of them."""
    (tmp_path / "probe_loops.py").write_text(_PROBE_LOOPS)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    code = ("import numpy as np, probe_loops\nfrom cftgnn import jit\n"
            "jit.warm_up(notice=lambda line: print(repr(line)))\n"
            "print(probe_loops.twice(np.arange(3, dtype=np.int64)).sum())")
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=os.environ | env, check=True, cwd=tmp_path).stdout.splitlines()
    assert first == [repr(jit.COLD_NOTICE), "6"]  # before the loop compiled
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=os.environ | env, check=True, cwd=tmp_path).stdout.splitlines()
    assert again == ["6"]  # cached by the first run: nothing to say
    (tmp_path / "probe_loops.py").write_text(_PROBE_LOOPS + "\n# edited\n")
    os.utime(tmp_path / "probe_loops.py", (1, 1))  # another stamp: numba's cache is stale
    edited = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=os.environ | env, check=True, cwd=tmp_path).stdout.splitlines()
    assert edited[0] == repr(jit.COLD_NOTICE)


def test_the_warm_up_command_has_nothing_to_do_without_numba(monkeypatch, capsys):
    from cftgnn.runs import warm

    monkeypatch.setattr(jit, "ENABLED", False)
    assert warm.warm() == (False, 0.0)
    warm.main([])
    assert capsys.readouterr().out == ("nothing to compile: numba is not installed here "
                                       f"(or {jit.ENV}=0)\n")


@pytest.mark.slow
@pytest.mark.skipif(not jit.ENABLED, reason="numba is not installed (or CFTGNN_JIT=0) here")
def test_the_warm_up_command_compiles_what_an_exact_run_compiles(tmp_path):
    """``python -m cftgnn.runs.warm`` into an empty cache, then a tiny exact run:
    the run finds every loop it calls compiled (no index file added, no notice)."""
    env = os.environ | {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def run(*args: str) -> str:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                              check=True, cwd=ROOT, timeout=900).stdout

    assert run("-m", "cftgnn.runs.warm").startswith("compiled the replay's numba loops")
    cached = sorted(p.name for p in (tmp_path / "cache").rglob("*.nbi"))
    assert run("-m", "cftgnn.runs.warm").startswith("the replay's numba loops were "
                                                          "compiled already")
    out = run("scripts/explain.py", "debug=default", "checkpoint=null", "explainer=exhaustive",
              "explainer.max_size=2", "mode=exact", "n_events=2", "picture=false",
              "progress=false", f"out_dir={tmp_path / 'run'}")
    assert "note: compiling" not in out
    assert sorted(p.name for p in (tmp_path / "cache").rglob("*.nbi")) == cached
