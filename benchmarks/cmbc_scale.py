"""CMBC at scale: seconds per pass over a binary zarr store against a plain read.

A store of ``--rows`` x ``--features`` binary values (uint8 by default, or
float32 0/1; Blosc-LZ4, written from a lazy generator) and a known clustering; on a LocalCluster of 2
single-threaded worker processes, best of ``--repeat``:

- plain read of ``x`` (dask sum),
- CMBC's counting pass (negative pattern x feature counts, A.5),
- one EM iteration (annealed E-step and M-step sums, one pass),
- a whole fit with ``max_iter=3`` per temperature, with the peak resident
  memory of each worker.

    .venv/bin/python benchmarks/cmbc_scale.py --rows 10000000 --features 64
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
import uuid
from pathlib import Path

import numpy as np


def best(f, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--dtype", choices=["uint8", "float32"], default="uint8", help="x on disk (default uint8)")
    a = p.parse_args()

    import dask.array as da

    from infoclust_dask import CMBC, engine, open_dataset, write_dataset
    from infoclust_dask.kernels.cmbc import CMBC_ESTEP, CMBC_PATTERNS

    path = Path(__file__).parent / "_data" / f"cmbc-{a.rows}x{a.features}-{a.dtype}.zarr"
    client = engine.local_client(n_workers=2, threads_per_worker=1)
    if not path.exists():
        rng = da.random.default_rng(0)
        z = rng.integers(0, 2, size=a.rows, chunks=1_000_000)
        base = rng.random((a.rows, a.features), chunks=(1_000_000, a.features)) < 0.1  # noise bits
        signal = (da.arange(a.features) % 2 == 0)[None, :] & (z[:, None] == 1)
        x = (base ^ signal).astype(np.float32)  # 0/1; stored as a.dtype
        t0 = time.perf_counter()
        write_dataset(path, x, label=z.astype(np.int32), chunks=524_288, check_finite=False, scheduler=client,
                      dtype=np.dtype(a.dtype))
        print(f"wrote {path} in {time.perf_counter() - t0:.1f} s")
    ds = open_dataset(path)
    nbytes = ds["x"].size * ds["x"].dtype.itemsize
    print(f"store: {ds['x'].shape} {ds['x'].dtype}, {nbytes / 1e9:.2f} GB in memory, "
          f"{len(ds['x'].chunks[0])} chunks; LocalCluster 2 workers x 1 thread")

    def fresh(var):
        return da.from_zarr(str(path / var), name=f"{var}-{uuid.uuid4().hex}")

    K, m = 2, a.features
    theta = np.clip(np.random.default_rng(0).uniform(0.3, 0.7, size=(m, K)), 1e-6, 1 - 1e-6)
    t_read = best(lambda: engine.compute(fresh("x").sum(), scheduler=client), a.repeat)
    t_count = best(lambda: engine.map_reduce(CMBC_PATTERNS, fresh("x"), fresh("label"), params={"n_patterns": 2},
                                             scheduler=client), a.repeat)
    t_em = best(lambda: engine.map_reduce(CMBC_ESTEP, fresh("x"), params={"log_theta": np.log(theta),
                                                                          "log_1m_theta": np.log1p(-theta),
                                                                          "temperature": 1.0},
                                          scheduler=client), a.repeat)
    print(f"plain read         {t_read:7.2f} s  ({nbytes / t_read / 1e9:.2f} GB/s)")
    print(f"counting pass      {t_count:7.2f} s  -> pass / read = {t_count / t_read:.2f}")
    print(f"one EM iteration   {t_em:7.2f} s  -> pass / read = {t_em / t_read:.2f}")

    peaks = {}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            for w, rss in client.run(lambda: __import__("psutil").Process().memory_info().rss).items():
                peaks[w] = max(peaks.get(w, 0), rss)
            time.sleep(0.5)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t0 = time.perf_counter()
    est = CMBC(2, max_iter=3, min_iter=1, random_state=0, scheduler=client).fit(str(path), known=ds["label"])
    seconds = time.perf_counter() - t0
    stop.set()
    th.join()
    print(f"whole fit (max_iter=3 per temperature): {seconds:.1f} s, {est.n_iter_} EM passes (plus the counting, Gram and label passes), "
          f"{len(est.temperatures_)} temperatures; peak worker RSS "
          f"{', '.join(f'{v / 2**30:.2f} GiB' for v in peaks.values())}")
    if not a.keep:
        shutil.rmtree(path)
    engine.close_local_client()


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
