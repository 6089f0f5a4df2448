"""Cross-validation: cells against independent references, the grid and
plan errors, and the Prefect flow's resume (only missing cells run) and
retries."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from infoclust_dask import crossval as cv
from infoclust_dask.io.ingest import ingest
from infoclust_dask.metrics import dc_log_posterior


@pytest.fixture(scope="module")
def wine_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("cv")
    path, _ = ingest("wine", d / "wine.zarr", standardize=True, n_folds=3, chunks=50)
    return str(path)


def test_parse_and_expand_grid():
    g = cv.parse_grid(["sigma=0.5,1,auto", "n-clusters=2,3", "regularization=none,vq"])
    assert g == {"sigma": [0.5, 1, "auto"], "n_clusters": [2, 3], "regularization": [None, "vq"]}
    combos = cv.expand_grid(g)
    assert len(combos) == 12 and combos[0] == {"n_clusters": 2, "regularization": None, "sigma": 0.5}
    with pytest.raises(ValueError, match="name=v1,v2"):
        cv.parse_grid(["sigma"])
    with pytest.raises(ValueError, match="is empty"):
        cv.expand_grid({"n_clusters": []})


def test_plan_errors(wine_store, tmp_path):
    with pytest.raises(ValueError, match="Unknown method 'em'"):
        cv.plan(wine_store, "em", {"n_clusters": [2]}, 3)
    with pytest.raises(ValueError, match="must include 'n_clusters'"):
        cv.plan(wine_store, "dc", {"sigma": [1.0]}, 3)
    with pytest.raises(ValueError, match="'sigmaa' is not a parameter of DiscriminativeClustering"):
        cv.plan(wine_store, "dc", {"n_clusters": [2], "sigmaa": [1.0]}, 3)
    with pytest.raises(ValueError, match="n_folds must be an integer >= 2"):
        cv.plan(wine_store, "kmeans", {"n_clusters": [2]}, 1)
    x = np.random.default_rng(0).normal(size=(30, 2))
    np.save(tmp_path / "x.npy", x)
    p, _ = ingest(tmp_path / "x.npy", tmp_path / "x.zarr")
    with pytest.raises(ValueError, match="needs class labels"):
        cv.plan(str(p), "dc", {"n_clusters": [2]}, 3)
    with pytest.raises(ValueError, match="no 'fold' vector"):
        cv.plan(str(p), "kmeans", {"n_clusters": [2]}, 3, "stored")


def test_keys_depend_on_everything_that_changes_a_result(wine_store, tmp_path, monkeypatch):
    a = cv.plan(wine_store, "dc", {"n_clusters": [2, 3], "sigma": [1.0]}, 3, "stored")
    assert len({c["key"] for c in a}) == 6
    assert [c["key"] for c in a] == [c["key"] for c in cv.plan(wine_store, "dc", {"sigma": [1.0], "n_clusters": [2, 3]},
                                                                3, "stored")]
    other = cv.plan(wine_store, "dc", {"n_clusters": [2, 3], "sigma": [1.0]}, 3, "ranges")
    assert not {c["key"] for c in a} & {c["key"] for c in other}
    copy, _ = ingest(wine_store, tmp_path / "copy.zarr")  # same data, another store: other keys
    assert not {c["key"] for c in a} & {c["key"] for c in cv.plan(str(copy), "dc", {"n_clusters": [2, 3],
                                                                                    "sigma": [1.0]}, 3, "ranges")}
    # a default of the estimator is part of the key: a release that changes it recomputes the cells
    explicit = cv.plan(wine_store, "dc", {"n_clusters": [2, 3], "sigma": [1.0], "max_iter": [None]}, 3, "stored")
    assert [c["key"] for c in explicit] == [c["key"] for c in a]
    from infoclust_dask import DiscriminativeClustering

    monkeypatch.setitem(DiscriminativeClustering.__init__.__kwdefaults__, "tol", 1e-7)
    changed = cv.plan(wine_store, "dc", {"n_clusters": [2, 3], "sigma": [1.0]}, 3, "stored")
    assert not {c["key"] for c in a} & {c["key"] for c in changed}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_dc_cell_scores_match_a_numpy_reference(wine_store):
    from infoclust_dask.io.store import open_dataset

    ds = open_dataset(wine_store)
    X, c, f = ds["x"].values, ds["label"].values, ds["fold"].values
    r = cv.run_cell(wine_store, "dc", {"n_clusters": 3, "sigma": 1.0, "max_iter": 10}, 1, 3, "stored", 0, "threads")
    te = f == 1
    assert (r["n_train"], r["n_test"]) == (int((~te).sum()), int(te.sum()))
    M = np.asarray(r["cluster_centers"])
    d2 = ((X[te][:, None, :] - M[None]) ** 2).sum(-1)
    lab = d2.argmin(1)
    ref = dc_log_posterior(lab, c[te], n_clusters=3, n_classes=3)
    assert r["score"] == pytest.approx(ref, rel=1e-10) and r["cost"] == pytest.approx(-ref, rel=1e-10)
    assert r["vq_cost"] == pytest.approx(d2.min(1).mean(), rel=1e-10)
    # the same fit on in-memory training rows gives the same prototypes
    from infoclust_dask import DiscriminativeClustering

    dc = DiscriminativeClustering(3, sigma=1.0, max_iter=10, random_state=1, scheduler="threads").fit(X[~te], c[~te])
    np.testing.assert_allclose(M, dc.cluster_centers_, atol=1e-8)


def test_summarize_means_and_best():
    res = [{"params": {"k": k}, "fold": f, "score": -float(k * 10 + f), "seconds": 1.0} for k in (1, 2) for f in range(3)]
    rows, best = cv.summarize(res)
    r1 = next(r for r in rows if r["k"] == 1)
    assert r1["score_mean"] == pytest.approx(-11.0) and r1["score_std"] == pytest.approx(1.0)
    assert best["k"] == 1 and r1["n_folds_done"] == 3


def _task_runs(flow_run_id, prefix="cv-cell"):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    return [r for r in runs if r.name.startswith(prefix)]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_flow_resumes_only_missing_cells(prefect_harness, wine_store, tmp_path):
    from infoclust_pipelines.crossval import crossval_flow

    grid = {"n_clusters": [2, 3], "sigma": [0.5, 2.0]}
    kw = dict(store=wine_store, method="dc", grid={**grid, "max_iter": [8]}, n_folds=3, fold_kind="stored",
              scheduler="threads", storage=str(tmp_path))
    first = crossval_flow(**kw)
    assert first["cells"] == 12 and len(first["computed"]) == 12 and first["reused"] == 0
    assert len(_task_runs(first["flow_run_id"])) == 12
    run = Path(first["run_dir"])
    summary = (run / "summary.csv").read_text().splitlines()
    assert len(summary) == 1 + 4 and summary[0].startswith("max_iter,n_clusters,sigma,n_folds_done,score_mean")
    assert len((run / "cells.csv").read_text().splitlines()) == 1 + 12
    assert (run / "validation.png").read_bytes()[:4] == b"\x89PNG"
    best = json.loads((run / "summary.json").read_text())["best"]
    assert first["best"] == {"max_iter": 8, "n_clusters": best["n_clusters"], "sigma": best["sigma"]}

    cells = sorted((tmp_path / "crossval" / "cells").glob("*.json"))
    assert len(cells) == 12
    victim = cells[5]
    mtimes = {p: p.stat().st_mtime_ns for p in cells if p != victim}
    victim.unlink()
    second = crossval_flow(**kw)
    assert second["computed"] == [victim.stem] and second["reused"] == 11
    assert len(_task_runs(second["flow_run_id"])) == 1  # only that cell ran as a task
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items())
    s2 = (Path(second["run_dir"]) / "summary.csv").read_text().splitlines()
    assert _without_seconds(s2) == _without_seconds(summary)  # the same table


def _without_seconds(lines):
    keep = [i for i, h in enumerate(lines[0].split(",")) if not h.startswith("seconds")]
    return [[row.split(",")[i] for i in keep] for row in lines]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_flow_retries_a_failed_cell_and_plots_tradeoff(prefect_harness, wine_store, tmp_path, monkeypatch):
    from infoclust_pipelines.crossval import crossval_flow

    calls = {"n": 0}
    real = cv.run_cell

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("simulated lost worker")
        return real(*a, **k)

    monkeypatch.setattr(cv, "run_cell", flaky)
    out = crossval_flow(store=wine_store, method="dc", n_folds=3, fold_kind="ranges", scheduler="threads",
                        grid={"n_clusters": [3], "sigma": [1.0], "regularization": ["vq"],
                              "reg_strength": [0.0, 1.0], "max_iter": [5]}, storage=str(tmp_path))
    assert calls["n"] == 7 and len(out["computed"]) == 6  # one failure, retried
    assert (Path(out["run_dir"]) / "tradeoff.png").exists()


def test_ac_cell_scores_held_out_pairs(tmp_path):
    from infoclust_dask import write_dataset
    from infoclust_dask.datasets import make_paired_dependency
    from infoclust_dask.objectives import ac as obj

    X, Y, z, _, _ = make_paired_dependency(900, n_latent=3, random_state=2)
    store = str(write_dataset(tmp_path / "p.zarr", X, y=Y, chunks=200))
    cells = cv.plan(store, "ac", {"n_clusters": [3], "sigma": [0.3], "n_init": [1]}, 3)
    r = cv.run_cell(store, "ac", cells[1]["params"], 1, 3, "ranges", 0, "threads")
    te = (np.arange(900) * 3) // 900 == 1
    mx, my = np.asarray(r["cluster_centers_x"]), np.asarray(r["cluster_centers_y"])
    lx = ((X[te][:, None] - mx[None]) ** 2).sum(-1).argmin(1)
    ly = ((Y[te][:, None] - my[None]) ** 2).sum(-1).argmin(1)
    t = np.zeros((3, 3))
    np.add.at(t, (lx, ly), 1)
    assert r["score"] == pytest.approx(obj.log_bayes_factor(t), rel=1e-12)
    assert r["mi"] == pytest.approx(obj.mutual_information(t), rel=1e-12) and r["mi"] > 0.3
    x_only = str(write_dataset(tmp_path / "x.zarr", X))
    with pytest.raises(ValueError, match="needs a second view"):
        cv.plan(x_only, "ac", {"n_clusters": [3]}, 3)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cmbc_gamma_by_held_out_objective(tmp_path):
    """CMBC cells score the held-out objective (3.14) at one reference gamma:
    over the grid {0 (EM), 0.995} the constrained fit wins, and its held-out
    clusters carry (almost) nothing of the known clustering."""
    from infoclust_dask import write_dataset
    from infoclust_dask.datasets import make_cmbc_data

    Y, Q, _ = make_cmbc_data(1200, p_noise=0.1, random_state=5)
    store = write_dataset(tmp_path / "cm.zarr", Y.astype("float32"), label=Q[:, 0])
    cells = cv.plan(store, "cmbc", {"n_clusters": [2], "gamma": [0.0, 0.995]}, 2, "ranges", seed=1)
    res = [cv.run_cell(store, "cmbc", c["params"], c["fold"], 2, "ranges", seed=1, scheduler="sync") for c in cells]
    mean = {g: np.mean([r["score"] for r in res if r["params"]["gamma"] == g]) for g in (0.0, 0.995)}
    nmi = {g: np.mean([r["nmi_known"] for r in res if r["params"]["gamma"] == g]) for g in (0.0, 0.995)}
    assert mean[0.995] > mean[0.0]
    assert nmi[0.995] < 0.02 < 0.5 < nmi[0.0]
    rows, best = cv.summarize(res)
    table = cv.table_markdown(rows, ["gamma"])
    assert "nmi_known" in table.splitlines()[0] and "loglik_per_sample" in table.splitlines()[0]
    assert best["gamma"] == 0.995 and f"{best['nmi_known_mean']:.4g} +-" in table


def test_kmeans_cluster_count_by_held_out_mixture_likelihood_picks_six(tmp_path):
    """On six Gaussian blobs the held-out K-means cost falls all the way to
    k = 10, but the held-out log-likelihood of the K-means mixture (the
    score) peaks at 6; the score equals a numpy reference on one cell."""
    from scipy.special import logsumexp
    from sklearn.datasets import make_blobs

    from infoclust_dask import KMeans, write_dataset

    X, _ = make_blobs(n_samples=3000, centers=6, n_features=8, cluster_std=1.0, center_box=(-10, 10),
                      random_state=0)
    store = write_dataset(tmp_path / "b.zarr", X)
    grid = {"n_clusters": list(range(2, 11)), "n_init": [3]}
    cells = cv.plan(store, "kmeans", grid, 5, "ranges", seed=0)
    res = [cv.run_cell(store, "kmeans", c["params"], c["fold"], 5, "ranges", seed=0, scheduler="sync")
           for c in cells]
    rows, best = cv.summarize(res)
    assert best["n_clusters"] == 6
    vq = {r["n_clusters"]: r["vq_cost_mean"] for r in rows}
    assert min(vq, key=vq.get) == 10  # the plain held-out cost would pick the largest k
    # one cell against numpy: the mixture of the training fit, evaluated on the held-out rows
    one = next(r for r in res if r["params"]["n_clusters"] == 4 and r["fold"] == 0)
    from infoclust_dask.io.folds import split
    from infoclust_dask.io.store import open_dataset

    train, test = split(open_dataset(store), 0, 5, "ranges", variables=("x",), scheduler="sync")
    xtr, xte = np.asarray(train["x"]), np.asarray(test["x"])
    km = KMeans(4, n_init=3, random_state=0, scheduler="sync").fit(xtr)
    lab = km.predict(xtr)
    sizes = np.bincount(lab, minlength=4)
    var = ((xtr - km.cluster_centers_[lab]) ** 2).sum() / xtr.size
    d2 = ((xte[:, None] - km.cluster_centers_[None]) ** 2).sum(-1)
    ref = np.mean(logsumexp(np.log(sizes / sizes.sum()) - d2 / (2 * var), axis=1)) \
        - xte.shape[1] / 2 * np.log(2 * np.pi * var)
    np.testing.assert_allclose(one["score"], ref, rtol=1e-10)


@pytest.mark.slow
def test_killed_crossval_resumes_the_missing_cells(wine_store, tmp_path):
    """kill -9 of `infoclust crossval` after some cells finished; the rerun
    computes only the missing ones and gives the uninterrupted table."""
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "INFOCLUST_STORAGE": str(tmp_path / "storage"), "PREFECT_HOME": str(tmp_path / "prefect")}
    cmd = [sys.executable, "-m", "infoclust_dask.cli", "crossval", str(wine_store), "--method", "dc",
           "--grid", "n_clusters=2,3", "--grid", "sigma=0.5,1,2", "--grid", "max_iter=8", "--folds", "3",
           "--fold-kind", "stored", "--scheduler", "threads"]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cells = tmp_path / "storage" / "crossval" / "cells"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and p.poll() is None and len(list(cells.glob("*.json"))) < 4:
        time.sleep(0.05)
    assert p.poll() is None, "crossval finished before it could be killed"
    p.send_signal(signal.SIGKILL)
    p.wait()
    done = len(list(cells.glob("*.json")))
    assert 4 <= done < 18
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout[r.stdout.index("{"):])
    assert out["reused"] >= done - 1 and out["cells"] == 18  # a cell being written at the kill may rerun
    resumed = (Path(out["run_dir"]) / "summary.csv").read_text().splitlines()
    r2 = subprocess.run(cmd, env={**env, "INFOCLUST_STORAGE": str(tmp_path / "fresh")}, capture_output=True,
                        text=True, timeout=600)
    fresh = json.loads(r2.stdout[r2.stdout.index("{"):])
    assert _without_seconds((Path(fresh["run_dir"]) / "summary.csv").read_text().splitlines()) == \
        _without_seconds(resumed)


def test_a_cell_is_one_cell_whether_its_numbers_came_as_ints_or_floats():
    """The guide's `infoclust crossval --grid sigma=0.5,1,2` and the nightly
    deployment's YAML `sigma: [0.5, 1.0, 2.0]` sweep the same cells: their
    keys match, so the deployment reuses what the command computed (the
    deployment test recomputed 60 of them)."""
    from infoclust_dask.crossval import cell_key

    a = cell_key("fp", "dc", {"sigma": 1, "n_clusters": 5, "classes": [0, 1]}, 0, 10, "stored", 0)
    b = cell_key("fp", "dc", {"sigma": 1.0, "n_clusters": 5.0, "classes": [0.0, 1.0]}, 0, 10, "stored", 0)
    assert a == b
    assert a != cell_key("fp", "dc", {"sigma": 1.5, "n_clusters": 5}, 0, 10, "stored", 0)
    assert cell_key("fp", "dc", {"flag": True}, 0, 10, "stored", 0) != cell_key("fp", "dc", {"flag": 1}, 0, 10,
                                                                                 "stored", 0)
