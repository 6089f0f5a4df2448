"""Model files and manifests that cannot hurt (issue 27, security): a
tampered ``model.json`` whose centres are wider than its
``n_features_in_`` used to crash ``predict`` (the compiled kernel read past
each row: a segfault at 1e6 columns, silent garbage at 6-50); a model with
2 000 000 centres ran for minutes; a manifest entry ``../../etc/passwd``
was opened by ``verify``. Each is refused now, with a message."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from infoclust_dask import KMeans, write_dataset
from infoclust_dask.io.store import MANIFEST, verify_store
from infoclust_dask.kernels import _compiled
from infoclust_dask.runs import MAX_MODEL_PROTOTYPES, load_model, save_model


@pytest.fixture
def model_file(tmp_path):
    X = np.random.default_rng(0).normal(size=(200, 5))
    return save_model(KMeans(3, random_state=0, scheduler="sync").fit(X), tmp_path / "model.json"), X


def _edit(path, **fitted):
    doc = json.loads(path.read_text())
    for k, v in fitted.items():
        doc["fitted"][k] = {"__ndarray__": np.asarray(v).tolist(), "dtype": str(np.asarray(v).dtype)}
    path.write_text(json.dumps(doc))


def test_a_model_with_centres_wider_than_its_features_is_refused(model_file):
    path, X = model_file
    assert load_model(path).predict(X).shape == (200,)
    _edit(path, cluster_centers_=np.zeros((3, 50)))
    with pytest.raises(ValueError, match=r"cluster_centers_ has shape \(3, 50\).*\(3, 5\).*damaged or was edited"):
        load_model(path)
    _edit(path, cluster_centers_=np.zeros((4, 5)))  # more centres than n_clusters
    with pytest.raises(ValueError, match=r"shape \(4, 5\)"):
        load_model(path)
    _edit(path, cluster_centers_=np.full((3, 5), np.nan))
    with pytest.raises(ValueError, match="NaN"):
        load_model(path)


def test_a_model_with_too_many_centres_is_refused(model_file):
    path, _ = model_file
    doc = json.loads(path.read_text())
    doc["params"]["n_clusters"] = MAX_MODEL_PROTOTYPES + 1
    path.write_text(json.dumps(doc))
    _edit(path, cluster_centers_=np.zeros((MAX_MODEL_PROTOTYPES + 1, 5), dtype=np.float32))
    with pytest.raises(ValueError, match=f"more than {MAX_MODEL_PROTOTYPES}"):
        load_model(path)


def test_the_compiled_kernels_check_the_shapes_they_read():
    x = np.zeros((10, 5))
    with pytest.raises(ValueError, match=r"centers of shape \(3, 50\) do not fit rows of 5 features"):
        _compiled.lloyd(x, centers=np.zeros((3, 50)))
    with pytest.raises(ValueError, match="labels outside 0..1"):
        _compiled.dc_counts(x, np.full(10, 7), centers=np.zeros((2, 5)), sigma=1.0, n_classes=2)
    with pytest.raises(ValueError, match="must be paired"):
        _compiled.ac_counts(x, np.zeros((9, 2)), mx=np.zeros((2, 5)), my=np.zeros((2, 2)), sx=1.0, sy=1.0)
    with pytest.raises(ValueError, match="variances"):
        _compiled.mixture_em(x, means=np.zeros((2, 5)), variances=np.ones(3), log_weights=np.zeros(2))


def test_verify_does_not_follow_manifest_entries_outside_the_store(tmp_path):
    store = write_dataset(tmp_path / "s.zarr", np.ones((20, 2)))
    secret = tmp_path / "secret.txt"
    secret.write_text("x" * 1234)
    manifest = store / "x" / MANIFEST
    doc = json.loads(manifest.read_text())
    doc["chunks"]["../secret.txt"] = [1234, 0]
    doc["chunks"][str(secret)] = [1234, 0]
    manifest.write_text(json.dumps(doc))
    problems = verify_store(store)["problems"]
    assert sum("points outside the store (not opened)" in p for p in problems) == 2, problems


@pytest.mark.parametrize("make", [
    lambda: __import__("infoclust_dask").KMeans(2, tol=float("nan")),
    lambda: __import__("infoclust_dask").SoftKMeans(2, perturbation=float("nan")),
    lambda: __import__("infoclust_dask").SoftKMeans(2, beta=float("inf")),
    lambda: __import__("infoclust_dask").DiscriminativeClustering(2, sigma=float("nan")),
    lambda: __import__("infoclust_dask").CMBC(2, gamma=float("nan")),
])
def test_nan_and_infinite_parameters_are_refused(make):
    """(issue 27) NaN passed every range check (NaN compares False with every
    bound); infinite values are no parameter's meaning either."""
    est = make()
    X = np.random.default_rng(0).integers(0, 2, size=(40, 3)).astype(float)
    args = (X, np.repeat([0, 1], 20)) if type(est).__name__ == "DiscriminativeClustering" else (X,)
    with pytest.raises(ValueError, match=r"must be a float in the range .* Got (nan|inf) instead"):
        est.set_params(scheduler="sync").fit(*args)


def test_the_cli_refuses_nan_and_l_0(tmp_path, capsys):
    from infoclust_dask.cli import main

    store = write_dataset(tmp_path / "s.zarr", np.random.default_rng(0).normal(size=(40, 2)),
                          y=np.random.default_rng(1).normal(size=(40, 2)))
    assert main(["fit", "kmeans", str(store), "-k", "2", "--tol", "nan", "--scheduler", "sync",
                 "--storage", str(tmp_path / "st")]) == 2
    assert "'tol' parameter" in capsys.readouterr().err
    assert main(["fit", "ac", str(store), "-k", "2", "-l", "0", "--scheduler", "sync",
                 "--storage", str(tmp_path / "st")]) == 2
    assert "n_clusters" in capsys.readouterr().err


def test_model_files_without_fitted_state_or_with_bad_parameters_are_refused(model_file):
    path, _ = model_file
    doc = json.loads(path.read_text())
    del doc["fitted"]["cluster_centers_"]
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="lacks the fitted cluster_centers_"):
        load_model(path)
    for value in ("two", -3):
        doc = json.loads(path.read_text())
        doc["params"]["n_clusters"] = value
        path.write_text(json.dumps(doc))
        with pytest.raises(ValueError, match="'n_clusters' parameter of KMeans"):
            load_model(path)


def test_a_npy_whose_header_does_not_match_its_size_is_refused(tmp_path, capsys):
    """(issue 27) a header claiming 10^11 rows made ingest run on silently."""
    from infoclust_dask.cli import main

    path = tmp_path / "a.npy"
    np.save(path, np.ones((100, 3)))
    path.write_bytes(path.read_bytes().replace(b"(100, 3)", b"(900, 3)", 1))  # the header claims 900 rows
    assert main(["ingest", str(path), str(tmp_path / "s.zarr")]) == 2
    assert "the file is truncated or its header was edited" in capsys.readouterr().err
    np.save(path, np.ones((100, 3)))
    path.write_bytes(path.read_bytes()[:-8])  # one value short
    assert main(["ingest", str(path), str(tmp_path / "s.zarr")]) == 2
    assert not (tmp_path / "s.zarr").exists()


@pytest.mark.parametrize("factor, dtype", [(1e300, np.float64), (1e160, np.float64), (1e30, np.float32)])
def test_values_whose_squares_overflow_are_refused(factor, dtype):
    """(issue 27) KMeans(2).fit(X * 1e300) gave sizes [599, 1] and an
    infinite inertia with only RuntimeWarnings."""
    import dask.array as da

    X = (np.random.default_rng(0).normal(size=(600, 3)) * factor).astype(dtype)
    for data in (X, da.from_array(X, chunks=200)):
        with pytest.raises(ValueError, match="too large for squared distances.*--standardize"):
            KMeans(2, scheduler="sync").fit(data)
    KMeans(2, scheduler="sync").fit(X / factor)  # the same data rescaled fits


def test_ingest_and_write_refuse_what_they_used_to_accept(tmp_path, capsys):
    """(issue 27) --folds 0, --write-labels '', fold=-1, duplicate CSV
    headers; and a UTF-8 byte-order mark is not part of the first name."""
    from infoclust_dask.cli import main

    np.save(tmp_path / "a.npy", np.ones((20, 2)))
    assert main(["ingest", str(tmp_path / "a.npy"), str(tmp_path / "a.zarr"), "--folds", "0"]) == 2
    assert "must be an int >= 2" in capsys.readouterr().err
    with pytest.raises(ValueError, match="'fold' numbers must be 0"):
        write_dataset(tmp_path / "f.zarr", np.ones((4, 2)), fold=np.array([0, 1, -1, 0]))
    (tmp_path / "d.csv").write_text("a,a,cls\n1,2,x\n3,4,y\n")
    assert main(["ingest", str(tmp_path / "d.csv"), str(tmp_path / "d.zarr"), "--label-column", "cls"]) == 2
    assert "['a'] more than once" in capsys.readouterr().err
    (tmp_path / "b.csv").write_bytes("\ufeffcls,a,b\nx,1,2\ny,3,4\n".encode("utf-8"))
    assert main(["ingest", str(tmp_path / "b.csv"), str(tmp_path / "b.zarr"), "--label-column", "cls"]) == 0
    store = tmp_path / "b.zarr"
    assert main(["fit", "kmeans", str(store), "-k", "2", "--scheduler", "sync", "--write-labels", "",
                 "--storage", str(tmp_path / "s")]) == 2
    assert "cannot name a label variable" in capsys.readouterr().err


def test_cmbc_on_constant_data_is_a_clear_error():
    """(issue 27) all-zero rows ended in a ZeroDivisionError inside the compiled kernel."""
    from infoclust_dask import CMBC

    with pytest.raises(ValueError, match="every feature is constant"):
        CMBC(2, scheduler="sync").fit(np.zeros((50, 5)))


def test_a_csv_with_a_huge_field_is_a_clear_error(tmp_path, capsys):
    """(issue 27) a 20 MB cell ended in ``_csv.Error: field larger than field limit``."""
    from infoclust_dask.cli import main

    (tmp_path / "h.csv").write_text("a,b\n1," + "9" * 200_000 + "\n2,3\n")
    assert main(["ingest", str(tmp_path / "h.csv"), str(tmp_path / "h.zarr")]) == 2
    err = capsys.readouterr().err
    assert "field larger than field limit" in err and "line 2" in err and "Traceback" not in err


def test_a_prior_not_summing_to_one_and_a_continuous_y_are_refused():
    """(issue 27) SMIC rescaled any class_prior silently; DC took 600
    distinct continuous floats as 600 classes."""
    from infoclust_dask import SMIC, DiscriminativeClustering

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2))
    with pytest.raises(ValueError, match="class_prior must sum to 1"):
        SMIC(2, t=5, class_prior=[0.8, 0.8], scheduler="sync").fit(X[:100])
    with pytest.raises(ValueError, match="600 distinct non-integer numbers"):
        DiscriminativeClustering(2, sigma=1.0, scheduler="sync").fit(X, rng.normal(size=600))
    DiscriminativeClustering(2, sigma=1.0, max_iter=2, scheduler="sync").fit(X, np.repeat([1.0, 2.0], 300))


def test_an_empty_stale_lock_does_not_block_the_next_write(tmp_path):
    """(issue 27) ENOSPC while writing the PID left an empty lock, and every
    later write failed with "Another process (PID ?) is writing"."""
    import os
    import time

    from infoclust_dask.io.store import StoreError

    path = tmp_path / "s.zarr"
    lock = tmp_path / ".s.zarr.lock-"
    lock.write_text("")
    with pytest.raises(StoreError, match=r"PID \?"):  # a fresh empty lock: maybe a writer starting up
        write_dataset(path, np.ones((4, 2)))
    old = time.time() - 3600
    os.utime(lock, (old, old))
    assert write_dataset(path, np.ones((4, 2))) == path and not lock.exists()


def test_the_lock_names_its_writer_from_the_instant_it_exists(tmp_path, monkeypatch):
    """(issue 65's CI) a writer SIGKILLed between creating the lock and
    writing its PID into it left an empty lock, and the next append within
    60 s was refused ("Another process (PID ?)"): the lock now appears by a
    hard link of a file that already holds the PID."""
    from infoclust_dask.storage import atomic

    seen = []
    real_link = os.link

    def link(src, dst):
        real_link(src, dst)
        seen.append(Path(dst).read_text())

    monkeypatch.setattr(atomic.os, "link", link)
    write_dataset(tmp_path / "s.zarr", np.ones((4, 2)))
    assert seen == [str(os.getpid())]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr"]  # no lock, no staged PID file left


def test_a_writer_killed_before_its_lock_existed_leaves_nothing_in_the_way(tmp_path):
    """The staged PID file of a writer killed before the link is removed by
    the next writer, which takes the lock."""
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    staged = tmp_path / f".s.zarr.lock-{dead.pid}-0123abcd"
    staged.write_text(str(dead.pid))
    assert write_dataset(tmp_path / "s.zarr", np.ones((4, 2))) == tmp_path / "s.zarr"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr"]


def test_without_hard_links_the_lock_is_created_exclusively(tmp_path, monkeypatch):
    """A file system without hard links (EPERM): the lock is created with
    O_EXCL and the PID written after; a second writer is still refused."""
    import errno

    from infoclust_dask.storage import atomic
    from infoclust_dask.storage.atomic import StoreError, WriteLock

    def link(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(atomic.os, "link", link)
    with WriteLock(tmp_path / "s.zarr"):
        assert (tmp_path / ".s.zarr.lock-").read_text() == str(os.getpid())
        with pytest.raises(StoreError, match=rf"PID {os.getpid()}\) is writing"):
            WriteLock(tmp_path / "s.zarr").__enter__()
    assert list(tmp_path.iterdir()) == []


def test_cmbc_predict_refuses_non_binary_rows():
    from infoclust_dask import CMBC

    Y = np.random.default_rng(0).integers(0, 2, size=(60, 4))
    m = CMBC(2, random_state=0, scheduler="sync").fit(Y)
    assert m.predict(Y).shape == (60,)
    with pytest.raises(ValueError, match=r"binary \(0/1\) as at fit; found values \[2"):
        m.predict(Y * 2)


@pytest.mark.parametrize("name, value, message", [
    ("class_names", 7, "expected a list of class names, found int"),
    ("feature_std", "abc", "expected a list of 3 numbers, found str"),
    ("feature_mean", [0.0, 1.0], "it has 2 values for 3 features"),
    ("feature_std", [1.0, -1.0, 1.0], "a standard deviation is negative"),
    ("n_folds", "ten", "expected an integer >= 2"),
    ("label_columns", ["nosuch"], "expected names of the store's label variables"),
])
def test_damaged_attributes_are_named_on_open(tmp_path, name, value, message):
    import json

    from infoclust_dask import open_dataset, write_dataset
    from infoclust_dask.io.store import StoreError

    store = write_dataset(tmp_path / "a.zarr", np.arange(30.0).reshape(10, 3), label=np.arange(10) % 2,
                          class_names=["a", "b"], attrs={"feature_mean": [0.0] * 3, "feature_std": [1.0] * 3})
    meta = json.loads((store / "zarr.json").read_text())
    meta["attributes"][name] = value
    (store / "zarr.json").write_text(json.dumps(meta))
    with pytest.raises(StoreError, match=f"damaged attribute '{name}': {message}"):
        open_dataset(store)


def _edited(model_file, change):
    path = model_file[0]
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("change, message", [
    (lambda d: d["fitted"]["cluster_centers_"]["__ndarray__"][0].__setitem__(0, 1e300),
     r"cluster_centers_ holds 1e\+300: values of that size overflow squared distances"),
    (lambda d: d["fitted"]["cluster_centers_"].update(dtype="int8"),
     r"fitted.cluster_centers_: its values are not int8 values .* would truncate or wrap them"),
    (lambda d: d["fitted"].update(inertia_=float("nan")), r"inertia_ is nan, not a finite number"),
    (lambda d: d["params"].update(variables=["../../etc/passwd"]), r"variables"),
    (lambda d: d["params"].update(sample_dim="a/b"), r"sample_dim"),
])
def test_model_values_are_checked_on_load(model_file, change, message):
    """Each bad value is one line naming it (issue 38: a centre of 1e300,
    centres' dtype edited to int8, inertia_ NaN, a variable name that is a
    path were accepted)."""
    path = _edited(model_file, change)
    with pytest.raises(ValueError, match=message):
        load_model(path)


def test_integer_centres_that_int8_holds_exactly_are_still_refused_as_not_float(model_file):
    def to_int8(d):
        c = d["fitted"]["cluster_centers_"]
        c["__ndarray__"] = [[int(v) % 100 for v in row] for row in c["__ndarray__"]]
        c["dtype"] = "int8"

    path = _edited(model_file, to_int8)
    with pytest.raises(ValueError, match="cluster_centers_ has dtype int8; the format stores it as float64"):
        load_model(path)


def test_unfitted_models_are_not_saved_and_every_value_has_its_declared_type(tmp_path):
    """save_model of an unfitted estimator wrote ``"fitted": {}``, which
    loading then called damaged; a centre written as the string "5" was
    accepted; a ragged centres row gave numpy's "inhomogeneous shape"
    (issue 53). Each is now one line naming the fix or the edit."""
    import json as _json

    from sklearn.exceptions import NotFittedError

    from infoclust_dask import KMeans
    from infoclust_dask.runs import load_model, save_model

    with pytest.raises(NotFittedError, match="not fitted.*Call fit first"):
        save_model(KMeans(2), tmp_path / "unfitted.json")
    assert not (tmp_path / "unfitted.json").exists()
    X = np.random.default_rng(0).normal(size=(40, 2))
    path = save_model(KMeans(2, random_state=0, scheduler="sync").fit(X), tmp_path / "m.json")
    doc = _json.loads(path.read_text())
    for edit, message in ((lambda c: c.__setitem__(0, ["5", c[0][1]]), "not numbers"),
                          (lambda c: c.__setitem__(0, c[0][:1]), "different lengths")):
        bad = _json.loads(_json.dumps(doc))
        edit(bad["fitted"]["cluster_centers_"]["__ndarray__"])
        (tmp_path / "bad.json").write_text(_json.dumps(bad))
        with pytest.raises(ValueError, match=message):
            load_model(tmp_path / "bad.json")
