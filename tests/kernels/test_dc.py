"""Discriminative clustering kernels (Kaski, Sinkkonen & Klami 2005) against
loop-written references of memberships (4), the counts of (10), the gradient
sums of (11), the hard counts of (9), the regularizer sums (14)-(15) and the
on-line algorithm (5)-(6); the pass's row subset against an explicit
selection."""

import numpy as np
import pytest

from infoclust_dask.kernels._common import row_hash_uniform, run_chunk, run_fold_step
from infoclust_dask.kernels.dc import (
    DC_COUNTS,
    DC_ONLINE,
    dc_count_stats,
    dc_grad_stats,
    dc_memberships,
    dc_reg_stats,
    hard_count_stats,
    online_dc_block,
)


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(257, 3))
    c = rng.integers(0, 4, size=257)
    m = rng.normal(size=(5, 3))
    return x, c, m


def memberships_loop(xi, m, sigma):
    e = np.array([np.exp(-np.sum((xi - mj) ** 2) / (2 * sigma**2)) for mj in m])
    return e / e.sum()


def test_memberships_are_eq_4(data):
    x, _, m = data
    ref = np.array([memberships_loop(xi, m, 0.8) for xi in x])
    np.testing.assert_allclose(dc_memberships(x, m, 0.8), ref, rtol=1e-12)
    far = dc_memberships(x * 1e3, m, 0.01)  # exp(-1e10): the stable softmax must not give NaN
    assert np.all(np.isfinite(far)) and np.allclose(far.sum(axis=1), 1.0)


def test_counts_of_eq_10(data):
    x, c, m = data
    ref = np.zeros((5, 4))
    for xi, ci in zip(x, c, strict=True):
        ref[:, ci] += memberships_loop(xi, m, 0.7)
    np.testing.assert_allclose(dc_count_stats(x, c, centers=m, sigma=0.7, n_classes=4)["counts"], ref, rtol=1e-12)


def test_gradient_sums_of_eq_11(data):
    x, c, m = data
    L = np.random.default_rng(0).normal(size=(5, 4))
    WX, W = np.zeros((5, 3)), np.zeros(5)
    for xi, ci in zip(x, c, strict=True):
        y = memberships_loop(xi, m, 0.9)
        for j in range(5):
            w = sum(y[j] * y[l_] * (L[j, ci] - L[l_, ci]) for l_ in range(5))
            WX[j] += w * xi
            W[j] += w
    st = dc_grad_stats(x, c, centers=m, sigma=0.9, L=L)
    np.testing.assert_allclose(st["WX"], WX, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(st["W"], W, rtol=1e-10, atol=1e-12)


def test_hard_counts_of_eq_9(data):
    x, c, m = data
    ref = np.zeros((5, 4))
    for xi, ci in zip(x, c, strict=True):
        ref[np.argmin([np.sum((xi - mj) ** 2) for mj in m]), ci] += 1
    np.testing.assert_array_equal(hard_count_stats(x, c, centers=m, n_classes=4)["counts"], ref)
    assert hard_count_stats(x[:0], c[:0], centers=m, n_classes=4)["counts"].shape == (5, 4)


def test_regularizer_sums(data):
    x, _, m = data
    lam = 0.3
    mog = dc_reg_stats(x, centers=m, kind="mog", lam=lam)
    log_z = sum(np.log(np.sum([np.exp(-lam * np.sum((xi - mj) ** 2)) for mj in m])) for xi in x)
    np.testing.assert_allclose(mog["log_z"], log_z, rtol=1e-12)
    vq = dc_reg_stats(x, centers=m, kind="vq", lam=lam)
    inertia = sum(min(np.sum((xi - mj) ** 2) for mj in m) for xi in x)
    np.testing.assert_allclose(vq["inertia"], inertia, rtol=1e-12)


def test_the_pass_applies_the_row_subset_once(data):
    x, c, m = data
    subset = (11, 0.6, "valid")
    start = 1000
    keep = row_hash_uniform(11, start, x.shape[0]) >= 0.6
    got = run_chunk(DC_COUNTS, start, [x, c], {"centers": m, "sigma": 0.7, "n_classes": 4, "subset": subset})
    ref = dc_count_stats(x[keep], c[keep], centers=m, sigma=0.7, n_classes=4)
    np.testing.assert_array_equal(got["counts"], ref["counts"])
    assert 0 < keep.sum() < x.shape[0]


def online_loop(state, x, c, start, sigma, alpha0, total_steps, seed):
    """(5)-(6) written out: psi_j = softmax(gamma_j); m_a -= alpha (x - m_a)
    log(psi_b,c / psi_a,c); gamma_a -= 2 alpha (psi_a - e_c); j and l swapped."""
    m, g, t = state["m"].copy(), state["gamma"].copy(), state["t"]
    rng = np.random.default_rng([seed, start])
    for idx in rng.permutation(x.shape[0]):
        xi, ci = x[idx], c[idx]
        alpha = alpha0 * max(0.0, 1.0 - t / total_steps)
        d = np.array([np.sum((xi - mj) ** 2) for mj in m])
        y = np.exp(-(d - d.min()) / (2 * sigma**2))
        y /= y.sum()
        j, l_ = rng.choice(m.shape[0], size=2, p=y)
        for a, b in ((j, l_), (l_, j)):
            psi_a = np.exp(g[a]) / np.exp(g[a]).sum()
            psi_b = np.exp(g[b]) / np.exp(g[b]).sum()
            if a != b:
                m[a] -= alpha * (xi - m[a]) * np.log(psi_b[ci] / psi_a[ci])
            e = np.zeros(g.shape[1])
            e[ci] = 1.0
            g[a] -= 2 * alpha * (psi_a - e)
        t += 1
    return {"m": m, "gamma": g, "t": t}


def test_online_block_is_eqs_5_and_6(data):
    x, c, m = data
    state = {"m": m, "gamma": np.random.default_rng(1).normal(size=(5, 4)) * 0.1, "t": 3}
    kw = dict(sigma=1.1, alpha0=0.05, total_steps=600, seed=42)
    got = online_dc_block(state, x, c, start=257, **kw)
    ref = online_loop(state, x, c, 257, **kw)
    np.testing.assert_allclose(got["m"], ref["m"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["gamma"], ref["gamma"], rtol=1e-10, atol=1e-12)
    assert got["t"] == ref["t"] == 3 + 257
    # the fold pass hands the block's start to the kernel and applies the subset
    sub = run_fold_step(DC_ONLINE, 257, state, [x, c], {**kw, "subset": (5, 0.5, "train")})
    keep = row_hash_uniform(5, 257, 257) < 0.5
    ref_sub = online_loop(state, x[keep], c[keep], 257, **kw)
    np.testing.assert_allclose(sub["m"], ref_sub["m"], rtol=1e-10, atol=1e-12)
