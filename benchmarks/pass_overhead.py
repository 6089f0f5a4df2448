"""What one pass costs above its arithmetic, per runner, in one run.

A soft K-means pass (the responsibilities and sums of MacKay's eq. 20.7-20.9,
k = 3) over iris-sized data (150 x 4) and over 1e5 x 16 rows:

- the kernel alone (``soft_kmeans_stats`` on the whole array, no engine);
- ``engine.map_reduce`` on each runner: in this process with one thread and
  with the thread pool (numpy blocks, no graph), dask's thread scheduler on
  a dask array (a graph per pass: what a fit on a store did before the
  placement rule), and the LocalCluster (2 worker processes, data scattered
  once).

Prints the median time of a pass and the overhead (pass - kernel).

    python benchmarks/pass_overhead.py
"""

import time

import numpy as np


def median_time(f, repeat):
    f()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main():
    import dask.array as da

    from infoclust_dask import engine
    from infoclust_dask.engine import choose as runners
    from infoclust_dask.kernels.kmeans import SOFT_KMEANS, soft_kmeans_stats

    rng = np.random.default_rng(0)
    local = runners.Distributed(engine.local_client(), "benchmark")
    print("| data | runner | pass (ms) | kernel (ms) | overhead (us) |")
    print("|---|---|---|---|---|")
    for n, d, repeat in ((150, 4, 2000), (100_000, 16, 50)):
        X = rng.normal(size=(n, d))
        c = X[:3].copy()
        params = {"centers": c, "beta": 1.0}
        kernel = median_time(lambda: soft_kmeans_stats(X, None, **params), repeat)
        lazy = da.from_array(X, chunks=max(1, n // 4) if n > 1000 else n)
        scattered = local.persist(X)
        cases = [
            ("in-process, 1 thread", lambda: engine.map_reduce(SOFT_KMEANS, X, None, params=params,
                                                               scheduler=runners.InProcess(1))),
            ("in-process, threads", lambda: engine.map_reduce(SOFT_KMEANS, X, None, params=params,
                                                              scheduler=runners.InProcess())),
            ("dask threads, a graph per pass", lambda: engine.map_reduce(SOFT_KMEANS, lazy, None, params=params,
                                                                         scheduler=runners.InProcess())),
            ("LocalCluster, data scattered", lambda: engine.map_reduce(SOFT_KMEANS, scattered, None, params=params,
                                                                       scheduler=local)),
        ]
        for name, f0 in cases:
            def f(f0=f0):  # a new beta each time: distinct task keys, as in a fit
                params["beta"] = params["beta"] * (1 + 1e-12)
                return f0()

            r = repeat if "LocalCluster" not in name and "graph" not in name else max(20, repeat // 20)
            t = median_time(f, r)
            print(f"| {n} x {d} | {name} | {t * 1e3:.3f} | {kernel * 1e3:.3f} | {(t - kernel) * 1e6:.0f} |",
                  flush=True)
    engine.close_local_client()


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
