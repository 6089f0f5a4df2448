"""Isotropic Gaussian mixture kernels (the MoG and MDA2 baselines of Kaski et
al. 2005, Table 1) against a loop-written E-step and M-step sums."""

import numpy as np

from infoclust_dask.kernels.mixture import mixture_assign, mixture_em_stats


def test_em_sums_match_loops():
    rng = np.random.default_rng(4)
    x, c = rng.normal(size=(150, 3)), rng.integers(0, 3, size=150)
    means, var = rng.normal(size=(4, 3)), rng.uniform(0.5, 2.0, size=4)
    log_w = np.log(rng.dirichlet(np.ones(4)))
    log_psi = np.log(rng.dirichlet(np.ones(3), size=4))
    for joint in (False, True):
        R, S, Q, N, ll = np.zeros(4), np.zeros((4, 3)), np.zeros(4), np.zeros((4, 3)), 0.0
        for xi, ci in zip(x, c, strict=True):
            p = np.array([np.exp(log_w[j]) * (2 * np.pi * var[j]) ** -1.5
                          * np.exp(-np.sum((xi - means[j]) ** 2) / (2 * var[j]))
                          * (np.exp(log_psi[j, ci]) if joint else 1.0) for j in range(4)])
            ll += np.log(p.sum())
            r = p / p.sum()
            R += r
            S += np.outer(r, xi)
            Q += r * (xi @ xi)
            N[:, ci] += r
        st = mixture_em_stats(x, c if joint else None, means=means, variances=var, log_weights=log_w,
                              log_psi=log_psi if joint else None, n_classes=3 if joint else 0)
        for key, ref in (("R", R), ("S", S), ("Q", Q), ("loglik", ll)):
            np.testing.assert_allclose(st[key], ref, rtol=1e-10)
        if joint:
            np.testing.assert_allclose(st["N"], N, rtol=1e-10)
        else:
            assert "N" not in st
    lab = mixture_assign(x, means=means, variances=var, log_weights=log_w)
    ref = [np.argmax([log_w[j] - 1.5 * np.log(2 * np.pi * var[j]) - np.sum((xi - means[j]) ** 2) / (2 * var[j])
                      for j in range(4)]) for xi in x]
    np.testing.assert_array_equal(lab, ref)
