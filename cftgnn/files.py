"""File helpers every stage shares: durable atomic writes, SHA-256 of a file, a writable-folder
check made before any work starts.

Every file a stage writes goes through ``atomic_output`` (or ``atomic_write``): the
bytes go to a temporary ``.<name>.<pid>.tmp`` next to the file, are flushed to the disk, then
renamed onto the file, so the file is complete or absent after a crash. A write that fails
removes its temporary file; one that fails for lack of space (``ENOSPC``, or ``EDQUOT``: a
quota) raises ``DiskFullError``, one line naming the file and its disk, which the scripts
print as ``error: …`` (``cftgnn.cli.friendly_errors``). Temporaries left by a writer that
was killed are removed when a run resumes (``remove_stale_temporaries``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from cftgnn.arrays import format_bytes
from cftgnn.errors import CftgnnError, ConfigError, exception_chain

#: ``errno`` values that mean "the disk (or the user's quota on it) is full".
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
#: The temporary name of a file being written by process ``pid``: ``.<name>.<pid>.tmp``.
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp$")


class DiskFullError(CftgnnError, OSError):
    """No space is left (or the quota is spent) on the disk a file was being written to; the
    message names the file and the disk's folder, and nothing was left under the file's name."""

    def __str__(self) -> str:
        return str(self.strerror)


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


def no_space(exc: BaseException) -> OSError | None:
    """The ``ENOSPC``/``EDQUOT`` ``OSError`` behind ``exc`` (itself, its cause or its
    context: ``torch.save`` reports a full disk as a ``RuntimeError`` raised while handling
    it), or None."""
    return next((e for e in exception_chain(exc)
                 if isinstance(e, OSError) and e.errno in NO_SPACE), None)


def nearest_existing(path: str | os.PathLike[str]) -> Path | None:
    """``path`` itself or its nearest ancestor that exists (None when none does, e.g. a
    relative path whose first part is absent)."""
    folder = Path(path)
    return next((p for p in (folder, *folder.parents) if p.exists()), None)


def mount_point(path: str | os.PathLike[str]) -> Path:
    """The mount point of the file system holding ``path`` (or its nearest existing folder)."""
    folder = nearest_existing(os.path.abspath(path)) or Path("/")
    while not os.path.ismount(folder) and folder != folder.parent:
        folder = folder.parent
    return folder


def disk_full_message(path: str | os.PathLike[str] | None, exc: OSError | None = None,
                      folder: bool = False) -> str:
    """One line for a write of ``path`` that found no space (or no quota) left: the file, its
    folder, the disk's mount point and free space, and what to do.

    Args:
        path: The file written (None: unknown).
        exc: The error (``EDQUOT`` says "disk quota exceeded").
        folder: ``path`` is a folder (a check made before any work), not the file written.
    """
    quota = exc is not None and exc.errno == errno.EDQUOT
    what = "disk quota exceeded" if quota else "no space left on device"
    if path is None:
        return f"{what}; free some space or choose an output folder on another disk"
    file = Path(os.path.abspath(path))
    where = f"in {file}" if folder else f"writing {file.name} in {file.parent}"
    disk = mount_point(file)
    try:
        free = f", {format_bytes(shutil.disk_usage(disk).free)} free"
    except OSError:
        free = ""
    return (f"{what} {where} (the disk mounted at {disk}{free}); free some space there or "
            "choose an output folder on another disk")


def temporary_path(path: str | os.PathLike[str]) -> Path:
    """Where this process writes ``path`` before renaming it: ``.<name>.<pid>.tmp`` next to it
    (one per writer, so that two processes never share one)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


@contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s bytes into, moved onto ``path`` (flushed, renamed,
    ``replace_durably``) when the block ends without error; otherwise removed, so that
    ``path`` keeps its old content (or stays absent) and no temporary file is left.

    Raises:
        DiskFullError: When the write (or the flush) found no space or no quota left; the
            message names the file and its disk (``disk_full_message``).
    """
    path = Path(path)
    tmp = temporary_path(path)
    try:
        with open(tmp, "wb") as f:
            yield f
        replace_durably(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        full = no_space(exc)
        if full is not None:
            raise DiskFullError(full.errno, disk_full_message(path, full), str(path)) from exc
        raise


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (``atomic_output``).

    Raises:
        DiskFullError: When no space is left on its disk (nothing is left under ``path``'s
            name, nor a temporary file).
    """
    with atomic_output(path) as f:
        f.write(data)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files (``temporary_path``) in ``folder`` whose writer is no
    longer running on this machine (killed mid-write); a live writer's are kept. (Process ids
    are this machine's: a folder shared with writers on other machines is resumed after they
    stopped.)

    Returns:
        The files removed.
    """
    removed: list[Path] = []
    folder = Path(folder)
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        m = _TEMPORARY.match(entry.name)
        if m is None or _alive(int(m.group("pid"))) or not entry.is_file():
            continue
        try:
            entry.unlink()
        except OSError:
            continue
        removed.append(entry)
    return removed


def check_writable_dir(path: str | os.PathLike[str], option: str) -> Path:
    """Create ``path`` (with its parents) and check that a file can be written in it (a block
    of bytes: a full disk is refused too), before any work that would write there starts.

    Args:
        path: The folder.
        option: The option that named it, for the message (``out_dir``).

    Raises:
        ConfigError: Naming the folder, the option and the reason.
    """
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        error = _probe(folder)
    except OSError as exc:
        error = exc
    if error is not None:
        if error.errno in NO_SPACE:
            raise ConfigError(f"{option}: {disk_full_message(folder, error, folder=True)}"
                              ) from None
        reason = error.strerror or type(error).__name__
        raise ConfigError(f"{option} {str(folder)!r} cannot be written ({reason}); choose a "
                          "writable folder") from None
    return folder


def _probe(folder: Path) -> OSError | None:
    """The error that writing a file in the existing ``folder`` raises (None when it can be
    written): a real file of one block is written and removed, since permission bits say
    nothing about a read-only mount (and root passes every ``os.access`` check), and a full
    disk refuses a block."""
    probe = folder / f".write-test-{uuid.uuid4().hex}"
    try:
        probe.write_bytes(bytes(4096))
        probe.unlink()
    except OSError as exc:
        with suppress(OSError):
            probe.unlink(missing_ok=True)
        return exc
    return None


def unwritable_reason(path: str | os.PathLike[str]) -> str | None:
    """Why the folder ``path`` could not be created or written in, without creating it.

    The nearest existing folder of ``path`` and its parents is probed with a real file.

    Returns:
        The reason (``Read-only file system``, ``/x is not a folder``), or None when files
        can be written there.
    """
    existing = nearest_existing(path)
    if existing is None:
        return None
    if not existing.is_dir():
        return f"{existing} is not a folder"
    error = _probe(existing)
    if error is None:
        return None
    if error.errno in NO_SPACE:
        return disk_full_message(existing, error, folder=True)
    if error.errno == errno.ENOENT:  # an existing folder that takes no file (``/proc``)
        return f"no file can be made in {existing.absolute()}: {error.strerror}"
    return error.strerror or type(error).__name__


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


def set_aside(path: Path, folder: Path | None = None) -> Path:
    """Rename an unreadable file to ``<name>.corrupt-<n>`` (the first free ``n``), so that
    it is kept for inspection but no longer counts as a record (or a training state).

    Args:
        path: The file.
        folder: Where it goes (created when absent); None: next to ``path``. A run's records
            go to ``<run>/corrupt`` (``RecordStore.CORRUPT``), out of the ``records`` folder
            that readers take as one dataset.
    """
    target = corrupt_path(path.parent if folder is None else folder, path.name)
    os.replace(path, target)
    return target


def corrupt_path(folder: Path, name: str) -> Path:
    """``folder/<name>.corrupt-<n>`` with the first free ``n`` (``folder`` created)."""
    folder.mkdir(parents=True, exist_ok=True)
    n = 1
    while (target := folder / f"{name}.corrupt-{n}").exists():
        n += 1
    return target


__all__ = ["NO_SPACE", "DiskFullError", "atomic_output", "atomic_write", "check_can_write",
           "check_writable_dir", "corrupt_path", "disk_full_message", "file_sha256",
           "fsync_dir", "fsync_file", "mount_point", "nearest_existing", "no_space",
           "remove_stale_temporaries", "replace_durably", "set_aside", "sha256_if_file",
           "temporary_path", "unwritable_reason"]
