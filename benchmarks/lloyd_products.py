"""Lloyd's assignment by exact differences (``_loops._lloyd_rows``) or by
BLAS products of the expansion (``_loops._lloyd_rows_gemm``, with near ties
decided exactly), one thread, in memory, milliseconds per 1e6 rows, best
of 3, both on the same rows in one run: what the measured choice of
``_compiled.lloyd_paths`` weighs (``kernels/_choice.py``), and where
``LLOYD_PRODUCTS_MIN_K`` (the least k at which products are a candidate)
comes from. Also checks that both give the same labels.

    python benchmarks/lloyd_products.py [--rows 1000000] [--d 16]
"""

import argparse
import os

import numpy as np
from _bench import best as best_median


def best(fn, repeat=3):
    fn()  # untimed: compilation / cache load
    return best_median(fn, repeat)[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--d", type=int, default=16)
    p.add_argument("--k", type=int, nargs="+", default=[4, 8, 12, 16, 24, 32, 100])
    a = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from threadpoolctl import threadpool_limits

    from infoclust_dask.kernels import _compiled
    from infoclust_dask.kernels._compiled import _lloyd_loops

    loops = _lloyd_loops()
    rng = np.random.default_rng(0)
    print(f"rows {a.rows} x {a.d}, one thread; LLOYD_PRODUCTS_MIN_K = {_compiled.LLOYD_PRODUCTS_MIN_K}")
    print("| dtype | k | exact differences ms | products ms | products / exact | labels equal |")
    print("|---|---|---|---|---|---|")
    for dtype in (np.float64, np.float32):
        for k in a.k:
            c = rng.normal(scale=2, size=(k, a.d))
            x = (c[rng.integers(0, k, a.rows)] + rng.normal(size=(a.rows, a.d))).astype(dtype)
            cx = c.astype(dtype)
            shift = cx.mean(axis=0, dtype=np.float64).astype(dtype)
            eps = float(np.finfo(dtype).eps) / 2
            outs = {}

            def run(name):
                lab, dmin = np.empty(a.rows, np.int64), np.empty(a.rows, dtype)
                counts, sums = np.zeros(k), np.zeros((k, a.d))
                if name == "exact":
                    loops._lloyd_rows(x, np.empty(0), cx, counts, sums, lab, dmin, np.zeros(1), True)
                else:
                    loops._lloyd_rows_gemm(x, np.empty(0), cx, shift, eps, counts, sums, lab, dmin, np.zeros(1), True)
                outs[name] = lab

            with threadpool_limits(1):
                t_exact = best(lambda: run("exact"))
                t_prod = best(lambda: run("products"))
            same = bool(np.array_equal(outs["exact"], outs["products"]))
            print(f"| {np.dtype(dtype).name} | {k} | {t_exact * 1e3:.1f} | {t_prod * 1e3:.1f} | "
                  f"{t_prod / t_exact:.2f} | {same} |", flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
