"""Every estimator on a store several times the workers' memory.

Writes (once, kept under benchmarks/_data) a store of ``--gb`` GB: x float32
(n x 64, ten blobs), label, and a paired view y (n x 8) for associative
clustering. Starts a LocalCluster of 2 single-threaded worker processes with
``--worker-memory`` each and, for the first 1e6 rows, the first 1e7 rows and
the whole store, times: a plain read (sum of x), KMeans (k-means|| seeding +
Lloyd), SoftKMeans (3 betas), DC (fixed sigma, 2 CG iterations), AC (fixed
widths, 2 CG iterations) and, on the whole store, the ingest store -> store
path (standardize). For each: seconds, passes (engine computes of a graph),
seconds per pass / plain read, peak RSS of each worker and of this process
(sampled every 0.5 s).

    python benchmarks/scale_all.py --gb 15 --worker-memory 1.5GB
"""

import argparse
import json
import shutil
import threading
import time
import warnings
from pathlib import Path

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gb", type=float, default=15.0)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--worker-memory", default="1.5GB")
    p.add_argument("--sizes", default="1e6,1e7,all")
    p.add_argument("--methods", default="read,kmeans,softkmeans,dc,ac,ingest")
    p.add_argument("--out", default=None, help="write the rows as JSON here")
    a = p.parse_args()
    warnings.simplefilter("ignore")

    import dask.array as da
    import psutil
    from distributed import Client, LocalCluster

    from infoclust_dask import (
        AssociativeClustering,
        DiscriminativeClustering,
        KMeans,
        SoftKMeans,
        engine,
        open_dataset,
        write_dataset,
    )
    from infoclust_dask.datasets import make_blobs
    from infoclust_dask.io.ingest import ingest

    rows = int(a.gb * 1e9 / (4 * a.features))
    data = Path(__file__).parent / "_data"
    path = data / f"scale-{rows}x{a.features}.zarr"
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=a.worker_memory, host="127.0.0.1",
                           dashboard_address=None)
    client = Client(cluster)
    if not path.exists():
        X, lab, _ = make_blobs(rows, a.features, centers=10, random_state=0, dtype=np.float32, chunks=131_072)
        rng = da.random.default_rng(1)
        Y = (da.stack([(lab % 3 == j) for j in range(3)] + [(lab % 2 == 0)] * 5, axis=1).astype(np.float32)
             + rng.normal(size=(rows, 8), chunks=(131_072, 8)).astype(np.float32))
        t0 = time.perf_counter()
        write_dataset(path, X, label=lab % 10, y=Y, check_finite=False, scheduler=client)
        print(f"wrote {path} in {time.perf_counter() - t0:.0f} s", flush=True)
    ds = open_dataset(path)
    disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    print(f"store {ds['x'].shape} x float32 + y {ds['y'].shape}: {ds['x'].nbytes / 1e9:.1f} GB of x, "
          f"{disk / 1e9:.1f} GB on disk; workers: 2 x {a.worker_memory}", flush=True)

    passes = [0]
    real_compute = engine.compute

    def counting(obj, **kw):
        if engine.is_lazy(obj) or hasattr(obj, "dask") or isinstance(obj, (list, tuple)):
            passes[0] += 1
        return real_compute(obj, **kw)

    engine.compute = counting
    peaks, stop = {}, threading.Event()
    me = psutil.Process()

    def sample():
        while not stop.is_set():
            try:
                for w, v in client.run(lambda: psutil.Process().memory_info().rss).items():
                    peaks[w] = max(peaks.get(w, 0), v)
                peaks["driver"] = max(peaks.get("driver", 0), me.memory_info().rss)
            except Exception:  # noqa: BLE001 - sampling must never break the benchmark
                pass
            time.sleep(0.5)

    def run(name, n, fn):
        peaks.clear()
        passes[0] = 0
        stop.clear()
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        t0 = time.perf_counter()
        fn()
        sec = time.perf_counter() - t0
        stop.set()
        th.join()
        w = sorted(v for k, v in peaks.items() if k != "driver")
        return {"method": name, "n": n, "seconds": round(sec, 1), "passes": passes[0],
                "worker_peak_gib": [round(v / 2**30, 2) for v in w],
                "driver_peak_gib": round(peaks.get("driver", 0) / 2**30, 2)}

    sizes = [rows if s == "all" else min(rows, int(float(s))) for s in a.sizes.split(",")]
    methods = a.methods.split(",")
    out = []
    for n in sizes:
        sub = ds.isel(sample=slice(0, n))
        x, lab, y = sub["x"], sub["label"], sub["y"]
        read = run("read", n, lambda: engine.compute(x.data.sum(dtype=np.float64), scheduler=client))
        out.append(read)
        m0 = np.asarray(ds["x"][:5].values, dtype=np.float64)
        jobs = {
            "kmeans": lambda: KMeans(8, init="k-means||", n_init=1, max_iter=3, tol=0, random_state=0,
                                     scheduler=client).fit(x),
            "softkmeans": lambda: SoftKMeans(4, beta_schedule=[0.05, 0.1, 0.2], max_iter=2, random_state=0,
                                             scheduler=client).fit(x),
            "dc": lambda: DiscriminativeClustering(5, sigma=4.0, init=m0, max_iter=2, random_state=0,
                                                   scheduler=client).fit(x, lab),
            "ac": lambda: AssociativeClustering((3, 3), sigma=(4.0, 1.0), init="random", n_init=1, anneal_steps=1,
                                                max_iter=2, random_state=0, scheduler=client).fit(x, y),
        }
        if n == rows and "ingest" in methods:
            dest = data / "scale-standardized.zarr"
            jobs["ingest"] = lambda: ingest(path, dest, standardize=True, overwrite=True, scheduler=client)
        for name, fn in jobs.items():
            if name not in methods:
                continue
            r = run(name, n, fn)
            r["per_pass_over_read"] = round(r["seconds"] / max(r["passes"], 1) / read["seconds"], 2)
            out.append(r)
            print(json.dumps(r), flush=True)
        print(json.dumps(read), flush=True)
        if "ingest" in jobs:
            shutil.rmtree(data / "scale-standardized.zarr", ignore_errors=True)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))
    client.close()
    cluster.close()


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
