"""Seeding for data that stream: k-means++ on a one-pass uniform sample
against k-means++ on the whole data, both followed by the same Lloyd
iterations, in one run.

Data: float32 blobs (``k_true = k`` centres in 16 dimensions, unit noise,
centres N(0, 3^2)), ``n`` rows held in memory so both seedings read the
same rows; passes over the data are counted. Prints, per (n, k), the
seeding passes, seeding seconds, final inertia of each and their ratio
(target: sampled within 1 % of k-means++).

    python benchmarks/seeding_by_size.py [--rows 1e6,1e7] [--k 8,100]
"""

import argparse
import time

import numpy as np


def blobs(n, k, d=16, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3, size=(k, d)).astype(np.float32)
    X = np.empty((n, d), dtype=np.float32)
    step = 1_000_000
    for a in range(0, n, step):
        b = min(n, a + step)
        X[a:b] = centres[rng.integers(0, k, b - a)] + rng.standard_normal((b - a, d), dtype=np.float32)
    return X


def main():
    from infoclust_dask import engine
    from infoclust_dask.cluster import _init
    from infoclust_dask.cluster._kmeans import lloyd

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1e6,1e7")
    ap.add_argument("--k", default="8,100")
    ap.add_argument("--max-iter", type=int, default=20)
    args = ap.parse_args()
    passes = []
    real = engine.map_reduce

    def counting(bp, *a, **kw):
        if a and getattr(a[0], "shape", (0,))[0] == n:
            passes.append(bp.name)
        return real(bp, *a, **kw)

    _init.engine.map_reduce = counting  # the seeding module's passes over the data

    def refine(C, cw, c0):
        with engine.installed("sync"):
            return lloyd(C, cw, c0, max_iter=100, tol=0.0, warn_empty=False)[0]

    print("| rows | k | seeding | passes | seeding s | Lloyd iterations | final inertia | ratio to k-means++ |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (int(float(r)) for r in args.rows.split(",")):
        for k in (int(v) for v in args.k.split(",")):
            X = blobs(n, k)
            tol = float(np.mean(X.var(axis=0))) * 1e-4
            out = {}
            with engine.installed("threads"):
                for name in ("k-means++", "sample"):
                    passes.clear()
                    rng = np.random.default_rng(1)
                    t0 = time.perf_counter()
                    if name == "k-means++":
                        c0 = _init.init_kmeanspp(X, None, k, rng)
                    else:
                        c0 = _init.init_sampled_kmeanspp(X, None, k, rng, lloyd=refine)
                    t_seed = time.perf_counter() - t0
                    n_pass = len(passes)
                    _, inertia, it, _ = lloyd(X, None, c0, max_iter=args.max_iter, tol=tol, warn_empty=False)
                    out[name] = inertia
                    label = name if name == "k-means++" else f"best of 5 k-means++ on {_init.seed_sample_rows(k)} sampled rows"
                    print(f"| {n:.0e} | {k} | {label} | {n_pass} | {t_seed:.2f} | {it} | {inertia:.6g} | "
                          f"{inertia / out['k-means++']:.4f} |", flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
