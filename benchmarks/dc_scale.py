"""DC on a zarr store larger than the workers' memory.

Writes (once) a store of ``--gb`` GB float32 with labels, starts a
LocalCluster of 2 worker processes with ``--worker-memory`` each, fits
DiscriminativeClustering with a fixed sigma for a few CG iterations, and
prints seconds per objective evaluation and the peak resident memory of each
worker (sampled every 0.5 s).

    python benchmarks/dc_scale.py --gb 10 --worker-memory 2GB --max-iter 2
"""

import argparse
import shutil
import threading
import time
from pathlib import Path

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gb", type=float, default=10.0)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--worker-memory", default="2GB")
    p.add_argument("--max-iter", type=int, default=2)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()

    from distributed import Client, LocalCluster

    from infoclust_dask import DiscriminativeClustering, open_dataset, write_dataset
    from infoclust_dask.datasets import make_blobs

    rows = int(a.gb * 1e9 / (4 * a.features))
    path = Path(__file__).parent / "_data" / f"dc-scale-{rows}x{a.features}.zarr"
    if not path.exists():
        X, lab, _ = make_blobs(rows, a.features, centers=10, random_state=0, dtype=np.float32, chunks=131_072)
        t0 = time.perf_counter()
        write_dataset(path, X, label=lab % 10, check_finite=False)
        print(f"wrote {path} ({rows} x {a.features} float32) in {time.perf_counter() - t0:.0f} s", flush=True)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    ds = open_dataset(path)
    print(f"store: {ds['x'].shape}, {rows * a.features * 4 / 1e9:.1f} GB as float32, {size / 1e9:.1f} GB on disk, "
          f"chunks of {ds['x'].chunks[0][0]} rows", flush=True)

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=a.worker_memory, host="127.0.0.1",
                           dashboard_address=None)
    client = Client(cluster)
    peaks = {}
    stop = threading.Event()

    def rss():
        import psutil

        return psutil.Process().memory_info().rss

    def sample():
        while not stop.is_set():
            try:
                for w, v in client.run(rss).items():
                    peaks[w] = max(peaks.get(w, 0), v)
            except Exception:  # noqa: BLE001 - sampling must never break the benchmark
                pass
            time.sleep(0.5)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t0 = time.perf_counter()
    m0 = np.asarray(ds["x"][: a.k].values, dtype=np.float64)
    dc = DiscriminativeClustering(a.k, sigma=4.0, init=m0, max_iter=a.max_iter, scheduler=client, verbose=1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dc.fit(ds["x"], ds["label"])
    total = time.perf_counter() - t0
    stop.set()
    th.join()
    n_eval = len(dc.objective_history_)
    print(f"fit: {total:.0f} s, {n_eval} objective evaluations (2 passes each) + validation/labels passes; "
          f"{total / max(n_eval, 1):.1f} s per evaluation including overheads")
    print("peak worker RSS: " + ", ".join(f"{v / 2**30:.2f} GiB" for v in peaks.values())
          + f" (limit {a.worker_memory} each; store {rows * a.features * 4 / 2**30:.1f} GiB)")
    client.close()
    cluster.close()
    if not a.keep:
        shutil.rmtree(path)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
