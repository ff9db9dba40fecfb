"""Streams from the researcher's own files: ``dataset=csv`` and ``dataset=jodie_ml``."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cftgnn.data import EventStream, load_csv, load_jodie_ml
from cftgnn.data import user_streams as user_mod
from cftgnn.errors import ConfigError, DataFormatError, DataNotFoundError

ROOT = Path(__file__).resolve().parents[2]

# columns in another order than the options name them, an ignored text column, equal times
CSV = (
    "time,note,to,from,w1,w2,y\n"
    "10,hello,4,1,0.5,1.5,0\n"
    "10,x y,1,4,0.25,2,1\n"
    "12.5,,2,0,-1,0,0\n"
)
CSV_OPTIONS = {
    "src_col": "from",
    "dst_col": "to",
    "time_col": "time",
    "feature_cols": ["w1", "w2"],
    "label_col": "y",
}


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def csv(tmp_path: Path, text: str, name: str = "events.csv", **kw) -> EventStream:
    path = write(tmp_path, name, text)
    return load_csv(path, cache_dir=tmp_path / "cache", **{**CSV_OPTIONS, **kw})


def assert_same(a: EventStream, b: EventStream) -> None:
    for field in ("src", "dst", "t", "edge_feat", "labels"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert (a.num_nodes, a.name, a.feat_dim) == (b.num_nodes, b.name, b.feat_dim)


# ------------------------------------------------------------------------------------- csv
EXPECTED = EventStream(
    src=[1, 4, 0],
    dst=[4, 1, 2],
    t=[10.0, 10.0, 12.5],
    edge_feat=np.array([[0.5, 1.5], [0.25, 2], [-1, 0]], np.float32),
    labels=[0, 1, 0],
    num_nodes=5,
    name="events",
)


@pytest.mark.parametrize("name", ["events.csv", "events.csv.gz"])
def test_csv_round_trip_equals_the_stream_built_by_hand(tmp_path, name):
    s = csv(tmp_path, CSV, name)
    assert_same(s, EXPECTED)
    assert s.meta["source"] == str(tmp_path / name) and s.meta["sorted_on_load"] is False


def test_csv_defaults_relabel_rest_and_name(tmp_path):
    path = write(tmp_path, "e.tsv", "src\tdst\tt\tf\n7\t3\t0\t1\n3\t9\t1\t2\n")
    s = load_csv(path, sep="\t", cache_dir=tmp_path / "c")
    assert (s.num_nodes, s.feat_dim, s.name) == (10, 0, "e")
    np.testing.assert_array_equal(s.labels, [0, 0])
    r = load_csv(path, sep="\t", relabel_nodes=True, feature_cols="rest", name="mine",
                 cache_dir=tmp_path / "c")
    assert (r.num_nodes, r.name) == (3, "mine")  # raw ids 3, 7, 9 -> 0, 1, 2
    np.testing.assert_array_equal(r.src, [1, 0])
    np.testing.assert_array_equal(r.dst, [0, 2])
    np.testing.assert_array_equal(r.edge_feat[:, 0], [1, 2])


def test_csv_unsorted_is_refused_or_sorted_stably(tmp_path):
    text = "src,dst,t\n0,1,5\n1,2,3\n2,3,5\n3,4,3\n"
    with pytest.raises(DataFormatError, match=r"events\.csv, line 3: timestamp 3 is earlier"):
        csv(tmp_path, text, src_col="src", dst_col="dst", time_col="t", feature_cols=[],
            label_col=None)
    s = csv(tmp_path, text, src_col="src", dst_col="dst", time_col="t", feature_cols=[],
            label_col=None, sort=True)
    np.testing.assert_array_equal(s.src, [1, 3, 0, 2])  # equal times keep their line order
    np.testing.assert_array_equal(s.t, [3, 3, 5, 5])
    assert s.meta["sorted_on_load"] is True


HEAD = "time,note,to,from,w1,w2,y\n"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("time,to,w1,w2,y\n1,2,0,0,0\n", "line 1: no column 'from' (src_col)"),
        ("time,from,to,w1,w2\n1,2,3,0,0\n", "line 1: no column 'y' (label_col)"),
        (HEAD + "1,a,2,3,0,0,0\n1,a,2,3,0,0,0,9\n", "malformed line"),
        (HEAD + "1,a,2,3,0,0,0\n1,a,2,3,0\n", "line 3: missing value for w2"),
        (HEAD + "1,a,2,3,0,0,0\n\n1,a,2,3,0,0,0\n", "line 3: empty line"),
        (HEAD + "1,a,2,x,0,0,0\n", "line 2: from = 'x' is not a number"),
        (HEAD + "1,a,2,3,0,zero,0\n", "line 2: w2 = 'zero' is not a number"),
        (HEAD + "1,a,2,3,0,0,0\n2,a,-2,3,0,0,0\n", "line 3: to = -2 is not a non-negative"),
        (HEAD + "1,a,2,1.5,0,0,0\n", "line 2: from = 1.5 is not a non-negative integer"),
        (HEAD + "1,a,2,3,0,0,-1\n", "line 2: y = -1 is not a non-negative integer"),
        (HEAD + "1,a,2,3,inf,0,0\n", "line 2: w1 = inf is not finite"),
        (HEAD + "inf,a,2,3,0,0,0\n", "line 2: timestamp inf is not finite"),
        (HEAD + "2,a,2,3,0,0,0\n1,a,2,3,0,0,0\n", "line 3: timestamp 1 is earlier"),
        (HEAD, "holds no events"),
        ("", "the file is empty"),
        ("time,to,from,from,w1,w2,y\n1,2,3,3,0,0,0\n", "column names repeat"),
    ],
)
def test_csv_bad_files_name_file_and_line(tmp_path, text, fragment):
    with pytest.raises(DataFormatError) as info:
        csv(tmp_path, text)
    assert fragment in str(info.value)
    assert str(tmp_path / "events.csv") in str(info.value)


def test_csv_bad_feature_cols_and_missing_file(tmp_path):
    with pytest.raises(DataFormatError, match="feature_cols must be"):
        csv(tmp_path, CSV, feature_cols="all")
    with pytest.raises(DataNotFoundError, match=str(tmp_path / "nope.csv")):
        load_csv(tmp_path / "nope.csv", cache_dir=tmp_path / "c")
    with pytest.raises(ConfigError, match="dataset.path"):
        load_csv(None)
    with pytest.raises(ConfigError, match="sep must be one character"):
        load_csv(tmp_path / "events.csv", sep="[,;]")


def test_csv_processed_cache_is_used_and_invalidated(tmp_path, monkeypatch):
    first = csv(tmp_path, CSV)
    assert "from_cache" not in first.meta
    calls = []
    monkeypatch.setattr(user_mod, "parse_event_csv", lambda *a: calls.append(a))
    again = load_csv(tmp_path / "events.csv", cache_dir=tmp_path / "cache", **CSV_OPTIONS)
    assert "from_cache" in again.meta and calls == []
    assert_same(again, EXPECTED)
    monkeypatch.undo()
    other = load_csv(tmp_path / "events.csv", cache_dir=tmp_path / "cache",
                     **{**CSV_OPTIONS, "feature_cols": ["w2"]})  # another option -> parsed again
    assert "from_cache" not in other.meta and other.feat_dim == 1
    changed = csv(tmp_path, CSV + "13,z,0,1,0,0,0\n")  # the file changed -> parsed again
    assert "from_cache" not in changed.meta and changed.num_events == 4


# -------------------------------------------------------------------------------- ml_ layout
ML = ",u,i,ts,label,idx\n0,1,4,0.0,0,2\n1,3,4,1.0,1,1\n2,1,5,1.0,0,3\n"
EDGES = np.array([[0, 0], [1, 10], [2, 20], [3, 30]], np.float32)  # row 0: padding


def ml(folder: Path, text: str = ML, edges: np.ndarray | None = EDGES,
       nodes: np.ndarray | None = None, name: str = "toy") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = write(folder, f"ml_{name}.csv", text)
    if edges is not None:
        np.save(folder / f"ml_{name}.npy", edges)
    if nodes is not None:
        np.save(folder / f"ml_{name}_node.npy", nodes)
    return path


def load_ml(tmp_path: Path, **kw) -> EventStream:
    return load_jodie_ml("toy", data_dir=tmp_path, cache_dir=tmp_path / "cache", **kw)


def test_ml_layout_ids_become_0_based_and_idx_picks_feature_rows(tmp_path):
    ml(tmp_path, nodes=np.zeros((8, 3)))  # 7 nodes + padding row
    s = load_ml(tmp_path)
    expected = EventStream(
        src=[0, 2, 0],
        dst=[3, 3, 4],
        t=[0.0, 1.0, 1.0],
        edge_feat=EDGES[[2, 1, 3]],
        labels=[0, 1, 0],
        num_nodes=7,
        name="ml_toy",
    )
    assert_same(s, expected)
    assert s.meta["node_feature_file"] == "all zero (ignored)"
    plain = load_ml(tmp_path, edge_features=False, node_features=False)
    assert (plain.feat_dim, plain.num_nodes) == (0, 5)  # largest id 5 -> nodes 0..4


def test_ml_layout_in_a_dygLib_folder_with_node_features_warns(tmp_path):
    ml(tmp_path / "toy", nodes=np.ones((6, 2)))
    with pytest.warns(UserWarning, match="node features are ignored"):
        s = load_ml(tmp_path)
    assert s.meta["source"] == str(tmp_path / "toy" / "ml_toy.csv")
    assert s.meta["node_feature_file"] == "ignored" and s.num_nodes == 5


@pytest.mark.parametrize(
    ("text", "edges", "fragment"),
    [
        (ML.replace("0,1,4,0.0,0,2", "0,0,4,0.0,0,2"), EDGES, "line 2: u = 0, but ids"),
        (ML.replace("1,3,4,1.0,1,1", "1,3,4,1.0,1,0"), EDGES, "line 3: idx = 0"),
        (ML.replace("2,1,5,1.0,0,3", "2,1,5,1.0,0,4"), EDGES, "line 4: idx = 4 but ml_toy.npy"),
        (ML.replace("1,3,4,1.0,1,1", "1,3,-4,1.0,1,1"), EDGES, "line 3: i = -4"),
        (ML.replace("1,3,4,1.0,1,1", "1,3,4,b,1,1"), EDGES, "line 3: ts = 'b'"),
        (ML.replace("1,3,4,1.0,1,1", "1,3,4,1.0,1"), EDGES, "line 3: missing value for idx"),
        (ML.replace("2,1,5,1.0", "2,1,5,0.5"), EDGES, "line 4: timestamp 0.5 is earlier"),
        (ML.replace(",label,", ",lab,"), EDGES, "line 1: no column 'label'"),
        (ML, EDGES[:, 0], "expected a 2-D numeric array"),
        (ML, np.where(EDGES == 30, np.nan, EDGES), "row 3 (idx on ml_toy.csv line 4)"),
    ],
)
def test_ml_bad_files(tmp_path, text, edges, fragment):
    ml(tmp_path, text, edges)
    with pytest.raises(DataFormatError) as info:
        load_ml(tmp_path)
    assert fragment in str(info.value) and "ml_toy" in str(info.value)


def test_ml_missing_files_and_name(tmp_path):
    with pytest.raises(DataNotFoundError, match=str(tmp_path / "ml_toy.csv")):
        load_ml(tmp_path)
    ml(tmp_path, edges=None)
    with pytest.raises(DataNotFoundError, match=str(tmp_path / "ml_toy.npy")):
        load_ml(tmp_path)
    assert load_ml(tmp_path, edge_features=False).num_events == 3
    with pytest.raises(ConfigError, match="dataset.name"):
        load_jodie_ml(None)


def test_ml_cache_follows_the_feature_file(tmp_path):
    ml(tmp_path)
    assert "from_cache" not in load_ml(tmp_path).meta
    assert "from_cache" in load_ml(tmp_path).meta
    np.save(tmp_path / "ml_toy.npy", EDGES * 2)  # a side file changes -> parsed again
    s = load_ml(tmp_path)
    assert "from_cache" not in s.meta and s.edge_feat[0, 1] == 40


# ------------------------------------------------------------------------------ the script
def dataset_info(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "dataset_info.py"), "dataset=csv",
         f"paths.cache_dir={tmp_path / 'cache'}", *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )


def test_dataset_info_on_a_csv_and_on_a_garbled_one(tmp_path):
    good = write(tmp_path, "mine.csv", "src,dst,t\n0,1,0\n1,2,86400\n")
    done = dataset_info(tmp_path, f"dataset.path={good}")
    assert done.returncode == 0, done.stderr
    assert "events       2" in done.stdout and "nodes        3" in done.stdout
    bad = write(tmp_path, "bad.csv", "src,dst,t\n0,1,0\n1,2\n")
    done = dataset_info(tmp_path, f"dataset.path={bad}")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {bad}, line 3: missing value for t (the line is short or has an empty field; "
        "expected 3 fields)"
    ]
