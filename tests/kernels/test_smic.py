"""SMIC kernels (Sugiyama et al. 2011) against loop-written references: the
local-scaling kernel values of (7) and the out-of-sample sums of §2.3.
(LSMI's per-fold sums are checked in tests/test_metrics_lsmi.py.)"""

import numpy as np

from infoclust_dask.kernels.smic import local_scaling_values, smic_oos_stats


def test_kernel_values_and_zero_scales():
    d2 = np.array([0.0, 1.0, 4.0, 0.0, 2.0])
    sa = np.array([1.0, 0.5, 2.0, 0.0, 0.0])
    sb = np.array([2.0, 1.0, 1.0, 1.0, 1.0])
    got = local_scaling_values(d2, sa, sb)
    ref = [1.0, np.exp(-1.0 / (2 * 0.5)), np.exp(-4.0 / (2 * 2.0)), 1.0, 0.0]  # zero scale: 1 at 0, else 0
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_out_of_sample_sums_match_loops():
    rng = np.random.default_rng(6)
    xd = rng.normal(size=(120, 2))
    phi = rng.normal(size=(120, 3))
    sigma = rng.uniform(0.2, 0.6, size=120)
    xq = rng.normal(size=(15, 2))
    sigma_q = rng.uniform(0.2, 0.6, size=15)
    start = 500
    nbr = np.stack([rng.choice(np.arange(start, start + 120), size=4, replace=False) for _ in range(15)])
    nbr[0, 0] = 3  # a neighbour in another block: ignored here
    kphi, ksum = np.zeros((15, 3)), np.zeros(15)
    for q in range(15):
        for i in range(120):
            d2 = np.sum((xq[q] - xd[i]) ** 2)
            if (start + i) in nbr[q] or d2 <= sigma[i] ** 2:
                v = np.exp(-d2 / (2 * sigma_q[q] * sigma[i]))
                kphi[q] += v * phi[i]
                ksum[q] += v
    got = smic_oos_stats(xd, phi, sigma, start=start, xq=xq, sigma_q=sigma_q, nbr=nbr)
    np.testing.assert_allclose(got["kphi"], kphi, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(got["ksum"], ksum, rtol=1e-10, atol=1e-14)
