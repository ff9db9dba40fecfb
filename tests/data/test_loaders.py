"""Loaders on small files written by the tests: formats, strict errors, cache, download."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import threading
from pathlib import Path

import numpy as np
import pytest

from cftgnn.data import load_uci, load_wikipedia
from cftgnn.data import loaders as loaders_mod
from cftgnn.errors import DataFormatError, DataNotFoundError

UCI_TEXT = "5 9 1000\n9 5 1000\n7 5 1010\n5 7 1020\n"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def uci(tmp_path: Path, text: str, name: str = "CollegeMsg.txt", **kw):
    write(tmp_path, name, text)
    return load_uci(data_dir=tmp_path, cache_dir=tmp_path / "cache", download=False, **kw)


def test_uci_ids_time_and_order(tmp_path):
    s = uci(tmp_path, UCI_TEXT, "CollegeMsg.txt.gz")
    assert s.num_events == 4 and s.num_nodes == 3
    np.testing.assert_array_equal(s.src, [0, 2, 1, 0])  # raw ids 5, 7, 9 -> 0, 1, 2
    np.testing.assert_array_equal(s.dst, [2, 0, 0, 1])
    np.testing.assert_array_equal(s.t, [0, 0, 10, 20])
    assert s.meta["sha256"] == hashlib.sha256(UCI_TEXT.encode()).hexdigest()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1 2 3\n1 2\n", "line 2: missing value"),
        ("1 2 3\n1 2 3 4\n", "line 2"),
        ("1 2 3\nx 2 3\n", "line 2: src = 'x' is not a number"),
        ("1 2 3\n\n1 2 4\n", "line 2: empty line"),
        ("1 2 5\n1 2 3\n", "line 2: timestamp 3 is earlier"),
        ("1 -2 3\n", "line 1: dst = -2 is not a non-negative integer"),
        ("1.5 2 3\n", "line 1: src = 1.5 is not a non-negative integer"),
        ("1 2 3 4\n", "expected 3 columns"),
        ("", "holds no events"),
    ],
)
def test_uci_bad_lines_name_file_and_line(tmp_path, text, fragment):
    with pytest.raises(DataFormatError) as info:
        uci(tmp_path, text)
    assert fragment in str(info.value)
    assert "CollegeMsg.txt" in str(info.value)


JODIE = "user_id,item_id,timestamp,state_label,comma_separated_list_of_features\n"


def test_wikipedia_with_and_without_features(tmp_path):
    rows = ["0,0,0.0,0,0.1,0.2", "2,1,5.0,1,0.3,0.4", "1,0,5.0,0,0.5,0.6"]
    write(tmp_path, "wikipedia.csv", JODIE + "\n".join(rows) + "\n")
    kw = {"data_dir": tmp_path, "cache_dir": tmp_path / "c", "download": False}
    s = load_wikipedia(**kw)
    assert (s.num_events, s.num_nodes, s.feat_dim) == (3, 5, 0)
    np.testing.assert_array_equal(s.dst, [3, 4, 3])  # items offset by 3 users
    np.testing.assert_array_equal(s.labels, [0, 1, 0])
    f = load_wikipedia(with_features=True, **kw)
    assert f.feat_dim == 2
    np.testing.assert_allclose(f.edge_feat[1], [0.3, 0.4])


def test_wikipedia_featureless_file_and_errors(tmp_path):
    write(
        tmp_path,
        "wikipedia_nofeatures.csv.gz",
        "user_id,item_id,timestamp,state_label\n0,0,0,0\n1,0,1,0\n",
    )
    kw = {"data_dir": tmp_path, "cache_dir": tmp_path / "c", "download": False}
    assert load_wikipedia(**kw).num_nodes == 3
    with pytest.raises(DataNotFoundError, match=r"wikipedia\.csv"):
        load_wikipedia(with_features=True, **kw)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("0,0,0,0\n1,0,1\n", "line 3: missing value for state_label"),
        ("0,0,0,0\n1,0,1,0,7\n", "line 3"),
        ("0,0,2,0\n1,0,1,0\n", "line 3: timestamp 1 is earlier"),
        ("0,a,0,0\n", "line 2: item_id = 'a'"),
    ],
)
def test_wikipedia_bad_lines(tmp_path, body, fragment):
    write(tmp_path, "wikipedia.csv", "user_id,item_id,timestamp,state_label\n" + body)
    with pytest.raises(DataFormatError) as info:
        load_wikipedia(data_dir=tmp_path, cache_dir=tmp_path / "c", download=False)
    assert fragment in str(info.value) and "wikipedia.csv" in str(info.value)


def test_wikipedia_bad_header(tmp_path):
    write(tmp_path, "wikipedia.csv", "0,0,0,0\n")
    with pytest.raises(DataFormatError, match="line 1: expected the JODIE header"):
        load_wikipedia(data_dir=tmp_path, cache_dir=tmp_path / "c", download=False)


def test_processed_cache_is_used_and_invalidated(tmp_path, monkeypatch):
    first = uci(tmp_path, UCI_TEXT)
    assert "from_cache" not in first.meta
    calls = []
    monkeypatch.setattr(loaders_mod, "parse_uci", lambda *a: calls.append(a) or first)
    again = load_uci(data_dir=tmp_path, cache_dir=tmp_path / "cache", download=False)
    assert "from_cache" in again.meta and calls == []
    np.testing.assert_array_equal(again.dst, first.dst)
    monkeypatch.undo()
    # the file changes -> the cache key changes -> parsed again
    changed = uci(tmp_path, UCI_TEXT + "5 7 1030\n")
    assert changed.num_events == 5 and "from_cache" not in changed.meta


def test_missing_offline_error_says_what_where_how(tmp_path, monkeypatch):
    monkeypatch.delenv("CFTGNN_DATA_DIR", raising=False)
    with pytest.raises(DataNotFoundError) as info:
        load_uci(data_dir=tmp_path, cache_dir=tmp_path / "c", download=False)
    msg = str(info.value)
    assert "CollegeMsg.txt.gz" in msg and str(tmp_path) in msg
    assert "snap.stanford.edu" in msg and "CFTGNN_DATA_DIR" in msg


def test_env_var_points_at_data(tmp_path, monkeypatch):
    write(tmp_path, "CollegeMsg.txt", UCI_TEXT)
    monkeypatch.setenv("CFTGNN_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CFTGNN_CACHE_DIR", str(tmp_path / "c"))
    assert load_uci(download=False).meta["source"] == str(tmp_path / "CollegeMsg.txt")


# ------------------------------------------------------------------------------ download
@pytest.fixture
def uci_source(monkeypatch):
    """Pretend the official UCI content is UCI_TEXT (its checksum is what is verified)."""
    digest = hashlib.sha256(UCI_TEXT.encode()).hexdigest()
    src = loaders_mod.UCI_SOURCE
    monkeypatch.setattr(
        loaders_mod,
        "UCI_SOURCE",
        loaders_mod.DataSource(src.name, src.filenames, src.url, src.download_name, digest),
    )


def test_download_from_file_url_is_verified_and_kept(tmp_path, uci_source):
    remote = write(tmp_path, "remote.gz", UCI_TEXT)
    data = tmp_path / "data"
    s = load_uci(data_dir=data, cache_dir=tmp_path / "c", url=remote.as_uri(), progress=False)
    assert s.num_events == 4 and (data / "CollegeMsg.txt.gz").is_file()


def test_download_with_wrong_content_is_refused(tmp_path, uci_source):
    remote = write(tmp_path, "remote.gz", UCI_TEXT + "1 2 3000\n")
    data = tmp_path / "data"
    with pytest.raises(DataNotFoundError, match="sha256"):
        load_uci(data_dir=data, cache_dir=tmp_path / "c", url=remote.as_uri(), progress=False)
    assert not any(data.iterdir())  # nothing half-written is left


def test_download_from_local_http_server(tmp_path, uci_source):
    served = tmp_path / "served"
    served.mkdir()
    write(served, "CollegeMsg.txt.gz", UCI_TEXT)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(served), **kw)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/CollegeMsg.txt.gz"
        s = load_uci(data_dir=tmp_path / "data", cache_dir=tmp_path / "c", url=url, progress=False)
        assert s.num_nodes == 3
        with pytest.raises(DataNotFoundError, match="could not download"):
            load_uci(
                data_dir=tmp_path / "d2",
                cache_dir=tmp_path / "c2",
                url=url.replace("CollegeMsg", "missing"),
                progress=False,
            )
    finally:
        server.shutdown()
        server.server_close()


def test_download_goes_to_cache_when_data_dir_is_read_only(tmp_path, uci_source, monkeypatch):
    remote = write(tmp_path, "remote.gz", UCI_TEXT)
    ro = tmp_path / "ro"
    # root ignores permission bits, so simulate a read-only data directory
    monkeypatch.setattr(loaders_mod, "_writable", lambda folder: folder != ro)
    s = load_uci(data_dir=ro, cache_dir=tmp_path / "c", url=remote.as_uri(), progress=False)
    assert s.meta["source"] == str(tmp_path / "c" / "downloads" / "CollegeMsg.txt.gz")
    # found there next time without downloading
    again = load_uci(data_dir=ro, cache_dir=tmp_path / "c", download=False)
    assert again.num_events == 4
