"""Five simulated nights of the update flow's work on a growing store: each
night 5 % new rows are appended (on night 4 one cluster's new rows come
from a moved centre: the planted drift), then K-means and DC are refitted
warm from the previous night's model and, for comparison, cold; the table
gives the iterations (each one a pass over the store) of both, and the
comparison of the warm model with the previous one (ARI on a fixed sample,
the largest relative prototype drift).

    python benchmarks/update_nights.py [--rows 1000000] [--features 16] [--nights 5]
"""

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--nights", type=int, default=5)
    p.add_argument("--drift-night", type=int, default=4)
    p.add_argument("--clusters", type=int, default=8)
    a = p.parse_args()

    from infoclust_dask import DiscriminativeClustering, KMeans, engine, open_dataset, write_dataset
    from infoclust_dask.io.append import append_dataset
    from infoclust_dask.update import compare_models, fixed_sample

    k, d = a.clusters, a.features
    rng = np.random.default_rng(0)
    centers = rng.normal(scale=1.0, size=(k, d))  # overlapping clusters: Lloyd needs many iterations

    def rows(n, seed, moved=False):
        r = np.random.default_rng(seed)
        z = r.integers(0, k, n)
        C = centers.copy()
        if moved:
            C[0] += 1.5  # cluster 0 new rows come from a centre moved by 1.5 sqrt(d)
        return (C[z] + r.normal(size=(n, d))).astype(np.float32), (z % 3).astype(np.int32)

    folder = Path(tempfile.mkdtemp(prefix="update-nights-", dir=Path(__file__).parent / "_data"))
    client = engine.local_client(n_workers=2, threads_per_worker=1)
    try:
        store = folder / "s.zarr"
        X, c = rows(a.rows, 0)
        write_dataset(store, X, label=c, scheduler=client)
        sample = fixed_sample(a.rows, 5000, 0)
        models = {"kmeans": KMeans(k, random_state=0, scheduler=client).fit(str(store))}
        ds = open_dataset(store)
        models["dc"] = DiscriminativeClustering(k, sigma=2.0, random_state=0, scheduler=client).fit(
            ds["x"], ds["label"])
        print(f"night 0: {a.rows} rows; cold fits: K-means {models['kmeans'].n_iter_} iterations, "
              f"DC {models['dc'].n_iter_}")
        print("| night | rows | appended (s) | K-means warm / cold iterations | DC warm / cold iterations | "
              "ARI to previous (K-means) | largest relative drift (K-means) |")
        print("|---|---|---|---|---|---|---|")
        for night in range(1, a.nights + 1):
            Xn, cn = rows(a.rows // 20, night, moved=night == a.drift_night)
            rep = append_dataset(store, Xn, label=cn, scheduler=client)
            ds = open_dataset(store)
            out = {}
            for name in ("kmeans", "dc"):
                prev = models[name]
                if name == "kmeans":
                    warm = KMeans(k, random_state=0, scheduler=client).fit(str(store), init=prev)
                    cold = KMeans(k, random_state=0, scheduler=client).fit(str(store))
                else:
                    warm = DiscriminativeClustering(k, sigma=2.0, random_state=0, scheduler=client).fit(
                        ds["x"], ds["label"], init=prev)
                    cold = DiscriminativeClustering(k, sigma=2.0, random_state=0, scheduler=client).fit(
                        ds["x"], ds["label"])
                out[name] = (warm.n_iter_, cold.n_iter_)
                if name == "kmeans":
                    cmp = compare_models(prev, warm, ds["x"].data[sample])
                models[name] = warm
            print(f"| {night} | {ds.sizes['sample']} | {rep['seconds']:.1f} | {out['kmeans'][0]} / {out['kmeans'][1]} "
                  f"| {out['dc'][0]} / {out['dc'][1]} | {cmp['ari']:.4f} | {cmp['max_relative_drift']:.3f}"
                  f"{' (planted)' if night == a.drift_night else ''} |")
    finally:
        engine.close_local_client()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    t0 = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t0:.0f} s)")
