"""What a user sees when a script refuses its input: one ``error:`` line, exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cftgnn.cli import friendly_errors

ROOT = Path(__file__).resolve().parents[2]


def lines(text: str) -> list[str]:
    """The lines of ``text`` that are not blank."""
    return [ln for ln in text.splitlines() if ln.strip()]


def one_line(stderr: str, prefix: str = "error: ") -> str:
    """The one line ``stderr`` holds, which starts with ``prefix`` (never a traceback or a
    usage block)."""
    assert "Traceback" not in stderr, stderr
    got = lines(stderr)
    assert len(got) == 1 and got[0].startswith(prefix), stderr
    return got[0]


def refused(capsys: pytest.CaptureFixture[str], fn: Callable[..., Any], *args: Any) -> str:
    """Call ``fn`` as a script's ``main`` runs it (under ``friendly_errors``): it must end in
    exit status 2 and one ``error:`` line, which is returned."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc, friendly_errors():
        fn(*args)
    assert exc.value.code == 2
    return one_line(capsys.readouterr().err)


def script_refused(name: str, *args: str, cwd: Path) -> tuple[str, list[str]]:
    """Run ``scripts/<name> args`` under ``-X importtime`` in ``cwd``; assert exit status 2,
    no traceback and one ``error:`` line. Returns that line and the modules imported."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-X", "importtime", str(ROOT / "scripts" / name),
                           *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    got = lines(done.stderr)
    imported = [ln.split("|")[-1].strip() for ln in got if ln.startswith("import time:")]
    said = [ln for ln in got if not ln.startswith("import time:")]
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert len(said) == 1 and said[0].startswith("error: "), said
    return said[0], imported
