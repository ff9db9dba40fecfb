"""What a user sees when a script refuses its input: one ``error:`` line, exit status 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cftgnn.cli import friendly_errors


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
