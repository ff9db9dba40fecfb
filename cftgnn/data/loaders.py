"""Loaders for the UCI-Messages and Wikipedia event streams.

One module although over 500 lines: locating/downloading, strict parsing and the processed
cache are one pipeline joined by private helpers (``_load``, ``_verify_download``,
``_parse_numeric_table``, ``_cache_path``, ``_load_cache``, ``_save_cache``) that no other
module should call; ``cftgnn.data.user_streams`` uses only its public parsing helpers.

Both loaders look for their file in the data directory (see ``cftgnn.data.paths``), fall
back to downloading it from the official source (verified before it is kept), parse it strictly
(every malformed line raises ``DataFormatError`` naming the file and the
line; nothing is dropped) and keep a processed copy in the cache directory, so that loading the
same file again reads a few NumPy arrays instead of parsing text.

Duplicate events (same endpoints and timestamp) are kept as separate events. Events with equal
timestamps keep their order in the file; the stream order is (timestamp, line) and the files
must already be sorted by time (an earlier timestamp after a later one is an error).

The researcher's own files (a CSV of events, TGN's ``ml_`` layout) load through
``cftgnn.data.user_streams``, which uses the same strict parsing and cache.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import is_numeric_dtype

from cftgnn.data.download import download as download_file
from cftgnn.data.paths import checked_data_dir, resolve_cache_dir
from cftgnn.data.stream import EventStream
from cftgnn.errors import DataFormatError, DataNotFoundError, DownloadError, short_reason, warn
from cftgnn.files import DiskFullError, atomic_output, remove_stale_temporaries

#: Bump when parsing changes, so that stale processed caches are ignored.
LOADER_VERSION = 1


@dataclass(frozen=True)
class DataSource:
    """Where a dataset's file is looked for and where it is downloaded from.

    Attributes:
        name: Dataset name.
        filenames: File names looked for in the data directory, in order of preference.
        url: Official download address.
        download_name: Name the downloaded file is saved under.
        content_sha256: SHA-256 of the uncompressed text of the official file, or None when
            unknown (then the download is verified by parsing it).
    """

    name: str
    filenames: tuple[str, ...]
    url: str
    download_name: str
    content_sha256: str | None = None


UCI_SOURCE = DataSource(
    name="uci",
    filenames=("CollegeMsg.txt.gz", "CollegeMsg.txt"),
    url="https://snap.stanford.edu/data/CollegeMsg.txt.gz",
    download_name="CollegeMsg.txt.gz",
    content_sha256="e00ba2415373dee52c00616065bcceaa4750e78de60d1855c76470600f10740f",
)

WIKIPEDIA_SOURCE = DataSource(
    name="wikipedia",
    filenames=(
        "wikipedia_nofeatures.csv.gz",
        "wikipedia_nofeatures.csv",
        "wikipedia.csv",
        "wikipedia.csv.gz",
    ),
    url="http://snap.stanford.edu/jodie/wikipedia.csv",
    download_name="wikipedia.csv",
)

WIKIPEDIA_FEATURES_SOURCE = DataSource(
    name="wikipedia",
    filenames=("wikipedia.csv", "wikipedia.csv.gz"),
    url=WIKIPEDIA_SOURCE.url,
    download_name=WIKIPEDIA_SOURCE.download_name,
)

JODIE_HEADER = ("user_id", "item_id", "timestamp", "state_label")


# ------------------------------------------------------------------------------ file access
def read_bytes(path: Path) -> bytes:
    """The file's uncompressed bytes (``.gz`` files are decompressed)."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError) as exc:
        raise DataFormatError(f"{path}: cannot read file: {exc}") from exc


def locate(
    source: DataSource,
    data_dir: Path,
    cache_dir: Path,
    download: bool = True,
    url: str | None = None,
    progress: bool = True,
) -> Path:
    """Find the dataset file, downloading it when absent.

    Looks in ``data_dir`` then in ``cache_dir/downloads``; when neither holds one of
    ``source.filenames`` and ``download`` is true, fetches ``url`` (default: the official
    source) into ``data_dir`` if it is writable, else into ``cache_dir/downloads``.

    Raises:
        DataNotFoundError: The file is absent and could not be downloaded; the message says
            what was looked for, where, and how to get it.
    """
    dl_dir = cache_dir / "downloads"
    for folder in (data_dir, dl_dir):
        for fname in source.filenames:
            if (folder / fname).is_file():
                return folder / fname
    url = url or source.url
    looked = (
        f"looked for {', '.join(source.filenames)} in {data_dir} (the data directory: "
        f"paths.data_dir or $CFTGNN_DATA_DIR) and in {dl_dir}"
    )
    howto = (
        f"Download {source.url} into {data_dir}, or set CFTGNN_DATA_DIR to a folder "
        f"that holds one of those files."
    )
    if not download:
        raise DataNotFoundError(
            f"{source.name} data not found: {looked}; downloads are disabled. {howto}"
        )
    target_dir = data_dir if _writable(data_dir) else dl_dir
    dest = target_dir / source.download_name
    try:
        download_file(url, dest, progress=progress, verify=lambda p: _verify_download(source, p))
    except DownloadError as exc:
        raise DataNotFoundError(f"{source.name} data not found: {looked}; {exc}. {howto}") from exc
    return dest


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)


def _verify_download(source: DataSource, tmp: Path) -> None:
    if source.content_sha256 is None:
        return
    raw = _maybe_gunzip(tmp.read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != source.content_sha256:
        raise DownloadError(
            f"downloaded {source.name} content has sha256 {digest}, expected "
            f"{source.content_sha256}; the file was not saved"
        )


def _maybe_gunzip(data: bytes) -> bytes:
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


# ------------------------------------------------------------------------------- parsing
def _parse_numeric_table(
    path: Path, raw: bytes, sep: str, skiprows: int, names: Sequence[str]
) -> np.ndarray:
    """Parse a delimited numeric table strictly.

    Returns a ``float64 [rows, cols]`` array; raises DataFormatError naming the file, line and
    value for ragged lines, empty lines, empty fields and non-numeric values.
    """
    df = read_table(path, raw, sep=sep, skiprows=skiprows, header=None)

    def col_name(j: int) -> str:
        return names[j] if j < len(names) else f"feature {j - len(names)}"

    return numeric_columns(path, df, skiprows + 1, [col_name(j) for j in range(df.shape[1])])


def read_table(
    path: Path,
    raw: bytes,
    sep: str,
    skiprows: int = 0,
    header: int | None = None,
) -> pd.DataFrame:
    """Read a delimited text table, every line kept (blank ones too), as pandas gives it.

    Raises:
        DataFormatError: The file holds no line, or a line has more fields than the others.
    """
    try:
        return pd.read_csv(
            io.BytesIO(raw),
            sep=sep,
            header=header,
            skiprows=skiprows,
            skip_blank_lines=False,
            engine="c",
            low_memory=False,
        )
    except pd.errors.EmptyDataError as exc:
        raise DataFormatError(f"{path}: the file holds no events") from exc
    except pd.errors.ParserError as exc:
        msg = str(exc).replace("Error tokenizing data. C error: ", "").strip()
        raise DataFormatError(
            f"{path}: malformed line: {msg} (every line must have the same number of fields)"
        ) from exc


def numeric_columns(
    path: Path, df: pd.DataFrame, first_line: int, names: Sequence[str], fields: int | None = None
) -> np.ndarray:
    """The columns of ``df`` as ``float64 [rows, cols]``, checked strictly.

    Args:
        path: The file (named in every error).
        df: The table as read; row ``r`` is line ``r + first_line`` of the file.
        first_line: File line number of the first row.
        names: What each column is called in error messages.
        fields: Fields per line in the file (default: the columns of ``df``).

    Raises:
        DataFormatError: Naming the file, the line and the column, for a value that is not a
            number, an empty field, a short line or an empty line.
    """
    out = np.empty(df.shape, dtype=np.float64)
    for j, col in enumerate(df.columns):
        s = df[col]
        if is_numeric_dtype(s):
            values = s.to_numpy(dtype=np.float64)
        else:
            values = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64)
            bad = np.flatnonzero(np.isnan(values) & s.notna().to_numpy())
            if bad.size:
                r = int(bad[0])
                raise DataFormatError(
                    f"{path}, line {r + first_line}: {names[j]} = {s.iloc[r]!r} is not a number"
                )
        missing = np.flatnonzero(np.isnan(values))
        if missing.size:
            r = int(missing[0])
            if df.iloc[r].isna().all():
                raise DataFormatError(f"{path}, line {r + first_line}: empty line")
            raise DataFormatError(
                f"{path}, line {r + first_line}: missing value for {names[j]} (the line is "
                f"short or has an empty field; expected {fields or df.shape[1]} fields)"
            )
        out[:, j] = values
    return out


def check_ids(path: Path, values: np.ndarray, name: str, first_line: int) -> np.ndarray:
    """``values`` (row ``r`` on line ``r + first_line``) as ``int64``; each must be an integer
    >= 0, else DataFormatError naming the file, the line and the value."""
    bad = np.flatnonzero(
        ~np.isfinite(values) | (values < 0) | (values != np.floor(values))
    )
    if bad.size:
        r = int(bad[0])
        raise DataFormatError(
            f"{path}, line {r + first_line}: {name} = {values[r]:g} is not a non-negative integer"
        )
    return values.astype(np.int64)


def check_time(
    path: Path, t: np.ndarray, first_line: int, ordered: bool = True, hint: str = ""
) -> None:
    """Every timestamp is finite and, when ``ordered``, none is earlier than the one before it
    (DataFormatError naming the file and the line otherwise; ``hint`` ends that message)."""
    bad = np.flatnonzero(~np.isfinite(t))
    if bad.size:
        r = int(bad[0])
        raise DataFormatError(f"{path}, line {r + first_line}: timestamp {t[r]} is not finite")
    dec = np.flatnonzero(np.diff(t) < 0) if ordered else np.empty(0)
    if dec.size:
        r = int(dec[0]) + 1
        raise DataFormatError(
            f"{path}, line {r + first_line}: timestamp {t[r]:g} is earlier than the previous "
            f"line's {t[r - 1]:g}; the file must be sorted by time{hint}"
        )


def parse_uci(path: Path, raw: bytes) -> EventStream:
    """Parse SNAP's ``CollegeMsg.txt`` (``src dst unixtime`` per line, no header).

    Node ids are mapped to 0-based contiguous ids in increasing order of the file's ids; time is
    shifted so that the first event is at 0.
    """
    table = _parse_numeric_table(
        path, raw, sep=r"\s+", skiprows=0, names=("src", "dst", "unixtime")
    )
    if table.shape[1] != 3:
        raise DataFormatError(
            f"{path}: expected 3 columns (src dst unixtime), found {table.shape[1]} on line 1"
        )
    src = check_ids(path, table[:, 0], "src", 1)
    dst = check_ids(path, table[:, 1], "dst", 1)
    t = table[:, 2]
    check_time(path, t, 1)
    raw_ids, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    n = len(src)
    return EventStream(
        src=inverse[:n],
        dst=inverse[n:],
        t=t - t[0],
        edge_feat=np.zeros((n, 0), np.float32),
        labels=np.zeros(n, np.int64),
        num_nodes=len(raw_ids),
        name="uci",
        meta={
            "time_offset": float(t[0]),
            "raw_id_min": int(raw_ids[0]),
            "raw_id_max": int(raw_ids[-1]),
        },
    )


def parse_jodie(path: Path, raw: bytes, with_features: bool) -> EventStream:
    """Parse the JODIE layout ``user_id,item_id,timestamp,state_label[,features...]``.

    Users keep their ids ``0..U-1`` and items become nodes ``U..U+I-1`` with ``U`` the number of
    users (largest user id + 1). The feature columns after ``state_label`` are kept when
    ``with_features`` is true and dropped otherwise; asking for features from a file that has
    none is an error.
    """
    newline = raw.find(b"\n")
    header = raw[: newline if newline >= 0 else len(raw)].decode("utf-8", "replace").strip()
    fields = tuple(h.strip() for h in header.split(","))
    if fields[:4] != JODIE_HEADER:
        raise DataFormatError(
            f"{path}, line 1: expected the JODIE header "
            f"{','.join(JODIE_HEADER)}[,features], found {header[:80]!r}"
        )
    table = _parse_numeric_table(path, raw, sep=",", skiprows=1, names=JODIE_HEADER)
    if table.shape[1] < 4:
        raise DataFormatError(
            f"{path}: expected at least 4 columns ({','.join(JODIE_HEADER)}), "
            f"found {table.shape[1]} on line 2"
        )
    users = check_ids(path, table[:, 0], "user_id", 2)
    items = check_ids(path, table[:, 1], "item_id", 2)
    t = table[:, 2]
    check_time(path, t, 2)
    labels = check_ids(path, table[:, 3], "state_label", 2)
    num_users = int(users.max()) + 1 if len(users) else 0
    num_items = int(items.max()) + 1 if len(items) else 0
    n = len(users)
    if with_features:
        if table.shape[1] == 4:
            raise DataFormatError(
                f"{path}: features were asked for, but the file has none "
                f"(use the full wikipedia.csv, or with_features=false)"
            )
        feat = table[:, 4:].astype(np.float32)
    else:
        feat = np.zeros((n, 0), np.float32)
    return EventStream(
        src=users,
        dst=items + num_users,
        t=t,
        edge_feat=feat,
        labels=labels,
        num_nodes=num_users + num_items,
        name="wikipedia",
        meta={
            "num_users": num_users,
            "num_items": num_items,
            "file_feature_columns": int(table.shape[1] - 4),
        },
    )


# --------------------------------------------------------------------------------- cache
def _cache_path(cache_dir: Path, path: Path, options: dict[str, Any]) -> Path:
    st = path.stat()
    key = json.dumps(
        [LOADER_VERSION, str(path.resolve()), st.st_size, st.st_mtime_ns, options], sort_keys=True
    )
    digest = hashlib.sha1(key.encode()).hexdigest()[:16]
    return cache_dir / "processed" / f"{path.name}-{digest}.npz"


def _save_cache(stream: EventStream, dest: Path) -> None:
    """Write the processed copy (complete or absent: ``atomic_output``); a
    cache that cannot be written (a read-only folder, a full disk) is one warning line, the run
    goes on without it."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(dest.parent)  # what killed writers left
        with atomic_output(dest) as f:
            np.savez(
                f,
                src=stream.src,
                dst=stream.dst,
                t=stream.t,
                edge_feat=stream.edge_feat,
                labels=stream.labels,
                num_nodes=np.int64(stream.num_nodes),
                name=np.str_(stream.name),
                meta=np.str_(json.dumps(stream.meta)),
            )
    except OSError as exc:
        reason = str(exc) if isinstance(exc, DiskFullError) else (exc.strerror or str(exc))
        warn(f"could not write the processed cache {dest} ({reason}); the run goes on "
              "without it")


def _load_cache(path: Path) -> EventStream | None:
    """The stream of a processed copy, or None (one warning line) when it does not load: cut
    short, emptied, of another layout; the caller parses the source again and rewrites it."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            meta["from_cache"] = str(path)
            return EventStream(
                z["src"],
                z["dst"],
                z["t"],
                z["edge_feat"],
                z["labels"],
                int(z["num_nodes"]),
                str(z["name"]),
                meta,
            )
    except Exception as exc:  # noqa: BLE001  (whatever a broken zip raises: BadZipFile, EOF...)
        warn(f"processed cache {path} does not load ({short_reason(exc)}); rebuilding it from "
             "the source data")
        return None


def _load(
    source: DataSource,
    data_dir: str | os.PathLike[str] | None,
    cache_dir: str | os.PathLike[str] | None,
    download: bool,
    url: str | None,
    use_cache: bool,
    progress: bool,
    options: dict[str, Any],
    parse: Any,
) -> EventStream:
    cache_path = resolve_cache_dir(cache_dir)
    path = locate(
        source, checked_data_dir(data_dir), cache_path, download=download, url=url,
        progress=progress,
    )
    return load_processed(path, cache_path, use_cache, options, parse)


def load_processed(
    path: Path,
    cache_dir: Path,
    use_cache: bool,
    options: dict[str, Any],
    parse: Callable[[Path, bytes], EventStream],
    side_files: Sequence[Path] = (),
) -> EventStream:
    """Parse the file at ``path``, or read the processed copy of an earlier parse.

    The copy is keyed by the file's resolved path, size and modification time, the loader
    version, ``options`` (everything else the parse depends on, e.g. column names) and the
    size and time of the ``side_files`` the parse also reads, so a changed file or option is
    parsed again.

    Returns:
        The stream, its ``meta`` extended by ``source``, ``sha256`` (of the uncompressed
        text), ``options``, and ``from_cache`` when read from the copy.
    """
    key: dict[str, Any] = options
    if side_files:
        stats = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in side_files]
        key = {"options": options, "side_files": stats}
    cached = _cache_path(cache_dir, path, key) if use_cache else None
    if cached is not None and cached.is_file():
        stream = _load_cache(cached)
        if stream is not None:
            return stream
    raw = read_bytes(path)
    stream = parse(path, raw)
    meta = dict(stream.meta)
    meta.update(source=str(path), sha256=hashlib.sha256(raw).hexdigest(), **options)
    stream = EventStream(
        stream.src,
        stream.dst,
        stream.t,
        stream.edge_feat,
        stream.labels,
        stream.num_nodes,
        stream.name,
        meta,
    )
    if cached is not None:
        _save_cache(stream, cached)
    return stream


def load_uci(
    data_dir: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    download: bool = True,
    url: str | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> EventStream:
    """Load UCI-Messages (SNAP ``CollegeMsg``): 59,835 events between 1,899 nodes.

    Args:
        data_dir: Folder holding ``CollegeMsg.txt.gz`` or ``CollegeMsg.txt``; default
            ``$CFTGNN_DATA_DIR`` or ``<project>/data``.
        cache_dir: Folder for processed copies and downloads; default ``$CFTGNN_CACHE_DIR`` or
            ``~/.cache/cftgnn``.
        download: Fetch the file from the official source when absent.
        url: Override the download address (e.g. a mirror, or a ``file://`` URL in tests).
        use_cache: Read and write the processed cache.
        progress: Show a progress bar while downloading.

    Returns:
        The stream; ``meta`` holds the source file, the SHA-256 of its uncompressed text, and
        ``from_cache`` when it was read from the processed cache.
    """
    return _load(UCI_SOURCE, data_dir, cache_dir, download, url, use_cache, progress, {}, parse_uci)


def load_wikipedia(
    data_dir: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    with_features: bool = False,
    download: bool = True,
    url: str | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> EventStream:
    """Load Wikipedia (JODIE): 157,474 edits between 8,227 users and 1,000 pages.

    Without features (the default) any of ``wikipedia_nofeatures.csv[.gz]`` or
    ``wikipedia.csv[.gz]`` serves and the stream has ``F = 0``; results on it are not comparable
    to published numbers of models that use the 172 LIWC edge features. With features only the
    full ``wikipedia.csv[.gz]`` serves (``F = 172``).

    Args:
        data_dir: Folder holding the file; default ``$CFTGNN_DATA_DIR`` or ``<project>/data``.
        cache_dir: Folder for processed copies and downloads.
        with_features: Keep the edge-feature columns.
        download: Fetch ``wikipedia.csv`` from the official source when absent.
        url: Override the download address.
        use_cache: Read and write the processed cache.
        progress: Show a progress bar while downloading.
    """
    source = WIKIPEDIA_FEATURES_SOURCE if with_features else WIKIPEDIA_SOURCE
    return _load(
        source,
        data_dir,
        cache_dir,
        download,
        url,
        use_cache,
        progress,
        {"with_features": with_features},
        lambda p, raw: parse_jodie(p, raw, with_features),
    )
