"""Where data files and processed caches live.

Precedence for the data directory: an explicit argument (``paths.data_dir`` in the Hydra config)
wins; otherwise the environment variable ``CFTGNN_DATA_DIR``; otherwise ``<project>/data``.
The Hydra config resolves ``paths.data_dir`` from the same variable, so setting it once points
every command at a folder of data files.
"""

from __future__ import annotations

import os
from pathlib import Path

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
