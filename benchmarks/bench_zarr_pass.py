"""One map-reduce pass over a >= 2 GB zarr store vs a plain read (sum) of it.

Both run on a LocalCluster of 2 single-threaded worker processes, on the same
store, in one run; the ratio is read-time / pass-time (1.0 = the pass costs
no more than reading the store).

    python benchmarks/bench_zarr_pass.py [--rows 4000000] [--features 128] [--codec lz4]
"""

import argparse
import shutil
import time
from pathlib import Path

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--features", type=int, default=128)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--codec", default="lz4", choices=["lz4", "zstd", "none"])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--keep", action="store_true", help="keep the store for another run")
    a = p.parse_args()

    from infoclust_dask import engine, open_dataset, write_dataset
    from infoclust_dask.datasets import make_blobs
    from infoclust_dask.kernels.kmeans import LLOYD_STEP
    from infoclust_dask.kernels.stats import MOMENTS

    path = Path(__file__).parent / "_data" / f"bench-{a.rows}x{a.features}-{a.codec}.zarr"
    if not path.exists():
        X, _, _ = make_blobs(a.rows, a.features, centers=a.k, random_state=0, dtype=np.float32, chunks=131_072)
        t0 = time.perf_counter()
        write_dataset(path, X, codec=a.codec, check_finite=False)
        print(f"wrote {path} in {time.perf_counter() - t0:.1f} s")
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    ds = open_dataset(path)
    nbytes = ds["x"].size * ds["x"].dtype.itemsize
    print(f"store: {ds['x'].shape} {ds['x'].dtype}, {nbytes / 1e9:.2f} GB in memory, {size / 1e9:.2f} GB on disk, "
          f"codec {a.codec}, {len(ds['x'].chunks[0])} chunks of {ds['x'].chunks[0][0]} rows")

    client = engine.local_client(n_workers=2, threads_per_worker=1)
    print(f"LocalCluster: {len(client.scheduler_info()['workers'])} worker processes x 1 thread")
    centers = np.random.default_rng(0).normal(size=(a.k, a.features))

    def fresh():
        # a new graph name every time, so no run can reuse another's results
        import uuid

        import dask.array as da

        return da.from_zarr(str(path / "x"), name=f"x-{uuid.uuid4().hex}")

    def plain_read():
        return float(engine.compute(fresh().sum(dtype=np.float64), scheduler=client))

    def moments_pass():
        return engine.map_reduce(MOMENTS, fresh(), scheduler=client)

    def lloyd_pass():
        return engine.map_reduce(LLOYD_STEP, fresh(), None, params={"centers": centers}, scheduler=client)

    results = {}
    for name, fn in [("plain read (dask sum)", plain_read), ("map_reduce moments pass", moments_pass),
                     ("map_reduce Lloyd pass, k=8", lloyd_pass)]:
        ts = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        results[name] = min(ts)
        print(f"{name:32s} best {min(ts):6.2f} s  median {np.median(ts):6.2f} s  -> {nbytes / min(ts) / 1e9:5.2f} GB/s")
    read = results["plain read (dask sum)"]
    print(f"RATIO read/pass: moments {read / results['map_reduce moments pass']:.2f}, "
          f"Lloyd {read / results['map_reduce Lloyd pass, k=8']:.2f}  (target >= 0.8)")
    engine.close_local_client()
    if not a.keep:
        shutil.rmtree(path)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
