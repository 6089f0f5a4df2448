"""Seconds per 1e6 rows of each compiled block kernel alone (one thread, in
memory, no dask), against the plain numpy form of the same formula
(``tests/reference_kernels.py``): where the arithmetic of a pass goes.

    python benchmarks/bench_kernels_micro.py [--rows 1000000]

Data: float32 standard normal rows; DC at d = 128 (K 10, C 10), AC at
x 64 + y 8 (K = L = 10), Lloyd at d = 16 (k 8).
"""

import argparse
import os
import time

import numpy as np
from _bench import reference_kernels


def best(fn, repeat=3):
    fn()  # untimed: compilation / cache load
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    a = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    from threadpoolctl import threadpool_limits

    from infoclust_dask.kernels import ac, dc, kmeans
    from infoclust_dask.objectives import ac as ac_obj
    from infoclust_dask.objectives import dc as dc_obj

    rng = np.random.default_rng(0)
    n = a.rows
    x128 = rng.standard_normal((n, 128)).astype(np.float32)
    c = rng.integers(0, 10, n)
    m128 = rng.standard_normal((10, 128))
    x64, y8 = rng.standard_normal((n, 64)).astype(np.float32), rng.standard_normal((n, 8)).astype(np.float32)
    mx, my = rng.standard_normal((10, 64)), rng.standard_normal((10, 8))
    x16 = rng.standard_normal((n, 16)).astype(np.float32)
    m16 = rng.standard_normal((8, 16))
    counts = dc.dc_count_stats(x128[:10000], c[:10000], centers=m128, sigma=8.0, n_classes=10)["counts"]
    L = dc_obj.digamma_terms(counts, 1.0)
    ac_counts = ac.ac_count_stats(x64[:10000], y8[:10000], mx=mx, my=my, sx=4.0, sy=1.0)["counts"]
    psi, psi_x, psi_y = ac_obj.digamma_terms(ac_counts, (1.0, 1.0, 1.0))
    ref = reference_kernels()
    cases = {  # name -> (module with the kernel, its name, positional data, parameters)
        "DC counts, d 128, K 10": (dc, "dc_count_stats", (x128, c), {"centers": m128, "sigma": 8.0, "n_classes": 10}),
        "DC gradient sums, d 128, K 10": (dc, "dc_grad_stats", (x128, c), {"centers": m128, "sigma": 8.0, "L": L}),
        "AC cross counts, 64 + 8, K = L = 10": (ac, "ac_count_stats", (x64, y8),
                                                {"mx": mx, "my": my, "sx": 4.0, "sy": 1.0}),
        "AC gradient sums, 64 + 8, K = L = 10": (ac, "ac_grad_stats", (x64, y8), {
            "mx": mx, "my": my, "sx": 4.0, "sy": 1.0, "psi": psi, "psi_x": psi_x, "psi_y": psi_y,
            "lam_x": 1.0, "lam_y": 1.0}),
        "Lloyd counts + sums, d 16, k 8": (kmeans, "lloyd_step_stats", (x16,), {"centers": m16}),
    }
    scale = 1e6 / n
    print(f"{'kernel':40s} {'compiled':>10s} {'numpy':>10s} {'ratio':>7s}   (seconds per 1e6 rows, one thread)")
    with threadpool_limits(1):
        for name, (mod, fn, args, kw) in cases.items():
            t_c = best(lambda mod=mod, fn=fn, args=args, kw=kw: getattr(mod, fn)(*args, **kw))
            t_n = best(lambda fn=fn, args=args, kw=kw: getattr(ref, fn)(*args, **kw))
            print(f"{name:40s} {t_c * scale:10.3f} {t_n * scale:10.3f} {t_n / t_c:6.1f}x")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
