"""What a pass costs in this process beyond its kernel, in one run: the
two changes of the seventh session against what they replaced.

1. How a pass's blocks are shared between 2 threads (``InProcess.each``):
   the calling thread and one pool thread taking the blocks in turn (now)
   against every block handed to the pool while the caller waits (before,
   re-created here), interleaved, on a Lloyd step (1e6 x 16, k = 8,
   float64 and float32: 32 blocks of 4 MiB) and a soft K-means pass over
   Letter-sized data (20 000 x 16, K = 26: one block per thread).
2. What the journal of a fit (``checkpoint=``, the CLI's run folder)
   costs per pass: ``Journal.record`` of a soft K-means result (R, S,
   log Z) 9802 times (Letter's annealing) against the time of one pass,
   and the same records written as before this session (one zip member per
   record and array, re-created here).

    python benchmarks/in_process_passes.py [--rounds 15]
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from _bench import best, interleaved

from infoclust_dask import engine, journal
from infoclust_dask.engine import execute
from infoclust_dask.engine.clients import thread_pool
from infoclust_dask.engine.in_process import InProcess
from infoclust_dask.kernels.kmeans import LLOYD_STEP, SOFT_KMEANS


class PoolOnly(InProcess):
    """Before: every block on the pool, the caller waiting for them all."""

    def each(self, func, items):
        if self.threads == 1 or len(items) <= 1:
            return [func(i) for i in items]
        with execute.one_blas_thread():
            return list(thread_pool().map(func, items))


def old_batch(path, records):
    """A batch as written before this session: a zip member per record and array."""
    payload = {}
    for i, (meta, arrays) in enumerate(records):
        payload[f"m{i}"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        for k, v in arrays.items():
            payload[f"a{i}.{k}"] = v
    with open(path, "wb") as fh:
        np.savez(fh, **payload)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    now, before = InProcess(2), PoolOnly(2)
    print("| pass (2 threads) | before: pool only, ms best / median | now: caller + pool, ms best / median "
          "| now / before (median) |")
    print("|---|---|---|---|")
    C = rng.normal(0, 3, size=(8, 16))
    X64 = C[rng.integers(0, 8, 1_000_000)] + rng.normal(size=(1_000_000, 16))
    letter = rng.normal(size=(20_000, 16))
    cases = [("Lloyd step, 1e6 x 16, k = 8, float64", LLOYD_STEP, X64, {"centers": X64[:8].copy()}, 20),
             ("Lloyd step, 1e6 x 16, k = 8, float32", LLOYD_STEP, X64.astype(np.float32), {"centers": X64[:8].copy()}, 20),
             ("soft K-means, 20000 x 16, K = 26, float64", SOFT_KMEANS, letter,
              {"centers": letter[:26] * 0.5, "beta": 0.3}, 200)]
    for name, bp, X, params, inner in cases:
        def run(runner, bp=bp, X=X, params=params, inner=inner):
            for _ in range(inner):
                engine.map_reduce(bp, X, None, params=params, scheduler=runner)

        run(now)
        t = interleaved({"before": (lambda: run(before), None), "now": (lambda: run(now), None)}, a.rounds)
        b, n = t["before"], t["now"]
        print(f"| {name} | {b[0] / inner * 1e3:.3f} / {b[1] / inner * 1e3:.3f} | {n[0] / inner * 1e3:.3f} / "
              f"{n[1] / inner * 1e3:.3f} | {n[1] / b[1]:.2f} |", flush=True)

    # the journal
    res = engine.map_reduce(SOFT_KMEANS, letter, None, params=cases[2][3], scheduler=now)
    one_pass = best(lambda: engine.map_reduce(SOFT_KMEANS, letter, None, params=cases[2][3], scheduler=now), 200)[1]
    n_rec = 9802
    tmp = Path(tempfile.mkdtemp(prefix="journal-bench-"))
    params = [{"centers": letter[:26] * 0.5 + i * 1e-9, "beta": 0.3} for i in range(n_rec)]
    t0 = time.perf_counter()
    with journal.recording(tmp / "run", {"bench": 1}, resume=False) as j:
        for p in params:
            j.record("soft_kmeans", p, res)
    t_now = time.perf_counter() - t0
    records = [({"position": i, "name": "soft_kmeans", "params": journal._digest(p), "stored": True},
                {k: np.asarray(v) for k, v in res.items()}) for i, p in enumerate(params)]
    t0 = time.perf_counter()
    for i in range(0, n_rec, 1024):
        old_batch(tmp / f"old{i}.npz", records[i:i + 1024])
    t_old = time.perf_counter() - t0
    t0 = time.perf_counter()
    for p in params:
        journal._digest(p)
    t_digest = time.perf_counter() - t0
    print()
    print(f"| journal of {n_rec} soft K-means passes | seconds | per pass (us) | per pass / one pass (median {one_pass * 1e3:.2f} ms) |")
    print("|---|---|---|---|")
    print(f"| records now (grouped batches, digests included) | {t_now:.3f} | {t_now / n_rec * 1e6:.0f} | "
          f"{t_now / n_rec / one_pass:.3f} |")
    print(f"| batch files as before (a member per record and array; digests not included) | {t_old:.3f} | "
          f"{t_old / n_rec * 1e6:.0f} | {t_old / n_rec / one_pass:.3f} |")
    print(f"| the parameters' digests alone | {t_digest:.3f} | {t_digest / n_rec * 1e6:.0f} | "
          f"{t_digest / n_rec / one_pass:.3f} |")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
