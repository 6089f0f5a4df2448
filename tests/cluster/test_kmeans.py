"""KMeans against scikit-learn, a brute-force reference, and bad input."""

import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.cluster import KMeans as SKKMeans
from sklearn.metrics import adjusted_rand_score

from infoclust_dask import KMeans, write_dataset
from infoclust_dask.cluster._kmeans import EmptyClusterWarning
from infoclust_dask.engine.choose import Distributed


def py_kmeans(X, init, w=None):
    """One Lloyd iteration written with loops (scikit-learn's test reference)."""
    w = np.ones(len(X)) if w is None else w
    lab = np.array([np.argmin([np.sum((x - c) ** 2) for c in init]) for x in X])
    return np.array([np.average(X[lab == j], axis=0, weights=w[lab == j]) for j in range(len(init))])


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_equals_sklearn_lloyd_with_fixed_init(blobs, lazy, weighted):
    X, _, _ = blobs
    w = np.random.default_rng(0).uniform(0.1, 3.0, len(X)) if weighted else None
    init = X[[0, 1, 2, 3, 4]] + 0.01
    ref = SKKMeans(5, init=init, n_init=1, algorithm="lloyd", max_iter=300, tol=1e-4).fit(X, sample_weight=w)
    Xin = da.from_array(X, chunks=(333, 3)) if lazy else X
    win = None if w is None else (da.from_array(w, chunks=333) if lazy else w)
    ours = KMeans(5, init=init, max_iter=300, tol=1e-4).fit(Xin, sample_weight=win)
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.inertia_, ref.inertia_, rtol=1e-8)
    assert ours.n_iter_ == ref.n_iter_
    labels = ours.labels_.compute() if lazy else ours.labels_
    assert isinstance(ours.labels_, da.Array) == lazy
    np.testing.assert_array_equal(labels, ref.labels_)


def test_one_iteration_equals_brute_force(blobs):
    X, _, _ = blobs
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(X))
    init = X[:4].copy()
    km = KMeans(4, init=init, max_iter=1).fit(X, sample_weight=w)
    np.testing.assert_allclose(km.cluster_centers_, py_kmeans(X, init, w), rtol=1e-10)


def test_inertia_is_true_sum_of_squared_distances(blobs):
    X, _, _ = blobs
    km = KMeans(4, random_state=0).fit(X)
    d2 = ((X[:, None, :] - km.cluster_centers_[None]) ** 2).sum(-1).min(1)
    np.testing.assert_allclose(km.inertia_, d2.sum(), rtol=1e-10)
    np.testing.assert_allclose(km.score(X), -d2.sum(), rtol=1e-10)
    np.testing.assert_allclose(km.transform(X) ** 2, ((X[:, None, :] - km.cluster_centers_[None]) ** 2).sum(-1),
                               rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("init", ["k-means++", "k-means||", "random"])
def test_seedings_find_separated_blobs(blobs, init):
    X, lab, _ = blobs
    km = KMeans(4, init=init, random_state=0).fit(X)
    assert adjusted_rand_score(lab, km.labels_) > 0.97
    ref = SKKMeans(4, n_init=10, random_state=0).fit(X)
    assert km.inertia_ <= ref.inertia_ * (1 + 1e-9)


@pytest.mark.parametrize("init", ["k-means++", "k-means||", "random"])
def test_fit_does_not_depend_on_chunking(blobs, init):
    X, _, _ = blobs
    a = KMeans(4, init=init, random_state=3).fit(X)
    b = KMeans(4, init=init, random_state=3).fit(da.from_array(X, chunks=((0, 700, 13, 1287), (3,))))
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.inertia_, b.inertia_, rtol=1e-10)


def test_distributed_and_store_inputs(blobs, local_cluster_client, tmp_path):
    X, _, _ = blobs
    init = X[:4].copy()
    ref = KMeans(4, init=init).fit(X)
    on_cluster = KMeans(4, init=init, scheduler=local_cluster_client).fit(X)
    np.testing.assert_allclose(on_cluster.cluster_centers_, ref.cluster_centers_, rtol=1e-10)
    assert isinstance(on_cluster.labels_, np.ndarray)
    path = write_dataset(tmp_path / "b.zarr", X, chunks=300)
    from_store = KMeans(4, init=init, scheduler="threads").fit(path)
    np.testing.assert_allclose(from_store.cluster_centers_, ref.cluster_centers_, rtol=1e-10)
    np.testing.assert_array_equal(from_store.labels_.compute(), ref.labels_)


def test_weight_k_equals_k_repeats(blobs):
    X, _, _ = blobs
    X = X[:300]
    w = np.random.default_rng(2).integers(1, 4, size=300)
    init = X[:4].copy()
    a = KMeans(4, init=init).fit(X, sample_weight=w)
    b = KMeans(4, init=init).fit(np.repeat(X, w, axis=0))
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-10)
    np.testing.assert_allclose(a.inertia_, b.inertia_, rtol=1e-10)


def test_empty_cluster_is_reseeded_with_a_warning(blobs):
    X, _, _ = blobs
    init = np.vstack([X[:3], [[1e3, 1e3, 1e3]]])  # the far centre gets no points
    with pytest.warns(EmptyClusterWarning, match=r"1 empty cluster\(s\) \[3\] at iteration 1"):
        km = KMeans(4, init=init).fit(X)
    assert np.bincount(km.labels_, minlength=4).min() > 0


def test_predict_new_points_uses_voronoi_regions(blobs):
    X, _, centers = blobs
    km = KMeans(4, random_state=0).fit(X)
    got = km.predict(centers + 0.1)
    np.testing.assert_array_equal(got, km.predict(km.cluster_centers_[got]))
    assert len(set(got.tolist())) == 4


@pytest.mark.parametrize(
    "params, X, match",
    [
        ({"n_clusters": 5}, np.ones((3, 2)), r"n_samples=3 should be >= n_clusters=5"),
        ({"n_clusters": 2}, np.array([[0.0, 1.0], [np.nan, 1.0], [2.0, 2.0]]), "Input X contains NaN"),
        ({"n_clusters": 2}, np.array([[0.0, 1.0], [np.inf, 1.0], [2.0, 2.0]]), "Input X contains infinity"),
        ({"n_clusters": 2}, np.arange(5.0), r"Expected 2D array, got 1D array instead(.|\n)*reshape\(-1, 1\)"),
        ({"n_clusters": 0}, np.ones((3, 2)), r"The 'n_clusters' parameter of KMeans must be an int in the range \[1, inf\). Got 0 instead."),
        ({"n_clusters": 2, "tol": -1.0}, np.ones((3, 2)), r"The 'tol' parameter of KMeans must be a float in the range \[0, inf\). Got -1.0"),
        ({"n_clusters": 2, "init": "kmeans"}, np.ones((3, 2)), r"The 'init' parameter of KMeans must be a str among \{'k-means\+\+', 'k-means\|\|', 'random'\} or an array-like. Got 'kmeans' instead."),
        ({"n_clusters": 2, "init": np.zeros((3, 2))}, np.ones((3, 2)), r"initial centers \(3, 2\) does not match \(n_clusters, n_features\) = \(2, 2\)"),
        ({"n_clusters": 2, "n_init": 0}, np.ones((3, 2)), r"The 'n_init' parameter of KMeans must be"),
    ],
)
def test_bad_input_numpy(params, X, match):
    with pytest.raises(ValueError, match=match):
        KMeans(**params).fit(X)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: da.from_array(np.array([[0.0, 1.0], [np.nan, 1.0], [2.0, 2.0]]), chunks=2), "contains 1 NaN or infinite"),
        (lambda: da.ones(5, chunks=2), r"Expected 2D array, got 1D array of shape \(5,\).*reshape\(-1, 1\)"),
        (lambda: da.ones((3, 2), chunks=2), r"n_samples=3 should be >= n_clusters=4"),
        (lambda: (lambda a: a[a[:, 0] > 0])(da.ones((10, 2), chunks=5)), "unknown chunk sizes"),
    ],
)
def test_bad_input_lazy(make, match):
    with pytest.raises(ValueError, match=match):
        KMeans(4).fit(make())


def test_wrong_width_at_predict(blobs):
    X, _, _ = blobs
    km = KMeans(4, random_state=0).fit(X)
    with pytest.raises(ValueError, match="X has 2 features, but KMeans is expecting 3 features"):
        km.predict(X[:, :2])
    with pytest.raises(ValueError, match="X has 2 features, but KMeans is expecting 3 features"):
        km.predict(da.from_array(X[:, :2]))


def test_max_iter_warns_convergence(blobs):
    from sklearn.exceptions import ConvergenceWarning

    X, _, _ = blobs
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        KMeans(4, init=X[:4] * 0.0 + X[:4].mean(0) + np.arange(4)[:, None] * 0.01, max_iter=2, tol=0).fit(X)


def test_sklearn_estimator_checks():
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyClusterWarning)
        warnings.filterwarnings("ignore", message="Skipping check check_array_api_input")
        check_estimator(
            KMeans(n_clusters=2, random_state=0, scheduler="sync"),
            expected_failed_checks={
                # as for scikit-learn's own KMeans: the check shuffles the repeated rows, so
                # the random seeding draws other points (test_weight_k_equals_k_repeats
                # checks the equivalence with a fixed init)
                "check_sample_weight_equivalence_on_dense_data": "seeding draws differ after shuffling",
            },
        )


@pytest.mark.slow  # 5.8 s on a fresh clone: make test stays under 8 minutes (issue 63's run: 495 s)
def test_data_whose_seeding_would_read_too_much_are_seeded_on_a_one_pass_sample(monkeypatch):
    """Where k + 1 passes would read more than SEEDING_READ_BYTES, k-means++
    runs on a uniform sample drawn in one pass: the same sample for any
    chunking, one seeding pass whatever k, the same seeding for streamed and
    in-memory rows (the data and k decide, issue 62), and a final inertia
    within 1 % of k-means++ on the whole data."""
    import dask.array as da

    from infoclust_dask import engine
    from infoclust_dask.cluster import _init
    from infoclust_dask.kernels.kmeans import UNIFORM_SAMPLE

    rng = np.random.default_rng(0)
    centres = rng.normal(0, 4, size=(12, 5))
    X = centres[rng.integers(0, 12, 60_000)] + rng.normal(size=(60_000, 5))
    a = engine.map_reduce(UNIFORM_SAMPLE, da.from_array(X, chunks=7_001), None, params={"p": 0.1, "seed": 5})
    b = engine.map_reduce(UNIFORM_SAMPLE, X, None, params={"p": 0.1, "seed": 5})
    np.testing.assert_array_equal(a["index"], b["index"])
    assert abs(a["index"].size - 6_000) < 300  # ~ p n rows
    from infoclust_dask.cluster import _kmeans

    monkeypatch.setattr(_kmeans, "SEEDING_READ_BYTES", X.nbytes * 13 - 1)  # k = 12: 13 passes are too many
    in_memory = KMeans(12, random_state=0, scheduler="threads").fit(X)
    monkeypatch.setenv("INFOCLUST_IN_PROCESS_BYTES", "0")  # the lazy input stays lazy: it streams
    lazy = da.from_array(X, chunks=10_000)
    passes = []
    real = engine.map_reduce

    def counting(bp, *args, **kw):
        if args and getattr(args[0], "shape", (0,))[0] == X.shape[0]:  # a pass over the data, not the sample
            passes.append(bp.name)
        return real(bp, *args, **kw)

    monkeypatch.setattr(_init.engine, "map_reduce", counting)
    km = KMeans(12, random_state=0, scheduler="threads").fit(lazy)
    seeding = passes[:passes.index("lloyd_step_stats")]
    monkeypatch.undo()
    assert km.seeding_.startswith("best of 5 k-means++ on a 20000-row uniform sample")
    assert seeding == ["moments_stats", "uniform_sample_rows"], seeding
    assert in_memory.seeding_ == km.seeding_
    np.testing.assert_allclose(in_memory.cluster_centers_, km.cluster_centers_, rtol=1e-10)
    full = KMeans(12, random_state=0, scheduler="threads").fit(X)
    assert full.seeding_ == "k-means++ (13 passes)"
    assert km.inertia_ <= 1.01 * full.inertia_, (km.inertia_, full.inertia_)


def test_data_above_the_sampled_seeding_size_seed_on_a_sample_on_every_runner(monkeypatch, local_cluster_client):
    """Above SAMPLED_SEEDING_BYTES, in memory too (numpy here, persisted on a
    cluster there): the one-pass sampled seeding, the same centres on every
    runner; below it, k-means++ on every row."""
    from infoclust_dask.cluster import _kmeans

    rng = np.random.default_rng(3)
    centres = rng.normal(0, 5, size=(6, 4))
    X = centres[rng.integers(0, 6, 30_000)] + rng.normal(size=(30_000, 4))
    monkeypatch.setattr(_kmeans, "SAMPLED_SEEDING_BYTES", X.nbytes - 1)  # (in this process only:
    monkeypatch.setattr(Distributed, "loop_budget", lambda self: 0)  # pass by pass, not whole on a worker)
    ref = KMeans(6, random_state=1, scheduler="sync").fit(X)
    assert ref.seeding_.startswith("best of 5 k-means++ on a 20000-row uniform sample")
    for s, data in (("threads", X), (local_cluster_client, da.from_array(X, chunks=7_000))):
        km = KMeans(6, random_state=1, scheduler=s).fit(data)
        assert km.seeding_ == ref.seeding_
        np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-10, atol=1e-12)
    monkeypatch.setattr(_kmeans, "SAMPLED_SEEDING_BYTES", X.nbytes)
    assert KMeans(6, random_state=1, scheduler="sync").fit(X).seeding_ == "k-means++ (7 passes)"


def test_when_the_centres_stop_moving_the_last_lloyd_pass_gives_the_final_inertia(monkeypatch):
    """No pass of its own for the final inertia when the last Lloyd pass was
    at the final centres; the inertia and sizes equal brute force."""
    from infoclust_dask import engine
    from infoclust_dask.cluster import _kmeans

    rng = np.random.default_rng(4)
    X = np.vstack([rng.normal(c, 0.3, size=(300, 2)) for c in ((0, 0), (5, 5), (0, 5))])
    names = []
    real = engine.map_reduce

    def counting(bp, *a, **k):
        names.append(bp.name)
        return real(bp, *a, **k)

    monkeypatch.setattr(_kmeans.engine, "map_reduce", counting)
    km = KMeans(3, random_state=0, tol=0.0, scheduler="sync").fit(X)
    monkeypatch.undo()
    assert "inertia_stats" not in names and names.count("lloyd_step_stats") == km.n_iter_
    d2 = ((X[:, None, :] - km.cluster_centers_[None]) ** 2).sum(-1)
    np.testing.assert_allclose(km.inertia_, d2.min(1).sum(), rtol=1e-10)
    np.testing.assert_array_equal(km.cluster_sizes_, np.bincount(d2.argmin(1), minlength=3))


def test_set_output_and_feature_names_in_a_pipeline():
    """Issue 54: KMeans(3).set_output(transform="pandas") raised AttributeError (no
    get_feature_names_out); in a Pipeline "Unable to configure output". The same for SoftKMeans."""
    import pandas as pd
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from infoclust_dask import SoftKMeans

    X = pd.DataFrame(np.random.default_rng(0).normal(size=(60, 2)), columns=["a", "b"])
    km = KMeans(3, random_state=0, scheduler="sync").set_output(transform="pandas").fit(X)
    out = km.transform(X)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["kmeans0", "kmeans1", "kmeans2"]
    np.testing.assert_allclose(out.to_numpy(), km.set_output(transform="default").transform(X), rtol=0)
    with pytest.raises(ValueError, match="does not match the 2 features seen in fit"):
        km.get_feature_names_out(["a", "c"])
    pipe = make_pipeline(StandardScaler(), SoftKMeans(3, random_state=0, scheduler="sync"))
    got = pipe.set_output(transform="pandas").fit_transform(X)
    assert list(got.columns) == ["softkmeans0", "softkmeans1", "softkmeans2"]
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-12)


def test_partial_fit_over_blocks_ends_near_fit(tmp_path):
    """Issue 54: partial_fit (on-line K-means with per-centre counts, MacKay 2003 ch. 20) over 20 blocks -
    the loop dask_ml's Incremental runs, and a plain loop over the blocks of a store - ends within 2 % of
    fit's inertia; each centre is the mean of the rows ever assigned to it (checked on a hand example)."""
    import dask.array as da

    from infoclust_dask import open_dataset, write_dataset
    from infoclust_dask.datasets import load_bundled

    X, _, _ = load_bundled("digits")
    X = np.asarray(X, dtype=np.float64)[np.random.default_rng(0).permutation(len(X))]
    whole = KMeans(10, random_state=0, scheduler="sync").fit(X)
    online = KMeans(10, random_state=0, scheduler="sync")
    for block in da.from_array(X, chunks=-(-len(X) // 20)).blocks:  # Incremental's loop: partial_fit per block
        online.partial_fit(block)
    assert online.n_steps_ == 20 and online.counts_.sum() == len(X)
    assert -online.score(X) <= 1.02 * whole.inertia_
    store = write_dataset(tmp_path / "d.zarr", X, chunks=90)
    streamed = KMeans(10, random_state=0, scheduler="sync")
    for block in open_dataset(store)["x"].data.blocks:
        streamed.partial_fit(block)
    assert -streamed.score(X) <= 1.02 * whole.inertia_
    hand = KMeans(2, init=np.array([[0.0], [10.0]]), n_init=1, scheduler="sync")
    hand.partial_fit(np.array([[1.0], [3.0], [9.0]]))
    np.testing.assert_allclose(hand.cluster_centers_, [[2.0], [9.0]])
    hand.partial_fit(np.array([[5.0], [11.0]]), sample_weight=np.array([2.0, 1.0]))
    np.testing.assert_allclose(hand.cluster_centers_, [[(1 + 3 + 2 * 5) / 4], [(9 + 11) / 2]])
    np.testing.assert_allclose(hand.counts_, [4.0, 2.0])


@pytest.mark.parametrize("weighted", [False, True])
def test_labels_from_the_inertia_pass_equal_a_separate_labels_pass(monkeypatch, weighted):
    """Issue 55: for rows in memory and many centres x features the final
    pass gives the labels and the inertia together (one pass less). Both
    paths on the same data give the same labels (= brute-force nearest
    centre), inertia and cluster sizes; lazy input keeps its lazy labels."""
    import dask.array as da

    from infoclust_dask.cluster import _kmeans

    rng = np.random.default_rng(4)
    X = rng.normal(size=(3000, 64)) + 3 * rng.integers(0, 5, (3000, 1))
    w = rng.uniform(0.5, 2.0, 3000) if weighted else None
    fits = {}
    for name, limit in (("fused", 1), ("separate", 10**9)):
        monkeypatch.setattr(_kmeans, "FUSED_LABELS_MIN_KD", limit)
        fits[name] = KMeans(16, random_state=0, n_init=1, scheduler="sync").fit(X, sample_weight=w)
    a, b = fits["fused"], fits["separate"]
    np.testing.assert_array_equal(a.labels_, b.labels_)
    ref = np.argmin(((X[:, None, :] - a.cluster_centers_[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_array_equal(a.labels_, ref)
    assert a.inertia_ == pytest.approx(b.inertia_, rel=1e-12)
    wv = np.ones(len(X)) if w is None else w
    assert a.inertia_ == pytest.approx(float(wv @ ((X - a.cluster_centers_[ref]) ** 2).sum(1)), rel=1e-10)
    np.testing.assert_allclose(a.cluster_sizes_, b.cluster_sizes_, rtol=1e-12)
    monkeypatch.setattr(_kmeans, "FUSED_LABELS_MIN_KD", 1)
    lazy = KMeans(16, random_state=0, n_init=1, scheduler="sync").fit(da.from_array(X, chunks=1000))
    assert isinstance(lazy.labels_, da.Array)
    np.testing.assert_array_equal(np.asarray(lazy.labels_), a.labels_ if w is None else lazy.predict(X))


@pytest.mark.parametrize("k", [12, 120], ids=["hamerly", "yinyang"])
@pytest.mark.parametrize("case", ["blobs", "duplicate centres", "an emptying cluster", "weighted float32"])
def test_bounds_give_plain_lloyds_centres_at_every_iteration(case, k, monkeypatch):
    """Issue 55: Lloyd with per-row bounds (rows in this process) -
    Hamerly's (2010) for 12 centres, Yinyang's grouped bounds (Ding et al.
    2015) for 120 - skips the rows and distances the bounds rule out, and
    gives the centres of the plain steps at every iteration, the same
    inertia, counts and labels, bit for bit (issue 63) - on blobs, with two identical
    starting centres (exact ties: the lower index), with a start whose
    cluster empties (re-seeded mid-run: the bounds survive the jump), and
    weighted float32 rows. Most rows are skipped (Hamerly), most distances
    not computed (Yinyang), once the centres settle."""
    from infoclust_dask.cluster._kmeans import lloyd

    # the plain steps compiled too (tiny data take numpy's forms, whose sums round otherwise; the automatic bounds
    # are never kept there)
    monkeypatch.setattr("infoclust_dask.kernels._compiled.NUMPY_FORM_MAX_BYTES", 0)
    rng = np.random.default_rng(["blobs", "duplicate centres", "an emptying cluster", "weighted float32"].index(case))
    n, d = 6000, 5
    X = rng.normal(scale=5.0, size=(k, d))[rng.integers(0, k, n)] + rng.normal(size=(n, d))
    C0 = X[rng.choice(n, k, replace=False)].copy()
    w = None
    if case == "duplicate centres":
        C0[3] = C0[7]
    elif case == "an emptying cluster":
        C0[0] = X.max(axis=0) + 100.0  # far from every row: empty after the first step
    elif case == "weighted float32":
        X = X.astype(np.float32)
        w = rng.uniform(0.5, 2.0, n)
    runs = {}
    for bounds in (False, True):
        trace, out = [], {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = lloyd(X, w, C0, max_iter=25, tol=0.0, bounds=bounds, trace=trace, labels_out=out,
                           warn_empty=False)
        runs[bounds] = result, trace, out["labels"]
    (plain, plain_trace, plain_labels), (pruned, pruned_trace, pruned_labels) = runs[False], runs[True]
    assert len(plain_trace) == len(pruned_trace) == plain[2] == pruned[2]
    for a, b in zip(plain_trace, pruned_trace, strict=True):
        np.testing.assert_array_equal(b["centers"], a["centers"])
    np.testing.assert_array_equal(pruned[0], plain[0])
    assert pruned[1] == plain[1]  # issue 63: every path measures a distance alike (the same inertia, bit for bit)
    np.testing.assert_array_equal(pruned[3], plain[3])
    np.testing.assert_array_equal(pruned_labels, plain_labels)
    assert all(t["skipped"] == 0 for t in plain_trace) and pruned_trace[0]["skipped"] == 0
    if k <= 64:
        assert max(t["skipped"] for t in pruned_trace) > 0.8 * n
    else:  # every distance at the first step, then a few
        assert pruned_trace[0]["measured"] == n * k and min(t["measured"] for t in pruned_trace) < 0.1 * n * k


def test_automatic_bounds_are_judged_by_their_time(monkeypatch):
    """Issue 63: with ``bounds="auto"`` the first step is plain (its time
    is the yardstick), the second sets Hamerly's bounds up, and a later
    bounded step that :func:`bounds_pay` judges slower ends them: the rest
    are plain steps (nothing skipped), and every centre, the inertia and the
    labels stay those of plain Lloyd, bit for bit. The rule itself: a
    bounded step no slower than the fastest plain one, or falling below
    BOUNDS_FALLING of the bounded step before it, keeps them."""
    from infoclust_dask.cluster import _kmeans, _lloyd_bounds
    from infoclust_dask.kernels import _compiled

    assert _kmeans.bounds_pay(1.0, 0.9, 5.0) and _kmeans.bounds_pay(1.0, 1.5, 2.1)
    assert not _kmeans.bounds_pay(1.0, 1.1, 1.2) and not _kmeans.bounds_pay(1.0, 1.5, 1.9)
    monkeypatch.setattr(_compiled, "NUMPY_FORM_MAX_BYTES", 0)  # bounds only where the steps are compiled
    monkeypatch.setattr(_lloyd_bounds, "BOUNDS_LOST", set())
    monkeypatch.setattr(_kmeans, "BOUNDS_MIN_FORECAST", 0.0)  # the time rule alone (the forecast: its own test)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 4))  # one blob, 20 centres: they keep moving
    C0 = X[:20].copy()
    runs = {}
    for name, verdict in (("kept", True), ("ended", False)):
        monkeypatch.setattr(_kmeans, "bounds_pay", lambda plain, step, previous, _v=verdict: _v)
        _lloyd_bounds.BOUNDS_LOST.clear()  # (a kept run that lost over the whole fit would skip the next run's trial)
        trace, paths, out = [], [], {}
        result = _kmeans.lloyd(X, None, C0, max_iter=8, tol=0.0, bounds="auto", trace=trace, paths=paths,
                               labels_out=out)
        runs[name] = result, trace, paths, out["labels"]
    plain_trace, out = [], {}
    plain = _kmeans.lloyd(X, None, C0, max_iter=8, tol=0.0, bounds=False, trace=plain_trace, labels_out=out)
    for name, (result, trace, paths, labels) in runs.items():
        skipped = [t["skipped"] for t in trace]
        assert skipped[0] == 0 and all(t["seconds"] > 0 for t in trace)
        at = _lloyd_bounds.BOUNDS_PLAIN_STEPS
        assert skipped[:at + 1] == [0] * (at + 1)  # plain steps timed, then the set-up step
        if name == "kept":
            assert max(skipped[at + 1:]) > 0 and paths[-1].startswith("bounds kept to the end"), (skipped, paths)
        else:  # judged at the step after the set-up: plain from the next
            assert skipped[at + 2:] == [0] * (8 - at - 2) and "plain steps from here" in paths[0], (skipped, paths)
        for a, b in zip(trace, plain_trace, strict=True):
            np.testing.assert_array_equal(a["centers"], b["centers"])
        np.testing.assert_array_equal(result[0], plain[0])
        assert result[1] == plain[1] and result[2] == plain[2]
        np.testing.assert_array_equal(result[3], plain[3])
        np.testing.assert_array_equal(labels, out["labels"])
    # the class whose bounds were ended is not tried again in this process
    _lloyd_bounds.BOUNDS_LOST.clear()
    _lloyd_bounds.BOUNDS_LOST.add(("hamerly", np.dtype(np.float64).str, 20, 4, 4000 .bit_length()))
    trace, paths = [], []
    _kmeans.lloyd(X, None, C0, max_iter=8, tol=0.0, bounds="auto", trace=trace, paths=paths)
    assert all(t["skipped"] == 0 for t in trace) and "did not pay" in paths[0], paths


def test_bounds_that_lost_over_a_whole_fit_are_not_tried_again(monkeypatch):
    """Issue 63: bounds kept to the end are judged over the whole fit too -
    their steps, set-up and final pass against the fastest plain step times
    the steps (and final pass) plain Lloyd would have made; a loss keeps
    that class (kind, dtype, k, d) on plain steps for the rest of the
    process, a win does not."""
    from infoclust_dask.cluster import _lloyd_bounds

    monkeypatch.setattr(_lloyd_bounds, "BOUNDS_LOST", set())
    paths: list = []
    _lloyd_bounds.judge_whole_fit("auto", ("hamerly", "<f8", 4, 16), 1.0, 1.2, paths, 0, "")
    assert _lloyd_bounds.BOUNDS_LOST == set() and "(paid)" in paths[-1]
    _lloyd_bounds.judge_whole_fit("auto", ("hamerly", "<f8", 4, 16), 1.3, 1.2, paths, 0, "")
    assert _lloyd_bounds.BOUNDS_LOST == {("hamerly", "<f8", 4, 16)} and "did not pay" in paths[-1]
    _lloyd_bounds.judge_whole_fit(True, ("yinyang", "<f4", 99, 8), 9.0, 1.0, paths, 0, "")
    assert ("yinyang", "<f4", 99, 8) not in _lloyd_bounds.BOUNDS_LOST and paths[-1] == "bounds kept (asked for)"


@pytest.mark.parametrize("k", [12, 120], ids=["hamerly", "yinyang"])
def test_bounds_that_would_decide_few_rows_are_dropped_before_a_bounded_step(k, monkeypatch):
    """Issue 63: after the set-up the bounds forecast the share of rows
    they would decide without a distance (RowBounds.forecast); below
    BOUNDS_MIN_FORECAST they are dropped before any bounded step (one blob:
    every centre keeps moving) - a Yinyang step whose bounds fail measures
    its distances one by one (17 plain steps at 2e5 x 128, k = 1024) - and
    on separated blobs they are kept. The model is the plain one either way,
    bit for bit."""
    from infoclust_dask.cluster import _kmeans, _lloyd_bounds
    from infoclust_dask.kernels import _compiled

    monkeypatch.setattr(_compiled, "NUMPY_FORM_MAX_BYTES", 0)
    monkeypatch.setattr(_lloyd_bounds, "BOUNDS_LOST", set())
    monkeypatch.setattr(_kmeans, "bounds_pay", lambda plain, step, previous: True)
    rng = np.random.default_rng(3)
    one_blob = rng.normal(size=(6000, 16))
    blobs = rng.normal(scale=30.0, size=(k, 16))[rng.integers(0, k, 6000)] + rng.normal(size=(6000, 16))
    at = _lloyd_bounds.plain_steps(k) + 1  # the set-up step
    for name, X in (("one blob", one_blob), ("separated", blobs)):
        _lloyd_bounds.BOUNDS_LOST.clear()
        C0 = X[rng.choice(6000, k, replace=False)].copy()
        trace, paths = [], []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = _kmeans.lloyd(X, None, C0, max_iter=8, tol=0.0, bounds="auto", trace=trace, paths=paths)
            want = _kmeans.lloyd(X, None, C0, max_iter=8, tol=0.0, bounds=False)
        skipped = [t["skipped"] for t in trace]
        if name == "one blob":  # the set-up step only (Yinyang's shows its distances), then plain steps
            assert skipped == [0] * len(trace) and "would decide too few rows" in paths[0], (skipped, paths)
            if k > _lloyd_bounds.HAMERLY_MAX_K:
                assert [t["measured"] >= 0 for t in trace] == [i == at - 1 for i in range(len(trace))]
        else:
            assert max(skipped[at:]) > 0 and not any("too few" in p for p in paths), (skipped, paths)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1] == want[1] and got[2] == want[2]


def test_yinyang_groups_and_their_end_when_they_do_not_pay(monkeypatch):
    """Issue 55: Yinyang's groups hold every centre once, nearby centres
    together, in fewer groups when the rows are many (the bounds' memory);
    with ``bounds="auto"`` a bounded step judged not to pay (issue 63: by its
    time, :func:`bounds_pay`) ends them, and the centres and inertia stay
    those of plain Lloyd, bit for bit."""
    from infoclust_dask.cluster import _kmeans, _lloyd_bounds
    from infoclust_dask.cluster._lloyd_bounds import RowBounds, centre_groups

    rng = np.random.default_rng(1)
    C = np.concatenate([rng.normal(loc=20.0 * g, size=(10, 3)) for g in range(8)])  # 8 tight groups of 10
    order, start = centre_groups(C, 8)
    assert sorted(order.tolist()) == list(range(80)) and np.all(np.diff(start) > 0) and start[-1] == 80
    assert {frozenset(order[a:b] // 10) for a, b in zip(start[:-1], start[1:], strict=True)} == \
        {frozenset([g]) for g in range(8)}
    assert RowBounds(1000, C, 64).lower.shape == (1000, 8)
    monkeypatch.setattr("infoclust_dask.cluster._lloyd_bounds.YINYANG_MIN_BYTES", 8 * 1000 * 3)
    assert RowBounds(1000, C, 64).lower.shape == (1000, 3)  # three groups' worth of room

    assert RowBounds.planned(1000, 80, 64)[1] == 1000 * (16 + 8 * 3) and RowBounds.planned(1000, 12, 64) == (0, 24000)

    monkeypatch.setattr("infoclust_dask.kernels._compiled.NUMPY_FORM_MAX_BYTES", 0)
    X = rng.normal(size=(3000, 3))
    monkeypatch.setattr(_lloyd_bounds, "_bounds_room", lambda: 3000 * 40 - 1)  # the bounds' memory is counted
    none = []
    _kmeans.lloyd(X, None, X[:80].copy(), max_iter=12, tol=0.0, bounds="auto", trace=none)
    assert all(t["measured"] == -1 and t["skipped"] == 0 for t in none)
    monkeypatch.setattr(_lloyd_bounds, "_bounds_room", lambda: 3000 * 40)
    monkeypatch.setattr(_kmeans, "bounds_pay", lambda plain, step, previous: False)
    monkeypatch.setattr(_lloyd_bounds, "BOUNDS_LOST", set())
    monkeypatch.setattr(_kmeans, "BOUNDS_MIN_FORECAST", 0.0)
    auto, plain = [], []
    a = _kmeans.lloyd(X, None, X[:80].copy(), max_iter=12, tol=0.0, bounds="auto", trace=auto)
    b = _kmeans.lloyd(X, None, X[:80].copy(), max_iter=12, tol=0.0, bounds=False, trace=plain)
    measured = [t["measured"] for t in auto]  # set up at the first step (its products), judged, then plain
    assert _lloyd_bounds.plain_steps(80) == 0 and _lloyd_bounds.plain_steps(64) == _lloyd_bounds.BOUNDS_PLAIN_STEPS
    assert measured[0] == 3000 * 80 and measured[1] >= 0 and set(measured[2:]) == {-1}, measured
    for x, y in zip(auto, plain, strict=True):
        np.testing.assert_array_equal(x["centers"], y["centers"])
    assert a[1] == b[1]


def test_every_partial_fit_streams_on_a_distributed_scheduler(local_cluster_client):
    """Found by the deployment guide's demo flow on a deployed cluster: the
    first batch of ``partial_fit`` was placed on the workers (for its
    moments) and then converted by numpy, which computed the scattered
    blocks' graph with dask's local scheduler ("Missing dependency
    infoclust-block-..."). Every estimator with partial_fit now streams
    blocks of a dask array on a distributed scheduler, and ends where the
    same stream in this process ends."""
    import dask.array as da

    from infoclust_dask import MDA2, DiscriminativeClustering, IsotropicGaussianMixture, SoftKMeans

    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 3)) + 4 * rng.integers(0, 3, (600, 1))
    c = (X[:, 0] > 4).astype(int)
    blocks = list(da.from_array(X, chunks=150).blocks)
    for make, labelled in ((lambda s: KMeans(3, random_state=0, scheduler=s), False),
                           (lambda s: SoftKMeans(3, beta=0.5, random_state=0, scheduler=s), False),
                           (lambda s: IsotropicGaussianMixture(3, random_state=0, scheduler=s), False),
                           (lambda s: MDA2(3, random_state=0, scheduler=s), True),
                           (lambda s: DiscriminativeClustering(3, sigma=1.0, random_state=0, scheduler=s), True)):
        ends = []
        for sched in (local_cluster_client, "sync"):
            est = make(sched)
            for i, block in enumerate(blocks):
                if labelled:
                    est.partial_fit(block, c[150 * i:150 * (i + 1)], classes=[0, 1])
                else:
                    est.partial_fit(block)
            ends.append(np.asarray(est.cluster_centers_))
        np.testing.assert_allclose(ends[0], ends[1], rtol=1e-10, atol=1e-10)
