"""Project exceptions, and the one-line forms a user sees. Every error the framework raises on
bad input derives from CftgnnError."""

from __future__ import annotations

import sys
from collections.abc import Iterator


class CftgnnError(Exception):
    """Base class of all cftgnn errors."""


class DataFormatError(CftgnnError, ValueError):
    """A data file or array is malformed (message names the file, line or value)."""


class DataNotFoundError(CftgnnError, FileNotFoundError):
    """A data file is absent and could not be obtained."""


class DownloadError(CftgnnError, OSError):
    """A download failed or its content did not verify."""


class IndexQueryError(CftgnnError, IndexError):
    """A query to the temporal index names an event or node outside the stream."""


class OracleError(CftgnnError, ValueError):
    """An oracle was misused: removed ids outside the candidates, a bad backend answer."""


class ExplainerError(CftgnnError, ValueError):
    """An explainer or selection strategy was configured or called incorrectly."""


class ConfigError(CftgnnError, ValueError):
    """A configuration value is out of range or inconsistent."""


class TrainingError(CftgnnError, RuntimeError):
    """Training produced no usable model (a loss or validation metric that is not a number);
    nothing is saved."""


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then its cause (or, without one, its context), and so on, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        yield current
        seen.add(id(current))
        current = current.__cause__ or current.__context__


def user_error(exc: BaseException) -> CftgnnError | None:
    """The ``CftgnnError`` behind ``exc`` (``exc`` itself or a cause), if any.

    ``hydra.utils.instantiate`` wraps what a constructor raises in its own exception, with
    the original as ``__cause__``; this is the one place that unwraps it.
    """
    return next((e for e in exception_chain(exc) if isinstance(e, CftgnnError)), None)


def short_reason(exc: BaseException, limit: int = 160) -> str:
    """``exc``'s message for one line: its first line (its type's name when it has none), at
    most ``limit`` characters."""
    return ((str(exc).splitlines() or [""])[0] or type(exc).__name__)[:limit]


def warn(message: str) -> None:
    """Print ``warning: <message>`` on stderr, the one form of a warning users see (the run
    goes on)."""
    print(f"warning: {message}", file=sys.stderr)


def print_block(text: str) -> None:
    """Print ``text`` (several lines) and a newline on stdout in one write, after what is
    pending there: processes that share a terminal or a pipe (the shards of a sweep) then
    show each other's blocks whole, never one's lines inside another's."""
    out = sys.stdout
    out.flush()
    data = f"{text}\n"
    raw = getattr(out, "buffer", None)  # the bytes under a text stream (absent when captured)
    if raw is None:
        out.write(data)
    else:
        raw.write(data.encode(out.encoding or "utf-8", errors=out.errors or "strict"))
        raw.flush()
    out.flush()
