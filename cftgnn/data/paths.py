"""Where data files and processed caches live.

Precedence for the data directory: an explicit argument (``paths.data_dir`` in the Hydra config)
wins; otherwise the environment variable ``CFTGNN_DATA_DIR``; otherwise ``<project>/data``.
The Hydra config resolves ``paths.data_dir`` from the same variable, so setting it once points
every command at a folder of data files. A variable naming a folder that does not exist, or a
file in place of the folder, is refused when a loader looks there, before any download is
tried (``checked_data_dir``).
"""

from __future__ import annotations

import os
from pathlib import Path

from cftgnn.errors import ConfigError

DATA_DIR_ENV = "CFTGNN_DATA_DIR"
CACHE_DIR_ENV = "CFTGNN_CACHE_DIR"


def project_root() -> Path:
    """The source checkout's root when running from one, else the current directory."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "pyproject.toml").is_file() else Path.cwd()


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The data directory: argument, else ``$CFTGNN_DATA_DIR``, else ``<project>/data``."""
    if data_dir is not None and str(data_dir) != "":
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return project_root() / "data"


def data_dir_problem(data_dir: str | os.PathLike[str] | None = None) -> str | None:
    """What is wrong with the data directory (``resolve_data_dir``), in one line, or None: a
    path that is a file, or a folder that ``$CFTGNN_DATA_DIR`` names and that does not exist
    (a typo would otherwise send the run to a download). A missing folder named otherwise
    (the default ``<project>/data``, ``paths.data_dir``) is fine: it is made for the
    download."""
    folder = resolve_data_dir(data_dir)
    env = os.environ.get(DATA_DIR_ENV)
    named = bool(env) and folder == Path(str(env)).expanduser()
    what = f"{DATA_DIR_ENV} names {str(folder)!r}" if named else \
        f"the data directory {str(folder)!r} (paths.data_dir)"
    if folder.exists() and not folder.is_dir():
        return f"{what}, which is a file, not a folder; point it at the folder of the data files"
    if named and not folder.exists():
        return (f"{what}, which does not exist; create it, point {DATA_DIR_ENV} at the folder "
                "of the data files, or unset it (then <project>/data is used, and made for "
                "downloads)")
    return None


def checked_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """``resolve_data_dir``, refused when ``data_dir_problem`` finds it wrong.

    Raises:
        ConfigError: A file in place of the folder, or a folder ``$CFTGNN_DATA_DIR`` names
            that does not exist.
    """
    problem = data_dir_problem(data_dir)
    if problem is not None:
        raise ConfigError(problem)
    return resolve_data_dir(data_dir)


def resolve_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The processed-stream cache: argument, else ``$CFTGNN_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/cftgnn`` (``~/.cache/cftgnn``)."""
    if cache_dir is not None and str(cache_dir) != "":
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "cftgnn"
