"""Ingest / preprocess: moments, standardization and PCA against numpy and
scikit-learn, store-to-store preprocessing vs in-memory, fold vectors, chunk
and codec choice, parquet input and its rejections."""

import os

import dask.array as da
import numpy as np
import pandas as pd
import pytest
from sklearn.decomposition import PCA

from infoclust_dask import engine
from infoclust_dask.io import folds
from infoclust_dask.io.ingest import IngestError, ingest
from infoclust_dask.io.store import StoreError, choose_chunk_rows, choose_codec, open_dataset, write_dataset
from infoclust_dask.preprocess import feature_moments, fit_transform


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1500, 6)) @ rng.normal(size=(6, 6)) * 50 + 1e4  # far from the origin
    c = rng.integers(0, 3, 1500)
    return X, c


def test_feature_moments_chunked_equal_numpy(data):
    X, _ = data
    mean, std, n, bad = feature_moments(da.from_array(X, chunks=(97, 6)), scheduler="threads")
    np.testing.assert_allclose(mean, X.mean(0), rtol=1e-12)
    np.testing.assert_allclose(std, X.std(0), rtol=1e-10)
    assert (n, bad) == (1500, 0)


@pytest.mark.parametrize("method", ["gram", "tsqr"])
@pytest.mark.parametrize("standardize", [False, True])
def test_pca_matches_sklearn(data, standardize, method):
    X, _ = data
    Xt, info = fit_transform(da.from_array(X, chunks=(200, 6)), standardize=standardize, pca=3, pca_method=method,
                             scheduler="threads")
    Z = (X - X.mean(0)) / X.std(0) if standardize else X
    ref = PCA(3, svd_solver="full").fit(Z)
    signs = np.sign(np.sum(info["components"] * ref.components_, axis=1))
    np.testing.assert_allclose(info["components"], ref.components_ * signs[:, None], atol=1e-10)
    np.testing.assert_allclose(info["explained_variance_ratio"], ref.explained_variance_ratio_, rtol=1e-10)
    np.testing.assert_allclose(Xt.compute(), ref.transform(Z) * signs, atol=1e-8)


def test_ingest_standardize_pca_folds_store(tmp_path, data):
    X, c = data
    np.savez(tmp_path / "d.npz", x=X, label=c)
    path, report = ingest(tmp_path / "d.npz", tmp_path / "s.zarr", standardize=True, pca=4, n_folds=5, chunks=300)
    ds = open_dataset(path)
    Z = (X - X.mean(0)) / X.std(0)
    ref = PCA(4, svd_solver="full").fit(Z)
    signs = np.sign(np.sum(np.asarray(ds.attrs["components"]) * ref.components_, axis=1))
    np.testing.assert_allclose(ds["x"].values, ref.transform(Z) * signs, atol=1e-8)
    np.testing.assert_allclose(ds.attrs["feature_mean"], X.mean(0), rtol=1e-12)
    np.testing.assert_allclose(ds.attrs["feature_std"], X.std(0), rtol=1e-10)
    assert ds["x"].chunks[0][0] == 300 and report["chunk_rows"] == 300
    f = ds["fold"].values
    assert set(np.unique(f)) == set(range(5)) and ds.attrs["n_folds"] == 5
    assert np.all(np.abs(np.bincount(f) - 300) < 60)  # hashed folds: about equal
    np.testing.assert_array_equal(ds["label"].values, c)


def test_store_to_store_equals_in_memory(tmp_path, data):
    X, c = data
    src = write_dataset(tmp_path / "raw.zarr", X, label=c, chunks=128)
    p1, r1 = ingest(src, tmp_path / "pre.zarr", standardize=True, pca=2, n_folds=4, chunks=256)
    np.savez(tmp_path / "d.npz", x=X, label=c)
    p2, _ = ingest(tmp_path / "d.npz", tmp_path / "mem.zarr", standardize=True, pca=2, n_folds=4, chunks=999)
    a, b = open_dataset(p1), open_dataset(p2)
    np.testing.assert_allclose(a["x"].values, b["x"].values, atol=1e-10)
    np.testing.assert_array_equal(a["fold"].values, b["fold"].values)  # chunking does not move rows between folds
    np.testing.assert_array_equal(a["label"].values, c)
    assert a.attrs["provenance"]["derived_from"] == str(src.resolve()) and r1["rows"] == 1500
    with pytest.raises(ValueError, match="same store"):
        ingest(src, src, overwrite=True)


def test_fold_splits_are_views_equal_to_numpy(tmp_path, data):
    X, c = data
    p, _ = ingest(_npz(tmp_path, X, c), tmp_path / "s.zarr", n_folds=3, chunks=100)
    ds = open_dataset(p)
    f = ds["fold"].values
    for kind in ("stored", "ranges"):
        ids = f if kind == "stored" else (np.arange(1500) * 3) // 1500
        for k in range(3):
            tr, te = folds.split(ds, k, 3, kind, scheduler="sync")
            assert not isinstance(tr["x"], np.ndarray) and not np.isnan(tr["x"].chunks[0]).any()
            np.testing.assert_array_equal(tr["x"].compute(), X[ids != k])
            np.testing.assert_array_equal(te["label"].compute(), c[ids == k])
    with pytest.raises(ValueError, match="has 3 folds, not 4"):
        folds.split(ds, 0, 4, "stored")
    with pytest.raises(ValueError, match="fold must be in 0 .. 2"):
        folds.split(ds, 3, 3, "ranges")
    with pytest.raises(ValueError, match="n_folds must be an integer >= 2"):
        folds.split(ds, 0, 1, "ranges")


def _npz(tmp_path, X, c):
    np.savez(tmp_path / "d.npz", x=X, label=c)
    return tmp_path / "d.npz"


def test_take_rows_numpy_and_errors(data):
    X, _ = data
    keep = np.arange(1500) % 3 == 0
    np.testing.assert_array_equal(engine.take_rows(X, keep), X[keep])
    with pytest.raises(ValueError, match="one entry per row"):
        engine.take_rows(da.from_array(X, chunks=100), keep[:10])
    with pytest.raises(ValueError, match="No rows are kept"):
        engine.take_rows(da.from_array(X, chunks=100), np.zeros(1500, bool))


def test_chunk_and_codec_choice():
    assert choose_chunk_rows(100, 16) == 100  # small: one chunk
    assert choose_chunk_rows(10**8, 16) == 64 * 2**20 // 128  # big: ~64 MB chunks
    mid = choose_chunk_rows(10**6, 16)  # 128 MB: 8 chunks of >= 8 MB
    assert mid * 128 >= 8 * 2**20 and -(-10**6 // mid) <= 8
    rng = np.random.default_rng(0)
    assert choose_codec(rng.normal(size=(2000, 8)))[0] == "none"  # random mantissas do not compress
    assert choose_codec(rng.integers(0, 16, size=(2000, 8)).astype(float))[0] == "lz4"


def test_parquet_ingest_and_rejections(tmp_path):
    rng = np.random.default_rng(1)
    df = pd.DataFrame(rng.normal(size=(40, 3)), columns=["a", "b", "c"])
    df["cls"] = ["u", "v", "w", "u"] * 10
    df.to_parquet(tmp_path / "ok.parquet")
    p, rep = ingest(tmp_path / "ok.parquet", tmp_path / "ok.zarr", label_column="cls")
    ds = open_dataset(p)
    np.testing.assert_array_equal(ds["x"].values, df[["a", "b", "c"]].to_numpy())
    assert ds.attrs["class_names"] == ["u", "v", "w"] and rep["rows_written"] == 40

    bad = df.copy()
    bad["note"] = "text"
    bad.to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(IngestError, match=r"column 'note' has dtype .* not numbers.*--label-column"):
        ingest(tmp_path / "bad.parquet", tmp_path / "bad.zarr", label_column="cls")
    nan = df.copy()
    nan.loc[7, "b"] = np.nan
    nan.to_parquet(tmp_path / "nan.parquet")
    with pytest.raises(IngestError, match=r"first at rows \[7\], 0-based; columns \[1\].*--drop-nonfinite"):
        ingest(tmp_path / "nan.parquet", tmp_path / "nan.zarr", label_column="cls")
    p, rep = ingest(tmp_path / "nan.parquet", tmp_path / "nan.zarr", label_column="cls", drop_nonfinite=True)
    assert rep["rejected"] == [{"reason": "NaN or inf", "rows": 1, "first_rows": [7], "columns": [1]}]
    assert open_dataset(p)["x"].shape == (39, 3)
    with pytest.raises(StoreError, match="--overwrite"):
        ingest(tmp_path / "ok.parquet", tmp_path / "ok.zarr", label_column="cls")
    for name in ("bad.zarr",):
        assert not (tmp_path / name).exists()
    assert [q for q in os.listdir(tmp_path) if q.startswith(".")] == []  # nothing half-written
