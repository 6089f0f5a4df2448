"""How many kernel products SMIC's eigensolver needs, and what changes it
(issue 65): the kernel (7) of ``--n`` Gaussian blob rows (10 centres,
d = 16, t = 10; neighbour graph by the NN-descent cell kernel, one cell),
its top 10 eigenpairs by :func:`infoclust_dask.objectives.smic.operator_eigenvectors`
with products in this process (``K @ V``, scipy), counting the products:
the basis size ``m``, the tolerance, and the block method with a block of
``b`` vectors, each against the default; the eigenvectors' largest
difference from the default's and whether the labels agree. Then the
start vector of the single-vector method on the shifted kernel ``K +
eps diag(component)`` (the rule before the default's per-component runs): the default's seeded uniform
draw, the degrees, the degrees over the root of each component's size.

    python benchmarks/smic_eigen_products.py --n 200000
"""

import argparse
import time

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=200_000)
    a = p.parse_args()
    import scipy.sparse.csgraph as cg

    from infoclust_dask.datasets import make_blobs
    from infoclust_dask.kernels.knn import cell_build
    from infoclust_dask.objectives.smic import kernel_matrix, operator_eigenvectors, orient

    X = np.asarray(make_blobs(a.n, 16, centers=10, random_state=0, lazy=False)[0])
    _, d2, idx = cell_build([(X, np.arange(a.n), np.ones(a.n, bool))], t=10, seed=0)
    K, _, degree = kernel_matrix(d2, idx.astype(np.int64), 10, normalization="none")
    n_comp, comp = cg.connected_components(K, directed=False)
    print(f"n = {a.n}, {K.nnz} kernel entries, {n_comp} connected components", flush=True)

    def labels(V):
        return np.argmax(np.maximum(orient(V), 0.0), axis=1)

    ref = None
    print("| setting | products | vectors per product | seconds (in-process products) | max abs difference "
          "from the default | labels as the default |")
    print("|---|---|---|---|---|---|")
    for name, kw in [("default (m 21, tol 1e-12)", {}), ("m 40", {"m": 40}), ("m 60", {"m": 60}),
                     ("tol 1e-8", {"tol": 1e-8}), ("tol 1e-6", {"tol": 1e-6}),
                     ("block of 12", {"block_size": 12})]:
        rep = {}
        t0 = time.perf_counter()
        _, V = operator_eigenvectors(lambda Z: K @ Z, a.n, 10, random_state=0, components=comp,
                                     norm=float(degree.max()), report=rep, **kw)
        dt = time.perf_counter() - t0
        if ref is None:
            ref = V
        diff = np.abs(np.abs(V) - np.abs(ref)).max()
        print(f"| {name} | {rep['products']} | {rep['block_size']} | {dt:.1f} | {diff:.1e} | "
              f"{bool((labels(V) == labels(ref)).all())} |", flush=True)
    SHIFT = 1e-8  # the per-component shift of the single-vector method, the rule before the per-component runs
    from infoclust_dask.solvers.eigen import basis_size, krylov_schur

    eps, q, count = SHIFT * float(degree.max()), comp.astype(np.float64), [0]

    def shifted(v):
        count[0] += 1
        return K @ v + eps * q * v

    for name, v0 in [("uniform(0.5, 1.5), seeded (the default)", np.random.default_rng(0).uniform(0.5, 1.5, a.n)),
                     ("the degrees", degree.copy()),
                     ("the degrees / sqrt(component size)", degree / np.sqrt(np.bincount(comp)[comp]))]:
        count[0] = 0
        krylov_schur(shifted, a.n, 10, v0=v0, tol=1e-12, m=basis_size(a.n, 10), random_state=0)
        print(f"the rule before (single vector on the shifted kernel), start vector {name}: {count[0]} products",
              flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()
    main()
