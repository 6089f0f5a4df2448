"""Every Lloyd path of K-means against scikit-learn's Lloyd, on separated and
on overlapping clusters (issue 63's table): whole ``fit`` calls from the
same initial centres, ``max_iter`` iterations (tol 0), one process, best of
``--repeat``. Paths: as shipped (``auto``: the constants choose products
and bounds), bounds off, the exact loops (no products) without bounds, the
products path without bounds. Also checks that every path gives the same
centres, labels and inertia as the exact loops, bit for bit (the same-answer
contract: a path chosen by measurement must not change the model).

    python benchmarks/kmeans_paths.py [--n 200000] [--iters 10] [--repeat 2] [--quick]
"""

import argparse
import contextlib
import time

import numpy as np


def blobs(n, d, k, spread, dtype, seed=0):
    """``k`` Gaussian blobs of unit noise whose centres are ``spread`` apart
    on average (10: separated; 1: overlapping)."""
    rng = np.random.default_rng(seed)
    c = rng.normal(scale=spread, size=(k, d))
    X = (c[rng.integers(0, k, n)] + rng.normal(size=(n, d))).astype(dtype)
    init = X[rng.choice(n, k, replace=False)].astype(np.float64)
    return X, init


@contextlib.contextmanager
def path(name):
    """Force one Lloyd path for the ``with`` block (module constants and the bounds rule)."""
    import infoclust_dask.cluster._kmeans as km
    import infoclust_dask.kernels._compiled as comp

    saved = (comp.LLOYD_PATH, km._use_bounds)
    if name != "auto":
        km._use_bounds = lambda *a: False
    if name == "exact":
        comp.LLOYD_PATH = "loops"
    elif name == "products":
        comp.LLOYD_PATH = "products"
    try:
        yield
    finally:
        comp.LLOYD_PATH, km._use_bounds = saved


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="k in (4, 16, 64) at d = 16 only")
    a = p.parse_args()
    import warnings

    from sklearn.cluster import KMeans as SKKMeans

    warnings.simplefilter("ignore")  # 10 iterations do not converge: that is the measurement

    from infoclust_dask import KMeans

    cells = [(k, 16) for k in ((4, 16, 64) if a.quick else (4, 8, 16, 32, 64))]
    if not a.quick:
        cells += [(16, 8), (16, 32)]
    print(f"# n = {a.n}, {a.iters} iterations from the same centres, best of {a.repeat}; ratio = ours / scikit-learn")
    print("| clusters | k | d | dtype | scikit-learn (s) | as shipped | bounds off | exact loops | products | "
          "as shipped / exact loops | same model on every path |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for regime, spread in (("separated", 10.0), ("overlapping", 1.0)):
        for k, d in cells:
            for dtype in (np.float32, np.float64):
                X, init = blobs(a.n, d, k, spread, dtype)

                def sk():
                    return SKKMeans(k, init=init, n_init=1, max_iter=a.iters, tol=0.0, algorithm="lloyd").fit(X)

                sk()
                times = {"sk": min(_timed(sk) for _ in range(a.repeat))}
                models = {}
                for name in ("auto", "plain", "exact", "products"):
                    with path(name):
                        def ours():
                            return KMeans(k, init=init, max_iter=a.iters, tol=0.0, random_state=0).fit(X)

                        models[name] = ours()
                        times[name] = min(_timed(ours) for _ in range(a.repeat))
                ref = models["exact"]
                same = all(np.array_equal(m.cluster_centers_, ref.cluster_centers_) and m.inertia_ == ref.inertia_
                           and np.array_equal(m.labels_, ref.labels_) for m in models.values())
                r = {n: times[n] / times["sk"] for n in ("auto", "plain", "exact", "products")}
                print(f"| {regime} | {k} | {d} | {np.dtype(dtype).name} | {times['sk']:.3f} | {r['auto']:.2f} | "
                      f"{r['plain']:.2f} | {r['exact']:.2f} | {r['products']:.2f} | "
                      f"{times['auto'] / times['exact']:.2f} | {same} |", flush=True)


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
