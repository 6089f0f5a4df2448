"""Each pass over a ~2 GB float32 store in plain reads of the same store,
measured in one run on a LocalCluster of 2 single-threaded worker
processes (127.0.0.1): the moments pass (validation), one Lloyd pass
(k = 8) and one DC objective + gradient evaluation (K = 8, C = 8: two
passes). Interleaved rounds (read, moments, Lloyd, DC; repeated), so that
the machine's slow phases hit all alike; the ratio is best pass / best
read.

Data: the first ``--rows`` rows (default 3.2e7 x 16 float32 = 2.05 GB) of
``benchmarks/_data/kmeans-stream-50000000x16-f32.zarr`` (written by
``kmeans_stream_cli.py``), or a new store of that shape when it is missing;
the DC classes are the stored labels mod 8.

The last rows are the passes inside a fit on this cluster: a many-pass fit
holds lazy input of at most a quarter of the workers' memory limits in their
memory (``engine.prepare``, read from the store once: the "read into the
workers' memory" row), so its later Lloyd passes and DC evaluations cost
their compute, not a read; larger stores keep the streamed rows above.

    python benchmarks/store_pass_ratios.py [--rows 32000000] [--repeat 3]
"""

import argparse
import time
import uuid
from pathlib import Path

import numpy as np
from _bench import interleaved


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=32_000_000)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()

    import dask.array as da
    from distributed import futures_of

    from infoclust_dask import engine, write_dataset
    from infoclust_dask.cluster import dc_objective
    from infoclust_dask.datasets import make_blobs
    from infoclust_dask.engine import execute
    from infoclust_dask.kernels.kmeans import LLOYD_STEP
    from infoclust_dask.kernels.stats import MOMENTS

    data = Path(__file__).parent / "_data"
    path = data / "kmeans-stream-50000000x16-f32.zarr"
    if not path.exists():
        path = data / f"ratios-{a.rows}x16-f32.zarr"
        if not path.exists():
            X, lab, _ = make_blobs(a.rows, 16, centers=8, random_state=0, dtype=np.float32, chunks=1 << 20)
            write_dataset(path, X, label=lab, check_finite=False)
    client = engine.local_client(n_workers=2, threads_per_worker=1)

    def fresh(var):
        return da.from_zarr(str(path / var), name=f"{var}-{uuid.uuid4().hex}")[: a.rows]

    x0 = np.asarray(fresh("x")[:100_000].compute(), dtype=np.float64)
    centers = x0[np.random.default_rng(0).choice(x0.shape[0], 8, replace=False)]
    sigma = float(np.sqrt(x0.var(0).sum())) * 0.3

    def read():
        return engine.compute(fresh("x").sum(dtype=np.float64), scheduler=client)

    def moments():
        return engine.map_reduce(MOMENTS, fresh("x"), scheduler=client)

    def lloyd():
        return engine.map_reduce(LLOYD_STEP, fresh("x"), None, params={"centers": centers}, scheduler=client)

    def dc():
        return dc_objective(fresh("x"), fresh("label") % 8, centers, sigma, prior=1.0, n_classes=8, scheduler=client)

    held = {}

    def hold():
        held.clear()
        x, lab = fresh("x"), fresh("label") % 8
        budget = engine.Distributed(client).persist_budget()
        assert x.nbytes + lab.nbytes <= budget, (x.nbytes, budget)
        held["x"], held["label"] = engine.prepare(x, scheduler=client), engine.prepare(lab, scheduler=client)
        execute.wait_futures(client, futures_of([held["x"], held["label"]]))  # persist returns at once

    def lloyd_held():
        return engine.map_reduce(LLOYD_STEP, held["x"], None, params={"centers": centers}, scheduler=client)

    def dc_held():
        return dc_objective(held["x"], held["label"], centers, sigma, prior=1.0, n_classes=8, scheduler=client)

    read()  # untimed: the page cache alike for all, the workers' kernels compiled or loaded
    lloyd()
    dc()
    r = interleaved({"read": (read, None), "moments": (moments, None), "lloyd": (lloyd, None), "dc": (dc, None)},
                    a.repeat)
    t0 = time.perf_counter()
    hold()
    t_hold = time.perf_counter() - t0
    lloyd_held()
    dc_held()
    r.update(interleaved({"lloyd_held": (lloyd_held, None), "dc_held": (dc_held, None)}, a.repeat))
    gb = a.rows * 16 * 4 / 1e9
    t_read = r["read"][0]
    print(f"store: first {a.rows} rows x 16 float32 of {path.name} ({gb:.2f} GB), 2 worker processes x 1 thread")
    print("| pass | best s | median s | reads (best / best read) | issue 37 target |")
    print("|---|---|---|---|---|")
    targets = {"read": "", "moments": "<= 1.2", "lloyd": "<= 1.1", "dc": "<= 1.35"}
    targets.update(lloyd_held="<= 1.1", dc_held="<= 1.35")
    names = {"read": "plain read (dask sum)", "moments": "moments (validation)", "lloyd": "one Lloyd pass, k = 8",
             "dc": "one DC evaluation (counts + gradient, 2 passes), K = C = 8",
             "lloyd_held": "in a fit, data held by the workers: one Lloyd pass",
             "dc_held": "in a fit, data held by the workers: one DC evaluation"}
    for key, (best, med) in r.items():
        if key == "lloyd_held":
            print(f"| in a fit: the store read into the workers' memory, once (x and labels) | {t_hold:.2f} | "
                  f"{t_hold:.2f} | {t_hold / t_read:.2f} | |")
        print(f"| {names[key]} | {best:.2f} | {med:.2f} | {best / t_read:.2f} | {targets[key]} |")
    engine.close_local_client()


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
