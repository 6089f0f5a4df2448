"""A URL is never taken for a relative path: ``s3://bucket/d.zarr`` used to
become a local folder ``s3:`` (ingest exited 0 having written it, fit then
fitted it). This version keeps stores, run folders, models and caches on
local or shared file systems and refuses URLs with a message that says so
(naming the fsspec package of the protocol when it is missing); nothing
is created. ``file://`` URLs are local paths."""

import numpy as np
import pytest

from infoclust_dask import open_dataset, write_dataset
from infoclust_dask._paths import URLNotSupported, local_path, url_protocol
from infoclust_dask.cli import main
from infoclust_dask.runs import load_model, new_run_dir


def _nothing_created(root):
    return not any(p.name.endswith(":") or "://" in p.name for p in root.rglob("*"))


def test_the_cli_refuses_url_stores_and_creates_no_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "a.npy", np.random.default_rng(0).normal(size=(50, 3)))
    assert main(["ingest", "a.npy", "s3://bucket/d.zarr"]) == 2
    err = capsys.readouterr().err
    assert "s3://" in err and "s3fs" in err and "local or shared file systems" in err
    assert main(["fit", "kmeans", "s3://bucket/d.zarr", "-k", "2", "--scheduler", "sync"]) == 2
    assert "s3://bucket/d.zarr" in capsys.readouterr().err
    assert main(["ingest", "gs://bucket/a.csv", "d.zarr"]) == 2
    assert "gs://bucket/a.csv" in capsys.readouterr().err
    assert _nothing_created(tmp_path) and not (tmp_path / "d.zarr").exists()


def test_the_library_refuses_urls_and_takes_file_urls(tmp_path, monkeypatch):
    X = np.arange(12.0).reshape(6, 2)
    with pytest.raises(URLNotSupported, match="memory://x.zarr"):
        write_dataset("memory://x.zarr", X)  # fsspec has memory://: the message does not ask for a package
    with pytest.raises(URLNotSupported, match="no file system for az:// is installed"):
        open_dataset("az://container/x.zarr")
    with pytest.raises(URLNotSupported, match="model file"):
        load_model("s3://bucket/run/model.json")
    monkeypatch.setenv("INFOCLUST_STORAGE", "s3://bucket/storage")
    with pytest.raises(URLNotSupported, match="INFOCLUST_STORAGE"):
        new_run_dir("kmeans")
    path = write_dataset(f"file://{tmp_path}/f.zarr", X)
    assert path == tmp_path / "f.zarr"
    np.testing.assert_array_equal(open_dataset(f"file://{path}")["x"].values, X)
    assert _nothing_created(tmp_path)


@pytest.mark.parametrize("text, proto", [("s3://b/k", "s3"), ("GS://b", "gs"), ("file:///tmp/x", "file"),
                                         ("a/b.zarr", None), ("C:/data/x.zarr", None), ("s3:/b", None)])
def test_url_protocol(text, proto):
    assert url_protocol(text) == proto
    if proto is None:
        assert str(local_path(text)) == str(local_path(text))  # a path stays a path
