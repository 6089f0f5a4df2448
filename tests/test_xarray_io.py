"""xarray in and out: the sample dim is found by name (or by sample_dim=),
never guessed; outputs are DataArrays over the caller's sample coordinate;
numpy in -> numpy out, dask in -> dask out; a Dataset is stacked from
variables=[...] and a label argument may name one of its variables. Each
result is compared with the same estimator on the plain numpy array."""

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from sklearn.base import clone

from infoclust_dask import (
    CMBC,
    SMIC,
    AssociativeClustering,
    DiscriminativeClustering,
    KMeans,
    SoftKMeans,
)
from infoclust_dask.cluster import IsotropicGaussianMixture

RNG = np.random.default_rng(0)
N = 300
LAB = RNG.integers(0, 3, N)
X = RNG.normal(size=(N, 4)) + 4.0 * LAB[:, None] * np.array([1, 0, 1, 0])
TIME = pd.date_range("2020-01-01", periods=N, freq="h")


def _band_time(data=X):
    """The 'wrong' layout of the issue: features first, samples along time."""
    return xr.DataArray(data.T, dims=("band", "time"), coords={"time": TIME, "band": ["b1", "b2", "b3", "b4"]})


def test_named_dims_without_sample_dim_are_an_error_that_lists_them():
    with pytest.raises(ValueError, match=r"dims \('band', 'time'\).*sample_dim="):
        KMeans(3, n_init=1, random_state=0).fit(_band_time())
    with pytest.raises(ValueError, match=r"sample_dim='space' is not a dim of X; its dims are \('band', 'time'\)"):
        KMeans(3, sample_dim="space").fit(_band_time())
    with pytest.raises(ValueError, match="sample_dim"):
        KMeans(3, sample_dim=3).fit(X)


def test_sample_dim_in_any_position_and_outputs_indexed_by_time():
    ref = KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(X)
    km = KMeans(3, n_init=1, random_state=0, scheduler="sync", sample_dim="time").fit(_band_time())
    np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-12)
    assert isinstance(km.labels_, xr.DataArray) and km.labels_.dims == ("time",)
    assert (km.labels_.time.values == TIME.values).all()
    np.testing.assert_array_equal(km.labels_.values, ref.labels_)
    assert list(km.feature_names_in_) == ["b1", "b2", "b3", "b4"]
    with pytest.raises(ValueError, match=r"feature names of X \(\['b4', 'b3', 'b2', 'b1'\]\) differ"):
        km.predict(_band_time()[::-1])
    p = km.predict(_band_time()[:, :50])
    assert p.dims == ("time",) and (p.time.values == TIME[:50].values).all()
    np.testing.assert_array_equal(p.values, ref.predict(X[:50]))
    t = km.transform(_band_time())
    assert t.dims == ("time", "cluster")
    np.testing.assert_allclose(t.values, ref.transform(X), rtol=1e-12)
    # survives clone (a constructor parameter) and numpy stays numpy
    c = clone(km).fit(X)
    assert c.sample_dim == "time" and isinstance(c.labels_, np.ndarray)


def test_sample_named_and_unnamed_dims_follow_the_store_and_numpy_rules():
    ref = KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(X)
    a = xr.DataArray(X.T, dims=("feature", "sample"))
    np.testing.assert_allclose(KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(a).cluster_centers_,
                               ref.cluster_centers_, atol=1e-12)
    b = xr.DataArray(X)  # dim_0, dim_1: rows are samples
    lab = KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(b).labels_
    assert lab.dims == ("dim_0",)
    np.testing.assert_array_equal(lab.values, ref.labels_)


def test_dask_backed_xarray_gives_dask_backed_outputs():
    lazy = _band_time(X).chunk({"time": 100})
    km = KMeans(3, n_init=1, random_state=0, sample_dim="time", scheduler="sync").fit(lazy)
    assert isinstance(km.labels_.data, da.Array)
    p = km.predict(lazy)
    assert isinstance(p.data, da.Array) and p.dims == ("time",)
    ref = KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(X)
    np.testing.assert_array_equal(p.values, ref.predict(X))
    # dask in, dask out without xarray
    assert isinstance(km.predict(da.from_array(X, chunks=100)), da.Array)


def test_soft_kmeans_probabilities_and_mixture_over_time():
    s = SoftKMeans(3, random_state=0, scheduler="sync", sample_dim="time").fit(_band_time())
    ref = SoftKMeans(3, random_state=0, scheduler="sync").fit(X)
    pp = s.predict_proba(_band_time())
    assert pp.dims == ("time", "cluster")
    np.testing.assert_allclose(pp.values, ref.predict_proba(X), rtol=1e-10, atol=1e-12)
    g = IsotropicGaussianMixture(3, random_state=0, scheduler="sync", sample_dim="time")
    lab = g.fit_predict(_band_time())
    assert lab.dims == ("time",)
    np.testing.assert_array_equal(lab.values, IsotropicGaussianMixture(3, random_state=0, scheduler="sync")
                                  .fit_predict(X))


def _dataset():
    return xr.Dataset(
        {"red": ("time", X[:, 0]), "nir": ("time", X[:, 1]), "bands": (("time", "b"), X[:, 2:]),
         "species": ("time", LAB), "other": ("site", np.arange(5))},
        coords={"time": TIME})


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_dataset_with_variables_and_a_named_label_variable():
    ds = _dataset()
    dc_ref = DiscriminativeClustering(3, sigma=1.0, max_iter=10, random_state=0, scheduler="sync").fit(X, LAB)
    dc = DiscriminativeClustering(3, sigma=1.0, max_iter=10, random_state=0, scheduler="sync",
                                  variables=["red", "nir", "bands"], sample_dim="time").fit(ds, "species")
    np.testing.assert_allclose(dc.cluster_centers_, dc_ref.cluster_centers_, rtol=0, atol=1e-10)
    assert list(dc.feature_names_in_) == ["red", "nir", "bands[0]", "bands[1]"]
    assert dc.predict(ds).dims == ("time",)
    with pytest.raises(ValueError, match=r"Dataset with data variables .*variables=\[\.\.\.\]"):
        KMeans(3).fit(ds)
    with pytest.raises(KeyError, match=r"\['blue'\] not in the Dataset"):
        KMeans(3, variables=["red", "blue"], sample_dim="time").fit(ds)
    with pytest.raises(ValueError, match="'other' has dims \\('site',\\), without the sample dim 'time'"):
        KMeans(3, variables=["red", "other"], sample_dim="time").fit(ds)


def test_two_views_and_binary_and_graph_methods_take_xarray():
    Y = X[:, :2] + RNG.normal(scale=0.1, size=(N, 2))
    ac_ref = AssociativeClustering((2, 2), random_state=0, max_iter=5, scheduler="sync").fit(X, Y)
    xa = xr.DataArray(X, dims=("time", "f"), coords={"time": TIME})
    ya = xr.DataArray(Y.T, dims=("g", "time"), coords={"time": TIME})
    ac = AssociativeClustering((2, 2), random_state=0, max_iter=5, scheduler="sync", sample_dim="time").fit(xa, ya)
    np.testing.assert_allclose(ac.cluster_centers_x_, ac_ref.cluster_centers_x_, atol=1e-10)
    assert ac.predict_x(xa).dims == ("time",)
    B = (X > 1).astype(np.uint8)
    cm = CMBC(2, random_state=0, scheduler="sync", sample_dim="time")
    lab = cm.fit_predict(xr.DataArray(B, dims=("time", "term"), coords={"time": TIME}),
                         known=xr.DataArray(LAB, dims="time"))
    np.testing.assert_array_equal(lab.values, CMBC(2, random_state=0, scheduler="sync")
                                  .fit_predict(B, known=LAB))
    sm = SMIC(3, t=5, random_state=0, scheduler="sync", sample_dim="time")
    got = sm.fit(_band_time()).labels_
    assert got.dims == ("time",)
    np.testing.assert_array_equal(got.values, SMIC(3, t=5, random_state=0, scheduler="sync").fit(X).labels_)
    new = sm.predict(_band_time()[:, :20])
    assert new.dims == ("time",) and (new.time.values == TIME[:20].values).all()


def test_labels_pair_with_x_by_coordinate_not_by_position():
    """(issue 27) a ``y`` whose sample coordinate is a permutation of X's was
    paired by position (DC's table [[300, 300], [0, 0]]); now it is reordered
    by coordinate, and a ``y`` over other samples is refused."""
    import xarray as xr

    from infoclust_dask import DiscriminativeClustering

    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(-4, 1, size=(300, 2)), rng.normal(4, 1, size=(300, 2))])
    c = np.repeat([0, 1], 300)
    X = xr.DataArray(x, dims=("sample", "feature"), coords={"sample": np.arange(600)})
    perm = rng.permutation(600)
    y = xr.DataArray(c[perm], dims=("sample",), coords={"sample": perm})
    dc = DiscriminativeClustering(2, sigma=1.0, random_state=0, scheduler="sync").fit(X, y)
    table = np.sort(dc.contingency_, axis=0)
    np.testing.assert_array_equal(table, [[0, 0], [300, 300]])  # each cluster holds one class
    other = xr.DataArray(c, dims=("sample",), coords={"sample": np.arange(600) + 1000})
    with pytest.raises(ValueError, match="different 'sample' coordinates"):
        DiscriminativeClustering(2, sigma=1.0, scheduler="sync").fit(X, other)


def test_a_3d_dataarray_with_unnamed_dims_is_refused_like_numpy_and_flattened_when_named():
    import xarray as xr

    from infoclust_dask import KMeans

    cube = xr.DataArray(np.random.default_rng(0).normal(size=(40, 3, 2)))
    with pytest.raises(ValueError, match=r"3-D DataArray with unnamed dims .* \(sample_dim='dim_0'\)"):
        KMeans(2, scheduler="sync").fit(cube)
    with pytest.raises(ValueError, match="Found array with dim 3"):
        KMeans(2, scheduler="sync").fit(cube.values)  # the numpy rule it follows
    m = KMeans(2, random_state=0, scheduler="sync", sample_dim="dim_0").fit(cube)
    ref = KMeans(2, random_state=0, scheduler="sync").fit(cube.values.reshape(40, 6))
    np.testing.assert_allclose(m.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-12)
