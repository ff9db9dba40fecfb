"""File helpers every stage shares: durable atomic writes, SHA-256 of a file, a writable-folder
check made before any work starts."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

from cftgnn.errors import ConfigError


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, read in chunks (the one hashing helper of the project)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_if_file(path: str | os.PathLike[str]) -> str | None:
    """``file_sha256`` of ``path``, None when it is not a file (fresh weights' text)."""
    return file_sha256(path) if Path(path).is_file() else None


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Flush a written file's bytes to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Flush a folder's entries (a rename into it) to the disk; a no-op where folders cannot
    be opened (Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on a folder
        pass
    finally:
        os.close(fd)


def replace_durably(tmp: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Move a fully written ``tmp`` onto ``path`` so that ``path`` is complete or absent after
    a crash: the bytes are flushed before the rename, the rename after it."""
    fsync_file(tmp)
    os.replace(tmp, path)
    fsync_dir(Path(path).parent)


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (temporary file, fsync, rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    replace_durably(tmp, path)


def check_writable_dir(path: str | os.PathLike[str], option: str) -> Path:
    """Create ``path`` (with its parents) and check that a file can be written in it, before
    any work that would write there starts.

    Args:
        path: The folder.
        option: The option that named it, for the message (``out_dir``).

    Raises:
        ConfigError: Naming the folder, the option and the reason.
    """
    folder = Path(path)
    probe = folder / f".write-test-{uuid.uuid4().hex}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"{option} {str(folder)!r} cannot be written ({reason}); choose a "
                          "writable folder") from None
    return folder


__all__ = ["atomic_write", "check_writable_dir", "file_sha256", "fsync_dir", "fsync_file",
           "replace_durably", "sha256_if_file"]
