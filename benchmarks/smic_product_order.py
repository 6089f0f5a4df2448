"""SMIC's kernel products in the rows' store order against a locality order
(issue 65): one process, one thread, the kernel's row blocks as the workers
hold them (``kernels/smic.py``: plain CSR blocks, or ``RankedRows``).

A graph whose neighbours lie within windows of ``--window`` rows of a
hidden order (a stand-in for a kNN graph: near rows in the data), stored in
a random order of its rows (a store written in any order): in store order a
product reads its input vector at random; in the hidden order (what
``locality_rank`` recovers from the data) it reads near where it read last.
Prints the time of one product over all blocks both ways, checks the two
give the same bits, and prints the ratio.

    python benchmarks/smic_product_order.py --n 2000000
"""

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

from infoclust_dask.kernels.smic import RankedRows, sparse_matmat  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--t", type=int, default=10)
    ap.add_argument("--window", type=int, default=65_536)
    ap.add_argument("--block-rows", type=int, default=262_144)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    n, t = a.n, a.t
    rng = np.random.default_rng(0)
    pos = np.arange(n)  # hidden order: neighbours within the same window
    nb = (pos // a.window * a.window)[:, None] + rng.integers(0, a.window, size=(n, t))
    nb = np.minimum(nb, n - 1)
    store = rng.permutation(n)  # store row of the row at hidden position p
    rank = np.empty(n, dtype=np.int32)
    rank[store] = pos.astype(np.int32)  # hidden position of each store row
    rows = np.repeat(store, t)
    cols = store[nb.ravel()]
    K = sp.csr_matrix((rng.random(n * t), (rows, cols)), shape=(n, n))
    K = K.maximum(K.T).tocsr()
    bounds = list(range(0, n, a.block_rows)) + [n]
    plain = [K[s:e] for s, e in zip(bounds[:-1], bounds[1:])]
    ranked = [RankedRows(b, rank, s) for b, s in zip(plain, bounds[:-1])]
    order = np.empty(n, dtype=np.int64)
    order[rank] = np.arange(n)
    x = rng.normal(size=n)

    def product(blocks, v):
        return np.concatenate([sparse_matmat(b, v) for b in blocks])

    assert np.array_equal(product(plain, x), product(ranked, x[order])), "the orders gave other bits"
    times = {}
    for name, blocks, v in (("store order", plain, x), ("locality order", ranked, x[order])):
        product(blocks, v)
        t0 = time.perf_counter()
        for _ in range(a.reps):
            product(blocks, v)
        times[name] = (time.perf_counter() - t0) / a.reps
    t0 = time.perf_counter()
    for _ in range(a.reps):
        x[order]
    gather = (time.perf_counter() - t0) / a.reps
    print(f"n={n:,}, t={t}, {K.nnz:,} entries, blocks of {a.block_rows:,} rows, window {a.window:,}, one thread")
    for name, s in times.items():
        print(f"  {name:>15}: {s * 1e3:7.1f} ms a product ({s / K.nnz * 1e9:.2f} ns an entry)")
    print(f"  the input put in rank order (x[order]): {gather * 1e3:.1f} ms")
    print(f"  ratio store / locality: {times['store order'] / times['locality order']:.2f}; same bits: yes")


if __name__ == "__main__":
    main()
