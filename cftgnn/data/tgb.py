"""The Temporal Graph Benchmark's link datasets (``tgbl-*``), read from a folder where the user
downloaded them, with TGB's ids, features, split and negative destinations.

TGB (Huang et al., 2023; ``py-tgb`` 2.3.0) ships each dataset as a zip that unpacks into
``<root>/<name with - as _>/`` (``tgb/datasets/tgbl_wiki/``): the edge list
``<name>_edgelist_v2.csv`` (``_edgelist.csv`` for the datasets at version 1) and the negative
destinations ``<name>_{val,test}_ns_v2.pkl`` (``_ns.pkl`` at version 1). This module reads those
files itself, without importing py-tgb (docs/datasets.md says why):

- ``load_tgb`` parses the edge list as TGB's ``LinkPropPredDataset`` processes it
  (``cftgnn.data.tgb_formats``: the same node ids, integer timestamps and edge features) and
  carries TGB's chronological split in ``stream.meta["tgb"]``;
- ``load_tgb_negatives`` reads a split's negatives with a restricted unpickler
  (``cftgnn.data.safe_pickle``) into a [`TGBNegatives`][cftgnn.data.TGBNegatives]
  table in the stream's event ids.

Node ids are TGB's own (after its destination shift or relabelling), so TGB's negatives and
any node id TGB reports are ours unchanged. Event ids are positions in (time, line) order, as
for every stream (docs/design.md §2); TGB keeps file order, which is the same order for a file
sorted by time (TGB's version-2 files are; version 1 of tgbl-coin and tgbl-flight was not).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cftgnn.data.loaders import check_time, load_processed
from cftgnn.data.paths import resolve_cache_dir
from cftgnn.data.safe_pickle import load_numpy_pickle
from cftgnn.data.stream import EventStream
from cftgnn.data.tgb_formats import PARSERS, TGBEdges
from cftgnn.data.tgb_negatives import TGB_KEY, TGB_SPLITS, TGBNegatives, tgb_split_points
from cftgnn.errors import ConfigError, DataFormatError, DataNotFoundError

#: Environment variable naming the folder of TGB's downloads.
TGB_DIR_ENV = "CFTGNN_TGB_DIR"
#: Bump when the parse changes, so that stale processed copies are ignored.
TGB_READER_VERSION = 1
#: TGB's split: the timestamps' quantiles that end training and validation
#: (``LinkPropPredDataset.generate_splits`` with val_ratio = test_ratio = 0.15).
TGB_SPLIT_QUANTILES = (0.70, 0.85)

#: TGB's link datasets: name -> (data version, edge-list layout). The names and versions are
#: py-tgb 2.3.0's ``tgb/utils/info.py`` (``DATA_URL_DICT``, ``DATA_VERSION_DICT``, every
#: ``tgbl-`` name); the layouts are the ``pre_process`` function ``LinkPropPredDataset`` picks
#: for each (``cftgnn.data.tgb_formats``). Copied by hand: py-tgb is not imported for it.
TGB_LINK_DATASETS: dict[str, tuple[int, str]] = {
    "tgbl-wiki": (2, "jodie"),
    "tgbl-review": (2, "weighted"),
    "tgbl-coin": (2, "weighted"),
    "tgbl-comment": (1, "comment"),
    "tgbl-flight": (2, "flight"),
    "tgbl-uci": (1, "jodie"),
    "tgbl-enron": (1, "jodie"),
    "tgbl-lastfm": (1, "jodie"),
    "tgbl-subreddit": (1, "jodie"),
}
#: Prefixes of TGB's other datasets, and why they are not read here.
_OTHER_TASKS = {
    "tgbn-": "a node property prediction dataset (a node task), not supported: cftgnn "
             "explains link predictions",
    "tkgl-": "a temporal knowledge graph (typed edges, TGB 2.0), not supported: cftgnn reads "
             "TGB's tgbl- link datasets",
    "thgl-": "a temporal heterogeneous graph (typed nodes and edges, TGB 2.0), not supported: "
             "cftgnn reads TGB's tgbl- link datasets",
}


def check_tgb_name(name: str | None) -> tuple[int, str]:
    """The version and layout of the TGB link dataset ``name``.

    Raises:
        ConfigError: No name, a node/knowledge/heterogeneous dataset, or an unknown name (the
            message lists the known ones).
    """
    known = ", ".join(TGB_LINK_DATASETS)
    if name is None or str(name) == "":
        raise ConfigError(f"dataset=tgb needs the dataset's name: add dataset.name=<name>, one "
                          f"of {known}")
    for prefix, why in _OTHER_TASKS.items():
        if str(name).startswith(prefix):
            raise ConfigError(f"TGB dataset {name!r} is {why}; the link datasets are {known}")
    if name not in TGB_LINK_DATASETS:
        raise ConfigError(f"unknown TGB link dataset {name!r}; the known ones (py-tgb 2.3.0) "
                          f"are {known}")
    return TGB_LINK_DATASETS[name]


def tgb_file_names(name: str) -> dict[str, str]:
    """TGB's file names of ``name`` at its version: ``edgelist``, ``val``, ``test``."""
    version, _ = check_tgb_name(name)
    tail = f"_v{version}" if version > 1 else ""
    return {"edgelist": f"{name}_edgelist{tail}.csv",
            **{split: f"{name}_{split}_ns{tail}.pkl" for split in TGB_SPLITS}}


def pytgb_datasets_dir() -> Path | None:
    """py-tgb's own ``tgb/datasets`` folder (where its downloads land), found without
    importing py-tgb; None when it is not installed."""
    try:
        spec = importlib.util.find_spec("tgb")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "datasets"


def _folder_of(root: Path, name: str) -> Path | None:
    """The folder holding ``name``'s edge list under ``root``: ``root/<dir_name>`` (TGB's
    layout) or ``root`` itself."""
    edgelist = tgb_file_names(name)["edgelist"]
    for folder in (root / name.replace("-", "_"), root):
        if (folder / edgelist).is_file():
            return folder
    return None


def find_tgb_folder(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder of TGB's files of ``name``.

    Looked for under the first of ``data_dir``, ``$CFTGNN_TGB_DIR`` and py-tgb's package folder
    ``tgb/datasets`` that is given, in ``<that>/<name with - as _>/`` and then in ``<that>/``.
    (py-tgb's own loader always looks under its package folder, whatever ``root`` says:
    TGB issue #116.)

    Raises:
        ConfigError: ``data_dir`` or ``$CFTGNN_TGB_DIR`` names a folder that does not exist.
        DataNotFoundError: The edge list is not there; the message says where it looked.
    """
    check_tgb_name(name)
    edgelist = tgb_file_names(name)["edgelist"]
    dir_name = name.replace("-", "_")
    env = os.environ.get(TGB_DIR_ENV)
    if data_dir is not None and str(data_dir) != "":
        root, what = Path(data_dir).expanduser(), "dataset.data_dir"
    elif env:
        root, what = Path(env).expanduser(), TGB_DIR_ENV
    else:
        pkg = pytgb_datasets_dir()
        if pkg is None:
            raise DataNotFoundError(
                f"TGB dataset {name}: no folder given; set dataset.data_dir (or "
                f"{TGB_DIR_ENV}) to the folder of TGB's downloads, which holds "
                f"{dir_name}/{edgelist} (py-tgb is not installed, so its package folder "
                "cannot serve)")
        root, what = pkg, "py-tgb's package folder"
    if not root.is_dir():
        raise ConfigError(f"{what} names {str(root)!r}, which is not a folder; point it at "
                          f"the folder of TGB's downloads (holding {dir_name}/{edgelist})")
    folder = _folder_of(root, name)
    if folder is None:
        older = [p for p in (root / dir_name / f"{name}_edgelist.csv",
                             root / f"{name}_edgelist.csv") if p.is_file()]
        hint = (f"; {older[0]} is an older version of the dataset, which py-tgb 2.3.0 no "
                "longer reads: download the current one") if older and \
            older[0].name != edgelist else ""
        raise DataNotFoundError(
            f"TGB dataset {name} not found: looked for {root / dir_name / edgelist} and "
            f"{root / edgelist} ({what}){hint}. Unzip TGB's {name} download there, or point "
            f"dataset.data_dir or {TGB_DIR_ENV} at the folder that holds {dir_name}/")
    return folder


def tgb_split(t: np.ndarray) -> tuple[int, int, float, float]:
    """TGB's chronological split of the sorted integer timestamps ``t`` (``[E]``).

    TGB's rule (``generate_splits``): ``val_time, test_time = np.quantile(t, [0.70, 0.85])``
    (linear interpolation); train is ``t <= val_time``, validation ``val_time < t <=
    test_time``, test ``t > test_time``. On a sorted stream these are three runs of ids, and
    events that share a timestamp never straddle a boundary: all events at ``val_time`` train.

    Returns:
        ``(val_start, test_start, val_time, test_time)``: the first validation and first test
        event ids (``E`` when a split is empty) and TGB's two thresholds.
    """
    val_time, test_time = (float(q) for q in np.quantile(t, TGB_SPLIT_QUANTILES))
    val_start = int(np.searchsorted(t, val_time, side="right"))
    test_start = int(np.searchsorted(t, test_time, side="right"))
    return val_start, test_start, val_time, test_time


def _stream_of(edges: TGBEdges, path: Path, name: str, version: int, layout: str,
               sort: bool) -> EventStream:
    t = edges.t
    check_time(path, t.astype(np.float64), 2, ordered=not sort,
               hint=" (TGB keeps file order; load it with dataset.sort=true to sort it stably)")
    order = np.argsort(t, kind="stable") if sort and np.any(np.diff(t) < 0) else None
    src, dst, feat, labels = edges.src, edges.dst, edges.edge_feat, edges.labels
    if order is not None:
        src, dst, t, feat, labels = src[order], dst[order], t[order], feat[order], labels[order]
    val_start, test_start, val_time, test_time = tgb_split(t)
    meta: dict[str, Any] = {
        "sorted_on_load": order is not None,
        TGB_KEY: {"name": name, "val_start": val_start, "test_start": test_start,
                "folder": str(path.parent), "version": version, "layout": layout,
                "val_time": val_time, "test_time": test_time, "edgelist": path.name},
    }
    return EventStream(src, dst, t.astype(np.float64), feat, labels, edges.num_nodes, name, meta)


def load_tgb(
    name: str | None,
    data_dir: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    edge_features: bool = True,
    use_cache: bool = True,
    sort: bool = False,
) -> EventStream:
    """Load a TGB link dataset from TGB's files, as py-tgb's ``LinkPropPredDataset`` reads it.

    The stream holds TGB's events in file order: TGB's node ids (``cftgnn.data.tgb_formats``
    for each layout; ``num_nodes`` is the largest id + 1, so ids TGB never uses, e.g. those
    its destination shift skips, count as nodes without events), TGB's integer timestamps
    (fractional ones truncated, as TGB's ``astype(int)``), and TGB's edge features as float32.
    Its ``meta["tgb"]`` carries TGB's split and where the files are: ``name`` (e.g.
    ``"tgbl-wiki"``), ``val_start`` (the first validation event id), ``test_start`` (the first
    test event id), ``folder`` (the folder of the files, a string), and ``version``,
    ``layout``, ``val_time``, ``test_time`` (TGB's two thresholds) and ``edgelist`` (the file
    name); so train is ids ``[0, val_start)``, validation ``[val_start, test_start)``, test
    ``[test_start, E)``, by TGB's rule (``tgb_split``: events at the training split's last
    timestamp ``val_time`` are all training events, TGB's ``t <= val_time``; ties never
    straddle a boundary). TGB keeps file order and a file whose timestamps decrease is
    refused, naming the line, unless ``sort`` (a stable sort by time: equal timestamps keep
    their line order; TGB itself does not sort, so its order then differs from ours but its
    three splits hold the same events). Duplicate events (same source, destination and time)
    stay separate events, as in TGB. Node features (tgbl-flight's airport file) are not read:
    streams have none.

    Args:
        name: The dataset, e.g. ``tgbl-wiki`` (``TGB_LINK_DATASETS`` lists them).
        data_dir: The folder of TGB's downloads (holding ``tgbl_wiki/``) or the dataset's own
            folder; default ``$CFTGNN_TGB_DIR``, then py-tgb's package folder
            (``find_tgb_folder``).
        cache_dir: Folder of the processed copy; default ``$CFTGNN_CACHE_DIR`` or
            ``~/.cache/cftgnn``.
        edge_features: Keep TGB's edge features (tgbl-wiki: 172 per event); false gives F = 0.
        use_cache: Read and write the processed copy (keyed by the edge list's path, size and
            time and these options, so a changed file is parsed again).
        sort: Sort the events stably by time instead of refusing an unsorted file.

    Raises:
        ConfigError: An unknown or non-link name, or a folder that does not exist.
        DataNotFoundError: The edge list is not found (the message says where it looked).
        DataFormatError: A malformed edge list (naming the file and the line).
    """
    version, layout = check_tgb_name(name)
    assert name is not None  # checked above
    folder = find_tgb_folder(name, data_dir)
    path = folder / tgb_file_names(name)["edgelist"]
    options = {"tgb_name": name, "tgb_reader": TGB_READER_VERSION, "edge_features": edge_features,
               "sort": sort}

    def parse(p: Path, raw: bytes) -> EventStream:
        edges = PARSERS[layout](p, raw, edge_features)
        return _stream_of(edges, p, name, version, layout, sort)

    return load_processed(path, resolve_cache_dir(cache_dir), use_cache, options, parse)


def tgb_negatives_path(name: str, folder: str | os.PathLike[str], split: str) -> Path:
    """The file of TGB's ``split`` negatives of ``name``: ``<name>_<split>_ns_v2.pkl``
    (``_ns.pkl`` at version 1) in ``folder/<name with - as _>/`` or in ``folder``; cheap, so a
    run can check it before any work.

    Raises:
        ConfigError: ``split`` is neither val nor test, or ``name`` is not a TGB link dataset.
        DataNotFoundError: The file is in neither place.
    """
    if split not in TGB_SPLITS:
        raise ConfigError(f"TGB's negatives exist for the splits {TGB_SPLITS}, not {split!r}")
    fname = tgb_file_names(name)[split]
    root = Path(folder).expanduser()
    looked = [root / fname, root / name.replace("-", "_") / fname]
    path = next((p for p in looked if p.is_file()), None)
    if path is None:
        raise DataNotFoundError(f"TGB's {split} negatives of {name} not found: looked for "
                                f"{looked[0]} and {looked[1]}; they come in TGB's {name} "
                                "download, beside the edge list")
    return path


def _split_events(stream: EventStream, split: str) -> tuple[int, int]:
    points = tgb_split_points(stream)
    if points is None or "name" not in stream.meta[TGB_KEY]:
        raise ConfigError(f"stream {stream.name!r} was not loaded with load_tgb (dataset=tgb): "
                          "it has no TGB split, so TGB's negatives do not apply to it")
    # (the split's name is checked by tgb_negatives_path, before any file is read)
    val, test = points
    return (val, test) if split == "val" else (test, stream.num_events)


def _key_arrays(table: Any, path: Path) -> tuple[np.ndarray, list[np.ndarray]]:
    """The keys ``[K, 3]`` (src, dst, t) and the negatives of a TGB negatives dict."""
    if not isinstance(table, dict):
        raise DataFormatError(f"{path}: expected TGB's dict from (src, dst, t) to negative "
                              f"destinations, found a {type(table).__name__}")
    keys = list(table)
    bad = next((k for k in keys if not (isinstance(k, tuple) and len(k) == 3 and all(
        isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in k))), None)
    if bad is not None:
        raise DataFormatError(f"{path}: the key {bad!r} is not a (src, dst, t) triple of "
                              "integers (TGB's link negatives)")
    values = []
    for k in keys:
        v = np.asarray(table[k])
        if v.ndim != 1 or not np.issubdtype(v.dtype, np.number) or \
                (v.size and not np.all(v == np.round(v))):
            raise DataFormatError(f"{path}: the negatives of {tuple(int(x) for x in k)} are not "
                                  "a 1-D array of node ids")
        values.append(v.astype(np.int64))
    return np.array(keys, dtype=np.int64).reshape(-1, 3), values


def load_tgb_negatives(
    stream: EventStream, split: str, data_dir: str | os.PathLike[str] | None = None
) -> TGBNegatives:
    """TGB's negative destinations of the ``split`` (``"val"`` or ``"test"``) of a stream
    ``load_tgb`` loaded, in its event ids.

    Reads ``<name>_<split>_ns_v2.pkl`` (``_ns.pkl`` for the datasets at version 1, as py-tgb
    does) from ``data_dir`` (the dataset's folder or the folder above it), default the folder
    the stream was read from (``meta["tgb"]["folder"]``), with ``cftgnn.data.safe_pickle``:
    nothing in the file is executed. TGB's file is a dict from ``(src, dst, t)`` to an array
    of negative destinations; keys and negatives are in TGB's node ids, which are the
    stream's. Every event of the split gets the negatives of its ``(src, dst, t)``; duplicate
    events (the same triple more than once in the split) all get the one list TGB keeps for
    that triple, as TGB's ``query_batch`` gives them.

    Raises:
        ConfigError: The stream has no TGB split, or ``split`` is neither val nor test.
        DataNotFoundError: The file is absent.
        DataFormatError: The pickle names anything but numpy arrays and scalars (refused,
            nothing run), is not TGB's dict, misses an event of the split, holds a triple no
            event of the split has (another dataset or version), or a node id outside the
            stream.
    """
    lo, hi = _split_events(stream, split)
    info = stream.meta[TGB_KEY]
    root = Path(data_dir).expanduser() if data_dir not in (None, "") else Path(info["folder"])
    path = tgb_negatives_path(str(info["name"]), root, split)
    keys, values = _key_arrays(load_numpy_pickle(path), path)
    where = str(path)
    ev = pd.MultiIndex.from_arrays([stream.src[lo:hi], stream.dst[lo:hi],
                                    stream.t[lo:hi].astype(np.int64)])
    index = pd.MultiIndex.from_arrays([keys[:, 0], keys[:, 1], keys[:, 2]])
    if not index.is_unique:  # (a dict's keys are unique; np.int64(1) and 1.0 are one key)
        raise DataFormatError(f"{where}: a (src, dst, t) key appears twice")
    row = index.get_indexer(ev)
    if np.any(row < 0):
        q = int(np.flatnonzero(row < 0)[0])
        e = lo + q
        raise DataFormatError(
            f"{where}: event {e} ({int(stream.src[e])}, {int(stream.dst[e])}, "
            f"{int(stream.t[e])}) of the {split} split has no negatives in the file (another "
            "dataset or version than the edge list?)")
    used = np.zeros(len(values), dtype=bool)
    used[row] = True
    if not used.all():
        k = keys[int(np.flatnonzero(~used)[0])]
        raise DataFormatError(f"{where}: the key {tuple(int(x) for x in k)} matches no event of "
                              f"the {split} split (events {lo} to {hi - 1}); another dataset or "
                              "version than the edge list?")
    counts = np.array([v.size for v in values], dtype=np.int64)
    flat = np.concatenate(values) if values else np.zeros(0, np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])[row]
    n = counts[row]
    indptr = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
    gather = np.repeat(starts - indptr[:-1], n) + np.arange(indptr[-1])
    table = TGBNegatives(split, np.arange(lo, hi, dtype=np.int64), indptr, flat[gather], where)
    table.check_within(stream)
    return table


def load_all_tgb_negatives(stream: EventStream, data_dir: str | os.PathLike[str] | None = None,
                           *, strict: bool = True) -> dict[str, TGBNegatives]:
    """TGB's negatives of every split (``TGB_SPLITS``) of a stream ``load_tgb`` loaded
    (``load_tgb_negatives`` for each).

    Args:
        stream: The stream.
        data_dir: As for ``load_tgb_negatives``.
        strict: Refuse a missing split's file (training ranks both splits); else keep the
            splits whose files are there (the rank target explains events of either) and
            refuse only when none is.

    Raises:
        DataNotFoundError: A split's file is missing (``strict``) or every one is.
        DataFormatError, ConfigError: As ``load_tgb_negatives``.
    """
    tables: dict[str, TGBNegatives] = {}
    missing: list[str] = []
    for split in TGB_SPLITS:
        try:
            tables[split] = load_tgb_negatives(stream, split, data_dir)
        except DataNotFoundError as exc:
            if strict:
                raise
            missing.append(str(exc))
    if not tables:
        raise DataNotFoundError(f"no TGB negatives found ({'; '.join(missing)})")
    return tables


__all__ = [
    "TGB_DIR_ENV",
    "TGB_LINK_DATASETS",
    "TGB_SPLIT_QUANTILES",
    "check_tgb_name",
    "find_tgb_folder",
    "load_all_tgb_negatives",
    "load_tgb",
    "load_tgb_negatives",
    "pytgb_datasets_dir",
    "tgb_file_names",
    "tgb_negatives_path",
    "tgb_split",
]
