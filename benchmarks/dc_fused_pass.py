"""Would one fused pass make a DC evaluation (objective (10) + gradient (11),
Kaski, Sinkkonen & Klami 2005) cheaper than today's two passes?

The gradient's weights ``L_{j,c} = psi(n_jc + n0) - psi(N_j + N0)`` come from
the counts of the same evaluation, so one pass must carry every sum the
gradient could need: ``T[c, j, l] = sum_{x in class c} y_j(x) y_l(x) x``
(K^2 d per row, l >= j kept) instead of the K d of the two passes. This
script times, on one thread and in one run, the two compiled passes against
a compiled fused loop (written here, not in the package), checks that the
fused sums give the same counts and gradient (to 1e-9), and prints how many
plain reads a store evaluation would need for each, from a measured read
rate of the machine's stores (``--read-gbps``, default: the 2 GB store of
``bench_dc_pass.py``: 1.20 GB/s with 2 workers).

    python benchmarks/dc_fused_pass.py
"""

import argparse
import time

import numpy as np

from infoclust_dask.kernels import _compiled as C


def fused_kernel():
    from infoclust_dask.kernels._loops import TILE, _buffers, _distances, _jit, _softmax_cols

    @_jit
    def fused_rows(x, c, cm, scale, P, T):
        n, d = x.shape
        k = cm.shape[0]
        xt, acc, y, lz, s, fbuf = _buffers(d, k, x.dtype, cm.dtype)
        for i0 in range(0, n, TILE):
            nt = min(TILE, n - i0)
            _distances(x, i0, nt, xt, cm, acc)
            _softmax_cols(acc, nt, scale, y, lz, s, fbuf, False)
            for r in range(nt):
                ci = c[i0 + r]
                for j in range(k):
                    for l in range(j, k):
                        p = y[j, r] * y[l, r]
                        P[ci, j, l] += p
                        for f in range(d):
                            T[ci, j, l, f] += p * np.float64(x[i0 + r, f])

    return fused_rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--read-gbps", type=float, default=1.20)
    a = ap.parse_args()
    fused_rows = fused_kernel()
    rng = np.random.default_rng(0)
    print("| d | K | C | two passes s / 1e6 rows | fused s / 1e6 rows | fused / two | store reads: two passes | fused |")
    print("|---|---|---|---|---|---|---|---|")
    for d, K, Cn in ((16, 8, 8), (128, 10, 10)):
        x = rng.normal(size=(a.rows, d)).astype(np.float32)
        c = rng.integers(0, Cn, a.rows)
        m, sigma, L = x[:K] * np.float32(0.5), 3.0, rng.normal(size=(K, Cn))  # float32 rows: float32 distances
        cc = np.ascontiguousarray(c.astype(np.int64))
        P, T = np.zeros((Cn, K, K)), np.zeros((Cn, K, K, d))
        fused_rows(x[:100], cc[:100], m, -0.5 / sigma**2, P, T)  # compile
        two = fused = np.inf
        for _ in range(3):
            t = time.perf_counter()
            counts = C.dc_counts(x, c, centers=m, sigma=sigma, n_classes=Cn)["counts"]
            g = C.dc_grad(x, c, centers=m, sigma=sigma, L=L)
            two = min(two, time.perf_counter() - t)
            P[:], T[:] = 0, 0
            t = time.perf_counter()
            fused_rows(x, cc, m, -0.5 / sigma**2, P, T)
            fused = min(fused, time.perf_counter() - t)
        iu = np.triu_indices(K, 1)
        P[:, iu[1], iu[0]], T[:, iu[1], iu[0]] = P[:, iu[0], iu[1]], T[:, iu[0], iu[1]]
        WX = np.einsum("ji,ijld->jd", L, T) - np.einsum("li,ijld->jd", L, T)
        assert np.allclose(P.sum(2).T, counts, rtol=1e-9) and np.allclose(WX, g["WX"], rtol=1e-9, atol=1e-9)
        # a store evaluation on 2 cores: reads (one per pass) plus the compute spread over both cores
        read = a.rows * d * 4 / 1e9 / a.read_gbps
        print(f"| {d} | {K} | {Cn} | {two * 1e6 / a.rows:.3f} | {fused * 1e6 / a.rows:.3f} | {fused / two:.2f} | "
              f"{(2 * read + two / 2) / read:.2f} | {(read + fused / 2) / read:.2f} |", flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
