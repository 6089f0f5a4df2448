"""Soft K-means' step (MacKay 2003, eq. 20.7-20.9) by the loops
(``_loops._soft_rows``) or by BLAS products (``_soft_products._soft_rows_gemm``),
one thread, in memory, best of 3, on the same rows in one run, over a grid
of k x d, float32 and float64, separated and overlapping blobs: where
``SOFT_GEMM_MIN_K`` (the rule of k that picks the products; until issue
63 also ``k x d >= 2048``) stand against this machine (issue 63). Unlike Lloyd's paths,
the two round differently (the expansion against the differences), so the
choice is a rule of k and d, the same on every machine (the same-answer
contract), not a measurement: this table says where the rule loses here.

    python benchmarks/soft_products.py [--rows 200000] [--k 8 16 32 64 128] [--d 8 16 32 64 128]
"""

import argparse

import numpy as np
from _bench import best as best_median


def best(fn, repeat=3):
    fn()  # untimed: compilation / cache load
    return best_median(fn, repeat)[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--k", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    p.add_argument("--d", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    p.add_argument("--spread", type=float, nargs="+", default=[4.0, 0.25])
    a = p.parse_args()
    from threadpoolctl import threadpool_limits

    from infoclust_dask.kernels import _compiled
    from infoclust_dask.kernels._compiled import _loops
    from infoclust_dask.kernels._soft_products import _soft_rows_gemm

    loops = _loops()
    print(
        f"rows {a.rows}, one thread; SOFT_GEMM_MIN_K = {_compiled.SOFT_GEMM_MIN_K}; beta = 1 / (2 x the rows' variance per feature)"
    )
    print("| dtype | spread | k | d | loops ms | products ms | products / loops | shipped rule | shipped / faster |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 1.0
    for dtype in (np.float32, np.float64):
        for spread in a.spread:
            for k in a.k:
                for d in a.d:
                    rng = np.random.default_rng(0)
                    c = rng.normal(scale=spread, size=(k, d))
                    x = (c[rng.integers(0, k, a.rows)] + rng.normal(size=(a.rows, d))).astype(dtype)
                    cx = c.astype(dtype)
                    shift = cx.mean(axis=0, dtype=np.float64).astype(dtype)
                    scale = -0.5 / (2.0 * float(x.var(axis=0).mean()))
                    w = np.ones(a.rows)

                    def run(name):
                        R, S, lz = np.zeros(k), np.zeros((k, d)), np.zeros(1)
                        if name == "loops":
                            loops._soft_rows(x, w, cx, scale, R, S, lz)
                        else:
                            _soft_rows_gemm(x, w, cx, shift, scale, R, S, lz)

                    with threadpool_limits(1):
                        t_loops = best(lambda: run("loops"))
                        t_prod = best(lambda: run("products"))
                    rule = "products" if k >= _compiled.SOFT_GEMM_MIN_K else "loops"
                    shipped = t_prod if rule == "products" else t_loops
                    worst = max(worst, shipped / min(t_prod, t_loops))
                    print(
                        f"| {np.dtype(dtype).name} | {spread:g} | {k} | {d} | {t_loops * 1e3:.1f} | "
                        f"{t_prod * 1e3:.1f} | {t_prod / t_loops:.2f} | {rule} | "
                        f"{shipped / min(t_prod, t_loops):.2f} |",
                        flush=True,
                    )
    print(f"worst shipped / faster: {worst:.2f}")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
