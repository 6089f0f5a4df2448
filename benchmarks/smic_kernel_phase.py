"""SMIC's kernel phase alone, on a LocalCluster of 2 single-threaded
workers: what a fit above ``DRIVER_KERNEL_MAX_ROWS`` rows does between the
neighbour lists and the eigensolver (``cluster._smic_solve.eigen_on_workers``):
the local scales gathered, the kernel's row blocks made by the all-to-all
exchange (``engine.exchange`` of ``kernel_transpose_pieces`` and
``kernel_row_block``, blocks of ``KERNEL_BLOCK_ROWS``, a locality rank) and
the degrees.

The lists are random over all ``--n`` rows (t = 10), as a shuffled store
gives them, made on the workers; the rank is a random permutation. Prints
each run's seconds (the exchange's split and join tasks' busy seconds from
the task stream) and the degrees' sum, which must not change between
versions. To compare two versions, run it at each (e.g. in a ``git
worktree`` with ``PYTHONPATH`` pointing at it) turn about.

    python benchmarks/smic_kernel_phase.py --n 10000000 --repeats 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _bench import machine

T = 10


def _lists(n, seed, block_info=None):
    a, b = block_info[None]["array-location"][0]
    rng = np.random.default_rng([seed, a])
    return np.sort(rng.uniform(0.1, 2.0, (b - a, T)), axis=1)


def _ids(n, seed, block_info=None):
    a, b = block_info[None]["array-location"][0]
    return np.random.default_rng([seed + 1, a]).integers(0, n, (b - a, T)).astype(np.int32)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=float, default=1e7)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--worker-memory", default="8GB")
    a = p.parse_args()
    import dask.array as da
    from distributed import Client, LocalCluster, get_task_stream, wait

    from infoclust_dask import engine
    from infoclust_dask.cluster._smic_solve import KERNEL_BLOCK_ROWS
    from infoclust_dask.kernels.smic import kernel_row_block, kernel_row_sums, kernel_transpose_pieces

    n = int(a.n)
    print(machine())
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=a.worker_memory,
                      dashboard_address=None) as cluster, Client(cluster):
        rows = max(min(KERNEL_BLOCK_ROWS, -(-n // 8)), 1)
        chunks = ((rows,) * (n // rows) + ((n % rows,) if n % rows else ()), (T,))
        d2 = da.map_blocks(_lists, n, 0, chunks=chunks, dtype=float).persist()
        idx = da.map_blocks(_ids, n, 0, chunks=chunks, dtype=np.int32).persist()
        wait([d2, idx])
        rank = np.random.default_rng(5).permutation(n).astype(np.int32)
        for run in range(a.repeats):
            t0 = time.perf_counter()
            sigma = np.sqrt(np.asarray(engine.rows_at(d2, np.arange(n), columns=T - 1), dtype=np.float64))
            t1 = time.perf_counter()
            with get_task_stream() as stream:
                K = engine.exchange(kernel_transpose_pieces, kernel_row_block, d2, idx, params={"t": T},
                                    shared={"sigma": sigma, "rank": rank}, block_rows=rows, name="phase")
            t2 = time.perf_counter()
            degree = np.concatenate(K.apply(kernel_row_sums))
            t3 = time.perf_counter()
            busy = {"split": 0.0, "join": 0.0}
            for task in stream.data:
                key = task["key"] if isinstance(task["key"], str) else task["key"][0]
                for step in busy:
                    if key.startswith(f"phase-{step}"):
                        busy[step] += sum(s["stop"] - s["start"] for s in task["startstops"]
                                          if s["action"] == "compute")
            K.release()
            print(f"run {run + 1}: {t3 - t0:.2f} s = scales {t1 - t0:.2f} + exchange {t2 - t1:.2f} (tasks busy: "
                  f"split {busy['split']:.1f} s, join {busy['join']:.1f} s) + degrees {t3 - t2:.2f}; "
                  f"degrees' sum {degree.sum():.6f}", flush=True)


if __name__ == "__main__":
    main()
