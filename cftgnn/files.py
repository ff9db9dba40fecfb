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
    """:func:`file_sha256` of ``path``, None when it is not a file (fresh weights' text)."""
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
    try:
        folder.mkdir(parents=True, exist_ok=True)
        reason = _probe(folder)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    if reason is not None:
        raise ConfigError(f"{option} {str(folder)!r} cannot be written ({reason}); choose a "
                          "writable folder")
    return folder


def _probe(folder: Path) -> str | None:
    """Why no file can be created in the existing ``folder`` (None when one can): a real
    file is written and removed, since permission bits say nothing about a read-only mount
    (and root passes every ``os.access`` check)."""
    probe = folder / f".write-test-{uuid.uuid4().hex}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def unwritable_reason(path: str | os.PathLike[str]) -> str | None:
    """Why the folder ``path`` could not be created or written in, without creating it.

    The nearest existing folder of ``path`` and its parents is probed with a real file.

    Returns:
        The reason (``Read-only file system``, ``/x is not a folder``), or None when files
        can be written there.
    """
    folder = Path(path)
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        return f"{existing} is not a folder"
    return _probe(existing)


def check_can_write(path: str | os.PathLike[str], option: str, file: bool = False) -> Path:
    """Check, before any work and without creating anything, that the folder ``path`` (or,
    with ``file``, the file ``path``) can be written.

    Args:
        path: The output folder, or the output file when ``file`` is true.
        option: What named it, for the message (``--out``).
        file: Whether ``path`` names a file (its folder is checked).

    Raises:
        ConfigError: Naming the path, the option and the reason.
    """
    target = Path(path)
    if file and target.is_dir():
        reason: str | None = "it is a folder; name a file"
    else:
        reason = unwritable_reason(target.parent if file else target)
    if reason is not None:
        kind = "a writable file" if file else "a writable folder"
        raise ConfigError(f"{option} {str(target)!r} cannot be written ({reason}); choose "
                          f"{kind}")
    return target


__all__ = ["atomic_write", "check_can_write", "check_writable_dir", "file_sha256", "fsync_dir",
           "fsync_file", "replace_durably", "sha256_if_file", "unwritable_reason"]
