"""Negative destinations in a file of the project's own, and random ones.

TGB's own negatives are read by ``cftgnn.data.tgb`` from its pickles. For a stream that is not
a TGB download (UCI, Wikipedia, a synthetic stream), ``explain.py target=rank`` reads a
``TGBNegatives`` table from an ``.npz`` file (``target_negatives=<file>``): arrays
``event_ids``, ``indptr``, ``dst`` and the ``split`` name, read without pickles
(``allow_pickle=False``, so a file can hold nothing but arrays). ``random_negatives`` draws
such a table the way TGB's random sampler does in spirit (uniform destinations other than the
true one), for benchmarks and tests.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from cftgnn.data.stream import EventStream
from cftgnn.data.tgb_negatives import TGB_SPLITS, TGBNegatives
from cftgnn.errors import DataFormatError, DataNotFoundError

#: The arrays of a negatives file.
NEGATIVES_KEYS = ("split", "event_ids", "indptr", "dst")


def save_negatives(path: str | os.PathLike[str], table: TGBNegatives) -> Path:
    """Write ``table`` as an ``.npz`` file that ``load_negatives`` reads back."""
    out = Path(path)
    with out.open("wb") as f:
        np.savez(f, split=np.asarray(table.split), event_ids=table.event_ids,
                 indptr=table.indptr, dst=table.dst)
    return out


def load_negatives(path: str | os.PathLike[str], stream: EventStream | None = None
                   ) -> TGBNegatives:
    """A ``TGBNegatives`` table from an ``.npz`` file of ``save_negatives``'s layout.

    Args:
        path: The file.
        stream: When given, event ids and destinations must be ids of it.

    Raises:
        DataNotFoundError: The file does not exist.
        DataFormatError: It is not such a file (not an npz, a key missing, pickled objects,
            ids outside the stream).
    """
    file = Path(path)
    if not file.is_file():
        raise DataNotFoundError(f"negatives file {file} does not exist")
    try:
        with np.load(file, allow_pickle=False) as data:
            missing = [k for k in NEGATIVES_KEYS if k not in data.files]
            if missing:
                raise DataFormatError(f"{file}: not a negatives file (no {', '.join(missing)})")
            arrays = {k: data[k] for k in NEGATIVES_KEYS}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise DataFormatError(f"{file}: not a negatives file ({exc})") from None
    split = str(arrays["split"])
    if split not in TGB_SPLITS:
        raise DataFormatError(f"{file}: split must be one of {TGB_SPLITS}, not {split!r}")
    for k in ("event_ids", "indptr", "dst"):
        if not np.issubdtype(arrays[k].dtype, np.integer):
            raise DataFormatError(f"{file}: {k} must hold integers, not {arrays[k].dtype}")
    table = TGBNegatives(split, arrays["event_ids"], arrays["indptr"], arrays["dst"],
                         source=file.name)
    if stream is not None:
        table.check_within(stream)
    return table


def random_negatives(stream: EventStream, event_ids: npt.ArrayLike, count: int,
                     split: str = "test", seed: int = 0) -> TGBNegatives:
    """``count`` distinct random destinations per event, none its true destination, drawn
    from the stream's destinations (``count`` capped at their number minus one).

    Args:
        stream: The stream.
        event_ids: The events that get negatives.
        count: Negatives per event (TGB's tgbl-wiki test split has 999 per positive).
        split: The table's split name.
        seed: Random seed.
    """
    pool = np.unique(stream.dst).astype(np.int64)
    ids = np.unique(np.asarray(event_ids, dtype=np.int64))
    rng = np.random.default_rng(seed)
    size = min(int(count), len(pool) - 1)
    rows: dict[int, npt.ArrayLike] = {}
    for e in ids.tolist():
        others = pool[pool != int(stream.dst[e])]
        rows[e] = rng.choice(others, size=size, replace=False)
    return TGBNegatives.from_lists(split, rows, source=f"random negatives (seed {seed})")


__all__ = ["NEGATIVES_KEYS", "load_negatives", "random_negatives", "save_negatives"]
