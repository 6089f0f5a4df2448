"""SMIC's kernel pieces: the compiled split against the numpy form it
replaced, in one process, turn about; the block build (scipy) beside it.

One block of ``--block-rows`` rows of an ``--n``-row kernel (t = 10), the
lists random over all rows as a shuffled store gives them, the other blocks'
transposed entries random too, a random locality rank: the split
(``kernel_transpose_pieces``) of this checkout against
``tests/reference_kernels.py``'s ``smic_kernel_pieces`` (numpy's stable
argsort and fancy indexing). Checks both give the same arrays, prints each
turn's seconds, the medians and their ratio, and the seconds of the block
build that follows (``kernel_row_block`` with ``rank``, scipy's: what the
split's time compares with).

    python benchmarks/smic_kernel_blocks.py --n 10000000 --repeats 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _bench import machine, reference_kernels


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=float, default=1e7)
    p.add_argument("--block-rows", type=int, default=1 << 20)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    from infoclust_dask.kernels.smic import kernel_row_block, kernel_transpose_pieces

    ref = reference_kernels()
    n, m, t = int(a.n), min(int(a.block_rows), int(a.n)), 10
    print(machine())
    rng = np.random.default_rng(0)
    sigma = rng.uniform(0.5, 1.5, n)
    bounds = np.r_[np.arange(0, n, m), n]
    start = int(bounds[len(bounds) // 2 - 1])
    d2 = np.sort(rng.uniform(0.1, 2.0, (m, t)), axis=1)
    idx = rng.integers(0, n, (m, t)).astype(np.int32)
    k = m * t // (len(bounds) - 1)
    incoming = [(rng.integers(0, m, k).astype(np.int32),
                 np.sort(rng.integers(bounds[b], bounds[b + 1], k)).astype(np.int32), rng.uniform(0, 1, k))
                for b in range(len(bounds) - 1)]
    rank = rng.permutation(n).astype(np.int32)
    fns = {"compiled": lambda: kernel_transpose_pieces(d2, idx, start=start, t=t, sigma=sigma, bounds=bounds),
           "numpy": lambda: ref.smic_kernel_pieces(d2, idx, start=start, t=t, sigma=sigma, bounds=bounds),
           "block (scipy)": lambda: kernel_row_block(d2, idx, incoming, start=start, t=t, sigma=sigma, n=n,
                                                     rank=rank)}
    x, y = fns["compiled"](), fns["numpy"]()  # the compiled code loaded, and the same pieces
    same = all(np.array_equal(u, v) for p, q in zip(x, y, strict=True) for u, v in zip(p, q, strict=True))
    print(f"the same pieces as numpy's: {same}")
    if not same:
        raise SystemExit("the compiled split differs from the reference")
    times: dict = {name: [] for name in fns}
    for turn in range(a.repeats):
        for name in list(fns) if turn % 2 == 0 else ["numpy", "compiled", "block (scipy)"]:
            t0 = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - t0)
        print(f"turn {turn + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
    c, s, b = (float(np.median(times[k])) for k in fns)
    print(f"split of one {m:,}-row block of {n:,} rows (medians of {a.repeats}): compiled {c:.2f} s, "
          f"numpy {s:.2f} s: {s / c:.2f}x; the block build after it {b:.2f} s")


if __name__ == "__main__":
    main()
