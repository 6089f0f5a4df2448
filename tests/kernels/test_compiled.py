"""The compiled block kernels (numba), the package's only form of each hot
formula, against the plain numpy formulas of ``tests/reference_kernels.py``
(written independently of the package): every pass's partial results
agree to 1e-10 for float64 rows and for float32 rows
(whose distances are computed in float32: to float32's rounding), weights,
label dtypes and non-contiguous blocks; BLAS and OpenMP use one thread while
dask's threads run kernels; nothing imports scikit-learn's private modules."""

import ast
from pathlib import Path

import numpy as np
import pytest
import reference_kernels as ref_kernels

from infoclust_dask.kernels import _compiled, _exp, _lloyd_loops, _loops, ac, cmbc, dc, kmeans, mixture, stats

#: package kernels whose reference has another name
_REF_NAMES = {cmbc.estep_stats: "cmbc_estep_stats"}


def _both(fn, *args, **kw):
    """(package result, numpy reference result) of one kernel call."""
    ref = getattr(ref_kernels, _REF_NAMES.get(fn, fn.__name__))
    return fn(*args, **kw), ref(*args, **kw)


def _close(got, ref, rtol=1e-10, atol=1e-12):
    if isinstance(ref, dict):
        assert set(got) == set(ref)
        for k in ref:
            _close(got[k], ref[k], rtol, atol)
        return
    if isinstance(ref, tuple):
        for g, r in zip(got, ref, strict=True):
            _close(g, r, rtol, atol)
        return
    ref = np.asarray(ref)
    got = np.asarray(got)
    assert got.shape == ref.shape
    if ref.dtype.kind in "iu":
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol * max(1.0, np.abs(ref).max(initial=0)))


def _tol(dtype):
    """(rtol, atol) of kernels whose float32 distances feed exponentials."""
    return (1e-10, 1e-12) if dtype == np.float64 else (3e-5, 1e-6)


def _data(n=3000, d=7, k=5, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(k, d)) * 3
    x = (centers[rng.integers(k, size=n)] + rng.normal(size=(n, d))).astype(dtype)
    return x, centers + rng.normal(scale=0.3, size=centers.shape)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("weighted", [False, True])
def test_kmeans_kernels(dtype, weighted):
    x, c = _data(dtype=dtype)
    w = np.random.default_rng(1).uniform(0, 2, size=x.shape[0]) if weighted else None
    # Lloyd's assignment compares float32 rows with the centres in float32 (as scikit-learn does): the labels,
    # counts and sums are the float64 reference's, the distances and the inertia carry float32's rounding
    dist_rtol = 1e-10 if dtype == np.float64 else 1e-6

    def close_lloyd(got, ref):
        for key in ref:
            _close(got[key], ref[key], dist_rtol if key in ("inertia", "far_d") else 1e-10)

    close_lloyd(*_both(kmeans.lloyd_step_stats, x, w, centers=c))
    close_lloyd(*_both(kmeans.inertia_stats, x, w, centers=c))
    got, ref = _both(kmeans.lloyd_stats, x, w, centers=c, n_far=4)
    for out in (got, ref):  # the farthest rows as a set: the kernel's order is its own
        order = np.argsort(-out["far_d"], kind="stable")
        out["far_d"], out["far_x"] = out["far_d"][order], out["far_x"][order]
    close_lloyd(got, ref)
    _close(*_both(kmeans.assign_labels, x, centers=c))
    lab, d2 = _both(kmeans.nearest, x, c)
    _close(lab[0], d2[0])
    _close(lab[1], d2[1], dist_rtol)
    # memberships of float32 rows come from float32 distances: float32's rounding, scaled by beta
    _close(*_both(kmeans.soft_kmeans_stats, x, w, centers=c, beta=0.7), *_tol(dtype))
    _close(*_both(kmeans.soft_scatter_stats, x, w, centers=c, beta=0.7), *_tol(dtype))
    got, ref = _both(kmeans.closest_count_stats, x, w, centers=c)
    _close(got["counts"], ref["counts"])
    _close(got["phi"], ref["phi"], dist_rtol)


def test_lloyd_kernel_against_brute_force():
    """An independent reference: explicit loops in Python over 200 rows."""
    x, c = _data(200, 4, 3, seed=5)
    w = np.linspace(0.5, 1.5, 200)
    lab, dmin, counts, sums = _compiled.lloyd(x, w, centers=c)
    for i in range(200):
        d = [sum((x[i, f] - c[j, f]) ** 2 for f in range(4)) for j in range(3)]
        assert lab[i] == int(np.argmin(d)) and abs(dmin[i] - min(d)) <= 1e-12 * max(1, min(d))
    for j in range(3):
        np.testing.assert_allclose(counts[j], w[lab == j].sum(), rtol=1e-13)
        np.testing.assert_allclose(sums[j], (w[lab == j, None] * x[lab == j]).sum(0), rtol=1e-12)


@pytest.mark.parametrize("n", [0, 1, _loops.TILE - 1, _loops.TILE, _loops.TILE + 1, 1000])
@pytest.mark.parametrize("k", [1, 2, 37])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lloyd_tiles_of_every_length(n, k, dtype):
    """Lloyd's assignment runs in transposed tiles: full, partial and empty
    tiles, one centre and more centres than SIMD lanes, against numpy's
    argmin of the explicit differences."""
    rng = np.random.default_rng(n + k)
    x = rng.normal(size=(n, 5)).astype(dtype)
    c = rng.normal(size=(k, 5))
    lab, dmin, counts, sums = _compiled.lloyd(x, centers=c)
    d = ((x[:, None, :].astype(np.float64) - c.astype(dtype).astype(np.float64)[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(lab, np.argmin(d, axis=1) if n else np.zeros(0, np.int64))
    np.testing.assert_allclose(dmin, d.min(axis=1) if n else np.zeros(0), rtol=1e-10 if dtype == np.float64 else 1e-5)
    np.testing.assert_array_equal(counts, np.bincount(lab, minlength=k))
    np.testing.assert_allclose(sums, np.stack([x[lab == j].astype(np.float64).sum(0) for j in range(k)]), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("n", [0, 1, _loops.TILE - 1, _loops.TILE, _loops.TILE + 1, 1000])
@pytest.mark.parametrize("k", [1, 2, 37])
@pytest.mark.parametrize("d", [5, 300])
def test_memberships_in_tiles_of_every_length(n, k, d):
    """Soft K-means (and its scatter), DC and the mixture run on transposed tiles too: full,
    partial and empty tiles, transposed (5 features) or not (300), against
    the softmax of the explicit differences (scipy's, an independent
    reference)."""
    from scipy.special import logsumexp, softmax

    assert 5 <= _loops.WIDE < 300
    rng = np.random.default_rng(n + 7 * k)
    x, c = rng.normal(size=(n, d)), rng.normal(size=(k, d)) * (2 / np.sqrt(d))
    cls = rng.integers(0, 3, size=n)
    dist = ((x[:, None, :] - c[None]) ** 2).sum(-1)
    g = softmax(-0.5 * 0.8 * dist, axis=1)
    got = _compiled.soft_kmeans(x, centers=c, beta=0.8)
    np.testing.assert_allclose(got["R"], g.sum(0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["S"], g.T @ x, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got["log_z"], logsumexp(-0.4 * dist, axis=1).sum(), rtol=1e-10, atol=1e-10)
    if n * k * d * d <= 5e7:  # the scatter's d^2 products (the annealing's predictions): rows wide enough to test
        got = _compiled.soft_scatter(x, centers=c, beta=0.8)
        Q = np.stack([((x - c[j]) * g[:, j:j + 1]).T @ (x - c[j]) for j in range(k)])
        np.testing.assert_allclose(got["R"], g.sum(0), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got["Q"], Q, rtol=1e-10, atol=1e-10)
    counts = _compiled.dc_counts(x, cls, centers=c, sigma=1 / np.sqrt(0.8), n_classes=3)["counts"]
    np.testing.assert_allclose(counts, np.stack([g[cls == i].sum(0) for i in range(3)], 1), rtol=1e-10, atol=1e-12)
    v = rng.uniform(0.5, 2, size=k)
    const = np.log(np.full(k, 1 / k)) - d / 2 * np.log(2 * np.pi * v)
    post = softmax(const - dist / (2 * v), axis=1)
    got = _compiled.mixture_em(x, means=c, variances=v, log_weights=np.log(np.full(k, 1 / k)))
    np.testing.assert_allclose(got["R"], post.sum(0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["Q"], post.T @ (x ** 2).sum(1), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("d", [1, 3, 4, 6, 9])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blocks_of_centres_and_features_with_every_remainder(k, d, dtype):
    """The distances and weighted sums run in blocks of two centres by four
    features, Lloyd's exact loop in blocks of four features: an odd last
    centre, features past the last four, fewer features than a block -
    against the explicit differences (scipy's softmax, numpy's argmin)."""
    from scipy.special import logsumexp, softmax

    rng = np.random.default_rng(10 * k + d)
    x = rng.normal(size=(2 * _loops.TILE + 3, d)).astype(dtype)
    c = rng.normal(size=(k, d)) * 0.7
    x64, c64 = x.astype(np.float64), c.astype(dtype).astype(np.float64)
    dist = ((x64[:, None, :] - c64[None]) ** 2).sum(-1)
    tol = 1e-10 if dtype == np.float64 else 3e-5
    g = softmax(-0.5 * 0.9 * dist, axis=1)
    got = _compiled.soft_kmeans(x, centers=c, beta=0.9)
    np.testing.assert_allclose(got["R"], g.sum(0), rtol=tol, atol=1e-9)
    np.testing.assert_allclose(got["S"], g.T @ x64, rtol=tol, atol=tol)
    np.testing.assert_allclose(got["log_z"], logsumexp(-0.45 * dist, axis=1).sum(), rtol=tol)
    lab, dmin, counts, sums = _compiled.lloyd(x, centers=c)
    np.testing.assert_array_equal(lab, np.argmin(dist, axis=1))
    np.testing.assert_allclose(dmin, dist.min(axis=1), rtol=1e-10 if dtype == np.float64 else 1e-5)
    np.testing.assert_allclose(sums, np.stack([x64[lab == j].sum(0) for j in range(k)]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", ["blobs", "offset ties", "duplicate centres", "constant column"])
def test_lloyd_by_matrix_products_gives_the_labels_of_the_exact_differences(dtype, case):
    """From LLOYD_PRODUCTS_MIN_K centres the assignment may come from BLAS products
    of the expansion |m|^2 - 2 x.m; rows whose runner-up is within its
    rounding are decided by the exact differences. Both paths on the same
    data - blobs, rows exactly on the bisector of two centres far from the
    origin (1e4), duplicated centres, a constant column - give the same
    labels (ties: the lowest index), distances and sums, bit for bit."""
    loops = _lloyd_loops
    rng = np.random.default_rng(["blobs", "offset ties", "duplicate centres", "constant column"].index(case))
    k, d = max(_compiled.LLOYD_PRODUCTS_MIN_K, 40), 6
    c = rng.normal(scale=3, size=(k, d))
    x = c[rng.integers(0, k, 5000)] + rng.normal(size=(5000, d))
    if case == "offset ties":  # integer centres and rows on the bisector of centres 0 and 1, around 1e4
        c = np.round(rng.normal(scale=3, size=(k, d))) + 1e4
        c[1] = c[0]
        c[1, 0] += 2.0
        x = np.repeat(c[:1], 5000, axis=0) + np.round(rng.normal(scale=0.3, size=(5000, d)))
        x[:, 0] = c[0, 0] + 1.0  # equidistant from centres 0 and 1 in exact arithmetic
    elif case == "duplicate centres":
        c[5:10] = c[0]
    elif case == "constant column":
        x[:, 2] = 7.0
        c[:, 2] = 7.0
    x, cx = x.astype(dtype), c.astype(dtype)
    out = {}
    for name in ("exact", "products"):
        lab, dmin = np.empty(len(x), np.int64), np.empty(len(x), dtype)
        counts, sums = np.zeros(k), np.zeros((k, d))
        if name == "exact":
            loops._lloyd_rows(x, np.empty(0), cx, counts, sums, lab, dmin, np.zeros(1), True)
        else:
            shift = cx.mean(axis=0, dtype=np.float64).astype(dtype)
            loops._lloyd_rows_gemm(x, np.empty(0), cx, shift, float(np.finfo(dtype).eps) / 2, counts, sums, lab,
                                   dmin, np.zeros(1), True)
        out[name] = lab, dmin, counts, sums
    (la, da_, ca, sa), (lb, db, cb, sb) = out["exact"], out["products"]
    np.testing.assert_array_equal(lb, la)
    np.testing.assert_array_equal(db, da_)  # issue 63: the same bits, so that a measured choice cannot change a model
    np.testing.assert_array_equal(cb, ca)
    np.testing.assert_array_equal(sb, sa)
    if case == "offset ties":
        assert np.all(np.isin(la, [0]))  # the bisector's rows go to the lower index
    if case == "duplicate centres":
        assert not np.isin(lb, np.arange(5, 10)).any()  # a duplicate never wins over centre 0
    ref = np.argmin(((x[:, None, :].astype(np.float64) - cx[None].astype(np.float64)) ** 2).sum(-1), axis=1)
    assert (lb == ref).mean() > 0.999  # float64 brute force (float32 rows' near ties may round apart)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("k", [3, 40])  # the exact loop and the products path
@pytest.mark.parametrize("weighted", [False, True])
def test_lloyd_sums_without_rows_equal_the_rows_summed(dtype, k, weighted):
    """A Lloyd step writes nothing per row (lloyd_sums): its counts, sums
    and in-loop inertia equal lloyd()'s counts, sums and its rows' distances
    summed (weighted) in numpy."""
    rng = np.random.default_rng(k)
    x = rng.normal(size=(3000, 6)).astype(dtype)
    c = rng.normal(size=(k, 6))
    w = rng.uniform(0, 2, size=3000) if weighted else None
    lab, dmin, counts, sums = _compiled.lloyd(x, w, centers=c)
    c2, s2, inertia = _compiled.lloyd_sums(x, w, centers=c)
    np.testing.assert_array_equal(c2, counts)
    np.testing.assert_array_equal(s2, sums)
    np.testing.assert_allclose(inertia, dmin.sum() if w is None else w @ dmin, rtol=1e-12)
    c3, s3, i3 = _compiled.lloyd_sums(x, w, centers=c, with_sums=False)
    assert s3.shape == (0, 0) and i3 == inertia
    np.testing.assert_array_equal(c3, counts)


def test_ties_go_to_the_lowest_index_and_a_row_on_a_centre_has_distance_zero():
    c = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 0.0]])
    x = np.array([[1.0, 0.0], [0.0, 0.0], [2.0, 0.0]])
    lab, dmin, _, _ = _compiled.lloyd(x, centers=c)
    np.testing.assert_array_equal(lab, [0, 0, 1])
    np.testing.assert_array_equal(dmin, [1.0, 0.0, 0.0])


@pytest.mark.parametrize("label_dtype", [np.int8, np.int32, np.int64, np.float64])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dc_kernels(dtype, label_dtype):
    x, m = _data(4000, 6, 4, dtype=dtype, seed=2)
    cls = np.random.default_rng(3).integers(0, 5, size=x.shape[0]).astype(label_dtype)
    L = np.log(np.random.default_rng(4).dirichlet(np.ones(5), size=4))
    _close(*_both(dc.dc_count_stats, x, cls, centers=m, sigma=1.3, n_classes=5), *_tol(dtype))
    _close(*_both(dc.dc_grad_stats, x, cls, centers=m, sigma=1.3, L=L), *_tol(dtype))
    # a narrow width: memberships near one-hot, the stable softmax must not underflow to 0/0
    _close(*_both(dc.dc_count_stats, x, cls, centers=m, sigma=0.01, n_classes=5), *_tol(dtype))
    _close(*_both(dc.dc_grad_stats, x, cls, centers=m, sigma=0.01, L=L), *_tol(dtype))


def test_dc_kernels_on_a_non_contiguous_block():
    x, m = _data(2000, 6, 4, seed=6)
    xs = np.asfortranarray(x)[::2]
    cls = np.arange(1000) % 3
    _close(*_both(dc.dc_count_stats, xs, cls, centers=m, sigma=2.0, n_classes=3))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ac_kernels(dtype):
    x, mx = _data(3000, 5, 4, dtype=dtype, seed=7)
    y, my = _data(3000, 3, 6, dtype=dtype, seed=8)
    rng = np.random.default_rng(9)
    psi = rng.normal(size=(4, 6))
    _close(*_both(ac.ac_count_stats, x, y, mx=mx, my=my, sx=1.5, sy=0.8), *_tol(dtype))
    _close(*_both(ac.ac_grad_stats, x, y, mx=mx, my=my, sx=1.5, sy=0.8, psi=psi,
                  psi_x=rng.normal(size=4), psi_y=rng.normal(size=6), lam_x=0.3, lam_y=0.7), *_tol(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("with_classes", [False, True])
def test_mixture_kernel(with_classes, dtype):
    x, means = _data(3000, 5, 4, dtype=dtype, seed=10)
    rng = np.random.default_rng(11)
    kw = {"means": means, "variances": rng.uniform(0.5, 2, size=4), "log_weights": np.log(rng.dirichlet(np.ones(4)))}
    if with_classes:
        cls = rng.integers(0, 3, size=3000)
        kw.update(log_psi=np.log(rng.dirichlet(np.ones(3), size=4)), n_classes=3)
        _close(*_both(mixture.mixture_em_stats, x, cls, **kw), *_tol(dtype))
        _close(*_both(mixture.mixture_em_stats, x, cls, **{**kw, "log_psi": None}), *_tol(dtype))
    else:
        _close(*_both(mixture.mixture_em_stats, x, **kw), *_tol(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("offset", [0.0, 1e4], ids=["centred", "far from the origin"])
def test_memberships_by_matrix_products_at_many_centres_x_features(dtype, offset):
    """Issue 55: from PRODUCTS_MIN_K centres and PRODUCTS_MIN_KD centres x
    features, DC's, AC's and the mixtures' kernels take their distances and
    sums from matrix products (float64, shifted by the centres' mean): the
    same results as the numpy reference (1e-10 in float64) with a partial
    last tile, and on rows 1e4 from the origin, where the reference runs on
    the same rows moved back to it (the expansion about the origin would
    lose 1e-8 there) and its sums are moved out again (translation: W X +=
    o W, S += o R, Q += 2 o.S + |o|^2 R); the gradients' sums of centred
    weights times rows of size 1e4 cancel, so they get 1e-12 x 1e4."""
    k, d = 40, 128
    assert k >= _loops.PRODUCTS_MIN_K and k * d >= max(_loops.PRODUCTS_MIN_KD, _loops.PRODUCTS_MIN_KD32)
    x0, m0 = _data(2 * _loops.TILE + 17, d, k, dtype=np.float64, seed=12)
    x, m = (x0 + offset).astype(dtype), m0 + offset
    x0 = x.astype(np.float64) - offset  # the same rows, at the origin (exact)
    y, my = x[:, : d // 2] * 0.5, m[:24, : d // 2] * 0.5
    y0 = y.astype(np.float64) - 0.5 * offset
    m0 = m.astype(dtype).astype(np.float64) - offset  # float32 rows meet their centres in float32
    my0 = my.astype(dtype).astype(np.float64) - 0.5 * offset
    rng = np.random.default_rng(13)
    cls = rng.integers(0, 5, size=x.shape[0])
    L = np.log(rng.dirichlet(np.ones(5), size=k))
    sigma = 0.6 * np.sqrt(d)
    psi, psi_x, psi_y = rng.normal(size=(k, 24)), rng.normal(size=k), rng.normal(size=24)
    mix = {"variances": rng.uniform(20, 40, size=k), "log_weights": np.log(rng.dirichlet(np.ones(k)))}
    strict, sums = _tol(dtype), (_tol(dtype)[0], _tol(dtype)[1] * (1 + offset))

    def check(fn, args, args0, kw, kw0, moved=lambda ref: ref, tol=strict):
        _close(fn(*args, **kw), moved(getattr(ref_kernels, _REF_NAMES.get(fn, fn.__name__))(*args0, **kw0)), *tol)

    check(dc.dc_count_stats, (x, cls), (x0, cls), {"centers": m, "sigma": sigma, "n_classes": 5},
          {"centers": m0, "sigma": sigma, "n_classes": 5})
    check(dc.dc_grad_stats, (x, cls), (x0, cls), {"centers": m, "sigma": sigma, "L": L},
          {"centers": m0, "sigma": sigma, "L": L}, lambda r: {**r, "WX": r["WX"] + offset * r["W"][:, None]}, sums)
    check(ac.ac_count_stats, (x, y), (x0, y0), {"mx": m, "my": my, "sx": sigma, "sy": sigma},
          {"mx": m0, "my": my0, "sx": sigma, "sy": sigma})
    ac_kw = {"sx": sigma, "sy": sigma, "psi": psi, "psi_x": psi_x, "psi_y": psi_y, "lam_x": 0.3, "lam_y": 0.7}
    check(ac.ac_grad_stats, (x, y), (x0, y0), {"mx": m, "my": my, **ac_kw}, {"mx": m0, "my": my0, **ac_kw},
          lambda r: {**r, "WX": r["WX"] + offset * r["Wx"][:, None], "WY": r["WY"] + 0.5 * offset * r["Wy"][:, None]},
          sums)
    check(mixture.mixture_em_stats, (x,), (x0,), {"means": m, **mix}, {"means": m0, **mix},
          lambda r: {**r, "S": r["S"] + offset * r["R"][:, None],
                     "Q": r["Q"] + 2 * offset * r["S"].sum(1) + d * offset**2 * r["R"]}, sums)


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.float64])
@pytest.mark.parametrize("temperature", [1.0, 0.3, 4.0])
def test_cmbc_estep_kernel(dtype, temperature):
    rng = np.random.default_rng(13)
    y = (rng.random((2000, 30)) < 0.3).astype(dtype)
    theta = rng.uniform(0.05, 0.95, size=(30, 3))
    kw = {"log_theta": np.log(theta), "log_1m_theta": np.log1p(-theta), "temperature": temperature}
    _close(*_both(cmbc.estep_stats, y, **kw))
    import scipy.sparse as sp

    # sparse blocks keep scipy's products; they agree with the compiled dense loop
    _close(cmbc.estep_stats(sp.csr_matrix(y.astype(np.float64)), **kw), cmbc.estep_stats(y, **kw))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shifted", [False, True])
def test_moments_kernel(dtype, weighted, shifted):
    """The moments pass (validation, mean and variance): float32 rows summed
    as they are, float64 sums; weights and a shift; 1-D input."""
    x, _ = _data(3001, 5, 2, seed=14)
    x = (x * 10).astype(dtype)
    w = np.random.default_rng(15).uniform(0, 2, size=x.shape[0]) if weighted else None
    shift = x[0].astype(np.float64) if shifted else None
    _close(*_both(stats.moments_stats, x, w, shift=shift))
    _close(*_both(stats.moments_stats, x[:, 2], w, shift=None if shift is None else shift[2:3]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_moments_kernel_leaves_out_and_counts_non_finite_entries(dtype):
    x, _ = _data(1000, 4, 2, dtype=dtype, seed=16)
    x[3, 1], x[500, 0], x[999, 3], x[7, 1] = np.nan, np.inf, -np.inf, np.nan
    for shift in (None, x[1].astype(np.float64)):
        got, ref = _both(stats.moments_stats, x, shift=shift)
        assert int(got["n_bad"]) == 4
        _close(got, ref)
    big = np.full((10, 2), 1e200)  # finite entries whose squares overflow stay in (the sums say inf)
    got = stats.moments_stats(big)
    assert int(got["n_bad"]) == 0 and np.isinf(got["s2"]).all()


def test_vectorized_exp_against_numpy():
    """The SIMD exp of the memberships: 1 ulp on [-708, 0] (numpy's exp as the
    reference), 0 below -708 and for -inf, NaN stays NaN; a tile whose rows
    are partly used leaves the rest alone."""
    rng = np.random.default_rng(0)
    v = np.concatenate([-rng.uniform(0, 708, 50_000), -rng.uniform(0, 1e-3, 1000),
                        [0.0, -0.0, -708.0, -707.9999, -708.0001, -745.2, -1e300, -np.inf, np.nan]])
    ref = np.exp(v)
    got = v.copy()
    _exp._exp_nonpos(got, got.size - 3, np.empty(got.size))  # the last three untouched
    normal = ref[:-3] > 1e-300
    assert np.max(np.abs(got[:-3][normal] - ref[:-3][normal]) / ref[:-3][normal]) < 4.5e-16
    assert np.all(got[:-3][~normal] <= 1e-300)
    np.testing.assert_array_equal(got[-3:], v[-3:])
    got = v.copy()
    _exp._exp_nonpos(got, got.size, np.empty(got.size))
    assert got[-3] == 0.0 and got[-2] == 0.0 and np.isnan(got[-1])


@pytest.mark.parametrize("rows, scratch", [(37, 200 * 4 + 7), (37, 200), (37, 16384), (0, 200)])
def test_gaussian_rows_against_numpy(rows, scratch):
    """LSMI's basis values of a subset of rows (``_gaussian_rows``) against
    numpy: ``exp(max(-a d2, lo))``, below ``tiny`` 0, within 1 ulp, in tiles
    of every length (a scratch of 4 rows and a remainder, of one row, of
    all rows); rows in any order, repeated; ``out`` rows past the subset
    untouched; a scratch smaller than a row refused."""
    rng = np.random.default_rng(1)
    d2 = np.ascontiguousarray(rng.uniform(0, 60, (50, 200)) ** 2)
    d2[3, :5] = 0.0
    take = rng.integers(0, 50, rows).astype(np.int64)
    a, lo, tiny = 0.5 / 1.7 ** 2, -231.0, 1e-100
    out = np.full((rows + 2, 200), -7.0)
    _exp._gaussian_rows(d2, take, a, lo, tiny, out, np.empty(scratch))
    ref = np.exp(np.maximum(d2[take] * -a, lo))
    ref[ref < tiny] = 0.0
    np.testing.assert_allclose(out[:rows], ref, rtol=4.5e-16, atol=0)
    assert (out[:rows][ref == 0] == 0).all() and (out[rows:] == -7.0).all()
    with pytest.raises(ValueError, match="at least one row"):
        _exp._gaussian_rows(d2, take, a, lo, tiny, out, np.empty(199))


def test_float32_exp_is_within_one_ulp():
    """Issue 55: soft K-means' products for float32 rows take a float32 exp
    (eight SIMD lanes): within one float32 ulp of exp in float64, 0 below
    -87, NaN kept, the values past ``n`` untouched; eager, FMA contraction
    only."""
    rng = np.random.default_rng(0)
    v = np.concatenate([-rng.uniform(0, 87, 50_000), -rng.uniform(0, 1e-3, 1000),
                        [0.0, -0.0, -87.0, -86.9999, -87.0001, -100.0, -np.inf, np.nan]]).astype(np.float32)
    got = v.copy()
    _exp._exp_nonpos32(got, got.size - 3, np.empty(got.size, dtype=np.float32))
    ref = np.exp(v.astype(np.float64))
    ok = v[:-3] >= -87
    assert np.max(np.abs(got[:-3][ok] - ref[:-3][ok]) / ref[:-3][ok]) < float(np.finfo(np.float32).eps)
    assert np.all(got[:-3][~ok] == 0.0)
    np.testing.assert_array_equal(got[-3:], v[-3:])
    got = v.copy()
    _exp._exp_nonpos32(got, got.size, np.empty(got.size, dtype=np.float32))
    assert got[-3] == 0.0 and got[-2] == 0.0 and np.isnan(got[-1])
    assert _exp._exp_nonpos32.signatures and set(_exp._exp_nonpos32.targetoptions.get("fastmath")) == {"contract"}


def test_exp_is_not_recompiled_with_the_callers_fastmath():
    """numba compiles a callee with its first caller's flags (numba #7168):
    the exp helper is compiled eagerly with FMA contraction only (no
    reassociation), and stays accurate (2e-14, not 1 ulp) even when compiled
    with the kernels' fastmath flags."""
    import numba

    assert _exp._exp_nonpos.signatures  # eager: compiled before any caller
    assert set(_exp._exp_nonpos.targetoptions.get("fastmath")) == {"contract"}
    fast = numba.njit(fastmath=set(_loops.FASTMATH))(_exp._exp_nonpos.py_func)
    v = -np.random.default_rng(1).uniform(0, 708, 20_000)
    got = v.copy()
    fast(got, got.size, np.empty(got.size))
    assert np.max(np.abs(got - np.exp(v)) / np.exp(v)) < 1e-13


def test_empty_block():
    x = np.zeros((0, 3))
    c = np.ones((2, 3))
    _close(*_both(kmeans.lloyd_step_stats, x, centers=c))
    _close(*_both(dc.dc_count_stats, x, np.zeros(0), centers=c, sigma=1.0, n_classes=2))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_whole_fits_against_numpy_loops_of_the_reference_formulas(dtype):
    """Estimators on top: K-means' centres after 10 Lloyd iterations from a
    fixed start, and DC's objective gradient at fixed prototypes, from the
    chunked passes (4 chunks) and from numpy loops over the reference
    formulas on the whole array."""
    import dask.array as da

    from infoclust_dask import KMeans
    from infoclust_dask.cluster import dc_objective
    from infoclust_dask.objectives import dc as dc_obj

    x, c0 = _data(5000, 4, 3, dtype=dtype, seed=12)
    km = KMeans(3, init=c0, max_iter=10, tol=0.0, scheduler="sync").fit(da.from_array(x, chunks=(1250, 4)))
    m = c0.copy()
    for _ in range(km.n_iter_):
        st = ref_kernels.lloyd_step_stats(x.astype(np.float64), centers=m.astype(dtype))
        m = st["sums"] / st["counts"][:, None]
    np.testing.assert_allclose(km.cluster_centers_, m, rtol=1e-10 if dtype == np.float64 else 1e-6)
    y = (x[:, 0] > 0).astype(int) + (x[:, 1] > 1)
    sigma = 1.3
    value, grad, counts_ours = dc_objective(da.from_array(x, chunks=(1250, 4)), da.from_array(y, chunks=1250), c0, sigma,
                               prior=1.0, n_classes=3, scheduler="sync")
    counts = ref_kernels.dc_count_stats(x, y, centers=c0, sigma=sigma, n_classes=3)["counts"]
    st = ref_kernels.dc_grad_stats(x, y, centers=c0, sigma=sigma, L=dc_obj.digamma_terms(counts, 1.0))
    rtol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(counts_ours, counts, rtol=rtol)
    np.testing.assert_allclose(value, dc_obj.log_posterior(counts, 1.0, 0.0), rtol=rtol)
    np.testing.assert_allclose(grad, dc_obj.gradient(st["WX"], st["W"], c0, sigma), rtol=rtol, atol=rtol)


def test_one_blas_thread_while_dask_threads_run_kernels():
    from threadpoolctl import threadpool_info

    from infoclust_dask import engine

    with engine.one_blas_thread():
        assert all(i["num_threads"] == 1 for i in threadpool_info())


def test_cluster_workers_use_one_blas_thread_each(local_cluster_client):
    threads = local_cluster_client.run(
        lambda: [i["num_threads"] for i in __import__("threadpoolctl").threadpool_info() if i["user_api"] == "blas"])
    assert threads and all(t == [1] * len(t) for t in threads.values())


def test_each_kernel_is_written_once_but_the_two_numpy_forms_for_tiny_data():
    """No switch between a compiled and a numpy form of a kernel in the
    package, but one: Lloyd's step and the moments have numpy forms
    (``_numpy_forms``) that only ``_compiled`` calls, inside
    ``numpy_form()`` (the numpy forms of every other formula are this
    folder's references)."""
    from infoclust_dask.kernels import _numpy_forms

    root = Path(_compiled.__file__).parents[1]
    assert not hasattr(_compiled, "available")
    offenders = [p.name for p in root.rglob("*.py")
                 if "INFOCLUST_KERNELS" in p.read_text() or "_compiled.available" in p.read_text()]
    assert offenders == []
    assert sorted(_numpy_forms.__all__) == ["lloyd_into", "moments"]
    importers = sorted({p.name for p in root.rglob("*.py") for node in ast.walk(ast.parse(p.read_text()))
                        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_numpy_forms")})
    assert importers == ["_compiled.py"]


def _forms(fn, *args, **kw):
    """(numpy form's result, compiled loop's result) of one ``_compiled`` call."""
    with _compiled.numpy_form():
        got = fn(*args, **kw)
    return got, fn(*args, **kw)


@pytest.mark.parametrize("n", [0, 1, _loops.TILE + 1, 1000])
@pytest.mark.parametrize("k", [1, 3, 20])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("weighted", [False, True])
def test_numpy_forms_equal_the_compiled_loops_and_the_reference(n, k, dtype, weighted):
    """Lloyd's step and the moments in their numpy forms (tiny data) give
    the compiled loops' results - labels and counts exactly, distances,
    sums, inertia and moments to 1e-10 (float32 rows: distances to float32's
    rounding) - and the reference formulas'; one centre, more centres than
    the products path's threshold, empty and one-row blocks."""
    rng = np.random.default_rng(n + 7 * k)
    x = (rng.normal(size=(n, 6)) * 3).astype(dtype)
    c = rng.normal(size=(k, 6)) * 3
    w = rng.uniform(0, 2, size=n) if weighted else None
    dist_rtol = 1e-10 if dtype == np.float64 else 1e-6
    (lab, dmin, counts, sums), (lab_c, dmin_c, counts_c, sums_c) = _forms(_compiled.lloyd, x, w, centers=c)
    np.testing.assert_array_equal(lab, lab_c)
    assert lab.dtype == np.int64 and dmin.dtype == np.float64
    np.testing.assert_allclose(dmin, dmin_c, rtol=dist_rtol, atol=1e-12)
    np.testing.assert_allclose(counts, counts_c, rtol=1e-12)
    np.testing.assert_allclose(sums, sums_c, rtol=1e-10, atol=1e-10)
    (c1, s1, i1), (c2, s2, i2) = _forms(_compiled.lloyd_sums, x, w, centers=c, with_sums=False)
    assert s1.shape == s2.shape == (0, 0)
    np.testing.assert_allclose(c1, c2, rtol=1e-12)
    np.testing.assert_allclose(i1, i2, rtol=dist_rtol, atol=1e-12)
    shift = x[0].astype(np.float64) if n else None
    with _compiled.numpy_form():  # against the reference formulas
        got, ref = _both(kmeans.lloyd_step_stats, x, w, centers=c)
        for key in ref:
            _close(got[key], ref[key], dist_rtol if key == "inertia" else 1e-10)
        _close(*_both(kmeans.assign_labels, x, centers=c))
        if n:  # (the reference does not take an empty block)
            _close(*_both(stats.moments_stats, x, w, shift=shift))
    _close(*_forms(stats.moments_stats, x, w, shift=shift))


def test_numpy_forms_keep_ties_and_non_finite_entries_as_the_compiled_loops_do():
    c = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 0.0]])
    x = np.array([[1.0, 0.0], [0.0, 0.0], [2.0, 0.0]])
    with _compiled.numpy_form():
        lab, dmin, _, _ = _compiled.lloyd(x, centers=c)
    np.testing.assert_array_equal(lab, [0, 0, 1])
    np.testing.assert_array_equal(dmin, [1.0, 0.0, 0.0])
    x, _ = _data(1000, 4, 2, seed=16)
    x[3, 1], x[500, 0], x[999, 3], x[7, 1] = np.nan, np.inf, -np.inf, np.nan
    for shift in (None, x[1].astype(np.float64)):
        got, ref = _forms(stats.moments_stats, x, np.linspace(0.5, 1.5, 1000), shift=shift)
        assert int(got["n_bad"]) == 4
        _close(got, ref)
    with _compiled.numpy_form():
        got = stats.moments_stats(np.full((10, 2), 1e200))  # finite entries whose squares overflow stay in
    assert int(got["n_bad"]) == 0 and np.isinf(got["s2"]).all()


def test_numpy_form_is_taken_only_inside_its_context_and_below_its_work_bound(monkeypatch):
    """``_compiled`` takes the numpy forms inside ``numpy_form()`` for calls
    of at most ``NUMPY_FORM_MAX_WORK`` products, the compiled loops
    otherwise (outside the context, above the bound, ``allowed=False``)."""
    from infoclust_dask.kernels import _numpy_forms

    calls = []
    for name in ("lloyd_into", "moments"):
        real = getattr(_numpy_forms, name)
        monkeypatch.setattr(_numpy_forms, name, lambda *a, _f=real, _n=name: calls.append(_n) or _f(*a))
    x, c = _data(100, 4, 3)
    _compiled.lloyd(x, centers=c)
    _compiled.moments(x)
    assert calls == []
    with _compiled.numpy_form(False):
        _compiled.lloyd(x, centers=c)
    assert calls == []
    with _compiled.numpy_form():
        _compiled.lloyd(x, centers=c)
        _compiled.lloyd_sums(x, centers=c)
        _compiled.moments(x)
        assert calls == ["lloyd_into", "lloyd_into", "moments"]
        monkeypatch.setattr(_compiled, "NUMPY_FORM_MAX_WORK", 100 * 4 * 3 - 1)  # one product too many for Lloyd
        _compiled.lloyd(x, centers=c)
        _compiled.moments(x)  # 400 products: still numpy
    assert calls == ["lloyd_into", "lloyd_into", "moments", "moments"]


def test_engine_passes_over_tiny_data_take_the_numpy_forms_and_fits_agree(monkeypatch):
    """Passes over at most ``NUMPY_FORM_MAX_BYTES`` of data take the numpy
    forms (a K-means fit on iris-sized data), in this process and in a
    graph's tasks alike (decided by the data's size, so a block gives the
    same bits wherever it runs); larger data the compiled loops; the same
    fit on either path gives the same labels and centres to 1e-10."""
    import dask.array as da

    from infoclust_dask import KMeans, engine
    from infoclust_dask.kernels import _numpy_forms
    from infoclust_dask.kernels.kmeans import LLOYD_STEP

    calls = []
    real = _numpy_forms.lloyd_into
    monkeypatch.setattr(_numpy_forms, "lloyd_into", lambda *a: calls.append(a[0].shape[0]) or real(*a))
    x, c = _data(600, 4, 3, seed=3)  # 19 kB
    engine.map_reduce(LLOYD_STEP, x, None, params={"centers": c}, scheduler="threads")
    assert sum(calls) == 600
    calls.clear()
    engine.map_reduce(LLOYD_STEP, da.from_array(x, chunks=200), None, params={"centers": c}, scheduler="threads")
    assert sum(calls) == 600  # a graph's tasks: the numpy forms too
    tiny = KMeans(3, random_state=0, n_init=3).fit(x)
    assert calls
    calls.clear()
    monkeypatch.setattr(_compiled, "NUMPY_FORM_MAX_BYTES", x.nbytes - 1)
    engine.map_reduce(LLOYD_STEP, x, None, params={"centers": c}, scheduler="threads")
    assert calls == []
    compiled = KMeans(3, random_state=0, n_init=3).fit(x)
    assert calls == []
    np.testing.assert_array_equal(tiny.labels_, compiled.labels_)
    np.testing.assert_allclose(tiny.cluster_centers_, compiled.cluster_centers_, rtol=1e-10)
    np.testing.assert_allclose(tiny.inertia_, compiled.inertia_, rtol=1e-10)


def test_no_private_imports_from_other_packages():
    """The kernels call only public APIs (scikit-learn's private Lloyd
    routines were the reason for its upper pin)."""
    root = Path(_compiled.__file__).parents[1]
    bad = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.split(".")[0] != "infoclust_dask" and any(p.startswith("_") for p in name.split(".")[1:]):
                    bad.append(f"{path.name}: {name}")
    assert not bad, bad


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", ["blobs", "far from the origin", "duplicate centres", "weighted", "two features"])
def test_soft_kmeans_by_matrix_products_equals_the_exact_differences(dtype, case):
    """Issue 55: from SOFT_GEMM_MIN_K centres soft K-means' step takes its
    distances and sums from BLAS products (issue 63: whatever d). Both paths
    on the same data (blobs; rows and centres around 1e3, where the
    expansion loses digits without the shift; two identical centres; sample
    weights; two features) give R, S and log Z equal to 1e-10 in float64
    (1e-5 in float32, whose products are float32), and equal to scipy's
    softmax of the explicit float64 differences."""
    from scipy.special import logsumexp, softmax

    rng = np.random.default_rng(["blobs", "far from the origin", "duplicate centres", "weighted",
                                 "two features"].index(case))
    n, d, k = 700, 2 if case == "two features" else 64, 40
    x = rng.normal(scale=2.0, size=(8, d))[rng.integers(0, 8, n)] + rng.normal(size=(n, d))
    c = x[rng.choice(n, k, replace=False)] + 0.3 * rng.normal(size=(k, d))
    if case == "far from the origin":
        x, c = x + 1e3, c + 1e3
    if case == "duplicate centres":
        c[3] = c[11]
    w = rng.uniform(0.5, 2.0, n) if case == "weighted" else None
    x = x.astype(dtype)
    assert k >= _compiled.SOFT_GEMM_MIN_K
    products = _compiled.soft_kmeans(x, w, centers=c, beta=0.05)
    limit = _compiled.SOFT_GEMM_MIN_K
    try:
        _compiled.SOFT_GEMM_MIN_K = 10**9
        exact = _compiled.soft_kmeans(x, w, centers=c, beta=0.05)
    finally:
        _compiled.SOFT_GEMM_MIN_K = limit
    tol = 1e-10 if dtype == np.float64 else 1e-5
    for key in ("R", "S", "log_z"):
        np.testing.assert_allclose(products[key], exact[key], rtol=tol, atol=tol * np.abs(exact[key]).max())
    x64, c64 = x.astype(np.float64), c.astype(dtype).astype(np.float64)
    dist = ((x64[:, None, :] - c64[None]) ** 2).sum(-1)
    wv = np.ones(n) if w is None else w
    g = softmax(-0.025 * dist, axis=1) * wv[:, None]
    np.testing.assert_allclose(products["S"], g.T @ x64, rtol=tol, atol=tol * np.abs(g.T @ x64).max())
    np.testing.assert_allclose(products["log_z"], wv @ logsumexp(-0.025 * dist, axis=1), rtol=tol)
