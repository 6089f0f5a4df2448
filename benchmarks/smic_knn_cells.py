"""One cell of SMIC's approximate neighbour graph, four ways (issue 65):
the t nearest neighbours of every row of one cell of Gaussian rows, one
thread each, recall against brute force on 1000 seeded rows, time per row.

- NN-descent (pynndescent's ``NNDescent``, as :func:`infoclust_dask.kernels.knn.cell_build`
  runs it: ``n_neighbors = ceil(2.5 t) + 1``, then the exact float64 top t);
- faiss' HNSW (``IndexHNSWFlat``, M 32, efConstruction 32, efSearch 22,
  each row searched from its own node: the cell search before issue 65);
- partition + matrix products: K-means leaves of ``--leaf`` rows, each
  leaf's rows against the rows of its ``--probes`` nearest leaves by matrix
  products and the compiled smallest-k selection (``brute_candidates``, brute
  force, float64) (the approach
  of partition-based builders such as PiPNN);
- an exact k-d tree (scipy's ``cKDTree``) on a sample of queries;
- then one cell of ``EXACT_CELL_ROWS`` rows (32 768) searched exactly by
  brute force (what ``cell_build`` does up to that size) and by NN-descent.

    python benchmarks/smic_knn_cells.py --n 200000 --d 16

Needs the [bench] extra (faiss-cpu). The first NN-descent call in a process
compiles pynndescent's loops (not cached by pynndescent: ~20 s); it is
timed separately and left out of the per-row figure.
"""

import argparse
import time

import numpy as np

from infoclust_dask.kernels.knn import cell_build


def truth(X, rows, t):
    out = []
    xn = (X * X).sum(1)
    for a in range(0, len(rows), 256):
        q = X[rows[a:a + 256]]
        d2 = (q * q).sum(1)[:, None] - 2 * q @ X.T + xn[None]
        d2[np.arange(len(q)), rows[a:a + 256]] = np.inf
        out.append(np.argsort(d2, axis=1)[:, :t])
    return np.vstack(out)


def recall(lists, rows, tr):
    return float(np.mean([len(set(lists[i]) & set(tr[i])) / tr.shape[1] for i in range(len(rows))]))


def nn_descent(X, t, rows):
    n = len(X)
    _, _, idx = cell_build([(X, np.arange(n), np.ones(n, bool))], t=t, seed=0, exact_rows=0)
    return idx[rows]


def hnsw(X, t, rows):
    import faiss

    faiss.omp_set_num_threads(1)
    xf = X.astype(np.float32)
    index = faiss.IndexHNSWFlat(X.shape[1], 32)
    index.hnsw.efConstruction = 32
    index.add(xf)
    index.hnsw.efSearch = 22
    n = len(X)
    found = np.empty((n, t + 1), dtype=np.int64)
    dist = np.empty((n, t + 1), dtype=np.float32)
    entry = np.arange(n, dtype=np.int32)
    at = np.zeros(n, dtype=np.float32)
    index.search_level_0(n, faiss.swig_ptr(xf), t + 1, faiss.swig_ptr(entry), faiss.swig_ptr(at),
                         faiss.swig_ptr(dist), faiss.swig_ptr(found), 1, 1)
    return np.array([[j for j in found[r] if j != r][:t] for r in rows])


def products(X, t, rows, leaf, probes):
    from infoclust_dask import KMeans
    from infoclust_dask.kernels.knn import brute_candidates

    n = len(X)
    L = max(1, n // leaf)
    sample = X[np.random.default_rng(0).choice(n, min(n, 30 * L), replace=False)]
    C = KMeans(L, random_state=0, scheduler="sync", max_iter=5, n_init=1).fit(sample).cluster_centers_
    lab = np.concatenate([np.argmin((C * C).sum(1)[None] - 2 * X[a:a + 65536] @ C.T, axis=1)
                          for a in range(0, n, 65536)])
    order = np.argsort(lab, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(lab, minlength=L))])
    near = np.argsort(((C[:, None] - C[None]) ** 2).sum(-1), axis=1)[:, :probes]
    out = np.empty((n, t), dtype=np.int64)
    xf = X.astype(np.float32)
    for A in range(L):
        q_rows = order[ptr[A]:ptr[A + 1]]
        if not q_rows.size:
            continue
        cand = np.concatenate([order[ptr[B]:ptr[B + 1]] for B in near[A]])
        Y = xf[cand] - C[A].astype(np.float32)
        for a in range(0, q_rows.size, 512):
            Q = xf[q_rows[a:a + 512]] - C[A].astype(np.float32)
            k = min(t + 1, cand.size)
            sel = cand[brute_candidates(Q.astype(np.float64), Y.astype(np.float64), k)]
            for i, r in enumerate(q_rows[a:a + 512]):
                out[r, :k - 1] = [j for j in sel[i] if j != r][:k - 1]
    return out[rows]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--d", type=int, default=16)
    p.add_argument("--t", type=int, default=10)
    p.add_argument("--leaf", type=int, default=1000)
    p.add_argument("--probes", type=int, nargs="+", default=[8, 16])
    p.add_argument("--tree-queries", type=int, default=2000)
    a = p.parse_args()
    from threadpoolctl import threadpool_limits

    X = np.random.default_rng(1).normal(size=(a.n, a.d))
    rows = np.sort(np.random.default_rng(2).choice(a.n, 1000, replace=False))
    tr = truth(X, rows, a.t)
    res = {}
    with threadpool_limits(1):
        t0 = time.perf_counter()
        nn_descent(X[:5000], a.t, np.arange(10))
        print(f"NN-descent's first call (pynndescent compiles its loops): {time.perf_counter() - t0:.1f} s", flush=True)
        runs = [("NN-descent", lambda: nn_descent(X, a.t, rows)), ("faiss HNSW", lambda: hnsw(X, a.t, rows))]
        runs += [(f"products, leaves of {a.leaf}, {pr} probes", lambda pr=pr: products(X, a.t, rows, a.leaf, pr))
                 for pr in a.probes]
        for name, fn in runs:
            t0 = time.perf_counter()
            lists = fn()
            res[name] = ((time.perf_counter() - t0) / a.n * 1e6, recall(lists, rows, tr))
            print(f"{name}: {res[name][0]:.1f} us a row, recall {res[name][1]:.4f}", flush=True)
        from scipy.spatial import cKDTree

        t0 = time.perf_counter()
        tree = cKDTree(X)
        build = time.perf_counter() - t0
        q = rows[:a.tree_queries]
        t0 = time.perf_counter()
        tree.query(X[q], k=a.t + 1)
        per = (time.perf_counter() - t0) / len(q) * 1e6 + build / a.n * 1e6
        res["exact k-d tree"] = (per, 1.0)
        print(f"exact k-d tree (cKDTree): {per:.1f} us a row (build {build:.1f} s), recall 1", flush=True)
        from infoclust_dask.kernels.knn import EXACT_CELL_ROWS

        m = min(a.n, EXACT_CELL_ROWS)
        cell = [(X[:m], np.arange(m), np.ones(m, bool))]
        times = {}
        for name, rows_exact in (("exact (brute force)", None), ("NN-descent", 0)):
            t0 = time.perf_counter()
            cell_build(cell, t=a.t, seed=0, exact_rows=rows_exact)
            times[name] = time.perf_counter() - t0
        print(f"a cell of {m} rows (EXACT_CELL_ROWS): exact {times['exact (brute force)']:.2f} s, NN-descent "
              f"{times['NN-descent']:.2f} s (compiled); exact / NN-descent "
              f"{times['exact (brute force)'] / times['NN-descent']:.2f}", flush=True)
    base = res["NN-descent"][0]
    print(f"\n| method (n = {a.n}, d = {a.d}, t = {a.t}, one thread) | us a row | recall | time / NN-descent |")
    print("|---|---|---|---|")
    for name, (us, rec) in res.items():
        print(f"| {name} | {us:.1f} | {rec:.4f} | {us / base:.2f} |")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()
    main()
