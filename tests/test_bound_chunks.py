"""A chunk is bound to its position (issue 38): every read checks the bytes
of each chunk against the manifest entry of its own key (size and the
codec's CRC-32C trailer), so swapped, moved or substituted chunks - which
zarr's own checksum accepts, as it moves with the chunk - fail the read in
this process and on the workers, as they fail ``verify``."""

import json
import os

import numpy as np
import pytest

from infoclust_dask import KMeans, open_dataset, write_dataset
from infoclust_dask.io.verify import verify_store
from infoclust_dask.storage.atomic import StoreError
from infoclust_dask.storage.manifest import MANIFEST, MANIFEST_VERSION


def _constant_chunks(values, rows=400, d=3):
    """One chunk per value, every row of it equal to that value: the
    chunks compress to the same size, so only their content tells them apart."""
    return np.concatenate([np.full((rows, d), v) for v in values])


def _swap(a, b):
    os.replace(a, str(a) + ".t")
    os.replace(b, a)
    os.replace(str(a) + ".t", b)


def test_swapped_chunks_of_equal_size_fail_every_read(tmp_path, scheduler):
    X = _constant_chunks([1.0, 2.0, 3.0])
    p = write_dataset(tmp_path / "s.zarr", X, label=np.repeat([0, 1, 2], 400), chunks=400)
    doc = json.loads((p / "x" / MANIFEST).read_text())
    assert doc["manifest_version"] == MANIFEST_VERSION == 3
    sizes = {k: v[0] for k, v in doc["chunks"].items()}
    assert sizes["x/c/0/0"] == sizes["x/c/1/0"]  # the case the CRC-32C inside the chunk cannot see
    np.testing.assert_array_equal(open_dataset(p)["x"].values, X)  # intact: reads as written
    _swap(p / "x" / "c" / "0" / "0", p / "x" / "c" / "1" / "0")
    ds = open_dataset(p)  # the open checks sizes only: equal here
    with pytest.raises(StoreError, match=r"chunk \((0|1), 0\) \('x/c/(0|1)/0'\) of the store .* holds bytes written "
                                         r"for another position"):
        ds["x"].to_numpy()
    with pytest.raises(StoreError, match="another position"):
        KMeans(2, n_init=1, random_state=0, scheduler=scheduler).fit(ds["x"])
    report = verify_store(p)
    assert any("moved or swapped" in line for line in report["problems"]), report["problems"]


def test_a_chunk_from_another_store_and_a_resized_one_fail_the_read(tmp_path):
    a = write_dataset(tmp_path / "a.zarr", _constant_chunks([1.0, 2.0]), chunks=400)
    b = write_dataset(tmp_path / "b.zarr", _constant_chunks([5.0, 2.0]), chunks=400)
    (a / "x" / "c" / "0" / "0").write_bytes((b / "x" / "c" / "0" / "0").read_bytes())  # same size, other bytes
    with pytest.raises(StoreError, match=r"chunk \(0, 0\) .* another position or another store"):
        open_dataset(a)["x"].to_numpy()
    # rows of the untouched chunk still read (a partial read touches only its chunks)
    np.testing.assert_array_equal(open_dataset(a)["x"][400:].values, np.full((400, 3), 2.0))


def test_trust_reads_unchecked_and_an_old_manifest_is_checked_by_size(tmp_path):
    X = _constant_chunks([1.0, 2.0])
    p = write_dataset(tmp_path / "s.zarr", X, chunks=400)
    _swap(p / "x" / "c" / "0" / "0", p / "x" / "c" / "1" / "0")
    np.testing.assert_array_equal(open_dataset(p, trust=True)["x"].values[:400], np.full((400, 3), 2.0))
    doc = json.loads((p / "x" / MANIFEST).read_text())  # as version 2 wrote it: no trailers
    doc["manifest_version"] = 2
    doc["chunks"] = {k: v[:2] for k, v in doc["chunks"].items()}
    (p / "x" / MANIFEST).write_text(json.dumps(doc))
    assert open_dataset(p)["x"].shape == (800, 3)  # equal sizes: an old manifest cannot tell


def test_swapped_chunks_at_a_url_fail_the_read(s3_bucket):
    import fsspec

    X = _constant_chunks([1.0, 2.0])
    url = s3_bucket + "/s.zarr"
    write_dataset(url, X, chunks=400)
    fs = fsspec.filesystem("s3")
    root = url[len("s3://"):]
    c0, c1 = fs.cat_file(f"{root}/x/c/0/0"), fs.cat_file(f"{root}/x/c/1/0")
    doc = json.loads(fs.cat_file(f"{root}/x/{MANIFEST}"))
    assert all(isinstance(v[2], int) for v in doc["chunks"].values())  # the trailers, by ranged reads
    np.testing.assert_array_equal(open_dataset(url)["x"].values, X)
    fs.pipe_file(f"{root}/x/c/0/0", c1)
    fs.pipe_file(f"{root}/x/c/1/0", c0)
    fs.invalidate_cache()
    with pytest.raises(StoreError, match="another position"):
        open_dataset(url)["x"].to_numpy()
