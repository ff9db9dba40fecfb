"""Fetching a data file from its official source, with checksum verification."""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tqdm.auto import tqdm

from cftgnn.errors import DownloadError

CHUNK = 1 << 20


def download(
    url: str,
    dest: Path,
    sha256: str | None = None,
    timeout: float = 30.0,
    progress: bool = True,
    verify: Callable[[Path], None] | None = None,
) -> Path:
    """Download ``url`` to ``dest`` atomically and verify its SHA-256 when one is given.

    The bytes go to a temporary file beside ``dest`` and are renamed into place only after the
    checksum matched, so an interrupted or corrupt download never leaves a file that a later
    load would trust.

    Args:
        url: Source address (``http(s)://`` or ``file://``).
        dest: Final path of the file.
        sha256: Expected hex digest of the downloaded bytes, or None to skip the check.
        timeout: Socket timeout in seconds.
        progress: Show a progress bar.
        verify: Extra check run on the complete temporary file before it is moved into place;
            it raises DownloadError to reject the content.

    Returns:
        ``dest``.

    Raises:
        DownloadError: The transfer failed or the checksum did not match.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            total = resp.headers.get("Content-Length") if hasattr(resp, "headers") else None
            with tqdm(
                total=int(total) if total else None,
                unit="B",
                unit_scale=True,
                desc=f"downloading {dest.name}",
                disable=not progress,
            ) as bar:
                for block in iter(lambda: resp.read(CHUNK), b""):
                    out.write(block)
                    h.update(block)
                    bar.update(len(block))
        digest = h.hexdigest()
        if sha256 is not None and digest != sha256.lower():
            raise DownloadError(
                f"checksum mismatch for {url}: expected sha256 {sha256}, got {digest}; "
                f"the file was not saved"
            )
        if verify is not None:
            verify(tmp)
        os.replace(tmp, dest)
        return dest
    except (urllib.error.URLError, OSError, ValueError) as exc:
        if isinstance(exc, DownloadError):
            raise
        raise DownloadError(f"could not download {url}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
