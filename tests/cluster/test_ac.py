"""Associative clustering: log BF (3) against the Bayes factor written from
(1)-(2), the smoothed objective and both gradients against finite
differences, chunk invariance and schedulers, the MI limit of §IV, the
cross-cluster table, optimization on a planted dependency, errors."""

import dask.array as da
import numpy as np
import pytest
from helpers import finite_difference
from scipy.special import gammaln
from scipy.stats import hypergeom

from infoclust_dask import AssociativeClustering, KMeans
from infoclust_dask.cluster._ac import ac_objective, cross_cluster_table
from infoclust_dask.datasets import make_paired_dependency
from infoclust_dask.engine.choose import Distributed
from infoclust_dask.objectives import ac as obj


@pytest.fixture(scope="module")
def paired():
    X, Y, z, z2, mi = make_paired_dependency(1200, random_state=0)
    return X, Y, mi


def _memberships(V, m, s):
    d2 = ((V[:, None, :] - m[None]) ** 2).sum(-1)
    g = np.exp(-d2 / (2 * s**2))
    return g / g.sum(1, keepdims=True)


def smoothed_reference(X, Y, mx, my, sx, sy, prior, lam):
    """log BF'' of §III with explicit loops over the cells and margins."""
    gx, gy = _memberships(X, mx, sx), _memberships(Y, my, sy)
    nd, nx, ny = prior
    v = 0.0
    for i in range(len(mx)):
        for j in range(len(my)):
            v += gammaln(np.sum(gx[:, i] * gy[:, j]) + nd)
        v -= lam[0] * gammaln(gx[:, i].sum() + nx)
    for j in range(len(my)):
        v -= lam[1] * gammaln(gy[:, j].sum() + ny)
    return v


def test_log_bf_plus_constants_is_the_bayes_factor_of_1_2():
    """(3) + constants == log P(n | M_D) - log P(n | M_I) written from (2) and the hypergeometric law."""
    n = np.array([[12, 3, 0], [2, 9, 4]])
    N, K, L = n.sum(), 2, 3
    nd, nx, ny = 0.7, 1.3, 2.0

    def dirichlet_multinomial(t, t0):  # (2), with the multinomial coefficient
        t = np.ravel(t)
        B, T = t.size, t.sum()
        return (gammaln(B * t0) + gammaln(T + 1) + gammaln(t + t0).sum() - B * gammaln(t0) - gammaln(T + B * t0)
                - gammaln(t + 1).sum())

    rows, cols = n.sum(1), n.sum(0)
    log_hyper = gammaln(rows + 1).sum() + gammaln(cols + 1).sum() - gammaln(N + 1) - gammaln(n + 1).sum()
    log_bf = dirichlet_multinomial(n, nd) - (log_hyper + dirichlet_multinomial(rows, nx)
                                             + dirichlet_multinomial(cols, ny))
    ours = obj.log_bayes_factor(n, (nd, nx, ny)) + obj.log_bf_constant(K, L, N, (nd, nx, ny))
    assert ours == pytest.approx(log_bf, rel=1e-12)


def test_one_over_n_log_bf_approaches_mi_minus_log_n_plus_one():
    """§IV, eq. (8): on a fixed joint distribution the gap shrinks like log(N)/N."""
    p = np.array([[0.3, 0.05, 0.05], [0.02, 0.25, 0.03], [0.05, 0.05, 0.2]])
    gaps = []
    for N in (10**3, 10**4, 10**5, 10**6):
        n = p * N
        mi = obj.mutual_information(n)
        gaps.append(abs(obj.log_bayes_factor(n) / N - (mi - np.log(N) + 1)))
    assert gaps[-1] < 1e-4 and all(b < a for a, b in zip(gaps, gaps[1:], strict=False))
    assert gaps[0] * 1e3 / np.log(1e3) == pytest.approx(gaps[-1] * 1e6 / np.log(1e6), rel=0.5)


@pytest.mark.parametrize("fused", [False, True], ids=["two-passes", "fused"])
@pytest.mark.parametrize("sig, prior, lam", [((0.5, 0.8), (1.0, 1.0, 1.0), (1.0, 1.0)),
                                             ((0.3, 1.5), (0.5, 2.0, 1.5), (1.5, 0.7))])
def test_objective_and_gradients_match_reference_and_finite_differences(paired, sig, prior, lam, fused):
    X, Y, _ = paired
    X, Y = X[:400], Y[:400]
    rng = np.random.default_rng(1)
    mx, my = rng.normal(size=(3, 4)), rng.normal(size=(2, 4))
    value, gx, gy, counts = ac_objective(X, Y, mx, my, sig, prior=prior, lam=lam, scheduler="sync", fused=fused)
    assert value == pytest.approx(smoothed_reference(X, Y, mx, my, *sig, prior, lam), rel=1e-10)
    assert counts.sum() == pytest.approx(400, rel=1e-12)
    fx = finite_difference(lambda m: ac_objective(X, Y, m, my, sig, prior=prior, lam=lam, fused=fused)[0], mx)
    fy = finite_difference(lambda m: ac_objective(X, Y, mx, m, sig, prior=prior, lam=lam, fused=fused)[0], my)
    np.testing.assert_allclose(gx, fx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gy, fy, rtol=1e-5, atol=1e-6)


def test_passes_chunked_equal_numpy(paired, scheduler):
    X, Y, _ = paired
    rng = np.random.default_rng(2)
    mx, my = rng.normal(size=(4, 4)), rng.normal(size=(3, 4))
    ref = ac_objective(X, Y, mx, my, (0.6, 0.9), scheduler="sync")
    got = ac_objective(da.from_array(X, chunks=(101, 4)), da.from_array(Y, chunks=(77, 4)), mx, my, (0.6, 0.9),
                       scheduler=scheduler)
    assert got[0] == pytest.approx(ref[0], rel=1e-10)
    for a, b in zip(got[1:], ref[1:], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_a_fit_on_a_distributed_scheduler_takes_the_same_passes_and_gives_the_same_bits(paired, local_cluster_client,
                                                                                      monkeypatch):
    """Pass by pass on a cluster (as for data above the whole-fit budget),
    the fit evaluates log BF'' by the same two passes as in this process -
    it once switched to the fused pass there, whose round-off conjugate
    gradients amplified into other prototypes (issue 62) - and ends at the
    same prototypes, bit for bit."""
    from infoclust_dask import engine

    X, Y, _ = paired
    passes = []
    real = engine.map_reduce

    def recording(bp, *a, **k):
        passes.append(bp.name)
        return real(bp, *a, **k)

    monkeypatch.setattr(engine, "map_reduce", recording)
    monkeypatch.setattr(Distributed, "loop_budget", lambda self: 0)
    kw = dict(sigma=(0.3, 0.3), n_init=1, anneal_steps=2, max_iter=8, random_state=0)
    a = AssociativeClustering((3, 3), scheduler="threads", **kw).fit(X, Y)
    two = list(passes)
    passes.clear()
    b = AssociativeClustering((3, 3), scheduler=local_cluster_client, **kw).fit(da.from_array(X, chunks=250),
                                                                                da.from_array(Y, chunks=250))
    assert "ac_fused_stats" not in two + passes and two.count("ac_count_stats") == two.count("ac_grad_stats") > 10
    assert passes == two
    np.testing.assert_array_equal(b.cluster_centers_x_, a.cluster_centers_x_)
    np.testing.assert_array_equal(b.cluster_centers_y_, a.cluster_centers_y_)


def test_fit_is_chunk_invariant_and_predicts(paired):
    X, Y, _ = paired
    kw = dict(sigma=(0.3, 0.3), n_init=1, anneal_steps=3, max_iter=10, random_state=0)
    a = AssociativeClustering((3, 3), scheduler="sync", **kw).fit(X, Y)
    b = AssociativeClustering((3, 3), scheduler="threads", **kw).fit(da.from_array(X, chunks=200),
                                                                      da.from_array(Y, chunks=300))
    np.testing.assert_allclose(a.cluster_centers_x_, b.cluster_centers_x_, atol=1e-7)
    np.testing.assert_allclose(a.cluster_centers_y_, b.cluster_centers_y_, atol=1e-7)
    np.testing.assert_array_equal(a.labels_x_, b.labels_x_.compute())
    lx = ((X[:, None] - a.cluster_centers_x_[None]) ** 2).sum(-1).argmin(1)
    ly = ((Y[:, None] - a.cluster_centers_y_[None]) ** 2).sum(-1).argmin(1)
    np.testing.assert_array_equal(a.predict_x(X), lx)
    np.testing.assert_array_equal(a.predict_y(Y), ly)
    table = np.zeros((3, 3), int)
    np.add.at(table, (lx, ly), 1)
    np.testing.assert_array_equal(a.contingency_, table)
    assert a.score(X, Y) == pytest.approx(obj.log_bayes_factor(table), rel=1e-12)


def test_cross_cluster_table_against_scipy():
    n = np.array([[30, 2], [5, 13]])
    cells = cross_cluster_table(n)
    top = cells[0]
    assert (top["x_cluster"], top["y_cluster"], top["count"]) == (0, 0, 30)
    assert top["expected"] == pytest.approx(32 * 35 / 50)
    assert top["p_over"] == pytest.approx(hypergeom(50, 32, 35).sf(29), rel=1e-12)
    low = next(c for c in cells if (c["x_cluster"], c["y_cluster"]) == (0, 1))
    assert low["p_under"] == pytest.approx(hypergeom(50, 32, 15).cdf(2), rel=1e-12)
    assert sum(c["mi_share"] for c in cells) == pytest.approx(obj.mutual_information(n), rel=1e-12)


def test_planted_dependency_beats_kmeans_per_view():
    """The dependency lives in the low-variance features: K-means on each
    view splits the distractors, AC finds the dependency."""
    X, Y, _, _, oracle = make_paired_dependency(3000, random_state=0)
    Xt, Yt, _, _, _ = make_paired_dependency(3000, random_state=1)
    ac = AssociativeClustering((4, 4), sigma=(0.3, 0.3), n_init=4, random_state=0, scheduler="threads").fit(X, Y)
    km_x, km_y = KMeans(4, random_state=0).fit(X), KMeans(4, random_state=0).fit(Y)
    t = np.zeros((4, 4))
    np.add.at(t, (km_x.predict(Xt), km_y.predict(Yt)), 1)
    mi_km, mi_ac = obj.mutual_information(t), ac.mutual_information(Xt, Yt)
    assert mi_km < 0.02 and mi_ac > 0.4 and mi_ac <= oracle + 0.02
    over, under = ac.most_surprising(3)
    assert len(over) == 3 and over[0]["p_over"] < 1e-10 and under[0]["count"] < under[0]["expected"]


@pytest.mark.parametrize("kwargs, X_or_Y, match", [
    (dict(n_clusters=(2, 0)), None, r"n_clusters"),
    (dict(sigma=(0.5, "auto")), None, r"both 'auto' or both floats"),
    (dict(sigma=-1.0), None, r"'sigma' parameter"),
    (dict(prior=(1, 0, 1)), None, r"prior must be three positive numbers"),
    (dict(margin_weight=(1, -1)), None, r"'margin_weight' parameter"),
    (dict(optimizer="sa"), None, r"'optimizer' parameter"),
    (dict(n_clusters=5000), None, r"n_samples=1200 should be >= n_clusters=5000"),
    (dict(), "short", r"X has 1200 rows but Y has 10"),
    (dict(), "nan", r"Input Y contains 1 NaN"),
])
def test_errors(paired, kwargs, X_or_Y, match):
    X, Y, _ = paired
    if X_or_Y == "short":
        Y = Y[:10]
    elif X_or_Y == "nan":
        Y = da.from_array(Y.copy(), chunks=500)
        Y[3, 1] = np.nan
    with pytest.raises(ValueError, match=match):
        AssociativeClustering(**{"sigma": 0.5, **kwargs}).fit(X, Y)
    with pytest.raises(ValueError, match="Y is missing"):
        AssociativeClustering().fit(X)


def test_match_prototypes_against_all_permutations():
    from itertools import permutations

    from infoclust_dask.reliability import match_prototypes

    rng = np.random.default_rng(5)
    ref = rng.normal(size=(5, 3))
    rep = ref[[3, 0, 4, 1, 2]] + 0.01 * rng.normal(size=(5, 3))
    perm, cost = match_prototypes(ref, rep)
    brute = min(permutations(range(5)), key=lambda p: ((ref - rep[list(p)]) ** 2).sum())
    assert list(perm) == list(brute) == [1, 3, 4, 0, 2]
    assert cost == pytest.approx(((ref - rep[perm]) ** 2).sum())


def test_bootstrap_reliability_high_for_planted_low_for_independent():
    from infoclust_dask.reliability import bootstrap_reliability, bootstrap_replicate

    kw = dict(n_clusters=(3, 3), sigma=(0.3, 0.3), n_init=1, scheduler="threads")
    X, Y, _, _, _ = make_paired_dependency(900, n_latent=3, random_state=3)
    ref, cells, rel = bootstrap_reliability(X, Y, n_boot=4, **kw)
    over = [c for c in cells if c["surprising"] == "over"]
    assert len(over) >= 3 and min(c["reliability"] for c in over[:3]) >= 0.75
    Yi = make_paired_dependency(900, n_latent=3, random_state=4)[1]  # unrelated to X
    _, cells_i, _ = bootstrap_reliability(X, Yi, n_boot=4, **kw)
    # fitted to noise, AC still finds "surprising" cells in its own training data; they do not recur
    flagged = [c for c in cells_i if c["surprising"] != "-"]
    assert flagged and max(c["reliability"] for c in flagged) <= 0.5
    base = {k: v for k, v in ref.get_params().items() if k not in ("random_state", "scheduler")}
    a = bootstrap_replicate(X, Y, base, (ref.cluster_centers_x_, ref.cluster_centers_y_), 7, scheduler="sync")
    b = bootstrap_replicate(X, Y, base, (ref.cluster_centers_x_, ref.cluster_centers_y_), 7, scheduler="threads")
    assert a == b and np.asarray(a["table"]).sum() == 900


def test_replicates_refit_at_the_widths_the_reference_chose(monkeypatch):
    """sigma="auto" is searched once, on the reference; every replicate
    refits at the reference's sigma_ (the width search is most of a default
    fit: 53 s of the weekly bootstrap's reference fit vs 1.8 s at a fixed width)."""
    from infoclust_dask.reliability import bootstrap_reliability, replicate_params
    from infoclust_dask.solvers import optimize

    searches = []
    real = optimize.repeated_held_out_search

    def counting(*a, **k):
        searches.append(1)
        return real(*a, **k)

    monkeypatch.setattr(optimize, "repeated_held_out_search", counting)
    X, Y, _, _, _ = make_paired_dependency(300, n_latent=3, random_state=5)
    ref, cells, _ = bootstrap_reliability(X, Y, n_boot=3, n_clusters=(3, 3), n_init=1, max_iter=5,
                                          sigma_grid=[0.1, 0.3], scheduler="threads")
    assert len(searches) == 1 and len(cells) == 9
    params = replicate_params(ref)
    assert params["sigma"] == [float(ref.sigma_[0]), float(ref.sigma_[1])]
    assert "random_state" not in params and "scheduler" not in params
    rep = AssociativeClustering(**params, random_state=0, scheduler="threads").fit(X, Y)
    assert rep.sigma_ == tuple(params["sigma"]) and len(searches) == 1


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_store_fit_and_bootstrap_flow(prefect_harness, tmp_path):
    import json
    from pathlib import Path

    from infoclust_dask import write_dataset
    from infoclust_dask.runs import load_model
    from infoclust_pipelines.bootstrap import bootstrap_flow

    X, Y, z, _, _ = make_paired_dependency(600, n_latent=3, random_state=1)
    store = write_dataset(tmp_path / "pairs.zarr", X, y=Y, label=z, chunks=300)
    ac = AssociativeClustering((3, 3), sigma=(0.3, 0.3), n_init=1, random_state=0, scheduler="threads").fit(str(store))
    ref = AssociativeClustering((3, 3), sigma=(0.3, 0.3), n_init=1, random_state=0, scheduler="threads").fit(X, Y)
    np.testing.assert_allclose(ac.cluster_centers_x_, ref.cluster_centers_x_, atol=1e-6)  # CG amplifies round-off
    assert ac.score(str(store)) == pytest.approx(ref.score(X, Y))
    out = bootstrap_flow(store=str(store), n_clusters=[3, 3], n_boot=2, params={"sigma": [0.3, 0.3], "n_init": 1},
                         scheduler="threads", storage=str(tmp_path))
    run = Path(out["run_dir"])
    assert (run / "heatmap.png").read_bytes()[:4] == b"\x89PNG"
    assert len((run / "reliability.csv").read_text().splitlines()) == 1 + 9
    summary = json.loads((run / "summary.json").read_text())
    assert summary["n_boot"] == 2 and len(out["most_over"]) == 3
    model = load_model(run / "ac-reference-model.json")
    np.testing.assert_array_equal(model.predict_x(X), ac.predict_x(X))


def test_predict_gives_each_views_cluster():
    """Issue 54: AssociativeClustering had no predict; now predict(X) is the x-view clusters and
    predict(X, y) the pair, equal to predict_x / predict_y, lazy on dask input."""
    X, Y = make_paired_dependency(400, random_state=0)[:2]
    ac = AssociativeClustering((3, 2), sigma=0.5, random_state=0, scheduler="sync", max_iter=5).fit(X, Y)
    np.testing.assert_array_equal(ac.predict(X), ac.predict_x(X))
    lx, ly = ac.predict(X, Y)
    np.testing.assert_array_equal(lx, ac.predict_x(X))
    np.testing.assert_array_equal(ly, ac.predict_y(Y))
    lazy = ac.predict(da.from_array(X, chunks=100))
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), lx)


def test_a_view_with_fewer_distinct_rows_than_regions_is_named():
    """Issue 54 (one default of 8 regions per view): a second view of class
    labels (3 values) cannot fill L = 8 regions; AC says so in its own words
    (not the inner K-means' "empty cluster ... re-seeded") and fits; with
    L = 3 nothing is said."""
    import warnings

    from infoclust_dask.cluster._ac_cca import FewRegionsWarning

    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 3))
    y = (np.arange(90) % 3).astype(float)[:, None]
    X[:, 0] += 2 * y[:, 0]
    # a fixed width and one start: the warning comes from the CCA start, which every fit runs first
    with pytest.warns(FewRegionsWarning, match=r"y view's canonical variates hold .* fewer than its L=8 regions"):
        ac = AssociativeClustering(sigma=(0.5, 0.5), n_init=1, random_state=0, scheduler="sync").fit(X, y)
    assert ac.cluster_centers_y_.shape[0] == 8
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        AssociativeClustering((8, 3), sigma=(0.5, 0.5), n_init=1, random_state=0, scheduler="sync").fit(X, y)


def test_width_search_averages_splits_and_does_not_hinge_on_rounding():
    """Issue 54 ("the same care for AC's width"): the width is chosen from
    the held-out log BF per row averaged over n_splits hashed splits by the
    one-standard-error rule (sigma_scores_ has mean, spread, scores, moved
    for every candidate), and multiplying the data by (1 + 1e-12) chooses
    the same width."""
    X, Y, _, _, _ = make_paired_dependency(600, n_latent=3, random_state=0)
    fits = [AssociativeClustering((3, 3), n_splits=3, n_init=1, random_state=0, scheduler="sync").fit(X * f, Y * f)
            for f in (1.0, 1.0 + 1e-12)]
    table = fits[0].sigma_scores_
    assert set(table) == set(fits[0]._grid())
    for row in table.values():
        assert len(row["scores"]) == 3 and row["mean"] == pytest.approx(np.mean(row["scores"]))
        assert row["spread"] == pytest.approx(np.std(row["scores"], ddof=1) / np.sqrt(3))
    best = max(row["mean"] for row in table.values())
    chosen = fits[0].sigma_[0] / np.sqrt(X.var(axis=0).sum())
    r = min(table, key=lambda c: abs(c - chosen))
    assert table[r]["mean"] >= best - max(row["spread"] for row in table.values())
    assert fits[0].sigma_ == pytest.approx(fits[1].sigma_, rel=1e-9)
