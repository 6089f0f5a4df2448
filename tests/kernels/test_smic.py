"""SMIC kernels (Sugiyama et al. 2011) against loop-written references: the
local-scaling kernel values of (7) and the out-of-sample sums of §2.3.
(LSMI's per-fold sums are checked in tests/test_metrics_lsmi.py.)"""

import numpy as np
import pytest

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


@pytest.mark.parametrize("d", [3, 40])  # the k-d tree path (<= 15 features) and the blocked brute force
def test_knn_candidates_equal_brute_force_with_ties_and_duplicates(d, monkeypatch):
    from infoclust_dask.kernels import knn

    monkeypatch.setattr(knn, "BRUTE_TILE_BYTES", 8 * 7 * 50)  # several query tiles of 7 rows
    rng = np.random.default_rng(3)
    xd = np.round(rng.normal(size=(50, d)), 1)
    xd[10:14] = xd[3]  # duplicates: distance 0 to each other
    xq = np.vstack([xd[:5], rng.normal(size=(20, d))])
    ref = ((xq[:, None, :] - xd[None, :, :]) ** 2).sum(-1)
    for k in (1, 6, 50):
        ind = knn.candidates(xq, xd, k)
        assert ind.shape == (25, k)
        got = np.sort(np.take_along_axis(ref, ind, axis=1), axis=1)
        np.testing.assert_allclose(got, np.sort(ref, axis=1)[:, :k], rtol=0, atol=1e-12)
        assert all(len(set(r)) == k for r in ind.tolist())  # no row twice
    d2, idx = knn.knn_block(xd, xd, q_start=0, t=4)
    assert not (idx == np.arange(50)[:, None]).any()  # never its own neighbour
    assert (d2[10:14, :3] == 0).all()  # its three duplicates, exactly 0
