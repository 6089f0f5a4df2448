"""The blobs generator does not depend on chunking; bundled loaders work offline."""

import dask.array as da
import numpy as np
import pytest

from infoclust_dask import datasets


def test_blobs_independent_of_chunking():
    n = datasets.GEN_BLOCK + 5000  # spans two generation blocks
    X1, l1, c1 = datasets.make_blobs(n, 3, centers=4, random_state=7, chunks=9999)
    X2, l2, c2 = datasets.make_blobs(n, 3, centers=4, random_state=7, chunks=n)
    X3, l3, c3 = datasets.make_blobs(n, 3, centers=4, random_state=7, lazy=False)
    assert isinstance(X1, da.Array) and X1.chunks[0][0] == 9999
    a, b = X1.compute(scheduler="threads"), X2.compute(scheduler="sync")
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, X3)
    np.testing.assert_array_equal(l1.compute(), l3)
    np.testing.assert_array_equal(c1, c3)
    other = datasets.make_blobs(n, 3, centers=4, random_state=8, lazy=False)[0]
    assert not np.allclose(other, X3)


def test_blobs_statistics():
    X, lab, c = datasets.make_blobs(40_000, 2, centers=np.array([[0.0, 0.0], [10.0, 0.0]]), cluster_std=2.0,
                                    random_state=1, lazy=False)
    for j in range(2):
        np.testing.assert_allclose(X[lab == j].mean(axis=0), c[j], atol=0.06)
        np.testing.assert_allclose(X[lab == j].std(axis=0), 2.0, rtol=0.03)


def test_blobs_bad_arguments():
    with pytest.raises(ValueError, match="centers must have shape"):
        datasets.make_blobs(10, 3, centers=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="n_samples and n_features must be >= 1"):
        datasets.make_blobs(0, 3)


def test_load_letter():
    X, c, names = datasets.load_letter(return_class_names=True)
    assert X.shape == (20000, 16) and c.shape == (20000,)
    assert names == [chr(ord("A") + i) for i in range(26)]
    assert X.min() == 0 and X.max() == 15  # the UCI integer features
    assert np.bincount(c).min() > 700


def test_load_satimage():
    X, c, names = datasets.load_satimage(return_class_names=True)
    assert X.shape == (6435, 36) and len(names) == 6
    assert sorted(np.unique(c).tolist()) == list(range(6))


def test_unknown_bundled_name():
    with pytest.raises(ValueError, match=r"Unknown bundled dataset 'lettre'; choose one of"):
        datasets.load_bundled("lettre")
