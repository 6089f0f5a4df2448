"""Stores at object-storage URLs (a real S3-protocol server, moto, on
127.0.0.1), appends on a local disk and at a URL, and what a killed write
or append leaves behind. References: numpy on the same rows; the same
store on local disk."""

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import infoclust_dask as ic
from infoclust_dask.io import append as append_mod
from infoclust_dask.io import store as store_mod
from infoclust_dask.io.append import append_dataset
from infoclust_dask.io.folds import fold_vector
from infoclust_dask.io.ingest import ingest
from infoclust_dask.io.store import StoreError, open_dataset, verify_store, write_dataset


def _data(n=5000, d=4, seed=0):
    X, z, _ = ic.datasets.make_blobs(n, d, centers=3, random_state=seed, lazy=False)
    return X, z


@pytest.fixture(params=["local", "s3"])
def where(request, tmp_path):
    """A store location on local disk or in a fresh bucket."""
    if request.param == "local":
        return str(tmp_path / "d.zarr")
    return request.getfixturevalue("s3_bucket") + "/d.zarr"


def test_a_store_at_a_url_reads_the_numbers_written_and_fits_like_the_local_copy(s3_bucket, tmp_path):
    X, z = _data()
    url = f"{s3_bucket}/blobs.zarr"
    assert write_dataset(url, X, label=z, chunks=700) == url
    write_dataset(tmp_path / "blobs.zarr", X, label=z, chunks=700)
    ds = open_dataset(url)
    np.testing.assert_array_equal(ds["x"].values, X)
    np.testing.assert_array_equal(ds["label"].values, z)
    report = verify_store(url)
    assert report["problems"] == [] and report["rows"] == 5000 and report["chunks"] == 16
    remote = ic.KMeans(3, random_state=0, scheduler="threads").fit(url)
    local = ic.KMeans(3, random_state=0, scheduler="threads").fit(str(tmp_path / "blobs.zarr"))
    np.testing.assert_array_equal(remote.cluster_centers_, local.cluster_centers_)
    np.testing.assert_array_equal(np.asarray(remote.labels_), np.asarray(local.labels_))
    assert not os.path.exists("s3:")  # nothing named after the URL on the local disk


def _watch_local_opens(prefix):
    """In a worker process: record every file opened below ``prefix`` (an
    audit hook, Python's own record of ``open``)."""
    import sys

    state = sys.modules.setdefault("_infoclust_open_audit", type(sys)("_infoclust_open_audit"))
    if not hasattr(state, "seen"):
        state.seen, state.prefix = [], None

        def hook(event, args):
            if event == "open" and state.prefix and isinstance(args[0], str) and args[0].startswith(state.prefix):
                state.seen.append(args[0])

        sys.addaudithook(hook)
    state.prefix, state.seen = prefix, []


def _local_opens():
    import sys

    state = sys.modules["_infoclust_open_audit"]
    seen, state.prefix = list(state.seen), None
    return seen


def test_the_workers_of_a_local_cluster_read_the_url_themselves(s3_bucket, local_cluster_client, tmp_path):
    X, z = _data(3000)
    url = f"{s3_bucket}/w.zarr"
    write_dataset(url, X, chunks=500, scheduler=local_cluster_client)
    local = write_dataset(tmp_path / "w.zarr", X, chunks=500)
    local_cluster_client.run(_watch_local_opens, str(tmp_path))
    est = ic.KMeans(3, random_state=0, scheduler=local_cluster_client).fit(url)
    opened = local_cluster_client.run(_local_opens)
    assert all(not paths for paths in opened.values()), opened  # nothing read from a local folder
    ref = ic.KMeans(3, random_state=0, scheduler="sync").fit(X)
    np.testing.assert_allclose(est.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-10)
    # the watch does see local reads: the same fit from the local copy opens its chunks
    local_cluster_client.run(_watch_local_opens, str(tmp_path))
    ic.KMeans(3, random_state=0, scheduler=local_cluster_client).fit(str(local))
    opened = local_cluster_client.run(_local_opens)
    assert any(any("/x/c/" in p for p in paths) for paths in opened.values()), opened


def test_credentials_are_refused_as_options_and_never_enter_graphs_or_run_folders(s3_bucket, tmp_path):
    X, _ = _data(1000)
    with pytest.raises(ValueError, match=r"storage_options\['secret'\] looks like a credential"):
        write_dataset(f"{s3_bucket}/s.zarr", X, storage_options={"secret": "x"})
    with pytest.raises(ValueError, match=r"\['client_kwargs'\]\['aws_secret_access_key'\]"):
        open_dataset(f"{s3_bucket}/s.zarr", storage_options={"client_kwargs": {"aws_secret_access_key": "x"}})
    url = f"{s3_bucket}/s.zarr"
    write_dataset(url, X, chunks=300)
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]  # set by conftest; every process reads it from there
    graph = pickle.dumps(dict(open_dataset(url)["x"].data.dask))
    assert secret.encode() not in graph
    env = dict(os.environ, INFOCLUST_STORAGE=str(tmp_path / "runs"))
    r = subprocess.run([sys.executable, "-m", "infoclust_dask.cli", "fit", "kmeans", url, "-k", "3",
                        "--scheduler", "threads"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert secret not in r.stdout + r.stderr
    for root, _, files in os.walk(tmp_path / "runs"):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                assert secret.encode() not in fh.read(), f


def test_a_protocol_without_its_file_system_names_the_package_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pytest.importorskip("fsspec")
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match=r"gs:// URL, but its file system is not installed.*gcsfs"):
            write_dataset("gs://bucket/d.zarr", np.zeros((3, 2)))
    with pytest.raises(ValueError, match="fsspec knows no protocol 'nosuch'"):
        open_dataset("nosuch://bucket/d.zarr")
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_write_at_a_url_is_not_opened_and_overwrite_replaces_only_it(s3_bucket, monkeypatch):
    X, _ = _data(1000)
    url = f"{s3_bucket}/i.zarr"
    def killed(loc, arrays=None):
        raise KeyboardInterrupt  # the write stops before its manifests, as a kill would

    monkeypatch.setattr(store_mod, "write_manifest", killed)
    with pytest.raises(KeyboardInterrupt):
        write_dataset(url, X, chunks=300)
    monkeypatch.undo()
    with pytest.raises(StoreError, match="has no manifest: its write did not finish"):
        open_dataset(url)
    with pytest.raises(StoreError, match="holds an interrupted write"):
        write_dataset(url, X, chunks=300)
    write_dataset(url, X, chunks=300, overwrite=True)
    np.testing.assert_array_equal(open_dataset(url)["x"].values, X)
    with pytest.raises(StoreError, match="a finished store is not replaced"):
        write_dataset(url, X, chunks=300, overwrite=True)


@pytest.mark.parametrize("chunk", [700, 1000])  # the old last chunk partly filled, and exactly full
def test_append_gives_the_store_of_all_rows(where, chunk):
    X, z = _data(5000)
    fold_all = fold_vector(5000, 4, seed=3, chunks=chunk).compute()
    write_dataset(where, X[:4000], label=z[:4000], fold=fold_all[:4000], chunks=chunk,
                  attrs={"n_folds": 4, "fold_seed": 3, "feature_mean": X[:4000].mean(0).tolist(),
                         "feature_std": X[:4000].std(0).tolist()})
    rep = append_dataset(where, X[4000:], label=z[4000:])
    assert (rep["rows_before"], rep["rows_added"], rep["rows"]) == (4000, 1000, 5000)
    ds = open_dataset(where)
    np.testing.assert_array_equal(ds["x"].values, X)
    np.testing.assert_array_equal(ds["label"].values, z)
    np.testing.assert_array_equal(ds["fold"].values, fold_all)  # the same seeded rule, row by row
    np.testing.assert_allclose(ds.attrs["feature_mean"], X.mean(0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ds.attrs["feature_std"], X.std(0), rtol=0, atol=1e-12)
    assert ds["x"].chunks[0][0] == chunk
    assert verify_store(where)["problems"] == []
    assert ds.attrs["provenance"]["appends"][0]["rows"] == 1000
    # the store keeps moments: their one pass also finds non-finite rows, refused before anything is written
    bad = X[:5].copy()
    bad[2, 1] = np.inf
    with pytest.raises(ValueError, match="'x' contains 1 NaN or infinite values"):
        append_dataset(where, bad, label=z[:5])
    assert open_dataset(where).sizes["sample"] == 5000


def test_lazy_new_rows_are_checked_and_summed_while_they_are_written(where):
    """Lazy new rows (a file being read, a generator) are gone through once:
    their checks run inside the staged write and the moments' pass in the
    same graph. The store equals that of in-memory rows; a bad block
    aborts the append with nothing committed."""
    import dask.array as da

    from infoclust_dask import engine

    X, z = _data(5000)
    attrs = {"feature_mean": X[:4000].mean(0).tolist(), "feature_std": X[:4000].std(0).tolist()}
    write_dataset(where, X[:4000], label=z[:4000], chunks=700, attrs=attrs)
    calls = []
    real = engine.build_reduction
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "build_reduction", lambda *a, **k: calls.append(a[0].name) or real(*a, **k))
        bad = da.from_array(np.where(np.arange(1000)[:, None] == 517, np.nan, X[4000:]), chunks=300)
        with pytest.raises(ValueError, match="'x' contains 4 NaN or infinite values in one block"):
            append_dataset(where, bad, label=da.from_array(z[4000:], chunks=300))
        with pytest.raises(ValueError, match="'label' must be >= 0; found -1"):
            append_dataset(where, da.from_array(X[4000:], chunks=300),
                           label=da.from_array(np.where(np.arange(1000) == 9, -1, z[4000:]), chunks=300))
        assert open_dataset(where).sizes["sample"] == 4000 and verify_store(where)["problems"] == []
        append_dataset(where, da.from_array(X[4000:], chunks=300), label=da.from_array(z[4000:], chunks=300))
    assert "moments_stats" in calls  # the moments' pass went into the write's graph
    ds = open_dataset(where)
    np.testing.assert_array_equal(ds["x"].values, X)
    np.testing.assert_array_equal(ds["label"].values, z)
    np.testing.assert_allclose(ds.attrs["feature_mean"], X.mean(0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ds.attrs["feature_std"], X.std(0), rtol=0, atol=1e-12)
    assert verify_store(where)["problems"] == []


def test_append_refuses_other_columns_and_missing_variables_by_name(tmp_path):
    X, z = _data(1000)
    store = tmp_path / "c.zarr"
    write_dataset(store, X, label=z, feature_names=["a", "b", "c", "d"], chunks=300)
    with pytest.raises(ValueError, match=r"new columns \['e'\]; missing columns \['d'\]"):
        append_dataset(store, X[:10], label=z[:10], feature_names=["a", "b", "c", "e"])
    with pytest.raises(ValueError, match="3 columns; the store's rows have 4"):
        append_dataset(store, X[:10, :3], label=z[:10])
    with pytest.raises(ValueError, match=r"missing \['label'\]"):
        append_dataset(store, X[:10])
    with pytest.raises(ValueError, match=r"not in the store \['y'\]"):
        append_dataset(store, X[:10], label=z[:10], y=X[:10])
    with pytest.raises(ValueError, match="NaN or infinite"):
        append_dataset(store, np.full((3, 4), np.nan), label=z[:3])
    assert open_dataset(store).sizes["sample"] == 1000


def test_append_matches_class_names_by_name_and_adds_new_ones_at_the_end(tmp_path):
    csv1 = tmp_path / "a.csv"
    csv2 = tmp_path / "b.csv"
    csv1.write_text("f1,f2,cls\n0,1,cat\n2,3,dog\n4,5,cat\n")
    csv2.write_text("f1,f2,cls\n6,7,dog\n8,9,emu\n")
    store = tmp_path / "s.zarr"
    ingest(csv1, store, label_column="cls")
    with pytest.warns(UserWarning, match=r"adds the class name \['emu'\] to the store's 'label' classes \(2 before, "
                                         r"3 after\)"):
        ingest(csv2, store, label_column="cls", append=True)
    ds = open_dataset(store)
    assert ds.attrs["class_names"] == ["cat", "dog", "emu"]
    names = np.array(ds.attrs["class_names"])[ds["label"].values]
    assert names.tolist() == ["cat", "dog", "cat", "dog", "emu"]
    np.testing.assert_array_equal(ds["x"].values, np.arange(10.0).reshape(5, 2))
    with pytest.raises(ValueError, match="cannot change them: \\['standardize'\\]"):
        ingest(csv2, store, label_column="cls", append=True, standardize=True)


def test_append_applies_the_stored_standardization(tmp_path):
    X, z = _data(2000)
    store = tmp_path / "st.zarr"
    np.save(tmp_path / "a.npy", X[:1500])
    np.save(tmp_path / "b.npy", X[1500:])
    ingest(tmp_path / "a.npy", store, standardize=True)
    ingest(tmp_path / "b.npy", store, append=True)
    mean, std = X[:1500].mean(0), X[:1500].std(0)
    np.testing.assert_allclose(open_dataset(store)["x"].values, (X - mean) / std, rtol=0, atol=1e-12)


@pytest.mark.parametrize("stop", ["before_metadata", "between_metadata", "before_manifests", "between_manifests"])
# in a bucket 7.6-8.6 s each (a few hundred requests to moto's server) against 0.3-0.5 s on a local disk: the bucket's
# four in make test-slow, with the fault injection there (make test's 8 minutes)
@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.slow)], indirect=True)
def test_an_interrupted_append_leaves_the_previous_version_whole_and_can_run_again(where, monkeypatch, stop):
    X, z = _data(5000)
    write_dataset(where, X[:4000], label=z[:4000], chunks=700)
    real_manifest, real_pending = append_mod.write_manifest, append_mod.write_pending
    real_write_text = append_mod.Location.write_text

    def write_text(self, rel, text):  # killed after the first array's metadata (x's rows grown, label's not)
        real_write_text(self, rel, text)
        if stop == "between_metadata" and rel.endswith("/zarr.json"):
            raise KeyboardInterrupt

    def pending(loc, var, chunks):
        real_pending(loc, var, chunks)
        if stop == "before_metadata":
            raise KeyboardInterrupt

    def manifest(loc, arrays=None, changed=None):
        if stop == "before_manifests":
            raise KeyboardInterrupt
        real_manifest(loc, arrays[:1], changed=changed)  # one array's manifest committed, the next not
        raise KeyboardInterrupt

    monkeypatch.setattr(append_mod, "write_pending", pending)
    monkeypatch.setattr(append_mod, "write_manifest", manifest)
    monkeypatch.setattr(append_mod.Location, "write_text", write_text)
    with pytest.raises(KeyboardInterrupt):
        append_dataset(where, X[4000:], label=z[4000:])
    monkeypatch.undo()
    store_mod.forget_opened()
    ds = open_dataset(where)
    np.testing.assert_array_equal(ds["x"].values, X[:4000])  # the old rows, all of them, unchanged
    np.testing.assert_array_equal(ds["label"].values, z[:4000])
    assert "appends" not in ds.attrs["provenance"]  # the attributes of the committed version too
    report = verify_store(where)
    assert report["problems"] == [] and report["rows"] == 4000  # the committed version is whole
    if stop != "before_metadata":
        assert report["notes"] and all("an append did not finish" in n for n in report["notes"])
    append_dataset(where, X[4000:], label=z[4000:])
    ds = open_dataset(where)
    np.testing.assert_array_equal(ds["x"].values, X)
    assert verify_store(where)["problems"] == [] and verify_store(where)["notes"] == []
    assert ds.attrs["provenance"]["appends"][0]["rows"] == 1000


def test_a_flipped_byte_inside_a_chunk_fails_the_fit_with_its_checksum(tmp_path):
    X, _ = _data(3000)
    store = tmp_path / "f.zarr"
    write_dataset(store, X, chunks=500)
    chunk = store / "x" / "c" / "2" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    chunk.write_bytes(bytes(raw))  # same size: the manifest's size check does not see it
    with pytest.raises(ic.engine.ChecksumError, match="failed its CRC-32C check"):
        ic.KMeans(3, random_state=0, scheduler="threads").fit(str(store))
    assert any("CRC-32" in p for p in verify_store(store)["problems"])


@pytest.mark.slow  # 4 CLI processes (16 s): run by `make test-slow` in .ci/run
def test_cli_ingest_info_verify_append_and_fit_at_a_url(s3_bucket, tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 3))
    np.savetxt(tmp_path / "a.csv", X[:500], delimiter=",", header="u,v,w", comments="")
    np.savetxt(tmp_path / "b.csv", X[500:], delimiter=",", header="u,v,w", comments="")
    url = f"{s3_bucket}/cli.zarr"
    env = dict(os.environ, INFOCLUST_STORAGE=str(tmp_path / "runs"))

    def cli(*args):
        r = subprocess.run([sys.executable, "-m", "infoclust_dask.cli", *args], capture_output=True, text=True,
                           env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        return r.stdout

    cli("ingest", str(tmp_path / "a.csv"), url)
    rep = json.loads(cli("ingest", str(tmp_path / "b.csv"), url, "--append"))
    assert rep["rows"] == 600 and rep["rows_added"] == 100
    assert json.loads(cli("verify", url))["problems"] == []
    info = json.loads(cli("info", url, "--json"))
    assert info["variables"]["x"]["shape"] == [600, 3]
    cli("fit", "kmeans", url, "-k", "2", "--scheduler", "threads")
    np.testing.assert_allclose(open_dataset(url)["x"].values, X, rtol=0, atol=1e-12)
    assert not (tmp_path / "s3:").exists()
