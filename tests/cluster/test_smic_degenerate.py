"""SMIC on degenerate structure, both eigensolver paths on the same data
(issue 24): the kernel assembled here (``eigen_solver="dense"``: LAPACK
``eigh`` up to 1500 rows) against the kernel kept as row blocks with the
block Krylov-Schur method on their products (``"operator"``); the
alignment of repeated eigenspaces against random rotations of exact
eigenvectors; the connected components against scipy on the assembled
kernel; a fit on either side of the size switch."""

import warnings

import numpy as np
import pytest
import scipy.linalg
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import adjusted_rand_score as ari

from infoclust_dask import SMIC, engine
from infoclust_dask.cluster import _smic, _smic_solve
from infoclust_dask.cluster._smic import _neighbour_lists
from infoclust_dask.kernels.components import COMPONENTS, component_labels
from infoclust_dask.objectives.smic import align, assign, eigen_groups, kernel_matrix, orient


def _blob(n, d, rng, scale=1.0):
    return rng.normal(size=(n, d)) * scale


def case(name, seed=0):
    """``(X, truth, n_clusters)`` of each degenerate structure."""
    rng = np.random.default_rng(seed)
    if name == "separate":  # c components of unequal sizes: c nearly equal top eigenvalues
        sizes = [120, 90, 150, 60]
        X = np.vstack([_blob(s, 3, rng) + 40 * q for q, s in enumerate(sizes)])
        y = np.repeat(np.arange(4), sizes)
        return X, y, 4
    if name == "isolated":  # c components plus two far groups of t + 1 = 7 points (two more components)
        X, y, _ = case("separate", seed)
        X = np.vstack([X, _blob(7, 3, rng, 0.1) + 500.0, _blob(7, 3, rng, 0.1) - 500.0])
        return X, np.concatenate([y, [4] * 7, [5] * 7]), 4
    if name == "touching":  # two clusters that touch: one connected graph
        X = np.vstack([_blob(200, 2, rng), _blob(200, 2, rng) + [3.2, 0]])
        return X, np.repeat([0, 1], 200), 2
    if name == "copies":  # one blob on a dyadic grid and exact copies of it: the kernel is three equal blocks
        base = np.round(_blob(100, 3, rng) * 2**20) / 2**20
        X = np.vstack([base + 64.0 * q for q in range(3)])
        return X, np.repeat(np.arange(3), 100), 3
    if name == "near_duplicate":  # copies of one blob, moved 1e-9: eigenvalues equal to ~1e-8
        base = _blob(100, 3, rng)
        X = np.vstack([base + 30 * q + 1e-9 * rng.normal(size=base.shape) for q in range(3)])
        return X, np.repeat(np.arange(3), 100), 3
    if name == "more_components":  # 5 blobs, 3 clusters asked
        X = np.vstack([_blob(80, 2, rng) + 50 * q for q in range(5)])
        return X, np.repeat(np.arange(5), 80), 3
    raise ValueError(name)


CASES = ["separate", "isolated", "touching", "copies", "near_duplicate", "more_components"]


def _fit(X, c, solver, normalization, t=6):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # more components than clusters: the warning is tested below
        return SMIC(c, t=t, eigen_solver=solver, kernel_normalization=normalization, random_state=0,
                    scheduler="sync").fit(X)


@pytest.mark.parametrize("normalization", ["none", "symmetric"])
@pytest.mark.parametrize("name", CASES)
def test_operator_path_equals_dense_eigh_on_the_same_kernel(name, normalization):
    X, y, c = case(name)
    dense = _fit(X, c, "dense", normalization)
    operator = _fit(X, c, "operator", normalization)
    np.testing.assert_allclose(operator.eigenvalues_, dense.eigenvalues_, rtol=0, atol=1e-8)
    assert ari(dense.labels_, operator.labels_) == 1.0
    assert operator.n_components_ == dense.n_components_
    # the eigenvalues are those of the assembled kernel, by LAPACK
    d2, idx = _neighbour_lists(X, 6)
    K, _, _ = kernel_matrix(d2, idx, 6, normalization=normalization)
    w = scipy.linalg.eigh(K.toarray(), eigvals_only=True)[::-1][:c]
    np.testing.assert_allclose(dense.eigenvalues_, w, rtol=0, atol=1e-8)
    if name in ("separate", "copies", "near_duplicate"):  # one component per cluster
        assert ari(y, dense.labels_) == 1.0


def test_operator_path_on_a_distributed_cluster_equals_dense(local_cluster_client):
    """Three near copies (eigenvalues 4e-10 apart): at eigen_tol 1e-12 the
    operator path on the workers numbers the clusters as LAPACK does; at
    the default 1e-8 the same partition (the copies' order within their
    aligned group may differ: its pivot rows are near ties)."""
    X, y, c = case("near_duplicate")
    dense = _fit(X, c, "dense", "none")
    operator = SMIC(c, t=6, eigen_solver="operator", eigen_tol=1e-12, random_state=0,
                    scheduler=local_cluster_client).fit(X)
    np.testing.assert_allclose(operator.eigenvalues_, dense.eigenvalues_, rtol=0, atol=1e-8)
    np.testing.assert_array_equal(operator.labels_, dense.labels_)
    np.testing.assert_array_equal(operator.predict(X[:40] + 0.05), dense.predict(X[:40] + 0.05))
    default = SMIC(c, t=6, eigen_solver="operator", random_state=0, scheduler=local_cluster_client).fit(X)
    np.testing.assert_allclose(default.eigenvalues_, dense.eigenvalues_, rtol=0, atol=1e-8)
    assert ari(default.labels_, dense.labels_) == 1.0


def test_the_partition_does_not_depend_on_the_basis_of_a_repeated_eigenspace():
    """Exact eigenvectors of the symmetric kernel of 4 separate components
    (eigenvalue 1, four times) rotated by random orthogonal matrices: the
    aligned, oriented vectors and the labels are the same for every
    rotation, and the labels are the components. Without the alignment
    some rotated bases give other partitions (2 of these 10)."""
    X, y, c = case("separate")
    d2, idx = _neighbour_lists(X, 6)
    K, _, _ = kernel_matrix(d2, idx, 6, normalization="symmetric")
    w, U = scipy.linalg.eigh(K.toarray())
    lam, V = w[::-1][:c], U[:, ::-1][:, :c]
    assert eigen_groups(lam) == [[0, 1, 2, 3]]
    prior = np.full(c, 1 / c)
    ref = orient(align(V, lam)[0])
    rng = np.random.default_rng(0)
    unaligned = []
    for _ in range(10):
        Q, _ = np.linalg.qr(rng.normal(size=(c, c)))
        rotated = V @ Q
        aligned, R = align(rotated, lam)
        np.testing.assert_allclose(aligned, rotated @ R, rtol=0, atol=1e-12)
        np.testing.assert_allclose(orient(aligned), ref, rtol=0, atol=1e-10)
        assert ari(y, assign(orient(aligned), prior)) == 1.0
        unaligned.append(ari(y, assign(orient(rotated), prior)))
    assert min(unaligned) < 0.9, unaligned  # the paper's rule alone depends on the basis


def test_simple_eigenvalues_are_not_rotated():
    rng = np.random.default_rng(0)
    V, _ = np.linalg.qr(rng.normal(size=(50, 3)))
    out, R = align(V, np.array([3.0, 2.0, 1.0]))
    np.testing.assert_array_equal(out, V)
    np.testing.assert_array_equal(R, np.eye(3))
    assert eigen_groups([5.0, 5.0 - 1e-9, 4.0, 4.0]) == [[0, 1], [2, 3]]


@pytest.mark.parametrize("chunks", [None, 37, 200])
@pytest.mark.parametrize("name", CASES)
def test_components_equal_scipy_on_the_assembled_kernel(name, chunks):
    import dask.array as da

    X, _, _ = case(name)
    t = 3
    d2, idx = _neighbour_lists(X, t)
    K, _, _ = kernel_matrix(d2, idx, t)
    k_ref, lab_ref = connected_components(K, directed=False)
    data = idx if chunks is None else da.from_array(idx, chunks=(chunks, -1))
    labels, k = component_labels(engine.map_reduce(COMPONENTS, data, params={"t": t}, scheduler="threads",
                                                   block_rows=50), len(X))
    assert k == k_ref
    assert ari(lab_ref, labels) == 1.0
    firsts = [np.flatnonzero(labels == q)[0] for q in range(k)]
    assert firsts == sorted(firsts)  # numbered by their smallest row, whatever the blocks


@pytest.mark.parametrize("split_every", [2, 8])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int32_and_int64_lists_give_the_same_components_with_any_fan_in(dtype, split_every):
    """SMIC's lists are int32 below 2**31 rows, and the forests combine two
    at a time: same components as scipy on the whole graph, forest dtype
    kept (int32 halves the forest near the top of the tree)."""
    import dask.array as da
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    n, t = 900, 2
    idx = rng.integers(0, n, size=(n, t))
    idx[rng.random((n, t)) < 0.45] = -1  # sparse: many components, isolated rows, padding
    ok = idx >= 0
    rows = np.repeat(np.arange(n), t)[ok.ravel()]
    G = sp.coo_matrix((np.ones(rows.size), (rows, idx.ravel()[ok.ravel()])), shape=(n, n))
    k_ref, lab_ref = connected_components(G, directed=True, connection="weak")
    data = da.from_array(idx.astype(dtype), chunks=(64, -1))
    forest = engine.map_reduce(COMPONENTS, data, params={"t": t}, scheduler="sync", split_every=split_every)
    assert forest["node"].dtype == dtype and forest["root"].dtype == dtype
    labels, k = component_labels(forest, n)
    assert k == k_ref > 50
    assert ari(lab_ref, labels) == 1.0


@pytest.mark.parametrize("chunks", [None, (300, 100, 350, 150), 256])
def test_the_fits_components_pass_takes_the_lists_in_large_blocks(chunks, monkeypatch):
    """``graph_components`` (the fit's call) runs one forest per chunk of
    lazy lists, or per :data:`COMPONENT_BLOCK_ROWS` rows of numpy lists,
    not per 4 MiB logical block (at 1e7 rows each block's forest costs a
    union-find over all 1e7 row numbers: 191 blocks, 29 s; 20, 10 s):
    same components as scipy on the whole graph, and the block count
    the rule gives."""
    import dataclasses

    import dask.array as da
    import scipy.sparse as sp

    from infoclust_dask.kernels import components

    rng = np.random.default_rng(5)
    n, t = 900, 3
    idx = rng.integers(0, n, size=(n, t)).astype(np.int32)
    idx[rng.random((n, t)) < 0.5] = -1
    ok = idx >= 0
    rows = np.repeat(np.arange(n), t)[ok.ravel()]
    G = sp.coo_matrix((np.ones(rows.size), (rows, idx.ravel()[ok.ravel()])), shape=(n, n))
    k_ref, lab_ref = connected_components(G, directed=True, connection="weak")
    monkeypatch.setattr(_smic_solve, "COMPONENT_BLOCK_ROWS", 200)
    monkeypatch.setattr(components, "DENSE_SPAN_MAX", 0)  # small spans still take the dense path: both paths run
    leaves = []
    forest = components.knn_forest

    def spy(b, **kw):
        leaves.append(b.shape[0])
        return forest(b, **kw)

    monkeypatch.setattr(_smic_solve, "COMPONENTS", dataclasses.replace(components.COMPONENTS, chunk=spy))
    data = idx if chunks is None else da.from_array(idx, chunks=(chunks, -1))
    with engine.installed("sync"):
        labels, k = _smic_solve.graph_components(data, t)
    assert k == k_ref > 20
    assert ari(lab_ref, labels) == 1.0
    expected = {None: [200] * 4 + [100], 256: [256] * 3 + [132]}.get(chunks)
    if expected is None:  # irregular chunks: whole blocks of the largest chunk's rows, boundaries moved to them
        assert sum(leaves) == n and max(leaves) <= 350 and len(leaves) <= 4
    else:
        assert sorted(leaves, reverse=True) == expected


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_the_dense_and_the_sorted_numbering_of_a_forest_agree(dtype):
    """``_forest`` numbers nodes densely when they cover their span and by
    ``np.unique`` when they are spread out; the same graph, its node numbers
    spread 10**5 apart, must give the same forest spread the same way."""
    from infoclust_dask.kernels.components import _forest

    rng = np.random.default_rng(5)
    u = rng.integers(0, 3000, 1500).astype(dtype)
    v = rng.integers(0, 3000, 1500).astype(dtype)
    dense = _forest(u, v)
    spread = _forest(u.astype(np.int64) * 10**5, v.astype(np.int64) * 10**5)
    np.testing.assert_array_equal(spread["node"], dense["node"].astype(np.int64) * 10**5)
    np.testing.assert_array_equal(spread["root"], dense["root"].astype(np.int64) * 10**5)
    assert dense["node"].dtype == dtype and np.all(dense["root"] < dense["node"])
    # every node is linked to its root through the edges (a reference union-find)
    parent = {}

    def find(a):
        while parent.get(a, a) != a:
            a = parent[a]
        return a

    for a, b in zip(u.tolist(), v.tolist()):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    ref = {a: find(a) for a in set(u.tolist()) | set(v.tolist())}
    assert dict(zip(dense["node"].tolist(), dense["root"].tolist())) == {a: r for a, r in ref.items() if a != r}


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("spread", [1, 10**4])
def test_the_union_find_equals_scipy_with_self_loops_and_repeated_edges(dtype, spread, monkeypatch):
    """The compiled union-find (:mod:`infoclust_dask.kernels._union_find`)
    against ``scipy.sparse.csgraph.connected_components`` on edge lists
    with self-loops, repeated and reversed edges and isolated nodes, on
    both numberings (dense, and sorted: spread-out node numbers with a
    small dense limit)."""
    import scipy.sparse as sp

    from infoclust_dask.kernels import components

    monkeypatch.setattr(components, "DENSE_SPAN_MAX", 1000)
    rng = np.random.default_rng(11)
    n = 4000
    u = rng.integers(0, n, 2500)
    v = np.where(rng.random(2500) < 0.1, u, rng.integers(0, n, 2500))  # self-loops
    u, v = np.concatenate([u, v[:300]]), np.concatenate([v, u[:300]])  # reversed repeats
    u, v = np.concatenate([u, u[:200]]), np.concatenate([v, v[:200]])  # exact repeats
    G = sp.coo_matrix((np.ones(u.size), (u, v)), shape=(n, n))
    k_ref, lab_ref = connected_components(G, directed=True, connection="weak")
    forest = components._forest((u * spread).astype(dtype), (v * spread).astype(dtype))
    assert forest["node"].dtype == dtype and np.all(np.diff(forest["node"]) > 0)
    assert np.all(forest["root"] < forest["node"])
    labels, k = component_labels({"node": forest["node"] // spread, "root": forest["root"] // spread}, n)
    assert k == k_ref > 100
    assert ari(lab_ref, labels) == 1.0
    first = np.array([np.flatnonzero(labels == q)[0] for q in range(k)])
    assert np.all(np.diff(first) > 0)  # components numbered in the order of their smallest nodes


def test_components_count_a_graph_of_isolated_points_and_padding():
    idx = np.array([[-1, -1], [0, -1], [-1, -1], [-1, -1]])
    labels, k = component_labels(engine.map_reduce(COMPONENTS, idx, params={"t": 2}, scheduler="sync"), 4)
    assert k == 3 and labels.tolist() == [0, 0, 1, 2]


def test_more_components_than_clusters_warns_and_reports_them():
    X, _, c = case("more_components")
    with pytest.warns(UserWarning, match=r"has 5 connected components, more than n_clusters=3, and (\d+) rows lie "
                                         "in components that none of the 3 top eigenvectors covers") as rec:
        m = SMIC(c, t=6, random_state=0, scheduler="sync").fit(X)
    assert m.n_components_ == 5
    uncovered = int((m.eigenvectors_ <= 0).all(axis=1).sum())
    assert uncovered >= 160 and f"and {uncovered} rows" in str(rec[0].message)  # 2 blobs at least


def test_a_few_stray_points_in_components_of_their_own_do_not_warn():
    """Four blobs of 300 rows and a far group of 7 (its own component at
    t = 6), symmetric kernel: the 4 largest components are the clusters and
    7 of 1207 rows are covered by no eigenvector, no warning. (With kernel
    (7) as is, the tight group's top eigenvalue exceeds a blob's, so a
    whole blob would be uncovered, which warns.)"""
    rng = np.random.default_rng(0)
    X = np.vstack([_blob(300, 3, rng) + 40 * q for q in range(4)] + [_blob(7, 3, rng, 0.1) + 500.0])
    y = np.repeat(np.arange(5), [300] * 4 + [7])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = SMIC(4, t=6, kernel_normalization="symmetric", random_state=0, scheduler="sync").fit(X)
    assert m.n_components_ == 5
    assert ari(y[:-7], m.labels_[:-7]) == 1.0
    with pytest.warns(UserWarning, match=r"and 30\d rows lie in components that none"):  # a blob, and the group
        SMIC(4, t=6, random_state=0, scheduler="sync").fit(X)


@pytest.mark.parametrize("solver", ["dense", "operator"])
def test_components_equal_to_clusters_are_the_clusters_of_the_symmetric_kernel(solver):
    X, y, c = case("separate")
    m = _fit(X, c, solver, "symmetric")
    assert m.n_components_ == c
    assert ari(y, m.labels_) == 1.0
    np.testing.assert_array_equal(m.eigenvalues_, np.ones(c))
    d2, idx = _neighbour_lists(X, 6)
    K, _, _ = kernel_matrix(d2, idx, 6, normalization="symmetric")
    np.testing.assert_allclose(K @ m.eigenvectors_, m.eigenvectors_, rtol=0, atol=1e-12)  # exact eigenvectors
    np.testing.assert_allclose(m.eigenvectors_.T @ m.eigenvectors_, np.eye(c), rtol=0, atol=1e-12)
    assert ari(y[:60], m.predict(X[:60] + 0.01)) == 1.0


def _recipe(n, seed=7, c=8, d=16):
    """The issue-24 recipe: c Gaussian blobs 9 sigma apart (one component each)."""
    rng = np.random.default_rng(seed)
    C = rng.normal(0, 9, size=(c, d))
    z = rng.integers(0, c, n)
    return C[z] + rng.normal(size=(n, d)), z


def test_a_fit_on_either_side_of_the_size_switch_finds_the_blobs(monkeypatch):
    """The switch from the assembled kernel to row blocks on the workers
    moved to 3000 rows: the same recipe just below and just above it, with
    eight clusters (the column count that a strided in-place negation
    corrupted), is clustered exactly, and the two paths agree on the same
    rows."""
    monkeypatch.setattr(_smic, "DRIVER_KERNEL_MAX_ROWS", 3000)
    monkeypatch.setattr(_smic_solve, "KERNEL_BLOCK_ROWS", 700)
    for n in (2900, 3100):
        X, z = _recipe(n)
        m = SMIC(8, t=10, random_state=0, scheduler="sync").fit(X)
        assert ari(z, m.labels_) >= 0.99, n
    X, z = _recipe(3100)
    dense = SMIC(8, t=10, eigen_solver="dense", random_state=0, scheduler="sync").fit(X)
    np.testing.assert_array_equal(dense.labels_, m.labels_)
    np.testing.assert_allclose(dense.eigenvalues_, m.eigenvalues_, rtol=0, atol=1e-8)


def _block_kernel(seed=0):
    """A block-diagonal kernel: one component of 300 rows, four exact copies
    of a 9-row component (an eigenvalue repeated four times), 30 isolated
    rows (eigenvalue 1 each) and a few components of 20-40 rows."""
    from scipy.sparse import block_diag, csr_matrix

    rng = np.random.default_rng(seed)

    def component(s, density=0.3):
        A = rng.uniform(0.1, 1.0, size=(s, s)) * (rng.uniform(size=(s, s)) < density)
        A = np.triu(A, 1)
        A = A + A.T + np.eye(s)
        A[np.arange(s - 1), np.arange(1, s)] = A[np.arange(1, s), np.arange(s - 1)] = 0.5  # connected: a path
        return A

    copy = component(9, 0.8)
    blocks = [component(300, 0.05), copy, component(30), copy, np.eye(1), component(40), copy, copy, component(20)]
    blocks += [np.eye(1)] * 29
    K = csr_matrix(block_diag(blocks))
    perm = rng.permutation(K.shape[0])  # the components interleaved, as rows of real data are
    return K[perm][:, perm]


@pytest.mark.parametrize("dense_max", [1000, 50])
def test_component_eigenpairs_equal_lapack_on_the_assembled_kernel(dense_max):
    """Each component solved on its own (dense_max 1000: every block by
    batched LAPACK eigh; 50: the 300-row block by Krylov-Schur on its own
    products) against LAPACK on the whole kernel: the same eigenvalues
    (1e-10) and, where the c-th place does not cut a repeated eigenvalue,
    the same eigenspace (its projector, 1e-8)."""
    from infoclust_dask.objectives.smic import component_eigenvectors

    K = _block_kernel()
    w, U = scipy.linalg.eigh(K.toarray())
    w, U = w[::-1], U[:, ::-1]
    for c in range(1, 12):
        lam, V = component_eigenvectors(K, c, dense_max=dense_max)
        np.testing.assert_allclose(lam, w[:c], rtol=0, atol=1e-10)
        np.testing.assert_allclose(V.T @ V, np.eye(c), rtol=0, atol=1e-10)
        np.testing.assert_allclose(K @ V, V * lam, rtol=0, atol=1e-9)
        if w[c - 1] - w[c] > 1e-8:  # the top-c eigenspace is unique
            np.testing.assert_allclose(V @ V.T, U[:, :c] @ U[:, :c].T, rtol=0, atol=1e-8)
        else:  # a repeated eigenvalue cut by the c-th place: whole components' vectors
            _, comp = connected_components(K, directed=False)
            assert all(np.unique(comp[np.abs(V[:, j]) > 1e-12]).size == 1 for j in range(c))


def test_component_eigenpairs_skip_no_block_that_could_rank(monkeypatch):
    """Blocks whose Gershgorin bound is below the c-th eigenvalue found are
    skipped - and only those: counting the batched eigh calls, the 29
    isolated rows (bound 1) are never solved for c = 5, yet the answer is
    LAPACK's; given labels coarser than the kernel's components (two
    components as one group) give the same eigenvalues."""
    from infoclust_dask.objectives import smic as smic_objectives

    K = _block_kernel()
    w = scipy.linalg.eigh(K.toarray(), eigvals_only=True)[::-1]
    sizes = []
    real = np.linalg.eigh
    monkeypatch.setattr(smic_objectives.np.linalg, "eigh", lambda B: sizes.append(B.shape) or real(B))
    lam, _ = smic_objectives.component_eigenvectors(K, 5)
    np.testing.assert_allclose(lam, w[:5], rtol=0, atol=1e-10)
    assert all(s[1] > 1 for s in sizes), sizes
    _, comp = connected_components(K, directed=False)
    coarse = np.where(comp == comp[np.argmax(np.bincount(comp)[comp])], comp.max() + 1, comp)
    lam2, _ = smic_objectives.component_eigenvectors(K, 5, coarse)
    np.testing.assert_allclose(lam2, w[:5], rtol=0, atol=1e-10)


def test_many_components_above_the_dense_size_solve_per_component(monkeypatch):
    """A fit above DENSE_MAX rows whose kernel has more components than
    n_clusters + 2 (eight blobs of unequal sizes, three clusters) takes the
    per-component solve; it equals LAPACK on the whole kernel (below the
    size switch) and the block Krylov-Schur method on the workers' row
    blocks: eigenvalues 1e-8, the same labels."""
    from infoclust_dask.objectives import smic as smic_objectives

    rng = np.random.default_rng(3)
    sizes = [60, 70, 80, 90, 100, 110, 120, 130]
    X = np.vstack([rng.normal(size=(s, 2)) + 60 * q for q, s in enumerate(sizes)])
    lapack = _fit(X, 3, "dense", "none")
    operator = _fit(X, 3, "operator", "none")
    calls = []
    real = smic_objectives.component_eigenvectors
    monkeypatch.setattr(smic_objectives, "component_eigenvectors", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(smic_objectives, "DENSE_MAX", 200)
    per_component = _fit(X, 3, "dense", "none")
    assert calls
    for other in (lapack, operator):
        np.testing.assert_allclose(per_component.eigenvalues_, other.eigenvalues_, rtol=0, atol=1e-8)
        np.testing.assert_array_equal(per_component.labels_, other.labels_)
