"""Warm start: ``fit(X, init=previous)`` (a fitted estimator, its run folder
or model.json) starts from the previous fit's prototypes (and widths)
instead of a fresh seeding. After 5 % new rows of the same clusters, the
refit needs fewer passes than a cold fit and finds the same clusters; the
estimator's parameters are unchanged afterwards."""

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from infoclust_dask import AssociativeClustering, DiscriminativeClustering, KMeans, SoftKMeans


def _blobs(n, seed):
    rng = np.random.default_rng(seed)
    c = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0], [6.0, 6.0]])
    z = rng.integers(0, 4, n)
    return c[z] + rng.normal(size=(n, 2)), z


def test_kmeans_warm_start_needs_fewer_iterations_and_finds_the_same_clusters():
    X, z = _blobs(4000, 0)
    new, _ = _blobs(200, 1)
    both = np.vstack([X, new])
    previous = KMeans(4, init="random", n_init=1, random_state=3, scheduler="sync").fit(X)
    cold = KMeans(4, init="random", n_init=1, random_state=3, scheduler="sync").fit(both)
    warm = KMeans(4, init="random", n_init=1, random_state=3, scheduler="sync").fit(both, init=previous)
    assert warm.n_iter_ < cold.n_iter_, (warm.n_iter_, cold.n_iter_)
    assert adjusted_rand_score(cold.labels_, warm.labels_) == 1.0
    assert warm.get_params()["init"] == "random" and warm.warm_started_ == "a fitted KMeans"
    # the same start, computed by hand: one Lloyd step from the previous centres
    d2 = ((both[:, None] - previous.cluster_centers_[None]) ** 2).sum(-1)
    assert (warm.labels_ == d2.argmin(1)).mean() > 0.999


def test_warm_start_from_a_run_folder_and_the_cli(tmp_path, capsys):
    from infoclust_dask import write_dataset
    from infoclust_dask.cli import main

    X, _ = _blobs(3000, 0)
    write_dataset(tmp_path / "a.zarr", X)
    assert main(["fit", "kmeans", str(tmp_path / "a.zarr"), "-k", "4", "--scheduler", "sync",
                 "--storage", str(tmp_path / "s")]) == 0
    run = Path(json.loads(capsys.readouterr().out)["run_dir"])
    cold = json.loads((run / "summary.json").read_text())
    assert main(["fit", "kmeans", str(tmp_path / "a.zarr"), "-k", "4", "--scheduler", "sync",
                 "--storage", str(tmp_path / "s"), "--warm-start", str(run)]) == 0
    run2 = Path(json.loads(capsys.readouterr().out)["run_dir"])
    warm = json.loads((run2 / "summary.json").read_text())
    assert warm["warm_started_from"] == str(run) and warm["n_iter"] <= 2 < cold["n_iter"] + 2
    assert warm["inertia"] == pytest.approx(cold["inertia"], rel=1e-9)
    km = KMeans(4, scheduler="sync").fit(X, init=run / "model.json")  # a model file works too
    assert km.n_iter_ <= 2
    # --init with --warm-start was ignored without a word (issue 53): refused, and no run folder is left
    runs = sorted((tmp_path / "s" / "runs").iterdir())
    assert main(["fit", "kmeans", str(tmp_path / "a.zarr"), "-k", "4", "--scheduler", "sync",
                 "--storage", str(tmp_path / "s"), "--warm-start", str(run), "--init", "random"]) == 2
    assert "--init random would be ignored" in capsys.readouterr().err
    assert sorted((tmp_path / "s" / "runs").iterdir()) == runs  # refused before a run folder exists


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_soft_kmeans_dc_and_ac_warm_starts_keep_the_previous_solution():
    X, z = _blobs(1500, 0)
    sk = SoftKMeans(4, beta_schedule=np.geomspace(0.05, 5.0, 12), random_state=0, scheduler="sync").fit(X)
    again = SoftKMeans(4, beta_schedule=np.geomspace(0.05, 5.0, 12), random_state=0, scheduler="sync").fit(
        X, init=sk)
    np.testing.assert_allclose(np.sort(again.cluster_centers_, axis=0), np.sort(sk.cluster_centers_, axis=0),
                               atol=1e-4)
    assert len(sk.betas_) == 12 and len(again.betas_) == 1  # EM at the previous final beta, no new annealing
    assert again.get_params()["beta_schedule"] is not None  # restored
    dc = DiscriminativeClustering(4, random_state=0, scheduler="sync").fit(X, z)
    dc2 = DiscriminativeClustering(4, random_state=0, scheduler="sync").fit(X, z, init=dc)
    assert dc2.sigma_ == dc.sigma_ and dc2.get_params()["sigma"] == "auto"
    assert hasattr(dc, "sigma_scores_") and not hasattr(dc2, "sigma_scores_")  # no new width search
    assert dc2.score(X, z) >= dc.score(X, z) - 1e-6
    Y = X[:, ::-1] + np.random.default_rng(2).normal(scale=0.1, size=X.shape)
    ac = AssociativeClustering((4, 4), n_init=1, random_state=0, scheduler="sync").fit(X, Y)
    ac2 = AssociativeClustering((4, 4), n_init=1, random_state=0, scheduler="sync").fit(X, Y, init=ac)
    assert ac2.sigma_ == ac.sigma_ and ac2.score(X, Y) >= ac.score(X, Y) - 1e-6
    assert hasattr(ac, "sigma_scores_") and not hasattr(ac2, "sigma_scores_")
    with pytest.raises(TypeError, match="init= must be a fitted DiscriminativeClustering"):
        DiscriminativeClustering(4, scheduler="sync").fit(X, z, init=sk)


def test_cmbc_warm_start_refines_at_temperature_one_with_fewer_iterations(tmp_path):
    from infoclust_dask import CMBC
    from infoclust_dask.datasets import make_cmbc_data
    from infoclust_dask.runs import load_model, save_model

    Y, Q, _ = make_cmbc_data(1200, random_state=0)
    new, Qn, _ = make_cmbc_data(60, random_state=1)
    both, known = np.vstack([Y, new]), np.concatenate([Q[:, 0], Qn[:, 0]])
    previous = CMBC(2, random_state=0, scheduler="sync").fit(Y, known=Q[:, 0])
    save_model(previous, tmp_path / "m.json")
    cold = CMBC(2, random_state=0, scheduler="sync").fit(both, known=known)
    warm = CMBC(2, random_state=0, scheduler="sync").fit(both, known=known, init=tmp_path / "m.json")
    assert warm.temperatures_[0] == 1.0 and cold.temperatures_[0] > 1.0
    assert warm.n_iter_ < cold.n_iter_, (warm.n_iter_, cold.n_iter_)
    assert adjusted_rand_score(cold.labels_, warm.labels_) > 0.95
    assert warm.get_params()["init"] is None and warm.get_params()["t0"] == "auto"  # restored
    with pytest.raises(ValueError, match=r"init must have shape \(n_features, n_clusters\)"):
        CMBC(2, init=np.full((3, 2), 0.5), scheduler="sync").fit(Y, known=Q[:, 0])
    assert load_model(tmp_path / "m.json").theta_.shape == previous.theta_.shape
