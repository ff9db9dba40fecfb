"""The TGB reader: TGB's own file layout round-trips (ids, split, features, cache), its
negatives are read without executing anything, bad input is one error line, and where py-tgb
is installed our stream and negatives equal what py-tgb's own reader gives."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cftgnn.data import load_tgb, load_tgb_negatives
from cftgnn.data import tgb as tgb_module
from cftgnn.data.safe_pickle import load_numpy_pickle
from cftgnn.data.tgb import TGB_LINK_DATASETS, tgb_file_names, tgb_split
from cftgnn.errors import ConfigError, DataFormatError, DataNotFoundError

ROOT = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------------------ the fixture
#: A small bipartite stream in the jodie layout: (user, item, t, label, f0, f1). Times repeat at
#: what become the split thresholds, so the boundary rule ``t <= val_time`` is exercised.
JODIE_ROWS = [(0, 0, 0.0, 0, 0.5, 1.0), (1, 1, 1.0, 0, 0.25, 2.0), (2, 0, 2.0, 1, 0.0, 3.0),
              (0, 2, 3.0, 0, 1.5, 4.0), (1, 0, 4.0, 0, 2.5, 5.0), (2, 1, 5.0, 0, 3.5, 6.0),
              (0, 1, 6.0, 0, 4.5, 7.0), (1, 2, 7.0, 0, 5.5, 8.0), (3, 0, 7.0, 0, 6.5, 9.0),
              (3, 2, 7.0, 0, 7.5, 1.0), (2, 2, 8.0, 0, 8.5, 2.0), (0, 0, 9.0, 1, 9.5, 3.0),
              (1, 1, 9.0, 0, 0.5, 4.0), (1, 1, 9.0, 0, 0.5, 4.0), (3, 1, 10.0, 0, 1.5, 5.0),
              (2, 0, 11.0, 0, 2.5, 6.0)]


def tgb_folder(root: Path, name: str) -> Path:
    folder = root / name.replace("-", "_")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_edgelist(root: Path, name: str, header: str, rows: list[tuple]) -> Path:
    path = tgb_folder(root, name) / tgb_file_names(name)["edgelist"]
    path.write_text(header + "\n" + "".join(",".join(str(v) for v in r) + "\n" for r in rows))
    return path


#: JODIE's header (as in tgbl-wiki's file) names one column for all the features.
JODIE_HEADER = "user_id,item_id,timestamp,state_label,comma_separated_list_of_features"


def write_jodie(root: Path, name: str = "tgbl-wiki", rows: list[tuple] = JODIE_ROWS) -> Path:
    return write_edgelist(root, name, JODIE_HEADER, rows)


def write_negatives(root: Path, name: str, split: str, table: dict) -> Path:
    path = tgb_folder(root, name) / tgb_file_names(name)[split]
    with open(path, "wb") as f:  # as TGB's save_pkl writes it
        pickle.dump(table, f, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def tgb_keys(stream, lo: int, hi: int) -> list[tuple]:
    """The (src, dst, t) keys of events [lo, hi) as TGB writes them: numpy int64 scalars."""
    t = stream.t[lo:hi].astype(np.int64)
    return [(np.int64(s), np.int64(d), np.int64(u))
            for s, d, u in zip(stream.src[lo:hi], stream.dst[lo:hi], t, strict=True)]


# ------------------------------------------------------------------------- the jodie layout
def test_jodie_layout_shifts_destinations_keeps_features_and_splits_by_tgb_rule(tmp_path):
    write_jodie(tmp_path)
    s = load_tgb("tgbl-wiki", data_dir=tmp_path, cache_dir=tmp_path / "cache")
    rows = np.array(JODIE_ROWS)
    shift = int(rows[:, 0].max()) + 1  # TGB: dst + max(src) + 1
    assert s.src.tolist() == rows[:, 0].astype(int).tolist()
    assert s.dst.tolist() == (rows[:, 1].astype(int) + shift).tolist()
    assert s.num_nodes == int(rows[:, 1].max()) + shift + 1
    assert s.labels.tolist() == rows[:, 3].astype(int).tolist()
    np.testing.assert_array_equal(s.edge_feat, rows[:, 4:].astype(np.float32))
    # TGB's split: quantiles 0.70 / 0.85 of the integer times, train t <= val_time
    t = rows[:, 2].astype(int)
    val_time, test_time = np.quantile(t, [0.70, 0.85])
    assert (val_time, test_time) == (8.5, 9.0)  # the hand value: 9.0 is a repeated time
    info = s.meta["tgb"]
    assert info["val_start"] == int(np.sum(t <= val_time)) == 11
    assert info["test_start"] == int(np.sum(t <= test_time)) == 14  # all three t=9 in val
    assert info["name"] == "tgbl-wiki" and info["folder"] == str(tmp_path / "tgbl_wiki")
    assert tgb_split(t)[:2] == (11, 14)


def test_fractional_times_are_truncated_as_tgb_and_features_can_be_dropped(tmp_path):
    rows = [(0, 0, 0.75, 0, 1.0, 1.0), (1, 0, 1.5, 0, 1.0, 1.0), (0, 1, 2.25, 0, 1.0, 1.0)]
    write_jodie(tmp_path, rows=rows)
    s = load_tgb("tgbl-wiki", data_dir=tmp_path / "tgbl_wiki", cache_dir=tmp_path / "c",
                 edge_features=False)
    assert s.t.tolist() == [0.0, 1.0, 2.0] and s.feat_dim == 0


def test_uci_is_version_1_and_shifted_though_not_bipartite(tmp_path):
    names = tgb_file_names("tgbl-uci")
    assert names["edgelist"] == "tgbl-uci_edgelist.csv" and names["val"] == "tgbl-uci_val_ns.pkl"
    rows = [(0, 1, 0, 0), (1, 0, 5, 0), (2, 1, 9, 0)]
    write_edgelist(tmp_path, "tgbl-uci", "src,dst,t,label", rows)
    s = load_tgb("tgbl-uci", data_dir=tmp_path, cache_dir=tmp_path / "c")
    assert s.dst.tolist() == [4, 3, 4] and s.num_nodes == 5 and s.feat_dim == 0


def test_processed_cache_is_hit_and_a_changed_file_parsed_again(tmp_path):
    path = write_jodie(tmp_path)
    first = load_tgb("tgbl-wiki", data_dir=tmp_path, cache_dir=tmp_path / "cache")
    again = load_tgb("tgbl-wiki", data_dir=tmp_path, cache_dir=tmp_path / "cache")
    assert "from_cache" not in first.meta and "from_cache" in again.meta
    assert again.meta["tgb"] == first.meta["tgb"]
    np.testing.assert_array_equal(again.edge_feat, first.edge_feat)
    write_jodie(tmp_path, rows=JODIE_ROWS[:-1])
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    changed = load_tgb("tgbl-wiki", data_dir=tmp_path, cache_dir=tmp_path / "cache")
    assert "from_cache" not in changed.meta and changed.num_events == len(JODIE_ROWS) - 1


def test_unsorted_file_is_refused_naming_the_line_or_sorted_stably(tmp_path):
    rows = [(0, 0, 5, 0, 1.0, 1.0), (1, 0, 3, 0, 2.0, 2.0), (2, 0, 3, 0, 3.0, 3.0)]
    write_jodie(tmp_path, rows=rows)
    with pytest.raises(DataFormatError, match="line 3: timestamp 3 is earlier"):
        load_tgb("tgbl-wiki", data_dir=tmp_path, use_cache=False)
    s = load_tgb("tgbl-wiki", data_dir=tmp_path, use_cache=False, sort=True)
    assert s.src.tolist() == [1, 2, 0] and s.meta["sorted_on_load"] is True


@pytest.mark.parametrize(("bad", "message"), [
    ("x", "line 3: feature 1 = 'x' is not a number"),
    ("", "line 3: missing value for feature 1"),
    ("1e39", "line 3: a feature is not finite (or too large for float32)"),
])
def test_a_bad_feature_is_named_by_its_line(tmp_path, bad, message):
    rows = [(0, 0, 0, 0, 1.0, 1.0), (1, 0, 1, 0, 2.0, bad), (1, 1, 2, 0, 3.0, 3.0)]
    write_jodie(tmp_path, rows=rows)
    with pytest.raises(DataFormatError, match=re.escape(message)):
        load_tgb("tgbl-wiki", data_dir=tmp_path, use_cache=False)


# --------------------------------------------------------------- the relabelling layouts
def test_coin_layout_relabels_by_first_appearance_and_logs_weights(tmp_path):
    rows = [(10, "0xaa", "0xbb", 8.0), (11, "0xcc", "0xaa", 0.0), (12, "0xbb", "0xdd", 2.0)]
    write_edgelist(tmp_path, "tgbl-coin", "day,src,dst,w", rows)
    s = load_tgb("tgbl-coin", data_dir=tmp_path, use_cache=False)
    assert s.src.tolist() == [0, 2, 1] and s.dst.tolist() == [1, 0, 3] and s.num_nodes == 4
    assert s.edge_feat[:, 0].tolist() == [3.0, 0.0, 1.0]  # log2(w), w = 0 counted as 1


def test_comment_layout_features_are_tgbs_three_columns(tmp_path):
    rows = [(1, "u", "v", 500, 3), (2, "v", "w", 2500, -1)]
    write_edgelist(tmp_path, "tgbl-comment", "ts,src,dst,num_words,score", rows)
    s = load_tgb("tgbl-comment", data_dir=tmp_path, use_cache=False)
    np.testing.assert_allclose(s.edge_feat, [[0.1, 0.1, 3.0], [0.5, 0.5, -1.0]])


def test_flight_layout_encodes_callsign_and_typecode(tmp_path):
    rows = [(100, "YUL", "YYZ", "AC1", "B738"), (200, "YYZ", "LAX", "", "A320NEOXX")]
    write_edgelist(tmp_path, "tgbl-flight", "timestamp,src,dst,callsign,typecode", rows)
    s = load_tgb("tgbl-flight", data_dir=tmp_path, use_cache=False)
    a, c = ord("A") - 35, ord("C") - 35
    b = ord("B") - 35
    assert s.edge_feat[0].tolist() == [a, c, 1, -1, -1, -1, -1, -1, b, 7, 3, 8, -1, -1, -1, -1]
    assert s.edge_feat[1].tolist() == [-1] * 16  # empty callsign; a type code over 8 chars
    assert s.src.tolist() == [0, 1] and s.dst.tolist() == [1, 2]


# --------------------------------------------------------------------------- the folder
def test_folder_from_the_environment_and_from_pytgbs_package_folder(tmp_path, monkeypatch):
    write_jodie(tmp_path / "tgbroot")
    monkeypatch.setenv("CFTGNN_TGB_DIR", str(tmp_path / "tgbroot"))
    assert load_tgb("tgbl-wiki", use_cache=False).num_events == len(JODIE_ROWS)
    monkeypatch.delenv("CFTGNN_TGB_DIR")
    monkeypatch.setattr(tgb_module, "pytgb_datasets_dir", lambda: tmp_path / "tgbroot")
    assert load_tgb("tgbl-wiki", use_cache=False).meta["tgb"]["folder"] == str(
        tmp_path / "tgbroot" / "tgbl_wiki")
    monkeypatch.setattr(tgb_module, "pytgb_datasets_dir", lambda: None)
    with pytest.raises(DataNotFoundError, match="py-tgb is not installed"):
        load_tgb("tgbl-wiki", use_cache=False)


def test_bad_names_and_folders(tmp_path):
    with pytest.raises(ConfigError, match="node task"):
        load_tgb("tgbn-trade", data_dir=tmp_path)
    with pytest.raises(ConfigError, match="tgbl-wiki, tgbl-review"):
        load_tgb("tgbl-nope", data_dir=tmp_path)
    with pytest.raises(ConfigError, match="not a folder"):
        load_tgb("tgbl-wiki", data_dir=tmp_path / "absent")
    (tgb_folder(tmp_path, "tgbl-wiki") / "tgbl-wiki_edgelist.csv").write_text("a,b,c,d\n")
    with pytest.raises(DataNotFoundError, match="older version"):
        load_tgb("tgbl-wiki", data_dir=tmp_path)
    assert set(TGB_LINK_DATASETS) >= {"tgbl-wiki", "tgbl-uci", "tgbl-coin", "tgbl-flight"}


# ---------------------------------------------------------------------------- negatives
def test_negatives_map_keys_to_event_ids_and_duplicates_share_their_list(tmp_path):
    write_jodie(tmp_path)
    s = load_tgb("tgbl-wiki", data_dir=tmp_path, use_cache=False)
    v, t = s.meta["tgb"]["val_start"], s.meta["tgb"]["test_start"]
    val = {k: np.array([4.0, 5.0]) if i % 2 else np.array([6], dtype=np.int64)
           for i, k in enumerate(dict.fromkeys(tgb_keys(s, v, t)))}
    write_negatives(tmp_path, "tgbl-wiki", "val", val)
    neg = load_tgb_negatives(s, "val")
    assert neg.event_ids.tolist() == list(range(v, t)) and neg.split == "val"
    for e in range(v, t):
        key = (int(s.src[e]), int(s.dst[e]), int(s.t[e]))
        assert neg.of(e).tolist() == np.asarray(val[key]).astype(int).tolist()
    # events 12 and 13 are the same (1, 1+4, 9): both get the one list TGB keeps
    assert (s.src[12], s.dst[12], s.t[12]) == (s.src[13], s.dst[13], s.t[13])
    assert neg.of(12).tolist() == neg.of(13).tolist()


def test_negatives_that_miss_an_event_or_name_another_are_refused(tmp_path):
    write_jodie(tmp_path)
    s = load_tgb("tgbl-wiki", data_dir=tmp_path, use_cache=False)
    t0 = s.meta["tgb"]["test_start"]
    keys = tgb_keys(s, t0, s.num_events)
    write_negatives(tmp_path, "tgbl-wiki", "test", {k: np.array([4]) for k in keys[1:]})
    with pytest.raises(DataFormatError, match=f"event {t0} .* has no negatives"):
        load_tgb_negatives(s, "test")
    extra = {**{k: np.array([4]) for k in keys}, (np.int64(0), np.int64(4), np.int64(99)):
             np.array([5])}
    write_negatives(tmp_path, "tgbl-wiki", "test", extra)
    with pytest.raises(DataFormatError, match=r"\(0, 4, 99\) matches no event"):
        load_tgb_negatives(s, "test")
    write_negatives(tmp_path, "tgbl-wiki", "test", {k: np.array([99]) for k in keys})
    with pytest.raises(DataFormatError, match="99 is outside"):
        load_tgb_negatives(s, "test")
    with pytest.raises(ConfigError, match="not 'train'"):
        load_tgb_negatives(s, "train")
    with pytest.raises(DataNotFoundError, match="val negatives"):
        load_tgb_negatives(s, "val")


class _OpensAFile:
    """Pickles as a call of ``open(path, "w")`` (``io.open``): loading it would create the file."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("payload", ["value", "key", "top"])
def test_a_negatives_pickle_that_would_run_code_is_refused_and_runs_nothing(tmp_path, payload):
    write_jodie(tmp_path)
    s = load_tgb("tgbl-wiki", data_dir=tmp_path, use_cache=False)
    v, t = s.meta["tgb"]["val_start"], s.meta["tgb"]["test_start"]
    marker = tmp_path / "created_by_the_pickle"
    table: object = {k: np.array([4]) for k in tgb_keys(s, v, t)}
    if payload == "value":
        table[next(iter(table))] = _OpensAFile(marker)  # type: ignore[index]
    elif payload == "key":
        table[(np.int64(0), _OpensAFile(marker), np.int64(1))] = np.array([4])  # type: ignore
    else:
        table = _OpensAFile(marker)
    path = write_negatives(tmp_path, "tgbl-wiki", "val", table)  # type: ignore[arg-type]
    assert not marker.exists()
    with pytest.raises(DataFormatError) as err:
        load_tgb_negatives(s, "val")
    assert str(err.value) == (f"{path}: refused to unpickle the global io.open: the file "
                              "may hold only numpy arrays and scalars in dicts and tuples; "
                              "nothing was executed")
    assert not marker.exists()


def test_safe_pickle_reads_numpy_pickles_of_every_protocol_and_refuses_object_arrays(tmp_path):
    table = {(np.int64(1), np.int64(2), np.int64(3)): np.array([1.0, 2.0]),
             (4, 5, 6): np.arange(3, dtype=np.int64), (7, 8, 9): np.zeros(0)}
    for proto in (3, 4, 5):
        path = tmp_path / f"p{proto}.pkl"
        path.write_bytes(pickle.dumps(table, protocol=proto))
        back = load_numpy_pickle(path)
        assert back.keys() == table.keys()
        assert all(np.array_equal(back[k], table[k]) for k in table)
    # numpy 1.x (which wrote TGB's files) names numpy.core.*: protocol 3's GLOBAL opcodes hold
    # the names as text, so the numpy 2 pickle becomes numpy 1's by renaming them
    old = pickle.dumps(table, protocol=3).replace(b"numpy._core.", b"numpy.core.")
    assert b"numpy.core.multiarray\n_reconstruct" in old and b"numpy._core" not in old
    (tmp_path / "numpy1.pkl").write_bytes(old)
    back = load_numpy_pickle(tmp_path / "numpy1.pkl")
    assert all(np.array_equal(back[k], table[k]) for k in table)
    path = tmp_path / "objects.pkl"
    path.write_bytes(pickle.dumps({(1, 2, 3): np.array([1, "x"], dtype=object)}))
    with pytest.raises(DataFormatError, match="dtype object"):
        load_numpy_pickle(path)
    path.write_bytes(pickle.dumps(table)[:40])
    with pytest.raises(DataFormatError, match="not a readable pickle"):
        load_numpy_pickle(path)


# ---------------------------------------------------------------- py-tgb's own reader
FIXTURES = {
    "tgbl-wiki": (JODIE_HEADER, JODIE_ROWS),
    "tgbl-enron": ("src,dst,t", [(0, 1, 0), (1, 0, 5), (2, 1, 9), (1, 2, 9), (0, 2, 12)]),
    "tgbl-uci": ("src,dst,t,label", [(0, 1, 0, 0), (1, 0, 5, 0), (2, 1, 9, 0), (1, 2, 9, 0),
                                     (0, 2, 12, 0), (2, 0, 14, 0)]),
    "tgbl-coin": ("day,src,dst,w", [(10 + i, f"0x{i % 3}", f"0x{(i * 7) % 5 + 1}", float(i))
                                    for i in range(12)]),
    "tgbl-comment": ("ts,src,dst,num_words,score",
                     [(i, f"u{i % 4}", f"u{(i + 1) % 5}", 10 * i, i - 3) for i in range(10)]),
    "tgbl-flight": ("timestamp,src,dst,callsign,typecode",
                    [(86400 * (i // 2), f"A{i % 6}", f"A{(i + 1) % 6}", f"CS{i}",
                      "B738" if i % 2 else "") for i in range(10)]),
}


def pytgb_dataset(root: Path, name: str):
    """py-tgb's ``LinkPropPredDataset`` on the files under ``root``, offline: py-tgb prepends
    its package folder to ``root`` (TGB issue #116), so ``root`` is given relative to it."""
    pytest.importorskip("tgb", reason="py-tgb is not installed (pip install -e '.[tgb]')")
    from tgb.linkproppred.dataset import LinkPropPredDataset
    from tgb.utils.info import PROJ_DIR

    if name == "tgbl-flight":  # py-tgb requires the airport file (node features) beside it;
        # its 20 node features are one-hot types and continents (6 + 5 here), 7 + 2 more
        (tgb_folder(root, name) / "airport_node_feat_v2.csv").write_text(
            "airport_code,type,continent,iso_region,longitude,latitude\n"
            + "".join(f"A{i},type{i},cont{i % 5},CA-QC,1.0,2.0\n" for i in range(6)))
    return LinkPropPredDataset(name, root=os.path.relpath(root, PROJ_DIR), download=False)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_same_events_split_and_negatives_as_pytgbs_own_reader(tmp_path, name):
    header, rows = FIXTURES[name]
    write_edgelist(tmp_path / "ours", name, header, rows)
    ours = load_tgb(name, data_dir=tmp_path / "ours", use_cache=False)
    info = ours.meta["tgb"]
    keys = tgb_keys(ours, info["val_start"], info["test_start"])
    rng = np.random.default_rng(0)
    table = {k: rng.integers(0, ours.num_nodes, 3).astype(np.float64) for k in keys}
    write_negatives(tmp_path / "ours", name, "val", table)
    shutil.copytree(tmp_path / "ours", tmp_path / "theirs")  # py-tgb writes ml_*.pkl there
    theirs = pytgb_dataset(tmp_path / "theirs", name)
    full = theirs.full_data
    np.testing.assert_array_equal(ours.src, full["sources"])
    np.testing.assert_array_equal(ours.dst, full["destinations"])
    np.testing.assert_array_equal(ours.t, full["timestamps"])
    np.testing.assert_allclose(ours.edge_feat, np.asarray(theirs.edge_feat, dtype=np.float64),
                               rtol=1e-6)
    ids = np.arange(ours.num_events)
    np.testing.assert_array_equal(ids < info["val_start"], theirs.train_mask)
    np.testing.assert_array_equal(ids >= info["test_start"], theirs.test_mask)
    theirs.load_val_ns()
    val = theirs.val_mask
    lists = theirs.negative_sampler.query_batch(full["sources"][val], full["destinations"][val],
                                                full["timestamps"][val], split_mode="val")
    neg = load_tgb_negatives(ours, "val")
    assert [neg.of(e).tolist() for e in np.flatnonzero(val)] == lists


# ------------------------------------------------------------------------------ the script
def dataset_info(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "dataset_info.py"), "dataset=tgb",
         f"paths.cache_dir={tmp_path / 'cache'}", *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "CFTGNN_TGB_DIR": str(tmp_path)},
    )


def test_dataset_info_reads_a_tgb_folder_and_its_negatives(tmp_path):
    write_jodie(tmp_path)
    s = load_tgb("tgbl-wiki", data_dir=tmp_path, use_cache=False)
    v, t = s.meta["tgb"]["val_start"], s.meta["tgb"]["test_start"]
    write_negatives(tmp_path, "tgbl-wiki", "val", {k: np.array([4, 5]) for k in tgb_keys(s, v, t)})
    done = dataset_info(tmp_path, "dataset.name=tgbl-wiki", "tgb_negatives=val")
    assert done.returncode == 0, done.stderr
    assert "TGB split    train [0, 11), val [11, 14), test [14, 16) by time" in done.stdout
    assert "negatives    val: 3 events from 11, 2-2 each" in done.stdout


BAD_INPUT = {
    "missing folder": (["dataset.name=tgbl-wiki", "dataset.data_dir={tmp}/absent"],
                       "error: dataset.data_dir names '{tmp}/absent', which is not a folder"),
    "unknown name": (["dataset.name=tgbl-wikipedia"],
                     "error: unknown TGB link dataset 'tgbl-wikipedia'; the known ones (py-tgb "
                     "2.3.0) are tgbl-wiki, tgbl-review, tgbl-coin"),
    "node task": (["dataset.name=tgbn-genre"],
                  "error: TGB dataset 'tgbn-genre' is a node property prediction dataset (a "
                  "node task), not supported"),
    "no negatives": (["dataset.name=tgbl-wiki", "tgb_negatives=test"],
                     "error: TGB's test negatives of tgbl-wiki not found: looked for "
                     "{tmp}/tgbl_wiki/tgbl-wiki_test_ns_v2.pkl"),
    "truncated": (["dataset.name=tgbl-wiki"],
                  "error: {tmp}/tgbl_wiki/tgbl-wiki_edgelist_v2.csv, line 18: missing value for "
                  "feature 0 (the line is short or has an empty field; expected 6 fields)"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_one_error_line_and_exit_2(tmp_path, case):
    path = write_jodie(tmp_path)
    if case == "truncated":  # the download cut short in the middle of the last line
        path.write_text(path.read_text() + "3,2,12.0,0")
    args, expected = BAD_INPUT[case]
    done = dataset_info(tmp_path, *(a.format(tmp=tmp_path) for a in args))
    assert done.returncode == 2, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected.format(tmp=tmp_path)), lines
    assert done.stdout == ""  # refused before any work: nothing was loaded or printed


def test_the_loading_benchmark_times_a_cold_and_a_cached_load(tmp_path, capsys):
    from cftgnn.benchmarks.tgb_load import main

    rows = main([str(tmp_path), "--events", "300", "--features", "3", "--repeats", "1"])
    assert [r["cached"] for r in rows] == [False, True]
    assert all(r["events"] == 300 and r["features"] == 3 for r in rows)
    assert "from the processed copy" in capsys.readouterr().out


@pytest.mark.slow
def test_the_loading_benchmark_times_pytgbs_loader_too(tmp_path):
    pytest.importorskip("tgb", reason="py-tgb is not installed (pip install -e '.[tgb]')")
    from cftgnn.benchmarks.tgb_load import main

    rows = main([str(tmp_path), "--events", "300", "--features", "3", "--repeats", "1",
                 "--pytgb"])
    assert [r["cached"] for r in rows] == [False, True, False, True]
    assert all(r["events"] == 300 and r["features"] == 3 for r in rows)
