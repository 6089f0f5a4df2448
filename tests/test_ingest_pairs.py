"""`infoclust ingest X DEST --y Y`: the paired store `fit ac` reads, made
from the command line; checked against the arrays it came from and against
the library's fit on those arrays."""

import json

import numpy as np
import pytest

from infoclust_dask import AssociativeClustering, open_dataset
from infoclust_dask.cli import main
from infoclust_dask.datasets import make_paired_dependency


@pytest.fixture
def views(tmp_path):
    X, Y, *_ = make_paired_dependency(1500, random_state=0)
    np.save(tmp_path / "x.npy", X)
    np.savetxt(tmp_path / "y.csv", Y, delimiter=",")  # another format for the second view
    return X, Y


def test_paired_store_from_the_cli_holds_both_views(tmp_path, views, capsys):
    X, Y = views
    dest = tmp_path / "p.zarr"
    assert main(["ingest", str(tmp_path / "x.npy"), str(dest), "--y", str(tmp_path / "y.csv"), "--standardize"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows"] == 1500 and report["x_features"] == X.shape[1] and report["y_features"] == Y.shape[1]
    ds = open_dataset(dest)
    z = lambda a: (a - a.mean(0)) / a.std(0)  # noqa: E731 - the reference standardization
    np.testing.assert_allclose(ds["x"].values, z(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ds["y"].values, z(Y), rtol=1e-12, atol=1e-12)
    assert ds.attrs["provenance"]["standardized"] is True
    # fit ac on the store = the library on the same standardized arrays
    assert main(["fit", "ac", str(dest), "-k", "3", "--sigma", "0.5", "--seed", "0", "--scheduler", "sync", "-q",
                 "--storage", str(tmp_path / "st")]) == 0
    summary = json.loads(capsys.readouterr().out)
    ref = AssociativeClustering((3, 3), sigma=(0.5, 0.5), random_state=0, scheduler="sync").fit(z(X), z(Y))
    assert summary["contingency"] == ref.contingency_.tolist()


@pytest.mark.parametrize("extra, match", [
    (["--pca", "2"], "does not take --pca"),
    (["--folds", "3"], "does not take --folds"),
])
def test_paired_store_refusals(tmp_path, views, capsys, extra, match):
    dest = tmp_path / "p.zarr"
    assert main(["ingest", str(tmp_path / "x.npy"), str(dest), "--y", str(tmp_path / "y.csv"), *extra]) == 2
    assert match in capsys.readouterr().err and not dest.exists()


def test_views_that_do_not_pair_are_refused(tmp_path, views, capsys):
    X, Y = views
    np.save(tmp_path / "short.npy", Y[:10])
    bad = Y.copy()
    bad[7, 1] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    for src, match in (("short.npy", "has 1500 rows but y"), ("nan.npy", "NaN/inf value(s), first at row 7, column 1")):
        assert main(["ingest", str(tmp_path / "x.npy"), str(tmp_path / "p.zarr"), "--y", str(tmp_path / src)]) == 2
        assert match in capsys.readouterr().err and not (tmp_path / "p.zarr").exists()
