"""Associative clustering kernels (Sinkkonen, Kaski, Nikkilä & Lahti 2005,
§III) against loop-written references: smoothed cross counts, the gradient
sums of log BF'' for both prototype sets, the hard contingency table."""

import numpy as np
import pytest

from infoclust_dask.kernels.ac import (
    ac_count_stats,
    ac_fused_stats,
    ac_grad_stats,
    ac_hard_count_stats,
    fused_gradient_sums,
)


@pytest.fixture
def pairs():
    rng = np.random.default_rng(8)
    return (rng.normal(size=(203, 3)), rng.normal(size=(203, 2)), rng.normal(size=(4, 3)),
            rng.normal(size=(3, 2)))


def g(v, m, s):
    e = np.array([np.exp(-np.sum((v - mj) ** 2) / (2 * s**2)) for mj in m])
    return e / e.sum()


def test_cross_counts(pairs):
    x, y, mx, my = pairs
    ref = sum(np.outer(g(xr, mx, 0.8), g(yr, my, 0.6)) for xr, yr in zip(x, y, strict=True))
    got = ac_count_stats(x, y, mx=mx, my=my, sx=0.8, sy=0.6)["counts"]
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_gradient_sums(pairs):
    x, y, mx, my = pairs
    rng = np.random.default_rng(2)
    psi, psi_x, psi_y = rng.normal(size=(4, 3)), rng.normal(size=4), rng.normal(size=3)
    lam_x, lam_y = 0.7, 1.3
    WX, Wx, WY, Wy = np.zeros((4, 3)), np.zeros(4), np.zeros((3, 2)), np.zeros(3)
    for xr, yr in zip(x, y, strict=True):
        gx, gy = g(xr, mx, 0.8), g(yr, my, 0.6)
        A = np.array([sum(psi[i, j] * gy[j] for j in range(3)) - lam_x * psi_x[i] for i in range(4)])
        B = np.array([sum(psi[i, j] * gx[i] for i in range(4)) - lam_y * psi_y[j] for j in range(3)])
        for i in range(4):
            w = gx[i] * (A[i] - sum(gx[k] * A[k] for k in range(4)))
            WX[i] += w * xr
            Wx[i] += w
        for j in range(3):
            w = gy[j] * (B[j] - sum(gy[k] * B[k] for k in range(3)))
            WY[j] += w * yr
            Wy[j] += w
    st = ac_grad_stats(x, y, mx=mx, my=my, sx=0.8, sy=0.6, psi=psi, psi_x=psi_x, psi_y=psi_y, lam_x=lam_x,
                       lam_y=lam_y)
    for key, ref in (("WX", WX), ("Wx", Wx), ("WY", WY), ("Wy", Wy)):
        np.testing.assert_allclose(st[key], ref, rtol=1e-10, atol=1e-12)


def test_hard_table(pairs):
    x, y, mx, my = pairs
    ref = np.zeros((4, 3))
    for xr, yr in zip(x, y, strict=True):
        ref[np.argmin(((xr - mx) ** 2).sum(1)), np.argmin(((yr - my) ** 2).sum(1))] += 1
    np.testing.assert_array_equal(ac_hard_count_stats(x, y, mx=mx, my=my)["counts"], ref)
    assert ac_hard_count_stats(x[:0], y[:0], mx=mx, my=my)["counts"].shape == (4, 3)


@pytest.mark.parametrize("budget", [2**20, 1])  # whole sub-blocks, and pieces of 64 rows
def test_fused_pass_gives_the_counts_and_the_gradient_sums(pairs, budget, monkeypatch):
    """One pass (its tensors linear in the digamma terms) = the two passes."""
    import infoclust_dask.kernels.ac as k

    monkeypatch.setattr(k, "FUSED_BUDGET", budget)
    x, y, mx, my = pairs
    st = ac_fused_stats(x, y, mx=mx, my=my, sx=0.8, sy=0.6)
    counts = ac_count_stats(x, y, mx=mx, my=my, sx=0.8, sy=0.6)["counts"]
    np.testing.assert_allclose(st["counts"], counts, rtol=1e-12)
    rng = np.random.default_rng(3)
    psi, psi_x, psi_y = rng.normal(size=(4, 3)), rng.normal(size=4), rng.normal(size=3)
    ref = ac_grad_stats(x, y, mx=mx, my=my, sx=0.8, sy=0.6, psi=psi, psi_x=psi_x, psi_y=psi_y, lam_x=0.7,
                        lam_y=1.3)
    got = fused_gradient_sums(st, psi, psi_x, psi_y, 0.7, 1.3)
    for key in ref:
        np.testing.assert_allclose(got[key], ref[key], rtol=1e-10, atol=1e-11)
