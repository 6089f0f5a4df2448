"""Where a whole K-means fit spends its time: calls and seconds per kernel.

    python benchmarks/profile_kmeans_passes.py     # 1e6 x 16, k=8, dask input, threads
"""

import collections
import time

import dask.array as da

from infoclust_dask import KMeans, engine
from infoclust_dask.datasets import make_blobs


def main():
    X, _, _ = make_blobs(1_000_000, 16, centers=8, cluster_std=3.0, random_state=0, lazy=False)
    Xd = da.from_array(X, chunks=(125_000, 16))
    acc = collections.defaultdict(lambda: [0, 0.0])
    original = engine.map_reduce

    def timed(kernel, *args, **kwargs):
        t0 = time.perf_counter()
        out = original(kernel, *args, **kwargs)
        entry = acc[getattr(kernel, "__name__", str(kernel))]
        entry[0] += 1
        entry[1] += time.perf_counter() - t0
        return out

    engine.map_reduce = timed
    try:
        for init in ("k-means++", "k-means||"):
            acc.clear()
            t0 = time.perf_counter()
            km = KMeans(8, init=init, random_state=0, scheduler="threads").fit(Xd)
            total = time.perf_counter() - t0
            print(f"{init}: {total:.2f} s, {km.n_iter_} Lloyd iterations")
            for name, (calls, secs) in sorted(acc.items(), key=lambda kv: -kv[1][1]):
                print(f"   {name:24s} {calls:3d} calls {secs:6.2f} s ({secs / calls * 1e3:6.1f} ms each)")
    finally:
        engine.map_reduce = original


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
