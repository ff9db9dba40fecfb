"""Event streams from the researcher's own files: a CSV of events, or the TGN ``ml_`` layout.

Both loaders follow the stream semantics of the built-in ones (docs/design.md §2): events are
ordered by (timestamp, line in the file) and an event's id is its 0-based position in that
order. Like [``load_uci``][cftgnn.data.load_uci] and
[``load_wikipedia``][cftgnn.data.load_wikipedia] they refuse a file whose timestamps decrease (the
error names the line); ``sort=True`` instead sorts the events by time *stably*, so events with equal
timestamps keep their file order and the ids are still (timestamp, line) positions. Parsing is
strict: a garbled, short or long line, an empty line, a missing column, a non-numeric value or a
negative or non-integer id raises ``DataFormatError`` naming the file and the line. A processed copy
is kept in the cache directory (keyed by the files' size and time and the options), so that loading
the same file again reads a few arrays. Nothing is downloaded: a missing file raises
``DataNotFoundError`` naming the path.
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cftgnn.data.loaders import check_ids, check_time, load_processed, numeric_columns, read_table
from cftgnn.data.paths import checked_data_dir, resolve_cache_dir
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError, DataFormatError, DataNotFoundError

#: ``feature_cols`` value that takes every column not named as src, dst, time or label.
REST = "rest"
#: Columns of a TGN / DyGLib ``ml_<name>.csv`` (after the unnamed index column).
ML_COLUMNS = ("u", "i", "ts", "label", "idx")
_SORT_HINT = " (or load it with sort=true, e.g. dataset.sort=true, to sort it stably)"


def _existing(path: Path, what: str) -> Path:
    if not path.is_file():
        raise DataNotFoundError(f"{what} not found: {path} (no such file; nothing is downloaded)")
    return path


def _header(path: Path, raw: bytes, sep: str) -> list[str]:
    """The column names on line 1, after checking that line 2 has no more fields than it.

    (pandas would otherwise take a first data line with one extra field as an index column
    and accept it silently; longer lines further down are errors anyway.)
    """
    try:
        head = pd.read_csv(io.BytesIO(raw), sep=sep, header=None, nrows=2, dtype=str)
    except pd.errors.EmptyDataError as exc:
        raise DataFormatError(f"{path}: the file is empty (expected a header line)") from exc
    except pd.errors.ParserError as exc:
        raise DataFormatError(
            f"{path}, line 2: more fields than the header on line 1 has"
        ) from exc
    names = [str(c) for c in pd.read_csv(io.BytesIO(raw), sep=sep, nrows=0).columns]
    if len(names) != head.shape[1]:  # pragma: no cover  (pandas counts both the same way)
        raise DataFormatError(f"{path}, line 1: unreadable header")
    # pandas renames a repeated column "a" to "a.1", "a.2", ...
    dup = sorted({c.rsplit(".", 1)[0] for c in names
                  if "." in c and c.rsplit(".", 1)[1].isdigit() and c.rsplit(".", 1)[0] in names})
    if dup:
        raise DataFormatError(f"{path}, line 1: column names repeat in the header: {dup}")
    return names


def _require(path: Path, header: Sequence[str], wanted: dict[str, str]) -> None:
    for option, col in wanted.items():
        if col not in header:
            raise DataFormatError(
                f"{path}, line 1: no column {col!r} ({option}) in the header; the columns are "
                f"{', '.join(repr(c) for c in header)}"
            )


def _stable_order(path: Path, t: np.ndarray, first_line: int, sort: bool) -> np.ndarray | None:
    """The stable by-time order when ``sort`` (None when already sorted); else the check."""
    check_time(path, t, first_line, ordered=not sort, hint=_SORT_HINT)
    if not sort or not np.any(np.diff(t) < 0):
        return None
    return np.argsort(t, kind="stable")


def parse_event_csv(
    path: Path,
    raw: bytes,
    src_col: str,
    dst_col: str,
    time_col: str,
    feature_cols: Sequence[str] | str,
    label_col: str | None,
    sep: str,
    relabel_nodes: bool,
    sort: bool,
    name: str,
) -> EventStream:
    """Parse a CSV with a header line; see [``load_csv``][cftgnn.data.load_csv] for the options."""
    header = _header(path, raw, sep)
    wanted = {"src_col": src_col, "dst_col": dst_col, "time_col": time_col}
    if label_col is not None:
        wanted["label_col"] = label_col
    if isinstance(feature_cols, str):
        if feature_cols != REST:
            raise DataFormatError(
                f"{path}: feature_cols must be a list of column names or {REST!r}, "
                f"got {feature_cols!r}"
            )
        feats = [c for c in header if c not in wanted.values()]
    else:
        feats = [str(c) for c in feature_cols]
    _require(path, header, {**wanted, **{f"feature_cols[{k}]": c for k, c in enumerate(feats)}})
    used = list(dict.fromkeys([*wanted.values(), *feats]))
    df = read_table(path, raw, sep=sep, header=0)  # all columns, so long lines are caught
    if len(df) == 0:
        raise DataFormatError(f"{path}: the file holds no events (only a header line)")
    used = [c for c in df.columns if c in used]  # checked in file order
    table = numeric_columns(path, df[used], 2, used, fields=df.shape[1])
    col = {c: table[:, j] for j, c in enumerate(used)}
    src = check_ids(path, col[src_col], src_col, 2)
    dst = check_ids(path, col[dst_col], dst_col, 2)
    t = col[time_col]
    labels = (
        check_ids(path, col[label_col], label_col, 2)
        if label_col is not None
        else np.zeros(len(src), np.int64)
    )
    feat = np.stack([col[c] for c in feats], axis=1) if feats else np.zeros((len(src), 0))
    if feats:
        bad = np.flatnonzero(~np.isfinite(feat).all(axis=1))
        if bad.size:
            r = int(bad[0])
            c = feats[int(np.flatnonzero(~np.isfinite(feat[r]))[0])]
            raise DataFormatError(f"{path}, line {r + 2}: {c} = {feat[r][feats.index(c)]} "
                                  "is not finite")
    order = _stable_order(path, t, 2, sort)
    meta: dict[str, Any] = {"sorted_on_load": order is not None}
    if order is not None:
        src, dst, t, labels, feat = src[order], dst[order], t[order], labels[order], feat[order]
    if relabel_nodes:
        raw_ids, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
        n = len(src)
        src, dst, num_nodes = inverse[:n], inverse[n:], len(raw_ids)
        meta.update(raw_id_min=int(raw_ids[0]), raw_id_max=int(raw_ids[-1]))
    else:
        num_nodes = int(max(src.max(), dst.max())) + 1
    return EventStream(src, dst, t, feat.astype(np.float32), labels, num_nodes, name, meta)


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".csv", ".tsv", ".txt"):
        name = name.removesuffix(suffix)
    return name or "csv"


def load_csv(
    path: str | os.PathLike[str] | None,
    src_col: str = "src",
    dst_col: str = "dst",
    time_col: str = "t",
    feature_cols: Sequence[str] | str = (),
    label_col: str | None = None,
    sep: str = ",",
    relabel_nodes: bool = False,
    sort: bool = False,
    name: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
) -> EventStream:
    """Load a stream from a delimited text file of events with a header line.

    One line per event; columns are found by their name in the header, in any order, and
    other columns are ignored. A ``.gz`` file is decompressed.

    Args:
        path: The file (``~`` is expanded); None is an error saying how to name one.
        src_col: Column of the source node: integers >= 0.
        dst_col: Column of the destination node: integers >= 0.
        time_col: Column of the timestamp (any finite number; kept as given, not shifted).
        feature_cols: Columns of edge features (finite numbers), in this order; ``"rest"``
            takes every column not named as src, dst, time or label, in file order; empty
            (the default) gives ``F = 0``.
        label_col: Column of a per-event label (integers >= 0); None gives labels 0.
        sep: Field separator: one character, or ``\\s+`` for any run of whitespace.
        relabel_nodes: Map node ids to ``0..N-1`` in increasing order of the file's ids
            (node ``k`` is the ``k``-th smallest id in the file). When false (the default)
            ids are kept and ``num_nodes`` is the largest id + 1.
        sort: Sort the events stably by time (equal timestamps keep their line order)
            instead of refusing a file whose timestamps decrease.
        name: The stream's name (it names checkpoints); default the file name without
            ``.csv``/``.gz``.
        cache_dir: Folder for the processed copy; default ``$CFTGNN_CACHE_DIR`` or
            ``~/.cache/cftgnn``.
        use_cache: Read and write the processed copy.

    Raises:
        DataNotFoundError: No file at ``path``.
        DataFormatError: A malformed file, naming the file and the line.
    """
    if path is None or str(path) == "":
        raise ConfigError("dataset=csv needs the event file: add dataset.path=/my/events.csv")
    if len(sep) != 1 and sep != r"\s+":
        raise ConfigError(f"sep must be one character or \\s+ (any whitespace), got {sep!r}")
    file = _existing(Path(path).expanduser(), "event file")
    feats: list[str] | str = feature_cols if isinstance(feature_cols, str) else list(feature_cols)
    options = {
        "src_col": src_col,
        "dst_col": dst_col,
        "time_col": time_col,
        "feature_cols": feats,
        "label_col": label_col,
        "sep": sep,
        "relabel_nodes": relabel_nodes,
        "sort": sort,
    }
    stream_name = name or _stem(file)
    return load_processed(
        file,
        resolve_cache_dir(cache_dir),
        use_cache,
        {**options, "name": stream_name},
        lambda p, raw: parse_event_csv(
            p, raw, src_col, dst_col, time_col, feats, label_col, sep, relabel_nodes, sort,
            stream_name,
        ),
    )


# --------------------------------------------------------------------------- the ml_ layout
def _load_npy(path: Path) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise DataFormatError(f"{path}: not a readable .npy array: {exc}") from exc
    if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.number):
        raise DataFormatError(
            f"{path}: expected a 2-D numeric array [rows, features], got shape {arr.shape} "
            f"and dtype {arr.dtype}"
        )
    return arr


def parse_ml(
    path: Path, raw: bytes, edge_path: Path | None, node_path: Path | None, sort: bool, name: str
) -> EventStream:
    """Parse ``ml_<name>.csv`` (and its ``.npy`` side files); see
    [``load_jodie_ml``][cftgnn.data.load_jodie_ml]."""
    header = _header(path, raw, ",")
    _require(path, header, {c: c for c in ML_COLUMNS})
    df = read_table(path, raw, sep=",", header=0)
    if len(df) == 0:
        raise DataFormatError(f"{path}: the file holds no events (only a header line)")
    table = numeric_columns(path, df[list(ML_COLUMNS)], 2, ML_COLUMNS, fields=df.shape[1])
    u, i, idx = (check_ids(path, table[:, k], c, 2) for k, c in ((0, "u"), (1, "i"), (4, "idx")))
    for ids, col in ((u, "u"), (i, "i"), (idx, "idx")):
        zero = np.flatnonzero(ids == 0)
        if zero.size:
            raise DataFormatError(
                f"{path}, line {int(zero[0]) + 2}: {col} = 0, but ids in the ml_ layout are "
                f"1-based (0 is the padding row)"
            )
    t = table[:, 2]
    labels = check_ids(path, table[:, 3], "label", 2)
    num_nodes = int(max(u.max(), i.max()))
    meta: dict[str, Any] = {"node_feature_file": "none"}
    if edge_path is not None:
        edges = _load_npy(edge_path)
        over = np.flatnonzero(idx >= len(edges))
        if over.size:
            r = int(over[0])
            raise DataFormatError(
                f"{path}, line {r + 2}: idx = {idx[r]} but {edge_path.name} has only "
                f"{len(edges)} rows (row 0 is padding)"
            )
        feat = np.asarray(edges[idx], dtype=np.float64)  # [E, F]
        bad = np.flatnonzero(~np.isfinite(feat).all(axis=1))
        if bad.size:
            r = int(bad[0])
            raise DataFormatError(
                f"{edge_path}: row {idx[r]} (idx on {path.name} line {r + 2}) is not finite"
            )
    else:
        feat = np.zeros((len(u), 0))
    if node_path is not None:
        nodes = _load_npy(node_path)
        num_nodes = max(num_nodes, len(nodes) - 1)
        meta["node_feat_dim"] = int(nodes.shape[1])
        if np.any(nodes[1:] != 0):
            warnings.warn(
                f"{node_path}: node features are ignored (EventStream has none); the models "
                "here see only edge features",
                stacklevel=2,
            )
            meta["node_feature_file"] = "ignored"
        else:
            meta["node_feature_file"] = "all zero (ignored)"
    order = _stable_order(path, t, 2, sort)
    meta["sorted_on_load"] = order is not None
    src, dst = u - 1, i - 1
    if order is not None:
        src, dst, t, labels, feat, idx = (
            src[order], dst[order], t[order], labels[order], feat[order], idx[order]
        )
    meta["edge_idx_first"], meta["edge_idx_last"] = int(idx[0]), int(idx[-1])
    return EventStream(src, dst, t, feat.astype(np.float32), labels, num_nodes, name, meta)


def load_jodie_ml(
    name: str | None,
    data_dir: str | os.PathLike[str] | None = None,
    edge_features: bool = True,
    node_features: bool = True,
    sort: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
) -> EventStream:
    """Load the preprocessed layout of TGN / DyGLib: ``ml_<name>.csv`` + ``.npy`` files.

    Looks for ``ml_<name>.csv`` in ``data_dir`` and then in ``data_dir/<name>`` (DyGLib's
    ``processed_data/<name>/``). Its columns are an unnamed index, ``u``, ``i``, ``ts``,
    ``label`` and ``idx``; ``u`` and ``i`` are 1-based node ids and become ``u - 1`` and
    ``i - 1`` (so ``num_nodes`` is the largest id, or the node file's rows - 1 when larger);
    ``idx`` is the 1-based row of the event's features in ``ml_<name>.npy`` (row 0 is padding).
    ``ml_<name>_node.npy`` only sets the node count: the stream has no node features, so they
    are ignored (with a warning when they are not all zero). The stream is named
    ``ml_<name>``, so its checkpoints differ from a built-in dataset of the same name.

    Args:
        name: The ``<name>`` of the files (``wikipedia``, ``reddit``, ...).
        data_dir: Folder to look in; default ``$CFTGNN_DATA_DIR`` or ``<project>/data``.
        edge_features: Read the edge features from ``ml_<name>.npy`` (needed then); false
            gives ``F = 0``.
        node_features: Read ``ml_<name>_node.npy`` when present (for the node count).
        sort: Sort the events stably by time instead of refusing decreasing timestamps.
        cache_dir: Folder for the processed copy.
        use_cache: Read and write the processed copy.
    """
    if name is None or str(name) == "":
        raise ConfigError(
            "dataset=jodie_ml needs the name of the files: add dataset.name=<name> for "
            "ml_<name>.csv"
        )
    folder = checked_data_dir(data_dir)
    looked = [folder / f"ml_{name}.csv", folder / name / f"ml_{name}.csv"]
    csv = next((p for p in looked if p.is_file()), None)
    if csv is None:
        raise DataNotFoundError(
            f"ml_{name}.csv not found: looked for {looked[0]} and {looked[1]} (nothing is "
            "downloaded; run TGN's or DyGLib's preprocessing, or set paths.data_dir)"
        )
    edge_path = _existing(csv.with_suffix(".npy"), "edge features") if edge_features else None
    node_file = csv.with_name(f"ml_{name}_node.npy")
    node_path = node_file if node_features and node_file.is_file() else None
    side = [p for p in (edge_path, node_path) if p is not None]
    options = {"edge_features": edge_features, "node_features": node_features, "sort": sort}
    return load_processed(
        csv,
        resolve_cache_dir(cache_dir),
        use_cache,
        options,
        lambda p, raw: parse_ml(p, raw, edge_path, node_path, sort, f"ml_{name}"),
        side_files=side,
    )


__all__ = ["load_csv", "load_jodie_ml", "parse_event_csv", "parse_ml"]
