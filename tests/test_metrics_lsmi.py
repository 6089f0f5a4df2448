"""LSMI (Sugiyama et al. §2.4) against references written from the formulas:
the all-class least-squares solution of Suzuki et al. (one theta over every
basis, Kronecker delta on the labels) with LSMI (14) summed over all pairs,
and the hold-out error CV_m by explicit loops; chunked passes vs numpy."""

import dask.array as da
import numpy as np
import pytest

from infoclust_dask import metrics
from infoclust_dask.datasets import make_smic_toy
from infoclust_dask.kernels.smic import LSMI_TINY, gaussian_basis, lsmi_stats
from infoclust_dask.kernels.stats import hashed_fold_ids
from infoclust_dask.objectives.lsmi import DELTAS, WIDTHS, cv_table


def gauss(A, B, width):
    d2 = ((A[:, None, :] - B[None]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * width**2))


def all_class_fit(X, y, centers, center_labels, width, delta):
    """theta of Suzuki et al.'s LSMI with psi_l(x, y) = L(x, c_l) [y == y_l]:
    H = 1/n^2 sum_{i,j} psi(x_i, y_j) psi(x_i, y_j)^T, h = 1/n sum_i psi(x_i, y_i)."""
    n = len(y)
    L = gauss(X, centers, width)
    H = np.zeros((len(centers), len(centers)))
    for j in range(n):
        psi = L * (center_labels == y[j])[None, :]
        H += psi.T @ psi
    H /= n**2
    h = (L * (center_labels[None, :] == y[:, None])).sum(0) / n
    return np.linalg.solve(H + delta * np.eye(len(centers)), h)


def ratio(X, yv, theta, centers, center_labels, width):
    return gauss(X, centers, width) @ (theta * (center_labels == yv))


def lsmi_reference(X, y, theta, centers, center_labels, width):
    """(14) with the double sum over every (x_i, y_j) pair written out."""
    n = len(y)
    quad = sum((ratio(X, y[j], theta, centers, center_labels, width) ** 2).sum() for j in range(n))
    lin = sum(ratio(X[i:i + 1], y[i], theta, centers, center_labels, width)[0] for i in range(n))
    return -quad / (2 * n**2) + lin / n - 0.5


@pytest.fixture
def labelled():
    X, y = make_smic_toy("four_blobs", 60, random_state=3)
    y = y.copy()
    y[::7] = (y[::7] + 1) % 4  # not a deterministic labelling
    return X, y


@pytest.mark.parametrize("width,delta", [(0.5, 1e-3), (1.0, 0.1), (3.0, 1.0)])
def test_classwise_lsmi_equals_all_class_reference(labelled, width, delta):
    X, y = labelled
    res = metrics.lsmi(X, y, n_bases=len(y), widths=[width], deltas=[delta], standardize=False,
                       random_state=0, return_details=True)
    theta = all_class_fit(X, y, X, y, width, delta)
    ref = lsmi_reference(X, y, theta, X, y, width)
    assert res.value == pytest.approx(ref, abs=1e-10, rel=1e-10)
    assert (res.width, res.delta) == (width, delta)


def test_cv_table_matches_explicit_holdout_loops(labelled):
    X, y = labelled
    widths, deltas, M, seed = (0.7, 2.0), (1e-2, 0.5), 4, 11
    centers = X[::3]
    stats = lsmi_stats(X, y, start=0, centers=centers, widths=widths, n_classes=4, n_folds=M, seed=seed,
                       shift=np.zeros(2), scale=np.ones(2))
    table = cv_table(stats, y[::3], widths, deltas)
    folds = hashed_fold_ids(X, start=0, seed=seed, n_folds=M)
    ref = np.zeros((2, 2))
    for wi, w in enumerate(widths):
        for di, d in enumerate(deltas):
            errs = []
            for m in range(M):
                tr, te = folds != m, folds == m
                theta = all_class_fit(X[tr], y[tr], centers, y[::3], w, d)
                Z, yz = X[te], y[te]
                quad = sum((ratio(Z, yv, theta, centers, y[::3], w) ** 2).sum() for yv in yz)
                lin = sum(ratio(Z[i:i + 1], yz[i], theta, centers, y[::3], w)[0] for i in range(len(yz)))
                errs.append(quad / (2 * len(yz) ** 2) - lin / len(yz))
            ref[wi, di] = np.mean(errs)
    np.testing.assert_allclose(table, ref, rtol=1e-10, atol=1e-12)


def test_lsmi_chunked_equals_numpy(scheduler):
    X, y = make_smic_toy("circle_gaussian", 300, random_state=1)
    ref = metrics.lsmi(X, y, random_state=5, return_details=True)
    got = metrics.lsmi(da.from_array(X, chunks=(37, 2)), y, random_state=5, scheduler=scheduler,
                       return_details=True)
    assert got.value == pytest.approx(ref.value, abs=1e-10)
    np.testing.assert_allclose(got.cv, ref.cv, rtol=1e-10, atol=1e-13)
    assert ref.cv.shape == (len(WIDTHS), len(DELTAS))


def test_lsmi_estimates_smi():
    """SMI (1) of a deterministic labelling with c equiprobable classes is
    (c - 1) / 2; of labels independent of x it is 0."""
    X, y = make_smic_toy("four_blobs", 400, random_state=0)
    assert metrics.lsmi(X, y, random_state=0) == pytest.approx(1.5, abs=0.05)
    noise = np.random.default_rng(1).integers(0, 4, len(y))
    assert abs(metrics.lsmi(X, noise, random_state=0)) < 0.02


def test_tiny_widths_floor_denormals():
    X, _ = make_smic_toy("high_low", 200, random_state=0)
    phi = gaussian_basis(X, X[:50], 1e-3)
    assert not np.any((phi > 0) & (phi < LSMI_TINY))
    assert np.all(np.isfinite(phi))
    y = (np.arange(200) % 2).astype(int)
    assert np.isfinite(metrics.lsmi(X, y, widths=[1e-3, 1e-2], random_state=0))


def test_lsmi_errors():
    X = np.zeros((10, 2))
    with pytest.raises(ValueError, match="one entry per row of X"):
        metrics.lsmi(X, np.zeros(9, dtype=int))
    with pytest.raises(ValueError, match="labels must lie in 0 .. 1"):
        metrics.lsmi(X, np.arange(10) % 3, n_classes=2)
    with pytest.raises(ValueError, match="n_folds must be between 2"):
        metrics.lsmi(X, np.zeros(10, dtype=int), n_folds=11)
    with pytest.raises(ValueError, match="non-integer"):
        metrics.lsmi(X, np.full(10, 0.5))


def test_sub_blocks_give_the_same_sums(monkeypatch):
    """Large store chunks are processed in sub-blocks (bounded worker memory):
    the sums equal those of one block."""
    import infoclust_dask.kernels._common as common
    import infoclust_dask.kernels.smic as k

    X, y = make_smic_toy("four_blobs", 300, random_state=2)
    kw = {"centers": X[:40], "widths": (0.5, 2.0), "n_classes": 4, "n_folds": 3, "seed": 7,
          "shift": np.zeros(2), "scale": np.ones(2)}
    whole = k.lsmi_stats(X, y, start=11, **kw)
    phi = np.random.default_rng(0).normal(size=(300, 4))
    sig = np.full(300, 0.3)
    oos_kw = {"xq": X[:25] + 0.01, "sigma_q": np.full(25, 0.2), "nbr": np.tile(np.arange(5), (25, 1))}
    oos = k.smic_oos_stats(X, phi, sig, start=0, **oos_kw)
    monkeypatch.setattr(common, "SUB_ROWS", 64)
    split = k.lsmi_stats(X, y, start=11, **kw)
    for key in whole:
        np.testing.assert_allclose(split[key], whole[key], rtol=1e-10, atol=1e-14)
    split_oos = k.smic_oos_stats(X, phi, sig, start=0, **oos_kw)
    for key in oos:
        np.testing.assert_allclose(split_oos[key], oos[key], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("sparse_max", [-1.0, None, 1.0])
def test_lsmi_stats_equal_explicit_sums_when_small_widths_skip_rows(sparse_max, monkeypatch):
    """The pass skips rows whose every basis value is below LSMI_TINY (small
    widths touch only rows near a centre) and clamps exp's argument: the sums
    equal the per-fold sums written out, for two labelings at once, at widths
    where every row, some rows and no row is skipped; on both paths (every
    width by the dense product: ``sparse_max`` -1; every width by the sums
    of nonzero values: 1; the default: the small widths sparse, the others
    dense)."""
    from infoclust_dask.kernels import _exp
    from infoclust_dask.kernels import smic as kernel_module

    if sparse_max is not None:
        monkeypatch.setattr(kernel_module, "LSMI_SPARSE_MAX", sparse_max)
    calls = []
    sparse = _exp._gaussian_sparse_sums
    monkeypatch.setattr(_exp, "_gaussian_sparse_sums", lambda *a: calls.append(a[2]) or sparse(*a))
    rng = np.random.default_rng(4)
    X = np.concatenate([rng.normal(size=(150, 3)), rng.normal(size=(150, 3)) + 6.0])
    labs = np.stack([(X[:, 0] > 0).astype(int) + 2 * (X[:, 2] > 3), rng.integers(0, 4, 300)], axis=1)
    centers = np.concatenate([X[:7] + 0.05, X[200:205]])
    widths = (1e-4, 0.02, 0.4, 3.0, 100.0)  # centre rows only, rows near a centre, every row
    seed, M = 5, 3
    d2 = ((X[:, None, :] - centers[None]) ** 2).sum(-1)
    stats = lsmi_stats(X, labs, start=0, centers=centers, widths=widths, n_classes=4, n_folds=M, seed=seed,
                       shift=np.zeros(3), scale=np.ones(3))
    folds = hashed_fold_ids(X, start=0, seed=seed, n_folds=M)
    for w, width in enumerate(widths):
        phi = np.exp(-d2 / (2 * width**2))
        phi[phi < LSMI_TINY] = 0.0
        for m in range(M):
            p = phi[folds == m]
            np.testing.assert_allclose(stats["G"][m, w], p.T @ p, rtol=1e-10, atol=1e-14)
            for k in range(2):
                onehot = np.eye(4)[labs[folds == m, k]]
                np.testing.assert_allclose(stats["S"][k, m, w], onehot.T @ p, rtol=1e-10, atol=1e-14)
                np.testing.assert_array_equal(stats["count"][k, m], onehot.sum(0))
    # the widths each path took (calls: one per fold, with a = 1 / (2 width^2))
    sparse_widths = sorted({float(np.sqrt(0.5 / a)) for a in calls})
    expected = {-1.0: [], 1.0: list(widths), None: [1e-4, 0.02]}[sparse_max]
    np.testing.assert_allclose(sparse_widths, expected, rtol=1e-12)
    # smallest width: only the rows that are centres (X[200:205]) count, once
    np.testing.assert_array_equal(stats["G"][:, 0].sum(0), np.diag([0.0] * 7 + [1.0] * 5))
    assert np.all(np.diagonal(stats["G"][:, 1], axis1=1, axis2=2).sum(0)[:7] > 0)


@pytest.mark.parametrize("chunks", [37, (100, 50, 150)])
def test_labels_reach_a_cluster_as_blocks_not_in_the_graph(chunks, local_cluster_client, monkeypatch):
    """On a cluster, dask rows' labels go to the workers as row blocks (not
    embedded in the pass's graph, where a 1e7-row fit's 19 MiB made
    distributed warn): the pass receives them lazy, and the value equals
    the in-memory one, for regular and irregular row blocks."""
    from infoclust_dask import engine

    X, y = make_smic_toy("circle_gaussian", 300, random_state=1)
    ref = metrics.lsmi(X, y, random_state=5, return_details=True)
    seen = []
    real = engine.map_reduce

    def spy(bp, *arrays, **kw):
        seen.append([engine.is_lazy(a) for a in arrays])
        return real(bp, *arrays, **kw)

    monkeypatch.setattr(engine, "map_reduce", spy)
    got = metrics.lsmi(da.from_array(X, chunks=(chunks, 2)), y, random_state=5, scheduler=local_cluster_client,
                       return_details=True)
    assert seen[-1] == [True, True]
    assert got.value == pytest.approx(ref.value, abs=1e-10)
    np.testing.assert_allclose(got.cv, ref.cv, rtol=1e-10, atol=1e-13)
