"""The four edge-list layouts of the Temporal Graph Benchmark's link datasets, parsed as py-tgb
2.3.0 processes them (``tgb/utils/pre_process.py``), strictly.

Each parser returns TGB's arrays before any split: sources and destinations in TGB's node ids,
integer timestamps (TGB keeps ``timestamps.astype(int)``, so fractional times are truncated
toward zero), and the edge features ``LinkPropPredDataset.edge_feat`` holds. The layouts:

- ``jodie`` (TGB's ``load_edgelist_wiki``: tgbl-wiki, -uci, -enron, -lastfm, -subreddit):
  a header line (skipped unread: JODIE's names fewer columns than its lines hold), then
  ``src, dst, t, label, features...`` (at least the first three); TGB shifts every destination by
  ``max(src) + 1`` (on the non-bipartite tgbl-uci and tgbl-enron too, so a node that sends and
  receives has two ids there, as in TGB); the features are the columns after the fourth.
- ``weighted`` (``csv_to_pd_data_sc``: tgbl-coin, tgbl-review): ``ts, src, dst, weight``;
  the node strings become ids ``0..N-1`` in order of first appearance (a line's source before
  its destination); the one feature is ``log2(weight)``, a weight of 0 counted as 1.
- ``comment`` (``csv_to_pd_data_rc``: tgbl-comment): ``ts, src, dst, num_words, score``; ids
  as above; features ``[num_words / 5000, num_words / 5000, score]`` (TGB writes the word count
  into both columns of its two-column block and appends the score).
- ``flight`` (``csv_to_pd_data``: tgbl-flight): ``ts, src, dst, callsign, typecode``; ids as
  above; a timestamp is Unix seconds when the first line's is all digits, else a
  ``%Y-%m-%d`` date read in the machine's local time zone (as TGB reads it); the 16 features
  encode the callsign and the type code, each padded with ``!`` to 8 characters (an empty one
  is ``!!!!!!!!``, a type code longer than 8 is ``!!!!!!!!``, a longer callsign is an error,
  as in TGB), one number per character: a digit its value, ``!`` -1, any other character
  ``ord(upper(c)) - 35``.

Where TGB would crash or produce what our streams cannot hold (a short line, a non-numeric
timestamp, a weight whose logarithm is not finite), ``DataFormatError`` names the file and
the line. Features are returned as float32 (TGB keeps float64).
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
from pandas.api.types import is_numeric_dtype

from cftgnn.data.loaders import check_ids, numeric_columns, read_table
from cftgnn.errors import DataFormatError

#: First file line of the data (line 1 is TGB's header, which it skips unread).
FIRST_LINE = 2
#: TGB's normalisation of tgbl-comment's word counts (``max_words``).
COMMENT_MAX_WORDS = 5000


@dataclass(frozen=True)
class TGBEdges:
    """TGB's arrays of one edge list, in file order.

    Attributes:
        src: ``int64 [E]`` TGB's source ids.
        dst: ``int64 [E]`` TGB's destination ids (after its shift, for the jodie layout).
        t: ``int64 [E]`` TGB's timestamps.
        edge_feat: ``float32 [E, F]`` (``F = 0`` when features were not asked for).
        labels: ``int64 [E]`` the jodie layout's fourth column when it holds integers >= 0,
            else 0 (TGB does not read it).
        num_nodes: Largest id + 1.
    """

    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    t: npt.NDArray[np.int64]
    edge_feat: npt.NDArray[np.float32]
    labels: npt.NDArray[np.int64]
    num_nodes: int


def _table(path: Path, raw: bytes, dtype: type | None, columns: int, layout: str) -> pd.DataFrame:
    df = read_table(path, raw, sep=",", skiprows=1, header=None) if dtype is None else \
        _read_str(path, raw)
    if len(df) == 0:
        raise DataFormatError(f"{path}: the file holds no events (only a header line)")
    if df.shape[1] < columns:
        raise DataFormatError(f"{path}, line {FIRST_LINE}: {df.shape[1]} fields, but TGB's "
                              f"{layout} layout has at least {columns}")
    return df


def _read_str(path: Path, raw: bytes) -> pd.DataFrame:
    try:
        return pd.read_csv(io.BytesIO(raw), sep=",", header=None, skiprows=1, dtype=str,
                           keep_default_na=False, skip_blank_lines=False, engine="c")
    except pd.errors.EmptyDataError as exc:
        raise DataFormatError(f"{path}: the file holds no events") from exc
    except pd.errors.ParserError as exc:
        msg = str(exc).replace("Error tokenizing data. C error: ", "").strip()
        raise DataFormatError(f"{path}: malformed line: {msg} (every line must have the same "
                              "number of fields)") from exc


def _empty_fields(path: Path, df: pd.DataFrame, names: list[str]) -> None:
    """A short line (pandas pads it with empty fields) or an empty line, named."""
    for j, name in enumerate(names):
        empty = np.flatnonzero((df.iloc[:, j] == "").to_numpy())
        if empty.size:
            r = int(empty[0])
            what = "empty line" if (df.iloc[r] == "").all() else f"missing value for {name}"
            raise DataFormatError(f"{path}, line {r + FIRST_LINE}: {what} (the line is short "
                                  f"or has an empty field; expected {df.shape[1]} fields)")


def _numbers(path: Path, values: pd.Series, name: str) -> npt.NDArray[np.float64]:
    out = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, copy=True)
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        r = int(bad[0])
        raise DataFormatError(f"{path}, line {r + FIRST_LINE}: {name} = {values.iloc[r]!r} is "
                              "not a finite number")
    return out


def _integers(path: Path, values: pd.Series, name: str) -> npt.NDArray[np.int64]:
    """Integers as TGB's ``int(field)`` reads them (no fraction, no exponent)."""
    text = values.str.strip()
    bad = np.flatnonzero(~text.str.fullmatch(r"[+-]?\d+").to_numpy(dtype=bool))
    if bad.size:
        r = int(bad[0])
        raise DataFormatError(f"{path}, line {r + FIRST_LINE}: {name} = {values.iloc[r]!r} is "
                              "not an integer")
    return np.asarray(text.astype(np.int64).to_numpy(), dtype=np.int64)


def _first_appearance(src: pd.Series, dst: pd.Series) -> tuple[np.ndarray, np.ndarray, int]:
    """TGB's ``node_ids``: each node string an id in order of first appearance, a line's
    source before its destination."""
    both = np.empty(2 * len(src), dtype=object)
    both[0::2], both[1::2] = src.to_numpy(dtype=object), dst.to_numpy(dtype=object)
    codes, uniques = pd.factorize(both, sort=False)
    return codes[0::2].astype(np.int64), codes[1::2].astype(np.int64), len(uniques)


def _jodie_features(path: Path, df: pd.DataFrame) -> npt.NDArray[np.float32]:
    """The columns after the fourth, ``float32 [E, F]``: straight from pandas when every one
    is numeric and finite (the common case: one conversion), else checked column by column
    for the message naming the line."""
    block = df.iloc[:, 4:]
    if all(is_numeric_dtype(block[c]) for c in block.columns):
        with np.errstate(over="ignore"):  # a value past float32's range: checked below
            feat = block.to_numpy(dtype=np.float32)
        if np.isfinite(feat).all():
            return feat
    used = [0, 1, 2, *range(4, df.shape[1])]  # with the ids, so a short line reads as one
    names = ["src", "dst", "t"] + [f"feature {j}" for j in range(block.shape[1])]
    checked = numeric_columns(path, df.iloc[:, used], FIRST_LINE, names,
                              fields=df.shape[1])[:, 3:]
    bad = np.flatnonzero((np.abs(checked) > np.finfo(np.float32).max).any(axis=1))
    if bad.size:
        raise DataFormatError(f"{path}, line {int(bad[0]) + FIRST_LINE}: a feature is not "
                              "finite (or too large for float32)")
    return checked.astype(np.float32)


def parse_jodie(path: Path, raw: bytes, edge_features: bool) -> TGBEdges:
    """The jodie layout (module docstring)."""
    df = _table(path, raw, None, 3, "jodie (src, dst, t[, label, features...])")
    table = numeric_columns(path, df.iloc[:, :3], FIRST_LINE, ["src", "dst", "t"],
                            fields=df.shape[1])
    feat = _jodie_features(path, df) if edge_features else np.zeros((len(df), 0), np.float32)
    src = check_ids(path, table[:, 0], "src", FIRST_LINE)
    dst_raw = check_ids(path, table[:, 1], "dst", FIRST_LINE)
    t = np.trunc(table[:, 2]).astype(np.int64)
    dst = dst_raw + int(src.max()) + 1
    label_col = pd.to_numeric(df.iloc[:, 3], errors="coerce").to_numpy(dtype=np.float64) \
        if df.shape[1] > 3 else np.zeros(len(src))
    integral = np.isfinite(label_col).all() and (label_col >= 0).all() and \
        (label_col == np.floor(label_col)).all()
    labels = label_col.astype(np.int64) if integral else np.zeros(len(src), np.int64)
    return TGBEdges(src, dst, t, feat, labels, int(dst.max()) + 1)


def _relabelled(path: Path, raw: bytes, names: list[str], layout: str
                ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, int]:
    df = _table(path, raw, str, len(names), layout)
    _empty_fields(path, df, names)
    src, dst, num_nodes = _first_appearance(df.iloc[:, 1], df.iloc[:, 2])
    return df, src, dst, num_nodes


def parse_weighted(path: Path, raw: bytes, edge_features: bool) -> TGBEdges:
    """The weighted layout of tgbl-coin and tgbl-review (module docstring)."""
    names = ["ts", "src", "dst", "weight"]
    df, src, dst, num_nodes = _relabelled(path, raw, names, "weighted (ts, src, dst, weight)")
    t = _integers(path, df.iloc[:, 0], "ts")
    if edge_features:
        w = _numbers(path, df.iloc[:, 3], "weight")
        w[w == 0] = 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            feat = np.log2(w)[:, None]
        bad = np.flatnonzero(~np.isfinite(feat[:, 0]))
        if bad.size:
            r = int(bad[0])
            raise DataFormatError(f"{path}, line {r + FIRST_LINE}: weight = {w[r]:g} has no "
                                  "finite log2 (TGB's edge feature)")
    else:
        feat = np.zeros((len(t), 0))
    return TGBEdges(src, dst, t, feat.astype(np.float32), np.zeros(len(t), np.int64), num_nodes)


def parse_comment(path: Path, raw: bytes, edge_features: bool) -> TGBEdges:
    """The layout of tgbl-comment (module docstring)."""
    names = ["ts", "src", "dst", "num_words", "score"]
    df, src, dst, num_nodes = _relabelled(path, raw, names,
                                          "comment (ts, src, dst, num_words, score)")
    t = _integers(path, df.iloc[:, 0], "ts")
    if edge_features:
        words = _integers(path, df.iloc[:, 3], "num_words") / COMMENT_MAX_WORDS
        score = _integers(path, df.iloc[:, 4], "score").astype(np.float64)
        feat = np.stack([words, words, score], axis=1)
    else:
        feat = np.zeros((len(t), 0))
    return TGBEdges(src, dst, t, feat.astype(np.float32), np.zeros(len(t), np.int64), num_nodes)


def _code_chars(path: Path, text: str, line: int) -> list[float]:
    out: list[float] = []
    for c in text:
        if c.isnumeric():
            try:
                out.append(float(c))
            except ValueError as exc:
                raise DataFormatError(f"{path}, line {line}: the character {c!r} is numeric "
                                      "but not a digit (TGB cannot encode it)") from exc
        elif c == "!":
            out.append(-1.0)
        elif len(c.upper()) == 1:
            out.append(float(ord(c.upper()) - 44 + 9))
        else:
            raise DataFormatError(f"{path}, line {line}: the character {c!r} has no one-letter "
                                  "upper case (TGB cannot encode it)")
    return out


def _flight_codes(path: Path, callsign: pd.Series, typecode: pd.Series) -> np.ndarray:
    """TGB's 16 features of (callsign, typecode), ``float64 [E, 16]``."""
    def pad(s: str, truncate: bool) -> str:
        if s == "" or (truncate and len(s) > 8):
            return "!" * 8
        return s + "!" * max(0, 8 - len(s))

    joined = callsign.map(lambda s: pad(s, False)) + typecode.map(lambda s: pad(s, True))
    codes, uniques = pd.factorize(joined, sort=False)
    first = {k: int(np.flatnonzero(codes == k)[0]) for k in range(len(uniques))
             if len(uniques[k]) != 16}
    if first:
        r = min(first.values())
        raise DataFormatError(f"{path}, line {r + FIRST_LINE}: callsign {callsign.iloc[r]!r} is "
                              "longer than 8 characters (TGB encodes 8)")
    table = np.array([_code_chars(path, u, int(np.flatnonzero(codes == k)[0]) + FIRST_LINE)
                      for k, u in enumerate(uniques)], dtype=np.float64).reshape(-1, 16)
    return table[codes]


def _flight_times(path: Path, ts: pd.Series) -> np.ndarray:
    if ts.iloc[0].isdigit():
        return _integers(path, ts, "ts")
    codes, uniques = pd.factorize(ts, sort=False)
    seconds = np.empty(len(uniques), dtype=np.int64)
    for k, day in enumerate(uniques):
        try:  # TGB: datetime.strptime(ts, "%Y-%m-%d").timestamp(), local time, then int
            seconds[k] = int(datetime.datetime.strptime(day, "%Y-%m-%d").timestamp())
        except ValueError as exc:
            r = int(np.flatnonzero(codes == k)[0])
            raise DataFormatError(f"{path}, line {r + FIRST_LINE}: ts = {day!r} is neither "
                                  "Unix seconds nor a %Y-%m-%d date") from exc
    return seconds[codes]


def parse_flight(path: Path, raw: bytes, edge_features: bool) -> TGBEdges:
    """The layout of tgbl-flight (module docstring)."""
    names = ["ts", "src", "dst", "callsign", "typecode"]
    df, src, dst, num_nodes = _relabelled(path, raw, names[:3],
                                          "flight (ts, src, dst, callsign, typecode)")
    if df.shape[1] < 5:
        raise DataFormatError(f"{path}, line {FIRST_LINE}: {df.shape[1]} fields, but TGB's "
                              "flight layout has 5 (ts, src, dst, callsign, typecode)")
    t = _flight_times(path, df.iloc[:, 0])
    feat = _flight_codes(path, df.iloc[:, 3], df.iloc[:, 4]) if edge_features else \
        np.zeros((len(t), 0))
    return TGBEdges(src, dst, t, feat.astype(np.float32), np.zeros(len(t), np.int64), num_nodes)


#: Parser of each layout.
PARSERS: dict[str, Callable[[Path, bytes, bool], TGBEdges]] = {
    "jodie": parse_jodie,
    "weighted": parse_weighted,
    "comment": parse_comment,
    "flight": parse_flight,
}

__all__ = ["PARSERS", "TGBEdges", "parse_comment", "parse_flight", "parse_jodie",
           "parse_weighted"]
