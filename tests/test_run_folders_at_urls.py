"""Run folders, model files, model versions, checkpoints, the
cross-validation cache and plots at object-storage URLs (moto's S3 server on
127.0.0.1, and fsspec's in-process ``memory://``). References: the same
operations on a local folder, and numpy."""

import json
import os

import fsspec
import numpy as np
import pytest

import infoclust_dask as ic
from infoclust_dask import KMeans
from infoclust_dask.cli import main
from infoclust_dask.crossval import CellCache
from infoclust_dask.io.store import write_dataset
from infoclust_dask.runs import check_writable, load_model, new_run_dir, run_path, save_model, write_json, write_npy
from infoclust_dask.update import ModelVersions


def _objects(url):
    """Every object below ``url``: key -> bytes."""
    fs, root = fsspec.core.url_to_fs(url)
    fs.invalidate_cache()
    return {k[len(root.rstrip("/")) + 1:]: fs.cat_file(k) for k in fs.find(root)}


def _blobs(n=3000):
    X, z, _ = ic.datasets.make_blobs(n, 3, centers=3, random_state=0, lazy=False)
    return X, z


def test_a_cli_fit_keeps_its_whole_run_folder_in_the_bucket(s3_bucket, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    X, z = _blobs()
    store = f"{s3_bucket}/blobs.zarr"
    write_dataset(store, X, label=z, chunks=700)
    storage = f"{s3_bucket}/storage"
    assert main(["fit", "kmeans", store, "-k", "3", "--scheduler", "threads", "--storage", storage]) == 0
    summary = json.loads(capsys.readouterr().out)
    run = summary["run_dir"]
    assert run.startswith(f"{storage}/runs/") and summary["store"] == store
    files = _objects(run)
    assert {"model.json", "summary.json", "checkpoint.json"} <= set(files)
    assert sum(k.startswith("passes/") for k in files) >= 2
    assert json.loads(files["summary.json"]) == summary
    model = load_model(f"{run}/model.json")
    ref = KMeans(3, random_state=0, scheduler="sync").fit(X)  # the CLI's seed and defaults, in memory
    np.testing.assert_allclose(model.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(np.asarray(model.set_params(scheduler="sync").predict(X)), ref.labels_)
    secret = os.environ["AWS_SECRET_ACCESS_KEY"].encode()
    assert not any(secret in b for b in _objects(s3_bucket).values())
    assert not any("s3:" in p.name for p in tmp_path.rglob("*"))  # nothing local named like the URL


def test_resume_from_a_checkpoint_in_the_bucket_equals_the_uninterrupted_fit(s3_bucket):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 4)) + 3 * rng.integers(0, 4, 2000)[:, None]
    run = f"{s3_bucket}/runs/km"
    ref = KMeans(5, n_init=2, random_state=0, scheduler="sync").fit(X, checkpoint=run)
    passes = sorted(k for k in _objects(run) if k.startswith("passes/"))
    assert len(passes) > 6
    fs, _ = fsspec.core.url_to_fs(run)
    for k in passes[len(passes) // 2:]:  # as if the driver died half-way
        fs.rm(f"{run}/{k}")
    got = KMeans(5, n_init=2, random_state=0, scheduler="sync").fit(X, resume=run)
    assert got.resumed_passes_ == len(passes) // 2
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-12)
    with pytest.raises(FileExistsError, match="already holds a checkpoint"):
        KMeans(5, scheduler="sync").fit(X, checkpoint=run)


def test_model_versions_cell_cache_and_plots_at_a_url(s3_bucket):
    X, _ = _blobs(600)
    versions = ModelVersions(f"{s3_bucket}/models/km")
    assert versions.versions() == []
    a = KMeans(3, random_state=0, scheduler="sync").fit(X)
    b = KMeans(3, random_state=1, scheduler="sync").fit(X, init=a)
    assert versions.save(a, {"night": 1}) == 1 and versions.save(b, {"night": 2}) == 2
    assert versions.versions() == [1, 2] and versions.info(1)["night"] == 1
    np.testing.assert_array_equal(versions.load(1).cluster_centers_, a.cluster_centers_)
    np.testing.assert_array_equal(versions.load().cluster_centers_, b.cluster_centers_)
    versions.record_appended([__file__], [10])
    assert versions.new_files([__file__]) == []
    cache = CellCache(f"{s3_bucket}/cv/cells")
    assert cache.load("k1") is None
    cache.save("k1", {"score": 0.5})
    assert cache.load("k1") == {"key": "k1", "score": 0.5}
    from infoclust_dask.plotting import available, plot_drift

    if available():
        png = plot_drift([{"version": 2, "max_relative_drift": 0.1, "ari": 0.9}], f"{s3_bucket}/plots/drift.png")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_writes_at_a_url_are_whole_objects_that_are_never_replaced_unasked(s3_bucket):
    model_url = f"{s3_bucket}/m/model.json"
    est = KMeans(2, random_state=0, scheduler="sync").fit(np.arange(20.0).reshape(10, 2))
    save_model(est, model_url)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_model(est, model_url)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_json(model_url, {"x": 1})
    write_npy(f"{s3_bucket}/m/a.npy", np.arange(5))
    with pytest.raises(FileExistsError):
        write_npy(f"{s3_bucket}/m/a.npy", np.arange(5))
    np.testing.assert_array_equal(np.load(run_path(f"{s3_bucket}/m/a.npy").open("rb")), np.arange(5))
    assert check_writable(f"{s3_bucket}/storage") is not None
    with pytest.raises(OSError, match="is not writable"):
        check_writable("s3://no-such-bucket-infoclust/storage")
    run = new_run_dir("kmeans", root=f"{s3_bucket}/storage")
    assert str(run).startswith(f"{s3_bucket}/storage/runs/") and "-kmeans-" in run.name
