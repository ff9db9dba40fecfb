"""Project exceptions. Every error the framework raises on bad input derives from CftgnnError."""

from __future__ import annotations


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


def user_error(exc: BaseException) -> CftgnnError | None:
    """The ``CftgnnError`` behind ``exc`` (``exc`` itself or a cause), if any.

    ``hydra.utils.instantiate`` wraps what a constructor raises in its own exception, with
    the original as ``__cause__``; this is the one place that unwraps it.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, CftgnnError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
