"""SMIC's approximate neighbour graph (an NN-descent graph per cell of a
coarse partition, on the workers; small cells searched exactly) against
exact references: the graph equals brute force but for its measured
recall, is the same on every runner, the recall estimate equals a
brute-force count, and SMIC clusters the same with either graph; the cell
kernels against brute force, on degenerate cells too (duplicates, fewer
rows than neighbours, one huge cell)."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import NearestNeighbors

from infoclust_dask import SMIC, engine
from infoclust_dask.cluster._smic import _neighbour_lists, knn_recall
from infoclust_dask.kernels.knn import KNN_CELLS, cell_build


def _blobs(n, seed=0):
    X, y = make_blobs(n_samples=n, centers=6, n_features=8, cluster_std=1.0, random_state=seed)
    return X, y


def _exact(X, t):
    ind = NearestNeighbors(n_neighbors=t + 1).fit(X).kneighbors(X, return_distance=False)
    return np.array([[j for j in row if j != i][:t] for i, row in enumerate(ind)])


def _recall(a, b):
    return np.mean([len(set(r) & set(s)) / len(r) for r, s in zip(a, b, strict=True)])


def _cells_graph(X, t, data, scheduler, **build):
    """The partitioned search of ``X`` (``data``: numpy or dask) with the
    plan SMIC makes and ``build`` over the cells' defaults."""
    from infoclust_dask.cluster._knn_graph import _cell_plan
    from infoclust_dask.kernels.knn import nnd_settings

    centres, groups, radii, _ = _cell_plan(X, 8, t, 0)
    out = ((np.float64, (t,)), (np.int64, (t,)))
    d2, idx = engine.partition_pairs(KNN_CELLS, data, n_parts=len(radii), outputs=out, block_rows=700,
                                     params={"t": t, "centers": centres, "groups": groups, "radii": radii},
                                     build_params={"t": t, **nnd_settings(t), **build},
                                     join_params={"t": t}, scheduler=scheduler)
    if engine.is_lazy(d2):
        d2, idx = engine.compute((d2, idx), scheduler="threads")
    return np.asarray(d2), np.asarray(idx)


#: the NN-descent path's tests (cells of tens of thousands of rows: seconds each) run in make test-slow; make
#: test runs the same tests on exactly searched cells
NN_DESCENT = pytest.param(0, marks=pytest.mark.slow, id="nn-descent")
EXACT = pytest.param(None, id="exact")


@pytest.mark.parametrize("scheduler", ["sync", "threads", "distributed"])
def test_blockwise_graph_matches_exact(scheduler, request):
    """SMIC's approximate lists (8 cells of ~750 rows: searched exactly)
    against brute force, on every runner."""
    sched = request.getfixturevalue("local_cluster_client") if scheduler == "distributed" else scheduler
    X, _ = _blobs(6000)
    t = 10
    exact = _exact(X, t)
    with engine.installed(sched):
        d2, idx = _neighbour_lists(X, t, "approximate", None)  # 8 cells
    assert idx.shape == (6000, t) and (idx >= 0).all() and (idx != np.arange(6000)[:, None]).all()
    # distances are exact for the pairs found, sorted
    np.testing.assert_allclose(d2, ((X[:, None, :] - X[idx]) ** 2).sum(-1), rtol=1e-12)
    assert (np.diff(d2, axis=1) >= 0).all()
    assert _recall(exact, idx) >= 0.995  # exact cells: only the routing can miss


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["threads", "distributed"])
def test_nn_descent_cells_are_the_same_on_every_runner(scheduler, request):
    """The NN-descent path (every cell forced through it) gives the same
    bits on every runner and chunking as in one process, with the recall
    the defaults promise."""
    import dask.array as da

    sched = request.getfixturevalue("local_cluster_client") if scheduler == "distributed" else scheduler
    X, _ = _blobs(6000)
    t = 10
    exact = _exact(X, t)
    one_d2, one_idx = _cells_graph(X, t, X, "sync", exact_rows=0)
    got_d2, got_idx = _cells_graph(X, t, da.from_array(X, chunks=1100), sched, exact_rows=0)
    np.testing.assert_array_equal(got_idx, one_idx)
    np.testing.assert_array_equal(got_d2, one_d2)
    assert _recall(exact, got_idx) >= 0.99


def test_recall_estimate_equals_a_brute_force_count():
    X, _ = _blobs(3000, seed=1)
    t = 8
    exact = _exact(X, t)
    noisy = exact.copy()
    rng = np.random.default_rng(0)
    wrong = rng.random(noisy.shape) < 0.2  # a fifth of the entries replaced by rows that are no neighbours
    noisy[wrong] = (np.nonzero(wrong)[0] + 1500) % 3000  # the row half the data set away
    got = knn_recall(X, noisy, n_queries=3000, scheduler="sync")  # every row sampled: the exact count
    np.testing.assert_allclose(got, _recall(exact, noisy), rtol=0, atol=1e-12)
    assert 0.75 < got < 0.85


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_smic_with_the_approximate_graph_clusters_as_with_the_exact_one():
    X, y = _blobs(3000, seed=2)
    ex = SMIC(6, t=7, random_state=0, scheduler="sync", knn="exact").fit(X)
    ap = SMIC(6, t=7, random_state=0, scheduler="sync", knn="approximate").fit(X)
    assert ex.knn_ == "exact" and ex.knn_recall_ == 1.0
    assert ap.knn_ == "approximate" and ap.knn_recall_ >= 0.98
    assert adjusted_rand_score(ex.labels_, ap.labels_) > 0.99
    assert adjusted_rand_score(y, ap.labels_) > 0.99
    # auto: exact at this size
    assert SMIC(6, t=7, random_state=0, scheduler="sync").fit(X).knn_ == "exact"


@pytest.mark.slow
def test_low_recall_warns(monkeypatch):
    big, _ = make_blobs(n_samples=40_000, centers=2, n_features=8, random_state=3)  # cells of ~5000 rows
    monkeypatch.setattr("infoclust_dask.kernels.knn.EXACT_CELL_ROWS", 1000)  # NN-descent on cells this small
    with pytest.warns(UserWarning, match=r"recall 0\.\d+ .* below 0.9; raise knn_params n_neighbors"):
        SMIC(2, t=10, random_state=0, scheduler="sync", knn="approximate",
             knn_params={"n_neighbors": 11, "max_candidates": 2, "n_iters": 1}).fit(big)


def test_bad_params_are_named():
    X, _ = _blobs(3000, seed=3)
    with pytest.raises(ValueError, match="'knn_params' parameter of SMIC must be None or a dict with keys"):
        SMIC(6, knn_params={"nprobe": 4}).fit(X)
    with pytest.raises(ValueError, match="the HNSW keys M, ef_construction and ef_search went with faiss"):
        SMIC(6, knn_params={"M": 32}).fit(X)
    with pytest.raises(ValueError, match="'knn' parameter of SMIC must be"):
        SMIC(6, knn="faiss").fit(X)


def test_store_input_runs_the_index_on_the_blocks(tmp_path, local_cluster_client):
    from infoclust_dask import write_dataset

    X, _ = _blobs(4000, seed=4)
    store = write_dataset(tmp_path / "b.zarr", X, chunks=1000)
    a = SMIC(6, t=5, random_state=0, scheduler=local_cluster_client, knn="approximate").fit(store)
    b = SMIC(6, t=5, random_state=0, scheduler="sync", knn="approximate").fit(X)
    assert a.knn_recall_ >= 0.98
    assert adjusted_rand_score(np.asarray(engine.compute(a.labels_) if engine.is_lazy(a.labels_) else a.labels_),
                               b.labels_) > 0.99


@pytest.mark.parametrize("normalization", ["none", "symmetric"])
def test_predict_in_two_passes_equals_the_blockwise_rule(normalization, monkeypatch):
    """predict for 10 000 new rows (three query blocks) equals the earlier
    implementation - neighbours and kernel sums for 4096 new rows at a time,
    two passes each - to 1e-10, and reads the training data twice in all."""
    from infoclust_dask.kernels.knn import KNN_QUERY
    from infoclust_dask.kernels.smic import SMIC_OOS

    X, _ = _blobs(3000, seed=5)
    new = np.random.default_rng(1).normal(size=(10_000, 8)) * 3
    m = SMIC(6, t=6, random_state=0, scheduler="sync", kernel_normalization=normalization).fit(X)
    from infoclust_dask.engine.choose import InProcess

    computes = []
    real = InProcess.compute  # every pass of the engine computes through its runner
    monkeypatch.setattr(InProcess, "compute",
                        lambda self, obj, **k: (computes.append(1) if isinstance(obj, tuple) else None)
                        or real(self, obj, **k))
    got = m.predict_proba(new)
    assert len(computes) == 2
    monkeypatch.setattr(InProcess, "compute", real)
    t, phi = m.t_, m.eigenvectors_
    if normalization == "symmetric":
        phi = phi / np.sqrt(m.degree_)[:, None]
    denom = m.eigenvalues_ * np.maximum(m.eigenvectors_, 0.0).sum(axis=0)
    ref = []
    for a in range(0, len(new), 4096):
        q = new[a:a + 4096]
        d2q, nbr = engine.map_reduce(KNN_QUERY, X, params={"xq": q, "t": t}, scheduler="sync")
        sums = engine.map_reduce(SMIC_OOS, X, phi, m.local_scales_,
                                 params={"xq": q, "sigma_q": np.sqrt(d2q[:, t - 1]), "nbr": nbr}, scheduler="sync")
        raw = m.class_prior_ * np.maximum(sums["kphi"], 0.0) / denom
        if normalization == "symmetric":
            raw = raw / np.sqrt(1.0 + sums["ksum"])[:, None]
        tot = raw.sum(axis=1, keepdims=True)
        ref.append(np.where(tot > 0, raw / np.where(tot > 0, tot, 1.0), m.class_prior_))
    np.testing.assert_allclose(got, np.vstack(ref), rtol=1e-10, atol=1e-12)


def _brute(X, t):
    d2 = ((X[:, None, :] - X[None]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    idx = np.argsort(d2, axis=1, kind="stable")[:, :t]
    return np.take_along_axis(d2, idx, 1), idx


@pytest.mark.parametrize("groups", [None, [0, 0, 1, 2, 2, 3], [1, 0, 1, 0, 1, 0]])
def test_every_neighbour_within_the_cell_radius_is_indexed_with_the_row(groups):
    """With exact radii (the sample is all rows, the quantile 1: every row's
    true t-th distance is within its cell's radius), each cell's piece
    holds every true neighbour of every own row (ghosts from the other
    cells by the bisector test), own rows are marked and each row is own in
    exactly one cell; with radius 0 no ghost is sent. The same with cells
    made of several centres (``groups``: the bisector test against the
    nearest of the cell's centres)."""
    from infoclust_dask.kernels.knn import cell_radii, cell_split, nearest_cells

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4))
    t = 5
    centres = X[rng.choice(1500, 6, replace=False)]
    member = np.arange(6) if groups is None else np.asarray(groups)
    n_cells = int(member.max()) + 1
    cells = member[nearest_cells(X, centres)]
    _, idx = _brute(X, t)
    radii = cell_radii(X, centres, t=t, n_rows=len(X), quantile=1.0, max_queries=len(X), groups=groups)
    assert radii.shape == (n_cells,)
    pieces = cell_split(X[:900], start=0, centers=centres, radii=radii, groups=groups)
    rest = cell_split(X[900:], start=900, centers=centres, radii=radii, groups=groups)
    assert len(pieces) == len(rest) == n_cells
    owners = np.zeros(len(X), dtype=int)
    for g in range(n_cells):
        ids = np.concatenate([pieces[g][1], rest[g][1]])
        own = np.concatenate([pieces[g][2], rest[g][2]])
        np.testing.assert_array_equal(np.sort(ids[own]), np.flatnonzero(cells == g))
        owners[ids[own]] += 1
        needed = set(idx[cells == g].ravel().tolist())
        assert needed <= set(ids.tolist()), g
        assert len(ids) > own.sum()  # these Gaussian rows do cross the boundaries
    assert (owners == 1).all()
    bare = cell_split(X, start=0, centers=centres, radii=np.zeros(n_cells), groups=groups)
    assert all(p[2].all() for p in bare)


@pytest.mark.parametrize("n_rows", [300, 3000, 10**6])
def test_cell_radii_equal_brute_force(n_rows):
    """Each cell's radius against numpy: the quantile of its first sampled
    rows' distance to their ``k``-th nearest other sampled row of the cell,
    ``k = ceil(t m / n_rows)`` (t, ceil(10 * 300 / 3000) = 1, and 1), with
    duplicate rows (distance 0) and a cell too small for any (inf)."""
    from infoclust_dask.kernels.knn import cell_radii, nearest_cells

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3))
    X[10:14] = X[9]  # duplicates
    centres = np.vstack([X[:3], [[50.0, 50.0, 50.0]]])
    X[-2:] = centres[3] + 0.1 * rng.normal(size=(2, 3))  # cell 3: two rows, fewer than k + 1 when k = 5
    t, quantile, queries = 5, 0.8, 60
    got = cell_radii(X, centres, t=t, n_rows=n_rows, quantile=quantile, max_queries=queries)
    k = int(min(t, max(1, np.ceil(t * len(X) / n_rows))))
    cells = nearest_cells(X, centres)
    for g in range(4):
        rows = X[cells == g]
        if len(rows) <= k:
            assert np.isinf(got[g])
            continue
        d2 = ((rows[:queries, None, :] - rows[None, :, :]) ** 2).sum(-1)
        d2[np.arange(min(queries, len(rows))), np.arange(min(queries, len(rows)))] = np.inf
        want = np.sqrt(np.quantile(np.sort(d2, axis=1)[:, k - 1], quantile))
        assert got[g] == pytest.approx(want, rel=1e-9, abs=1e-12), (g, k)


def test_cells_cut_through_one_cluster_are_merged():
    """Two blobs far apart in 16 dimensions, each cut in half by two of
    four centres: nearly every row of a half is a ghost of the other half,
    so the halves share a cell; the blobs stay apart. With a cap below a
    blob's rows nothing merges; blobs each with their own centre (no cut)
    keep their cells. Merging is decided on the sample alone."""
    from infoclust_dask.kernels.knn import cell_radii, cell_split, merge_cells

    rng = np.random.default_rng(4)
    d, n = 16, 8000
    far = np.zeros(d)
    far[0] = 40.0
    X = np.vstack([rng.normal(size=(n // 2, d)), far + rng.normal(size=(n // 2, d))])
    step = np.zeros(d)
    step[1] = 0.5
    centres = np.vstack([-step, step, far - step, far + step])  # each blob cut through its middle
    radii = cell_radii(X, centres, t=10, n_rows=len(X))
    groups = merge_cells(X, centres, radii, n_rows=len(X), max_rows=10**9)
    assert groups.tolist() == [0, 0, 1, 1]
    # the estimate scales the sample's counts to n_rows: a cap below a blob's rows (a half is 2000 rows) keeps them
    assert merge_cells(X, centres, radii, n_rows=len(X), max_rows=3000).tolist() == [0, 1, 2, 3]
    # the cost the merge saves: the split indexes each half with nearly all of the other half
    pieces = cell_split(X, start=0, centers=centres, radii=radii)
    assert sum(len(p[1]) for p in pieces) > 1.8 * len(X)
    merged_radii = cell_radii(X, centres, t=10, n_rows=len(X), groups=groups)
    merged = cell_split(X, start=0, centers=centres, radii=merged_radii, groups=groups)
    assert sum(len(p[1]) for p in merged) == len(X)
    whole = np.vstack([np.zeros(d), far])
    assert merge_cells(X, whole, cell_radii(X, whole, t=10, n_rows=len(X)), n_rows=len(X),
                       max_rows=10**9).tolist() == [0, 1]


def test_cell_radii_are_the_quantile_of_the_exact_t_th_distances_on_the_whole_data():
    """On the whole data (``m = n``) a cell's radius is the quantile of its
    rows' distances to their t-th nearest other row of the same cell; on a
    sample it estimates the t-th distance among all rows from a nearer
    sample neighbour (an overestimate on average); an empty or tiny cell
    gets an infinite radius."""
    from infoclust_dask.kernels.knn import cell_radii, nearest_cells

    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 3))
    centres = np.array([[-1.0, 0, 0], [1.0, 0, 0], [50.0, 50, 50]])
    t = 4
    cells = nearest_cells(X, centres)
    radii = cell_radii(X, centres, t=t, n_rows=len(X), quantile=0.9, max_queries=len(X))
    for g in range(2):
        own = X[cells == g]
        dd = ((own[:, None, :] - own[None]) ** 2).sum(-1)
        np.fill_diagonal(dd, np.inf)
        kth = np.sqrt(np.sort(dd, axis=1)[:, t - 1])
        # the radii come from |a|^2 + |b|^2 - 2 a.b (round-off ~1e-6 of a small distance): a routing bound
        np.testing.assert_allclose(radii[g], np.quantile(kth, 0.9), rtol=1e-5)
    assert radii[2] == np.inf
    sample = X[rng.choice(3000, 600, replace=False)]
    est = cell_radii(sample, centres, t=t, n_rows=len(X), quantile=0.5)
    assert (est[:2] >= 0.9 * radii[:2] * (np.quantile(kth, 0.5) / np.quantile(kth, 0.9))).all()


def test_result_join_keeps_the_t_nearest_of_all_pieces():
    from infoclust_dask.kernels.knn import result_join

    a = (np.array([0, 2]), np.array([[1.0, 4.0], [0.5, np.inf]]), np.array([[7, 8], [3, -1]]))
    b = (np.array([0, 2]), np.array([[2.0, 3.0], [0.7, 0.9]]), np.array([[5, 6], [4, 9]]))
    d2, idx = result_join([a, b], rows=3, t=3)
    np.testing.assert_array_equal(idx, [[7, 5, 6], [-1, -1, -1], [3, 4, 9]])
    np.testing.assert_array_equal(d2, [[1.0, 2.0, 3.0], [np.inf] * 3, [0.5, 0.7, 0.9]])


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("exact_rows", [EXACT, NN_DESCENT])
def test_the_cell_graph_equals_brute_force_on_small_cells(lazy, exact_rows):
    """The partitioned search (8 cells, routing across boundaries, answers
    sent back to 700-row blocks), with the cells searched exactly (the
    default for cells this small) and by NN-descent with wide lists, on the
    same rows: the brute-force lists but for a handful of entries (the
    routing's 1 % quantile, NN-descent's misses), for numpy and dask input;
    every distance is exact and sorted."""
    import dask.array as da

    X, _ = _blobs(2400, seed=3)
    t = 6
    data = da.from_array(X, chunks=700) if lazy else X
    d2, idx = _cells_graph(X, t, data, "threads", exact_rows=exact_rows, n_neighbors=40)
    ref_d2, ref_idx = _brute(X, t)
    assert _recall(ref_idx, idx) >= 0.999
    assert (idx != np.arange(2400)[:, None]).all() and (idx >= 0).all()
    np.testing.assert_allclose(d2, ((X[:, None, :] - X[idx]) ** 2).sum(-1), rtol=1e-12)  # exact distances
    assert (np.diff(d2, axis=1) >= 0).all() and (np.asarray(d2) >= ref_d2 - 1e-9).all()


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_result_join_equals_a_row_by_row_merge(overlap, dtype):
    """Both paths of the join (rows answered once: placed; answered in
    several pieces: merged) against a row-by-row reference, with ties,
    padded lists and rows no piece answers."""
    from infoclust_dask.kernels.knn import knn_top, result_join

    rng = np.random.default_rng(5)
    rows, t = 40, 4
    order = rng.permutation(rows)[:35]
    owners = [order[:12], order[12:30], order[30:]] if not overlap else [order[:20], order[10:30], order[25:]]
    pieces = []
    for own in owners:
        width = int(rng.integers(1, 7))
        d2 = rng.integers(0, 4, size=(own.size, width)).astype(float)  # ties on purpose
        idx = rng.integers(0, 1000, size=(own.size, width))
        d2[:, -1][rng.random(own.size) < 0.3] = np.inf
        idx[np.isinf(d2)] = -1
        d2, idx = knn_top(d2, idx, t)
        pieces.append((own, d2, idx.astype(dtype)))
    got_d2, got_idx = result_join(pieces, rows=rows, t=t)
    assert got_idx.dtype == dtype
    for r in range(rows):
        cands = sorted((d, i) for own, d2, idx in pieces for k in np.flatnonzero(own == r)
                       for d, i in zip(d2[k], idx[k], strict=True) if i >= 0)[:t]
        cands += [(np.inf, -1)] * (t - len(cands))
        np.testing.assert_array_equal(got_d2[r], [c[0] for c in cands])
        np.testing.assert_array_equal(got_idx[r], [c[1] for c in cands])


@pytest.mark.parametrize("exact_rows", [EXACT, NN_DESCENT])
def test_a_cell_answers_its_own_rows(exact_rows):
    """One cell (:func:`cell_build`), searched exactly and by NN-descent on
    the same rows: ghosts are candidates, never answered, a row is never
    its own neighbour, exact duplicates (distance 0) are each other's first
    neighbour; exact search equals brute force entry for entry, NN-descent
    with its defaults keeps recall >= 0.99 on this cell."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 8))
    X[1500] = X[10]  # an exact duplicate pair
    t = 7
    own = np.zeros(3000, dtype=bool)
    own[:2000] = True
    pieces = [(X[1200:], np.arange(1200, 3000), own[1200:]), (X[:1200], np.arange(1200), own[:1200])]  # any order
    ids, d2, idx = cell_build(pieces, t=t, exact_rows=exact_rows)
    np.testing.assert_array_equal(ids, np.arange(2000))
    ref_d2, ref_idx = _brute(X, t)
    assert (idx != np.arange(2000)[:, None]).all()
    assert idx[10, 0] == 1500 and d2[10, 0] == 0.0
    np.testing.assert_allclose(d2, ((X[:2000, None, :] - X[idx]) ** 2).sum(-1), rtol=1e-12, atol=0)
    if exact_rows is None:  # exact search
        np.testing.assert_array_equal(idx, ref_idx[:2000])
        np.testing.assert_allclose(d2, ref_d2[:2000], rtol=1e-12, atol=1e-12)
    else:
        assert _recall(ref_idx[:2000], idx) >= 0.99


def test_the_default_list_width_grows_with_the_cell_rows():
    """``ceil(2.5 t) + 1`` below NND_BASE_ROWS rows, then NND_WIDEN more at
    NND_BASE_ROWS and at each doubling of it, against the closed form; a
    width given by the caller is kept (at least ``t + 1``)."""
    from infoclust_dask.kernels.knn import NND_BASE_ROWS, NND_WIDEN, cell_neighbors, nnd_settings

    for t in (1, 3, 10, 25):
        base = int(np.ceil(2.5 * t)) + 1
        for rows in (2, 50_000, NND_BASE_ROWS - 1, NND_BASE_ROWS, 2 * NND_BASE_ROWS - 1, 2 * NND_BASE_ROWS,
                     1_000_000, 1_500_000, 10_000_000, 2**31):
            doublings = int(np.floor(np.log2(rows / NND_BASE_ROWS))) + 1 if rows >= NND_BASE_ROWS else 0
            assert cell_neighbors(t, rows) == base + NND_WIDEN * doublings, (t, rows)
    assert cell_neighbors(10, 400_000) == 26 and cell_neighbors(10, 1_000_000) == 28
    assert nnd_settings(10)["n_neighbors"] is None
    assert nnd_settings(10, {"n_neighbors": 40})["n_neighbors"] == 40
    assert nnd_settings(10, {"n_neighbors": 5})["n_neighbors"] == 11


@pytest.mark.parametrize(("params", "base_rows"), [({"n_neighbors": 52}, None), (None, 1000)])
def test_the_memory_check_scales_with_the_width_over_the_default(params, base_rows, monkeypatch):
    """The largest cell's memory estimate (measured at the default width
    ``ceil(2.5 t) + 1`` = 26 for t = 10) is scaled by the width the cell
    will get over 26: a width given as 52 doubles it; a default width
    widened by the cell's rows (NND_BASE_ROWS at 1000: the plan's largest
    cell of a few thousand rows widened once per 1000, 2000, 4000, ...
    reached) scales it by that width over 26."""
    from infoclust_dask.cluster import _knn_graph
    from infoclust_dask.kernels import knn as knn_module

    if base_rows is not None:
        monkeypatch.setattr(knn_module, "NND_BASE_ROWS", base_rows)
    seen = []

    def check(rows, d, wider=1.0):
        seen.append((float(np.max(rows)), wider))
        raise RuntimeError("stop before the search")

    monkeypatch.setattr(_knn_graph, "_check_cell_tasks", check)
    X, _ = _blobs(24_000, seed=2)
    with pytest.raises(RuntimeError, match="stop before the search"):
        _neighbour_lists(X, 10, method="approximate", params=params)
    largest, got = seen[0]
    if base_rows is None:
        assert got == pytest.approx(2.0)
    else:
        assert largest >= 2 * base_rows, largest  # widened at least twice
        width = 26 + 2 * (int(np.floor(np.log2(largest / base_rows))) + 1)
        assert got == pytest.approx(width / 26)


def test_a_cell_searched_by_nn_descent_takes_the_width_of_its_rows(monkeypatch):
    """A cell of 4000 rows with NND_BASE_ROWS at 1000 (1000, 2000 and 4000
    reached): its graph is built with lists of 26 + 3 NND_WIDEN at t = 10,
    the same answer as that width given explicitly; a width given is used
    as is."""
    import infoclust_dask.kernels._nn_descent as nnd_module
    from infoclust_dask.kernels import knn as knn_module

    widths = []
    real = nnd_module.nn_descent

    def spy(x, n_neighbors, **kw):
        widths.append((x.shape[0], n_neighbors))
        return real(x, n_neighbors, **kw)

    monkeypatch.setattr(nnd_module, "nn_descent", spy)
    monkeypatch.setattr(knn_module, "NND_BASE_ROWS", 1000)
    rng = np.random.default_rng(8)
    X = rng.normal(size=(4000, 6))
    pieces = [(X, np.arange(4000), np.ones(4000, bool))]
    default = cell_build(pieces, t=10, exact_rows=0)
    given = cell_build(pieces, t=10, exact_rows=0, n_neighbors=26 + 3 * knn_module.NND_WIDEN)
    narrow = cell_build(pieces, t=10, exact_rows=0, n_neighbors=12)
    assert widths == [(4000, 26 + 3 * knn_module.NND_WIDEN)] * 2 + [(4000, 12)]
    for a, b in zip(default, given, strict=True):
        np.testing.assert_array_equal(a, b)
    assert narrow[2].shape == (4000, 10)


@pytest.mark.parametrize("exact_rows", [EXACT, NN_DESCENT])
def test_degenerate_cells(exact_rows):
    """Cells no friendly data makes: every row repeated (a cell of
    duplicates: the neighbours are the copies, at distance 0, the smaller
    row number first), a cell with fewer rows than neighbours (padded
    inf / -1), and a cell where a constant block of 1000 rows (1000-way
    ties at distance 0) sits beside spread rows - the same answers from
    exact search and NN-descent."""
    rng = np.random.default_rng(6)
    base = rng.normal(size=(400, 5))
    X = np.repeat(base, 4, axis=0)  # 4 copies of every row: rows 4i..4i+3
    t = 3
    ids, d2, idx = cell_build([(X, np.arange(1600), np.ones(1600, bool))], t=t, exact_rows=exact_rows)
    copies = (np.arange(1600)[:, None] // 4) * 4 + np.arange(4)[None, :]
    want = np.array([[c for c in row if c != i] for i, row in enumerate(copies)])
    np.testing.assert_array_equal(idx, want)
    assert (d2 == 0).all()
    # fewer rows than neighbours: 3 rows, t = 5
    ids, d2, idx = cell_build([(base[:3], np.array([7, 8, 9]), np.ones(3, bool))], t=5, exact_rows=exact_rows)
    assert (idx[:, 2:] == -1).all() and np.isinf(d2[:, 2:]).all() and (idx[:, :2] >= 7).all()
    # a constant block of 1000 rows beside 2000 spread ones: 1000 zero-distance ties
    Y = np.vstack([np.zeros((1000, 5)), rng.normal(size=(2000, 5)) + 3.0])
    ids, d2, idx = cell_build([(Y, np.arange(3000), np.ones(3000, bool))], t=t, exact_rows=exact_rows)
    assert (d2[:1000] == 0).all() and (idx[:1000] < 1000).all() and (idx[:1000] != np.arange(1000)[:, None]).all()
    _, ref_idx = _brute(Y, t)
    assert _recall(ref_idx[1000:], idx[1000:]) >= (1.0 if exact_rows is None else 0.99)


def test_predict_on_a_cluster_scatters_its_numpy_inputs(local_cluster_client):
    """On a distributed scheduler the out-of-sample passes send their numpy
    inputs (the eigenvectors, the local scales, the new rows and their
    neighbour lists) by scatter, not inside the graph: no "Sending large
    graph" warning even with the threshold at 200 kB (before: 11 MB graphs
    for a saved SMIC over 80 000 rows), and the same probabilities as the
    sync scheduler to 1e-12."""
    import warnings

    import dask

    X, _ = _blobs(6000, seed=2)
    new = np.random.default_rng(3).normal(size=(5000, 8)) * 3
    m = SMIC(6, t=6, random_state=0, scheduler="sync").fit(X)
    ref = m.predict_proba(new)
    m.scheduler = local_cluster_client
    with warnings.catch_warnings(record=True) as seen, \
            dask.config.set({"distributed.admin.large-graph-warning-threshold": "200kB"}):
        warnings.simplefilter("always")
        got = m.predict_proba(new)
    assert not [w for w in seen if "large graph" in str(w.message)], [str(w.message) for w in seen]
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_one_huge_cell_beside_tiny_ones():
    """90 % of the rows in one blob, the rest in six far blobs of 100 rows:
    the plan's cells are one huge cell (the blob's pieces merged: a cut
    through one cluster) and tiny ones; NN-descent on the huge cell and
    exact search on the tiny ones (below four lists' worth) still give
    recall >= 0.99 against brute force, every distance exact."""
    from infoclust_dask.cluster._knn_graph import _cell_plan

    rng = np.random.default_rng(8)
    far = rng.normal(0, 40, size=(6, 8))
    X = np.vstack([rng.normal(size=(5400, 8))] + [c + rng.normal(size=(100, 8)) for c in far])
    t = 8
    centres, groups, radii, _ = _cell_plan(X, 8, t, 0)
    cells = groups[np.argmin(((X[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)]
    assert np.bincount(cells).max() >= 5400  # one cell holds the whole blob
    d2, idx = _cells_graph(X, t, X, "sync", exact_rows=0)
    _, ref_idx = _brute(X, t)
    assert _recall(ref_idx, idx) >= 0.99
    np.testing.assert_allclose(d2, ((X[:, None, :] - X[idx]) ** 2).sum(-1), rtol=1e-12)


@pytest.mark.parametrize("k", [1, 5, 40])
def test_brute_candidates_equal_a_stable_sort_of_the_expansion(k):
    """The brute-force tiles folded by the compiled running top-k give what
    a stable sort of the whole table gives (the smaller row first among
    equal values: integer rows make many ties), across tile edges
    (queries and data rows beyond one tile)."""
    from infoclust_dask.kernels import knn

    rng = np.random.default_rng(9)
    xd = rng.integers(0, 3, size=(3000, 20)).astype(np.float64)
    xq = rng.integers(0, 3, size=(600, 20)).astype(np.float64)
    got = knn.brute_candidates(xq, xd, k)
    expansion = (xd * xd).sum(1)[None, :] - 2.0 * (xq @ xd.T)
    want = np.argsort(expansion, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(got, want)


def test_cell_sizes_count_the_rows_each_cell_task_gathers():
    """The plan's estimate of each cell's rows (own and ghosts) equals
    cell_split's pieces when the sample is every row, and scales a uniform
    half sample to about the same counts."""
    from infoclust_dask.kernels.knn import cell_radii, cell_sizes, cell_split

    X, _ = make_blobs(n_samples=6000, centers=4, n_features=8, cluster_std=3.0, random_state=3)
    centres = X[np.random.default_rng(0).choice(len(X), 5, replace=False)]
    radii = cell_radii(X, centres, t=10, n_rows=len(X))
    pieces = cell_split(X, start=0, centers=centres, radii=radii)
    want = np.array([ids.size for _, ids, _ in pieces], dtype=float)
    assert want.sum() > len(X)  # ghosts: some rows travel to two cells or more
    np.testing.assert_array_equal(cell_sizes(X, centres, radii, n_rows=len(X)), want)
    half = X[np.random.default_rng(1).permutation(len(X))[:3000]]
    np.testing.assert_allclose(cell_sizes(half, centres, radii, n_rows=len(X)), want, rtol=0.1)


def test_a_cell_too_large_for_any_worker_is_refused_before_it_is_searched():
    """Overlapping clusters in 16 dimensions: every row's neighbours cross
    every boundary, so the plan makes one cell of all 60 000 rows (~78 MB
    in its task); on a worker of 400 MB (26 MB of room below dask's pause
    threshold after the 280 MB a worker process counts for) the fit ends at
    once with one error naming the cell, the memory limit that would do and
    knn='exact' - not a worker killed again and again. The plan does not
    depend on the worker: the same rows' plan on an unlimited runner is
    searched (not tested here: ~30 s of NN-descent)."""
    import re

    from distributed import Client, LocalCluster

    from infoclust_dask.engine import WorkerMemoryError

    X, _ = make_blobs(n_samples=60_000, centers=10, n_features=16, cluster_std=5.0, center_box=(-10, 10),
                      random_state=0)
    with LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="400MB", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster, set_as_default=False) as client:
        with pytest.raises(WorkerMemoryError) as err:
            SMIC(10, t=10, knn="approximate", random_state=0, scheduler=client).fit(X)
        message = str(err.value)
        rows = int(re.search(r"largest cell \(about ([\d,]+) rows with the other cells' rows near its boundary",
                             message).group(1).replace(",", ""))
        assert rows >= 59_000  # one cell of (nearly) every row
        assert "memory limit of at least" in message and "knn='exact'" in message
        assert "1 worker: 381 MB memory limit" in message
        # nothing of the search ran on the worker: its NN-descent was never imported there
        assert not any(client.run(
            lambda: __import__("sys").modules.get("infoclust_dask.kernels._nn_descent") is not None).values())


@pytest.mark.parametrize("data_kind", ["numpy", "dask"])
def test_one_cell_builds_on_the_runners_threads_with_the_graph_of_one(data_kind):
    """Clusters that overlap merge into one cell: its task is given the
    runner's threads over the cells (at most the host's cores), four cells
    on two threads one each; the answers are those of one thread."""
    import dataclasses
    import os

    import dask.array as da

    from infoclust_dask.engine.in_process import InProcess

    given = []

    def build(pieces, **kw):
        given.append(kw["threads"])
        return cell_build(pieces, **kw)

    bp = dataclasses.replace(KNN_CELLS, build=build)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 8))
    X[100:300] = X[:200]  # duplicate rows: equal distances, where the order of the updates would show
    data = X if data_kind == "numpy" else da.from_array(X, chunks=700)
    t = 10
    out = ((np.float64, (t,)), (np.int64, (t,)))
    cores = len(os.sched_getaffinity(0))

    def graph(runner, parts):
        centres = X[:parts]
        d2, idx = engine.partition_pairs(bp, data, n_parts=parts, outputs=out, block_rows=700,
                                         params={"t": t, "centers": centres, "groups": np.arange(parts),
                                                 "radii": np.full(parts, np.inf)},
                                         build_params={"t": t, "n_iters": 2, "exact_rows": 0},
                                         join_params={"t": t}, scheduler=runner)
        if engine.is_lazy(d2):
            d2, idx = engine.compute((d2, idx), scheduler=runner)
        return np.asarray(d2), np.asarray(idx)

    one = graph(InProcess(1), 1)
    assert given == [1]
    for threads in (2, 3):
        given.clear()
        got = graph(InProcess(threads), 1)
        assert given == [min(threads, cores)]
        np.testing.assert_array_equal(got[1], one[1])
        np.testing.assert_array_equal(got[0], one[0])
    given.clear()
    graph(InProcess(2), 4)
    assert given == [1, 1, 1, 1]


def _lists_with_d2(X, idx):
    ok = idx >= 0
    diff = X[:, None, :] - X[np.maximum(idx, 0)]
    return np.where(ok, np.einsum("ijk,ijk->ij", diff, diff), np.inf)


@pytest.mark.parametrize("data", ["touching", "separate", "one_gaussian", "duplicates"])
def test_the_bounded_exact_search_equals_the_plain_one(data, monkeypatch):
    """``knn_query_bounded`` (rows measured only against the centres whose
    bisector bound does not exceed the query's reach) against
    ``knn_query_block`` and brute force, with the reach exactly the true
    t-th distance (no slack: a bound too large would drop true neighbours
    of the rows near a boundary): the same lists. On separated blobs it
    measures a fraction of the pairs; a repeated centre has no bisector."""
    import infoclust_dask.kernels._knn_loops as loops
    from infoclust_dask.kernels.knn import knn_query_block, knn_query_bounded

    rng = np.random.default_rng(4)
    t = 7
    if data == "one_gaussian":
        X = rng.normal(size=(3000, 5))
        centers = rng.normal(size=(4, 5))
    else:
        gap = {"touching": 2.0, "separate": 40.0, "duplicates": 3.0}[data]
        mu = np.arange(4)[:, None] * gap * np.eye(5)[0]
        X = mu[rng.integers(0, 4, 3000)] + rng.normal(size=(3000, 5))
        if data == "duplicates":
            X[1000:1400] = X[:400]  # exact copies: distance ties and zero reach
            X[2000:2100] = X[2000]
        centers = np.vstack([mu, mu[:1]])  # the first centre repeated
    q = rng.choice(len(X), 300, replace=False)
    exact_d2, exact_idx = knn_query_block(X, xq=X[q], t=t + 1)
    reach = np.sqrt(exact_d2[:, -1])
    pairs = []
    real = loops.merge_smallest
    monkeypatch.setattr(loops, "merge_smallest", lambda prod, *a: pairs.append(prod.size) or real(prod, *a))
    d2, idx = knn_query_bounded(X, start=100, xq=X[q], t=t + 1, centers=centers, reach=reach)
    if data == "duplicates":  # ties at the t-th distance: any tied row is a right answer
        np.testing.assert_array_equal(d2, exact_d2)
        diff = X[q][:, None, :] - X[idx - 100]
        np.testing.assert_array_equal(np.einsum("ijk,ijk->ij", diff, diff), d2)  # real rows at those distances
    else:
        np.testing.assert_array_equal(idx, exact_idx + 100)
        np.testing.assert_array_equal(d2, exact_d2)
    measured = sum(pairs) / (300 * len(X))
    if data == "separate":
        assert measured < 0.4
    if data == "one_gaussian":
        assert measured in (0.0, 1.0) or measured > 0.5  # the plain search, or most pairs


def test_the_recall_check_with_the_cells_equals_the_brute_force_count():
    """``knn_recall(d2=, centers=)``: the bounded exact search gives the
    same recall as the plain one and a brute-force count, with the cells'
    centres and with a list padded where the search found fewer rows."""
    from infoclust_dask.cluster._knn_graph import _cell_plan

    X, _ = _blobs(3000, seed=2)
    t = 8
    exact = _exact(X, t)
    noisy = exact.copy()
    rng = np.random.default_rng(1)
    wrong = rng.random(noisy.shape) < 0.2
    noisy[wrong] = (np.nonzero(wrong)[0] + 1500) % 3000
    d2 = _lists_with_d2(X, noisy)
    order = np.argsort(d2, axis=1, kind="stable")
    noisy, d2 = np.take_along_axis(noisy, order, 1), np.take_along_axis(d2, order, 1)
    noisy[5, -1], d2[5, -1] = -1, np.inf  # a short list: its row is measured against every row
    centres = _cell_plan(X, 8, t, 0)[0]
    plain = knn_recall(X, noisy, n_queries=3000, scheduler="sync")
    bounded = knn_recall(X, noisy, n_queries=3000, scheduler="sync", d2=d2, centers=centres)
    assert bounded == plain
    np.testing.assert_allclose(bounded, _recall(exact, noisy), rtol=0, atol=1e-12)


def test_the_search_gives_the_engine_each_cells_cost_and_bytes(monkeypatch):
    """The approximate search hands :func:`~infoclust_dask.engine.partition_pairs`
    each cell's cost (``n log2 n`` of its estimated rows: the builds'
    order and placement) and the bytes its build holds
    (:func:`~infoclust_dask.kernels.knn.cell_task_bytes` of those rows: no
    build placed on a worker without room for it), from the same plan."""
    from infoclust_dask import engine
    from infoclust_dask.cluster import _knn_graph
    from infoclust_dask.kernels.knn import cell_task_bytes

    seen = {}

    def capture(bp, X, **kw):
        seen.update(kw)
        raise RuntimeError("stop before the search")

    monkeypatch.setattr(engine, "partition_pairs", capture)
    X, _ = _blobs(24_000, seed=2)
    plan = _knn_graph.cell_plan(X, 10, 0)
    with pytest.raises(RuntimeError, match="stop before the search"):
        _neighbour_lists(X, 10, method="approximate", plan=plan)
    rows = np.asarray(plan.rows, dtype=np.float64)
    assert len(rows) >= 2
    np.testing.assert_allclose(seen["costs"], rows * np.log2(rows))
    np.testing.assert_array_equal(seen["needs"], [int(cell_task_bytes(r, X.shape[1])) for r in rows])
    assert seen["n_parts"] == len(rows)
