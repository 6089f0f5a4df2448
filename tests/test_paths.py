"""A URL is never taken for a relative path: ``s3://bucket/d.zarr`` used to
become a local folder ``s3:`` (ingest exited 0 having written it, fit then
fitted it). Dataset stores, run folders, models and caches may be URLs
(tests/test_object_store.py, tests/test_run_folders_at_urls.py); source
files stay local, and a URL there is refused with a message that says so.
A URL whose file system is not installed is refused naming the package;
nothing is created.
``file://`` URLs are local paths."""

import numpy as np
import pytest

from infoclust_dask import open_dataset, write_dataset
from infoclust_dask.cli import main
from infoclust_dask.runs import load_model, new_run_dir
from infoclust_dask.storage.paths import URLNotSupported, local_path, url_protocol


def _nothing_created(root):
    return not any(p.name.endswith(":") or "://" in p.name for p in root.rglob("*"))


def _has(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


@pytest.mark.skipif(_has("gcsfs"), reason="gcsfs is installed: gs:// would be reached for real")
def test_the_cli_names_the_missing_file_system_and_creates_no_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "a.npy", np.random.default_rng(0).normal(size=(50, 3)))
    assert main(["ingest", "a.npy", "gs://bucket/d.zarr"]) == 2
    err = capsys.readouterr().err
    assert "gs://" in err and "gcsfs" in err and "Nothing was created" in err
    assert main(["fit", "kmeans", "nosuch://bucket/d.zarr", "-k", "2", "--scheduler", "sync"]) == 2
    assert "fsspec knows no protocol 'nosuch'" in capsys.readouterr().err
    assert main(["ingest", "gs://bucket/a.csv", "d.zarr"]) == 2  # source files are local
    assert "source" in capsys.readouterr().err
    assert _nothing_created(tmp_path) and not (tmp_path / "d.zarr").exists()


def test_stores_models_and_run_folders_take_urls_and_a_missing_file_system_is_named(tmp_path, monkeypatch):
    X = np.arange(12.0).reshape(6, 2)
    url = f"memory://infoclust-test-{tmp_path.name}/x.zarr"  # fsspec's in-process file system
    assert write_dataset(url, X) == url
    np.testing.assert_array_equal(open_dataset(url)["x"].values, X)
    monkeypatch.setenv("INFOCLUST_STORAGE", f"memory://infoclust-test-{tmp_path.name}/storage")
    run = new_run_dir("kmeans")
    assert str(run).startswith(f"memory://infoclust-test-{tmp_path.name}/storage/runs/")
    if not _has("gcsfs"):
        with pytest.raises(URLNotSupported, match="gcsfs"):
            load_model("gs://bucket/run/model.json")
        monkeypatch.setenv("INFOCLUST_STORAGE", "gs://bucket/storage")
        with pytest.raises(URLNotSupported, match=r"INFOCLUST_STORAGE.*gcsfs"):
            new_run_dir("kmeans")
    path = write_dataset(f"file://{tmp_path}/f.zarr", X)
    assert path == tmp_path / "f.zarr"
    np.testing.assert_array_equal(open_dataset(f"file://{path}")["x"].values, X)
    with pytest.raises(ValueError, match="names a bucket, not a folder"):
        write_dataset("s3://just-a-bucket", X)
    with pytest.raises(ValueError, match="names a bucket, not a folder"):
        new_run_dir("kmeans", root="s3://just-a-bucket")
    assert _nothing_created(tmp_path)


@pytest.mark.parametrize("text, proto", [("s3://b/k", "s3"), ("GS://b", "gs"), ("file:///tmp/x", "file"),
                                         ("a/b.zarr", None), ("C:/data/x.zarr", None)])
def test_url_protocol(text, proto):
    assert url_protocol(text) == proto
    if proto is None:
        assert str(local_path(text)) == str(local_path(text))  # a path stays a path


def test_nothing_is_written_inside_a_store(tmp_path, monkeypatch, capsys):
    """A run folder, storage root, model or output file inside a store (or
    the store itself as a storage root) is refused before anything is
    written; verify then still finds the store clean (issue 53)."""
    import numpy as np

    from infoclust_dask import cli
    from infoclust_dask.io.store import verify_store, write_dataset
    from infoclust_dask.runs import save_model

    monkeypatch.chdir(tmp_path)
    x = np.random.default_rng(0).normal(size=(60, 2))
    store = write_dataset(tmp_path / "s.zarr", x)
    assert cli.main(["fit", "kmeans", str(store), "-k", "2", "--scheduler", "sync", "--storage",
                     str(tmp_path / "st")]) == 0
    capsys.readouterr()
    model = next((tmp_path / "st").rglob("model.json"))
    for argv in (["fit", "kmeans", str(store), "-k", "2", "--scheduler", "sync", "--storage", f"{store}/x"],
                 ["fit", "kmeans", str(store), "-k", "2", "--scheduler", "sync", "--storage", str(store)],
                 ["predict", str(model), str(store), "--out", f"{store}/x/lab.npy"]):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "zarr store" in err and "outside the store" in err, err
    from infoclust_dask import KMeans

    with pytest.raises(ValueError, match="inside the zarr store"):
        save_model(KMeans(2, scheduler="sync").fit(x), store / "m.json")
    report = verify_store(store)
    assert report["problems"] == [] and report["notes"] == [], report


def test_writing_labels_never_replaces_the_stores_own_classes(tmp_path, capsys):
    """``predict --write-labels label --overwrite`` (or a known clustering's
    name) is refused: those are the data, not a result (issue 53); a result
    written earlier under another name may be replaced."""
    import numpy as np

    from infoclust_dask import cli
    from infoclust_dask.io.labels import add_labels
    from infoclust_dask.io.store import open_dataset, write_dataset

    x = np.random.default_rng(0).normal(size=(40, 2))
    label = np.repeat([0, 1], 20)
    store = write_dataset(tmp_path / "s.zarr", x, label=label, extra_labels={"topic": label[::-1].copy()})
    for name in ("label", "topic"):
        with pytest.raises(Exception, match="overwrite=True does not replace"):
            add_labels(store, name, np.zeros(40, dtype=int), overwrite=True)
    add_labels(store, "clusters", np.zeros(40, dtype=int))
    add_labels(store, "clusters", np.ones(40, dtype=int), overwrite=True)
    ds = open_dataset(store)
    np.testing.assert_array_equal(np.asarray(ds["label"]), label)
    np.testing.assert_array_equal(np.asarray(ds["clusters"]), 1)
    assert cli.main(["fit", "kmeans", str(store), "-k", "2", "--scheduler", "sync", "--storage",
                     str(tmp_path / "st")]) == 0
    model = next((tmp_path / "st").rglob("model.json"))
    capsys.readouterr()
    assert cli.main(["predict", str(model), str(store), "--write-labels", "label", "--overwrite"]) == 2
    assert "does not replace" in capsys.readouterr().err
    np.testing.assert_array_equal(np.asarray(open_dataset(store)["label"]), label)


def test_a_file_url_with_one_slash_gets_advice_that_keeps_it_where_it_was_meant(tmp_path, monkeypatch, capsys):
    """``file:/abs/x.zarr`` was told to use ``file://abs/...``, which puts the
    store at ./abs/... (issue 53): the advice is the absolute path itself,
    or ``file:///abs/...``; following it writes the store at /abs/..."""
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "d.npy", np.random.default_rng(0).normal(size=(20, 2)))
    target = tmp_path / "out" / "x.zarr"
    assert main(["ingest", "d.npy", f"file:{target}"]) == 2
    err = capsys.readouterr().err
    assert f"write '{target}'" in err and f"file://{target}'" in err and "file://" + str(target).lstrip("/") not in err
    assert main(["ingest", "d.npy", f"file://{target}"]) == 0
    assert (target / "zarr.json").exists() and not (tmp_path / str(target).lstrip("/")).exists()
