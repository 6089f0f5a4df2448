"""The memberships kernels (soft K-means, DC counts and gradient, the
mixture E-step, AC counts) on float64 and float32 rows, in one run: 16e6
numbers per block (1e6 x 16, 2.5e5 x 64, ...), K = 8 centres, one thread,
best of 3; the float32 / float64 ratio of each kernel at each width.

    python benchmarks/memberships_dtypes.py
"""

import time

import numpy as np

from infoclust_dask.kernels import _compiled as C


def best(fn, repeat=3):
    fn()  # compile / warm
    t = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main():
    rng = np.random.default_rng(0)
    print("| kernel | d | float64 ms | float32 ms | float32 / float64 |")
    print("|---|---|---|---|---|")
    for d in (4, 16, 64, 128):
        n = 16_000_000 // d
        x64 = rng.normal(size=(n, d))
        x32 = x64.astype(np.float32)
        c = x64[:8] * 0.5
        cls = rng.integers(0, 8, n)
        L = rng.normal(size=(8, 8))
        sigma = float(np.sqrt(d))
        kernels = {
            "soft K-means": lambda x: C.soft_kmeans(x, centers=c, beta=1.0 / d),
            "DC counts": lambda x: C.dc_counts(x, cls, centers=c, sigma=sigma, n_classes=8),
            "DC gradient": lambda x: C.dc_grad(x, cls, centers=c, sigma=sigma, L=L),
            "mixture E-step": lambda x: C.mixture_em(x, means=c, variances=np.full(8, float(d)),
                                                      log_weights=np.full(8, -np.log(8))),
            "AC counts": lambda x: C.ac_counts(x, x, mx=c, my=c, sx=sigma, sy=sigma),
        }
        for name, fn in kernels.items():
            t64 = best(lambda: fn(x64))
            t32 = best(lambda: fn(x32))
            print(f"| {name} | {d} | {t64 * 1e3:.1f} | {t32 * 1e3:.1f} | {t32 / t64:.2f} |", flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
