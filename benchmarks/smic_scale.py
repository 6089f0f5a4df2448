"""SMIC at scale: fixed t on zarr stores of n = 1e5 and 1e6 rows (d = 16).

For each n: writes (once) a store of Gaussian blobs (10 centres, float64,
65 536-row chunks), starts a LocalCluster of 2 single-threaded worker
processes on 127.0.0.1, fits ``SMIC(c, t)`` on the store and prints the time
split into the kNN graph (block against block on the workers), the sparse
kernel, the eigensolver, the assignment and LSMI, with the peak resident
memory of the driver and of each worker (sampled every 0.5 s). At
``n <= --sklearn-max`` it also times scikit-learn's ``NearestNeighbors`` on
the same rows in this one process (its default threads) and prints the
ratio. Then the whole model selection (t in 1..10) on ``--selection-n``
rows held in memory.

    python benchmarks/smic_scale.py --n 100000 1000000 --selection-n 5000
    python benchmarks/smic_scale.py --n 100000 1000000 --selection-n 0 --knn approximate --keep

``--knn`` is SMIC's neighbour search (``exact``: block against block;
``approximate``: an NN-descent graph per cell of a coarse partition; ``auto``: SMIC's rule).
``--data far`` writes the blobs of issue 24 instead (centres drawn with
standard deviation 9, unit noise: one connected component of the
neighbour graph per cluster); the default ``blobs`` are
:func:`infoclust_dask.datasets.make_blobs` (10 centres, unit spread: the
clusters apart); ``--data overlap`` the same centres with spread 5, so the
clusters touch: one connected component for all, ARI 0.97 at 1e5 rows.

    python benchmarks/smic_scale.py --n 2000000 --data overlap --selection-n 0 --keep

    python benchmarks/smic_scale.py --n 220000 1000000 --data far --clusters 8 --selection-n 0 --knn approximate --keep
"""

import argparse
import shutil
import threading
import time
from pathlib import Path

import numpy as np


class Peaks:
    """Peak RSS of this process and of the workers, sampled in a thread."""

    def __init__(self, client):
        self.client, self.peaks, self.stop = client, {}, threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)

    def run(self):
        import psutil

        me = psutil.Process()
        while not self.stop.is_set():
            self.peaks["driver"] = max(self.peaks.get("driver", 0), me.memory_info().rss)
            try:
                for w, v in self.client.run(lambda: __import__("psutil").Process().memory_info().rss).items():
                    self.peaks[w] = max(self.peaks.get(w, 0), v)
            except Exception:  # noqa: BLE001 - sampling must never break the benchmark
                pass
            time.sleep(0.5)

    def __enter__(self):
        self.th.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.th.join()

    def text(self):
        return ", ".join(f"{'driver' if k == 'driver' else 'worker'} {v / 2**30:.2f} GiB" for k, v in self.peaks.items())


#: the blobs' spread for ``--data overlap`` (centres in [-10, 10]^d as for the default blobs)
OVERLAP_STD = 5.0


def record(n, m, total, ari_value, pk, data="blobs"):
    """Add this run's stage times to docs/figures/smic_scale.json (plot_smic_scale.py draws them)."""
    import datetime
    import json

    path = Path(__file__).parents[1] / "docs" / "figures" / "smic_scale.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    rows = [r for r in rows if not (r["n"] == n and r["knn"] == m.knn_ and r.get("data", "blobs") == data)]
    workers = sorted(v for k, v in pk.peaks.items() if k != "driver")
    rows.append({"n": n, "data": data, "knn": m.knn_, **({"graph": "cells"} if m.knn_ == "approximate" else {}), "recall": round(m.knn_recall_, 4), "total_s": round(total, 1),
                 **{f"{k}_s": round(v, 1) for k, v in m.timings_.items()}, "ari": round(ari_value, 4),
                 "driver_gib": round(pk.peaks.get("driver", 0) / 2**30, 2),
                 "worker_gib": [round(v / 2**30, 2) for v in workers],
                 "n_components": m.n_components_, "date": datetime.date.today().isoformat()})
    path.write_text(json.dumps(sorted(rows, key=lambda r: (r.get("data", "blobs"), r["knn"], r["n"])), indent=1)
                    + "\n")


def far_blobs(n, d, c, seed=7, rows=1 << 20):
    """Issue 24's recipe as a dask array made block by block (seeded per
    block): ``c`` centres drawn from N(0, 9^2), unit Gaussian noise."""
    import dask
    import dask.array as da

    C = np.random.default_rng(seed).normal(0, 9, size=(c, d))

    def part(i, size):
        rng = np.random.default_rng([seed, i])
        z = rng.integers(0, c, size)
        return C[z] + rng.normal(size=(size, d)), z

    xs, zs = [], []
    for i, a in enumerate(range(0, n, rows)):
        size = min(rows, n - a)
        p = dask.delayed(part, nout=2)(i, size)
        xs.append(da.from_delayed(p[0], (size, d), dtype=np.float64))
        zs.append(da.from_delayed(p[1], (size,), dtype=np.int64))
    return da.concatenate(xs).rechunk((65_536, d)), da.concatenate(zs).rechunk(65_536)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--d", type=int, default=16)
    p.add_argument("--t", type=int, default=10)
    p.add_argument("--clusters", type=int, default=10)
    p.add_argument("--worker-memory", default="3GB")
    p.add_argument("--sklearn-max", type=int, default=200_000)
    p.add_argument("--selection-n", type=int, default=5000)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--knn", choices=["auto", "exact", "approximate"], default="auto")
    p.add_argument("--data", choices=["blobs", "far", "overlap"], default="blobs")
    a = p.parse_args()

    from distributed import Client, LocalCluster
    from sklearn.metrics import adjusted_rand_score as ari

    from infoclust_dask import SMIC, open_dataset, write_dataset
    from infoclust_dask.datasets import make_blobs

    if a.selection_n:
        X, lab, _ = make_blobs(a.selection_n, a.d, centers=a.clusters, random_state=1, lazy=False)
        X, lab = np.asarray(X), np.asarray(lab)
        t0 = time.perf_counter()
        m = SMIC(a.clusters, random_state=0, scheduler="threads").fit(X)
        dt = time.perf_counter() - t0
        print(f"model selection, n={a.selection_n}, d={a.d}, t in 1..10 (threads scheduler, in memory): "
              f"{dt:.2f} s; chosen t={m.t_}, ARI {ari(lab, m.labels_):.3f}; "
              + ", ".join(f"{k} {v:.2f} s" for k, v in m.timings_.items()), flush=True)

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=a.worker_memory, host="127.0.0.1",
                           dashboard_address=None)
    client = Client(cluster)
    try:
        for n in a.n:
            suffix = {"blobs": "", "far": f"-far{a.clusters}", "overlap": f"-overlap{a.clusters}"}[a.data]
            path = Path(__file__).parent / "_data" / f"smic-scale-{n}x{a.d}{suffix}.zarr"
            if not path.exists():
                if a.data in ("blobs", "overlap"):
                    X, lab, _ = make_blobs(n, a.d, centers=a.clusters, random_state=0, chunks=65_536,
                                           cluster_std=OVERLAP_STD if a.data == "overlap" else 1.0)
                else:
                    X, lab = far_blobs(n, a.d, a.clusters)
                write_dataset(path, X, label=lab, check_finite=False)
            ds = open_dataset(path)
            print(f"\nn={n}, d={a.d}: store {path.name}, chunks of {ds['x'].chunks[0][0]} rows", flush=True)
            with Peaks(client) as pk:
                t0 = time.perf_counter()
                m = SMIC(a.clusters, t=a.t, random_state=0, scheduler=client, verbose=2, knn=a.knn).fit(ds["x"])
                total = time.perf_counter() - t0
            labels = np.asarray(ds["label"].values)
            print(f"SMIC t={a.t}: total {total:.1f} s = " + ", ".join(f"{k} {v:.1f} s" for k, v in m.timings_.items())
                  + f" (+ {total - sum(m.timings_.values()):.1f} s validation/persist); ARI {ari(labels, m.labels_):.3f}; "
                  f"neighbour search {m.knn_}, recall {m.knn_recall_:.4f}")
            print(f"peak RSS: {pk.text()}; data {n * a.d * 8 / 2**30:.2f} GiB", flush=True)
            print(f"neighbour graph: {m.n_components_} connected components", flush=True)
            record(n, m, total, ari(labels, m.labels_), pk, a.data)
            if n <= a.sklearn_max:
                from sklearn.neighbors import NearestNeighbors
                from threadpoolctl import threadpool_limits

                X = np.asarray(ds["x"].values)
                for label, limit in (("default threads (2 cores)", None), ("one thread", 1)):
                    with threadpool_limits(limit):
                        t0 = time.perf_counter()
                        NearestNeighbors(n_neighbors=a.t + 1).fit(X).kneighbors(X)
                        sk = time.perf_counter() - t0
                    print(f"scikit-learn NearestNeighbors, one process, {label}, k={a.t + 1}: {sk:.1f} s; "
                          f"our blockwise kNN on 2 workers: {m.timings_['knn']:.1f} s; ratio sklearn/ours "
                          f"{sk / m.timings_['knn']:.2f}", flush=True)
            if not a.keep:
                shutil.rmtree(path)
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
