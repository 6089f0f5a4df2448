"""CMBC block kernels against loops: the counting pass behind (A.5), the
annealed E-step (4.15) and its M-step sums, dense and scipy.sparse rows."""

import numpy as np
import pytest
import scipy.sparse as sp

from infoclust_dask.kernels.cmbc import estep_stats, pattern_stats, posterior


@pytest.fixture
def block():
    rng = np.random.default_rng(5)
    y = (rng.uniform(size=(90, 6)) < 0.3).astype(np.uint8)
    return y, rng.integers(0, 3, size=90), rng.uniform(0.05, 0.95, size=(6, 2))


@pytest.mark.parametrize("sparse", [False, True])
def test_pattern_counts(block, sparse):
    y, pat, _ = block
    st = pattern_stats(sp.csr_matrix(y) if sparse else y, pat, n_patterns=3)
    for p in range(3):
        assert st["count"][p] == np.sum(pat == p)
        np.testing.assert_array_equal(st["S"][p], y[pat == p].sum(axis=0))
    np.testing.assert_array_equal(st["n1"], y.sum(axis=0))
    assert int(st["nonbinary"]) == 0
    y2 = y.astype(float)
    y2[0, 0], y2[1, 1] = 2.0, 0.5
    assert int(pattern_stats(sp.csr_matrix(y2) if sparse else y2, pat, n_patterns=3)["nonbinary"]) == 2


@pytest.mark.parametrize("sparse", [False, True])
def test_estep_sums_match_loops(block, sparse):
    y, _, theta = block
    T = 2.5
    S1, R, ll, hard = np.zeros((6, 2)), np.zeros(2), 0.0, 0.0
    for row in y:
        logp = np.array([np.sum(row * np.log(theta[:, k]) + (1 - row) * np.log(1 - theta[:, k])) for k in range(2)])
        q = np.exp(logp / T) / np.exp(logp / T).sum()
        S1 += np.outer(row, q)
        R += q
        ll += np.log(np.exp(logp).sum())
        hard += q.max()
    st = estep_stats(sp.csr_matrix(y) if sparse else y, log_theta=np.log(theta), log_1m_theta=np.log1p(-theta),
                     temperature=T)
    np.testing.assert_allclose(st["S1"], S1, rtol=1e-12)
    np.testing.assert_allclose(st["R"], R, rtol=1e-12)
    assert float(st["loglik"]) == pytest.approx(ll, rel=1e-12)
    assert float(st["hard"]) == pytest.approx(hard, rel=1e-12)
    post = posterior(y, log_theta=np.log(theta), log_1m_theta=np.log1p(-theta))
    np.testing.assert_allclose(post.sum(axis=1), 1.0)
