"""Scaling curves on the store of benchmarks/scale_all.py (run that first):
time of one K-means (Lloyd) pass against K, and of a plain read and a Lloyd
pass against the number of worker processes; from the task stream, the
share of the pass spent in the chunk tasks vs the tree-reduce combine tasks
(is the reduction the bottleneck as workers are added?). Writes JSON for
benchmarks/plot_scale.py.

    python benchmarks/scale_curves.py --rows 1e7 --out docs/figures/scale_curves.json
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=float, default=1e7)
    p.add_argument("--ks", default="2,8,32,128")
    p.add_argument("--workers", default="1,2")
    p.add_argument("--worker-memory", default="1.5GB")
    p.add_argument("--out", default=None)
    a = p.parse_args()

    from distributed import Client, LocalCluster, get_task_stream

    from infoclust_dask import engine, open_dataset
    from infoclust_dask.kernels.kmeans import LLOYD_STEP

    store = next(iter(sorted((Path(__file__).parent / "_data").glob("scale-*x64.zarr"))), None)
    if store is None:
        raise SystemExit("No store: run benchmarks/scale_all.py first.")
    x = open_dataset(store)["x"].isel(sample=slice(0, int(a.rows))).data
    out = {"store": store.name, "rows": int(x.shape[0]), "gb": x.nbytes / 1e9, "k": [], "workers": []}
    rng = np.random.default_rng(0)
    for nw in [int(w) for w in a.workers.split(",")]:
        with LocalCluster(n_workers=nw, threads_per_worker=1, memory_limit=a.worker_memory, host="127.0.0.1",
                          dashboard_address=None) as cluster, Client(cluster) as client:
            engine.compute(x.sum(dtype=np.float64), scheduler=client)  # warm-up: page cache, worker imports
            t0 = time.perf_counter()
            engine.compute(x.sum(dtype=np.float64), scheduler=client)
            read = time.perf_counter() - t0
            ks = [int(k) for k in a.ks.split(",")] if nw == max(int(w) for w in a.workers.split(",")) else [8]
            for k in ks:
                centers = rng.normal(size=(k, x.shape[1]))
                with get_task_stream(client) as ts:
                    t0 = time.perf_counter()
                    engine.map_reduce(LLOYD_STEP, x, None, params={"centers": centers}, scheduler=client)
                    sec = time.perf_counter() - t0
                busy = {"chunk": 0.0, "combine": 0.0}
                for t in ts.data:
                    d = sum(s["stop"] - s["start"] for s in t["startstops"] if s["action"] == "compute")
                    busy["combine" if "combine" in str(t["key"]) else "chunk"] += d
                row = {"workers": nw, "k": k, "pass_seconds": round(sec, 2), "read_seconds": round(read, 2),
                       "over_read": round(sec / read, 2), "chunk_task_seconds": round(busy["chunk"], 2),
                       "combine_task_seconds": round(busy["combine"], 3), "tasks": len(ts.data)}
                print(json.dumps(row), flush=True)
                if nw == max(int(w) for w in a.workers.split(",")):
                    out["k"].append(row)
                if k == 8:
                    out["workers"].append(row)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
