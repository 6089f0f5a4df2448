"""Store round trip, layout, atomic writes, refusal to overwrite, bad input."""

import json
import os

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

from infoclust_dask import append_dataset, open_dataset, write_dataset
from infoclust_dask.io.store import SCHEMA_VERSION, StoreError


@pytest.fixture
def arrays():
    rng = np.random.default_rng(3)
    return rng.normal(size=(500, 6)), rng.integers(0, 4, size=500), rng.normal(size=(500, 2))


def test_round_trip_layout_and_attrs(tmp_path, arrays):
    x, c, y = arrays
    p = write_dataset(tmp_path / "d.zarr", x, label=c, y=y, chunks=128, class_names="abcd",
                      provenance={"source": "unit test"})
    ds = open_dataset(p)
    assert ds["x"].dims == ("sample", "feature") and ds["y"].dims == ("sample", "feature_y")
    assert ds["label"].dims == ("sample",)
    assert ds["x"].chunks == ((128, 128, 128, 116), (6,))  # along sample only
    assert isinstance(ds["x"].data, da.Array)  # lazy
    np.testing.assert_array_equal(ds["x"].values, x)
    np.testing.assert_array_equal(ds["y"].values, y)
    np.testing.assert_array_equal(ds["label"].values, c)
    assert ds.attrs["schema_version"] == SCHEMA_VERSION
    assert ds.attrs["class_names"] == ["a", "b", "c", "d"]
    assert ds.attrs["provenance"]["source"] == "unit test"
    assert "infoclust_dask" in ds.attrs["provenance"]["library"]


def test_default_codec_is_blosc_lz4_shuffle(tmp_path, arrays):
    x, _, _ = arrays
    p = write_dataset(tmp_path / "d.zarr", x)
    meta = json.loads((p / "x" / "zarr.json").read_text())
    blosc = [c for c in meta["codecs"] if c["name"] == "blosc"]
    assert blosc and blosc[0]["configuration"]["cname"] == "lz4"
    assert blosc[0]["configuration"]["shuffle"] == "shuffle"
    p2 = write_dataset(tmp_path / "u.zarr", x, codec="none")
    assert not [c for c in json.loads((p2 / "x" / "zarr.json").read_text())["codecs"] if c["name"] == "blosc"]
    np.testing.assert_array_equal(open_dataset(p2)["x"].values, x)


def test_lazy_input_written_block_by_block(tmp_path, arrays):
    x, _, _ = arrays
    X = da.from_array(x, chunks=(77, 3))  # feature-chunked input is fine: it is rechunked
    p = write_dataset(tmp_path / "d.zarr", X, chunks=100)
    np.testing.assert_array_equal(open_dataset(p)["x"].values, x)


def test_refuses_to_overwrite(tmp_path, arrays):
    x, _, _ = arrays
    p = write_dataset(tmp_path / "d.zarr", x)
    with pytest.raises(StoreError, match=r"already exists at .*d\.zarr.*overwrite=True"):
        write_dataset(p, x[:10])
    assert open_dataset(p).sizes["sample"] == 500
    write_dataset(p, x[:10], overwrite=True)
    assert open_dataset(p).sizes["sample"] == 10


def _failing(x):
    def boom(block, block_info=None):
        if block_info[0]["chunk-location"][0] == 3:
            raise RuntimeError("disk on fire")
        return block

    return da.from_array(x, chunks=(100, 6)).map_blocks(boom, dtype=x.dtype)


def test_failed_write_leaves_nothing(tmp_path, arrays):
    x, _, _ = arrays
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_dataset(tmp_path / "d.zarr", _failing(x), chunks=100, check_finite=False)
    assert os.listdir(tmp_path) == []


def test_failed_overwrite_keeps_the_old_store(tmp_path, arrays):
    x, _, _ = arrays
    p = write_dataset(tmp_path / "d.zarr", x)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_dataset(p, _failing(x + 1), chunks=100, overwrite=True, check_finite=False)
    np.testing.assert_array_equal(open_dataset(p)["x"].values, x)
    assert sorted(os.listdir(tmp_path)) == ["d.zarr"]


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"x": np.array([[1.0, np.nan], [0.0, 1.0]])}, ValueError, "'x' contains 1 NaN or infinite"),
        ({"x": np.array([[1.0, np.inf], [0.0, -np.inf]])}, ValueError, "'x' contains 2 NaN or infinite"),
        ({"x": np.arange(5.0)}, ValueError, r"'x' must be 2-D .*got shape \(5,\).*reshape\(-1, 1\)"),
        ({"x": np.ones((4, 2)), "label": np.arange(3)}, ValueError, "'label' has 3 entries but 'x' has 4 rows"),
        ({"x": np.ones((4, 2)), "label": np.array([0, 1, -1, 0])}, ValueError, "'label' must be >= 0; found -1"),
        ({"x": np.ones((4, 2)), "label": np.ones(4)}, TypeError, "'label' must be integer classes; got dtype float64"),
        ({"x": np.ones((4, 2)), "y": np.ones((3, 2))}, ValueError, "'y' has 3 rows but 'x' has 4"),
        ({"x": np.array([["a", "b"]])}, TypeError, "'x' must hold numbers; got dtype <U1"),
        ({"x": np.ones((0, 3))}, ValueError, "'x' has 0 samples"),
        ({"x": np.ones((4, 2)), "codec": "gzip"}, ValueError, "codec must be one of"),
    ],
)
def test_bad_input(tmp_path, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        write_dataset(tmp_path / "d.zarr", **kwargs)
    assert not (tmp_path / "d.zarr").exists()


def test_missing_store(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"No dataset store at .*nope\.zarr.*infoclust ingest"):
        open_dataset(tmp_path / "nope.zarr")


def test_malformed_stores(tmp_path, arrays):
    x, _, _ = arrays
    (tmp_path / "empty.zarr").mkdir()
    with pytest.raises(StoreError, match=r"empty\.zarr' is not a zarr \(format 3\) group"):
        open_dataset(tmp_path / "empty.zarr")
    xr.Dataset({"x": (("sample", "feature"), x)}).to_zarr(tmp_path / "foreign.zarr", zarr_format=3, consolidated=False)
    with pytest.raises(StoreError, match="no 'schema_version' attribute"):
        open_dataset(tmp_path / "foreign.zarr")
    xr.Dataset({"x": (("row", "col"), x)}, attrs={"schema_version": 1}).to_zarr(
        tmp_path / "dims.zarr", zarr_format=3, consolidated=False)
    with pytest.raises(StoreError, match=r"'x' has no chunk manifest"):  # written to look like ours, unchecked
        open_dataset(tmp_path / "dims.zarr")
    with pytest.raises(StoreError, match=r"'x' has dims \('row', 'col'\)"):
        open_dataset(tmp_path / "dims.zarr", trust=True)
    xr.Dataset({"z": (("sample",), x[:, 0])}, attrs={"schema_version": 1}).to_zarr(
        tmp_path / "nox.zarr", zarr_format=3, consolidated=False)
    with pytest.raises(StoreError, match=r"has no variable 'x'; it holds \['z'\]"):
        open_dataset(tmp_path / "nox.zarr", trust=True)
    p = write_dataset(tmp_path / "new.zarr", x)
    g = zarr.open_group(p, mode="r+")
    g.attrs["schema_version"] = 99
    with pytest.raises(StoreError, match="schema_version=99, newer than this library"):
        open_dataset(p)


def test_a_store_is_opened_once_per_version(tmp_path):
    """Concurrent callers get the same dask graph (same zarr objects behind the
    same keys); each gets its own Dataset object; a rewrite is a new version."""
    import numpy as np

    from infoclust_dask.io.store import open_dataset, write_dataset

    path = write_dataset(tmp_path / "s.zarr", np.arange(12.0).reshape(6, 2))
    a, b = open_dataset(path), open_dataset(str(path))
    assert a is not b and a["x"].data.name == b["x"].data.name
    ga, gb = dict(a["x"].data.__dask_graph__()), dict(b["x"].data.__dask_graph__())
    assert all(ga[k] is gb[k] for k in ga)  # the very same tasks, not equal-looking copies
    a.attrs["note"] = "mine"
    assert "note" not in open_dataset(path).attrs
    write_dataset(path, np.ones((6, 2)), overwrite=True)
    c = open_dataset(path)
    assert float(c["x"].values.sum()) == 12.0 and c.attrs["provenance"]["store_id"] != b.attrs["provenance"]["store_id"]


def test_binary_stores_are_uint8_and_checked(tmp_path):
    import dask.array as da
    import numpy as np
    import pytest

    from infoclust_dask.io.store import open_dataset, write_dataset

    x = (np.random.default_rng(0).uniform(size=(100, 4)) < 0.3).astype(np.float32)
    p = write_dataset(tmp_path / "b.zarr", da.from_array(x, chunks=30), dtype=np.uint8)
    assert open_dataset(p)["x"].dtype == np.uint8 and np.array_equal(open_dataset(p)["x"].values, x)
    x[5, 2] = 0.5
    with pytest.raises(ValueError, match=r"dtype=uint8 stores binary data, but 'x' holds the values \[0.5\]"):
        write_dataset(tmp_path / "c.zarr", x, dtype=np.uint8)
    assert not (tmp_path / "c.zarr").exists()
    with pytest.raises(TypeError, match="dtype must be a float dtype, or uint8"):
        write_dataset(tmp_path / "d.zarr", x, dtype=np.int32)


def test_any_zarr_store_and_zarr_arrays_are_read_lazily(tmp_path):
    """A store written by xarray.to_zarr, a plain zarr array path and a
    zarr.Array object fit like the numpy data they hold."""
    import dask.array as da
    import xarray as xr
    import zarr

    from infoclust_dask import KMeans
    from infoclust_dask._inputs import open_input

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3)) + 5 * rng.integers(0, 3, 3000)[:, None]
    ref = KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(X).cluster_centers_
    xr.Dataset({"data": (("time", "band"), X)}).chunk({"time": 500}).to_zarr(tmp_path / "xr.zarr", zarr_format=3, consolidated=False)
    arr = zarr.create_array(str(tmp_path / "plain.zarr"), shape=X.shape, chunks=(700, 3), dtype="f8")
    arr[:] = X
    for src in (str(tmp_path / "xr.zarr"), str(tmp_path / "plain.zarr"), zarr.open_array(str(tmp_path / "plain.zarr"))):
        assert isinstance(open_input(src), da.Array)  # lazy, chunk by chunk
        got = KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(src).cluster_centers_
        np.testing.assert_allclose(got, ref, atol=1e-10)
    xr.Dataset({"a": (("s", "f"), X), "b": (("s", "g"), X)}).to_zarr(tmp_path / "two.zarr", zarr_format=3, consolidated=False)
    with pytest.raises(KeyError, match=r"has no array 'x' and 2 two-dimensional arrays \['a', 'b'\]"):
        KMeans(2, scheduler="sync").fit(str(tmp_path / "two.zarr"))


def test_a_store_being_written_is_waited_for_not_called_damaged(tmp_path, monkeypatch):
    """A fit started while an append runs read the store as "damaged ...
    re-ingest it" though verify then found it clean (issue 53). While a live
    process holds the store's write lock, a reader waits for it
    ($INFOCLUST_WRITER_WAIT) and opens the store once it is done, or says
    the write is still in progress; without a live writer, damage is
    damage."""
    import subprocess
    import sys
    import threading

    from infoclust_dask.storage.reading import forget_opened

    store = write_dataset(tmp_path / "s.zarr", np.arange(40.0).reshape(20, 2), chunks=5)
    chunk = next(p for p in (store / "x" / "c").rglob("*") if p.is_file())
    good = chunk.read_bytes()
    lock = tmp_path / ".s.zarr.lock-"
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock.write_text(str(writer.pid))
        chunk.write_bytes(good[:-3])  # mid-write: the bytes do not match the manifests yet
        forget_opened()
        monkeypatch.setenv("INFOCLUST_WRITER_WAIT", "1")
        with pytest.raises(StoreError, match=rf"being written by another process \(PID {writer.pid}.*not damaged"):
            open_dataset(store)

        def finish():  # the writer finishes: its bytes in place, its lock released
            chunk.write_bytes(good)
            lock.unlink()

        monkeypatch.setenv("INFOCLUST_WRITER_WAIT", "20")
        threading.Timer(0.5, finish).start()
        np.testing.assert_array_equal(np.asarray(open_dataset(store)["x"]), np.arange(40.0).reshape(20, 2))
    finally:
        writer.kill()
        writer.wait()
    chunk.write_bytes(good[:-3])
    lock.write_text(str(writer.pid))  # a dead writer's lock: the damage is reported as damage
    forget_opened()
    with pytest.raises(StoreError, match="damaged"):
        open_dataset(store)


def test_a_reader_opened_before_an_append_still_reads_its_rows(tmp_path):
    """An append rewrites the partly filled last chunk (its old rows unchanged): a dataset opened before
    reads the rows it committed to, during and after one or more appends (before: "holds bytes written for
    another position or another store"; found by the store's state machine, issue 53). A variable rewritten
    whole since the open is not taken for a grown one: the reader is told to open the store again."""
    from infoclust_dask.io.labels import add_labels

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 4))
    path = tmp_path / "s.zarr"
    write_dataset(path, X, label=np.arange(20) % 3, chunks=16, codec="none")
    before = open_dataset(path)
    append_dataset(path, rng.normal(size=(7, 4)), label=np.arange(7) % 3)  # rewrites chunk 1 (rows 16-26)
    np.testing.assert_array_equal(before["x"].values, X)
    np.testing.assert_array_equal(before["label"].values, np.arange(20) % 3)
    middle = open_dataset(path)
    append_dataset(path, rng.normal(size=(2, 4)), label=np.arange(2) % 3)  # chunk 1 again: 27 -> 29 rows
    np.testing.assert_array_equal(before["x"].values, X)
    assert middle.sizes["sample"] == 27 and np.isfinite(middle["x"].values).all()
    add_labels(path, "km", np.zeros(29, dtype=np.int64))
    labelled = open_dataset(path)
    add_labels(path, "km", np.ones(29, dtype=np.int64), overwrite=True)
    with pytest.raises(StoreError, match="was rewritten after the store was opened.*Open the store again"):
        _ = labelled["km"].values
    np.testing.assert_array_equal(open_dataset(path)["km"].values, np.ones(29))


def test_a_reader_checking_a_grown_chunk_while_the_append_commits(tmp_path, monkeypatch):
    """Found by the slow state machine in CI (2026-11-28): a reader opened before an append read the
    append's new version of the partly filled last chunk, then looked up the versions grown from its own
    while the append committed - it read the old manifest, the append wrote the new one and removed its
    pending record, and the reader found no pending record: the version it held was in neither, and it
    was told "rewritten after the store was opened" though only rows were added. The interleaving is
    made here: the append is stopped before its manifests, and they are written (the pending record
    removed) right after the reader has read one of them."""
    import infoclust_dask.io.append as append_mod
    from infoclust_dask.storage import manifest

    rng = np.random.default_rng(0)
    X = rng.normal(size=(25, 4))
    path = tmp_path / "s.zarr"
    write_dataset(path, X, label=np.arange(25) % 3, chunks=16, codec="none")
    before = open_dataset(path)
    held = []
    monkeypatch.setattr(append_mod, "write_manifest", lambda *a, **k: held.append((a, k)))
    append_dataset(path, rng.normal(size=(8, 4)), label=np.arange(8) % 3)  # chunk 1 rewritten, not committed
    assert held and (path / "x" / manifest.PENDING).exists()
    monkeypatch.undo()
    real = manifest._read_json
    commits = []

    def read_json(loc, rel, what):
        doc = real(loc, rel, what)
        if rel == f"x/{manifest.MANIFEST}" and held:  # the writer commits right after this read
            args, kwargs = held.pop()
            manifest.write_manifest(*args, **kwargs)
            commits.append(rel)
        return doc

    monkeypatch.setattr(manifest, "_read_json", read_json)
    np.testing.assert_array_equal(before["x"].values, X)
    assert commits and not (path / "x" / manifest.PENDING).exists()
    monkeypatch.undo()
    now = open_dataset(path)
    assert now.sizes["sample"] == 33
    np.testing.assert_array_equal(now["x"].values[:25], X)


def test_a_temporary_left_in_an_array_folder_by_a_killed_append_is_not_damage(tmp_path):
    """Found by the slow state machine (tests/test_store_model.py): an append
    SIGKILLed while replacing ``x/zarr.json`` left ``x/.zarr.json.tmp-PID-*``,
    which ``verify`` called damage ("no manifest names it ... re-ingest")
    though the store reads whole. A writer's temporary is now a note, and the
    next append removes a dead writer's; a live writer's stays; a file of any
    other name is still a problem."""
    import subprocess
    import sys

    from infoclust_dask.io.verify import verify_store

    path = tmp_path / "s.zarr"
    write_dataset(path, np.arange(40.0).reshape(20, 2))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    crumb = path / "x" / f".zarr.json.tmp-{dead.pid}-a77d1965"
    crumb.write_text("{}")
    live = path / "x" / f".zarr.json.tmp-{os.getpid()}-0123abcd"
    live.write_text("{}")
    report = verify_store(path)
    assert report["problems"] == [] and any("temporary file(s) of a writer" in n for n in report["notes"])
    append_dataset(path, np.ones((3, 2)))
    assert not crumb.exists() and live.exists()
    assert open_dataset(path)["x"].shape == (23, 2)
    (path / "x" / "backup.json").write_text("{}")
    assert any("backup.json" in p for p in verify_store(path)["problems"])
