"""SMIC's kernel row blocks: the compiled split and block build against the
numpy / scipy forms they replaced, turn about, in ``--processes`` processes
at once (a fit runs one block on each worker of a host: they share its
memory bus and caches).

One block of ``--block-rows`` rows of an ``--n``-row kernel (t = 10), the
lists random over all rows as a shuffled store gives them, the other blocks'
transposed entries random too, a random locality rank: the split
(``kernel_transpose_pieces``) and the block (``kernel_row_block`` with
``rank``) of this checkout against ``tests/reference_kernels.py``'s
``smic_kernel_pieces`` / ``smic_kernel_block`` (numpy's stable argsort;
scipy's coordinates to CSR, ``maximum`` twice, ``eliminate_zeros``, row
indexing and the renaming). Each process checks both give the same arrays;
every step starts in all processes together. Prints each turn's seconds
(the slowest process), the medians over processes and turns, and the
ratios.

    python benchmarks/smic_kernel_blocks.py --n 10000000 --repeats 3 --processes 2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import numpy as np
from _bench import machine, reference_kernels

STEPS = ("split compiled", "split numpy", "block compiled", "block scipy")


def _run(n, m, repeats, proc, barrier, queue):
    from infoclust_dask.kernels.smic import kernel_row_block, kernel_transpose_pieces

    ref = reference_kernels()
    t = 10
    rng = np.random.default_rng(proc)
    sigma = rng.uniform(0.5, 1.5, n)
    bounds = np.r_[np.arange(0, n, m), n]
    start = int(bounds[(len(bounds) - 1) // 2])
    d2 = np.sort(rng.uniform(0.1, 2.0, (m, t)), axis=1)
    idx = rng.integers(0, n, (m, t)).astype(np.int32)
    k = m * t // (len(bounds) - 1)
    incoming = [(rng.integers(0, m, k).astype(np.int32),
                 np.sort(rng.integers(bounds[b], bounds[b + 1], k)).astype(np.int32), rng.uniform(0, 1, k))
                for b in range(len(bounds) - 1)]
    rank = rng.permutation(n).astype(np.int32)
    fns = {"split compiled": lambda: kernel_transpose_pieces(d2, idx, start=start, t=t, sigma=sigma, bounds=bounds),
           "split numpy": lambda: ref.smic_kernel_pieces(d2, idx, start=start, t=t, sigma=sigma, bounds=bounds),
           "block compiled": lambda: kernel_row_block(d2, idx, incoming, start=start, t=t, sigma=sigma, n=n,
                                                      rank=rank),
           "block scipy": lambda: ref.smic_kernel_block(d2, idx, incoming, start=start, t=t, sigma=sigma, n=n,
                                                        rank=rank)}
    x, y = fns["split compiled"](), fns["split numpy"]()  # the compiled code loaded, and the same arrays
    same = all(np.array_equal(u, v) for p, q in zip(x, y, strict=True) for u, v in zip(p, q, strict=True))
    K, (local, R) = fns["block compiled"](), fns["block scipy"]()
    same = same and np.array_equal(K.local, local) and all(
        np.array_equal(getattr(K.csr, f), getattr(R, f)) for f in ("indptr", "indices", "data"))
    queue.put((proc, -1, "same", same))
    for turn in range(repeats):
        order = STEPS if turn % 2 == 0 else ("split numpy", "split compiled", "block scipy", "block compiled")
        for name in order:
            barrier.wait()
            t0 = time.perf_counter()
            fns[name]()
            queue.put((proc, turn, name, time.perf_counter() - t0))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=float, default=1e7)
    p.add_argument("--block-rows", type=int, default=1 << 20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--processes", type=int, default=2)
    a = p.parse_args()
    n, m, procs = int(a.n), min(int(a.block_rows), int(a.n)), int(a.processes)
    print(machine())
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(procs), ctx.Queue()
    workers = [ctx.Process(target=_run, args=(n, m, a.repeats, i, barrier, queue)) for i in range(procs)]
    for w in workers:
        w.start()
    times: dict = {name: {} for name in STEPS}
    for _ in range(procs * (1 + a.repeats * len(STEPS))):
        proc, turn, name, value = queue.get()
        if name == "same":
            print(f"process {proc}: the same arrays as the references': {value}", flush=True)
            if not value:
                raise SystemExit("the compiled kernel pieces differ from the references")
            continue
        times[name].setdefault(turn, []).append(value)
    for w in workers:
        w.join()
    for turn in range(a.repeats):
        print(f"turn {turn + 1} (the slowest of {procs}): "
              + ", ".join(f"{s} {max(times[s][turn]):.2f} s" for s in STEPS))
    med = {s: float(np.median([v for vs in times[s].values() for v in vs])) for s in STEPS}
    print(f"one {m:,}-row block of {n:,} rows, {procs} processes at once, medians of {procs * a.repeats}: "
          f"split {med['split compiled']:.2f} s against numpy's {med['split numpy']:.2f} "
          f"({med['split numpy'] / med['split compiled']:.2f}x); block {med['block compiled']:.2f} s against "
          f"scipy's {med['block scipy']:.2f} ({med['block scipy'] / med['block compiled']:.2f}x)")


if __name__ == "__main__":
    main()
