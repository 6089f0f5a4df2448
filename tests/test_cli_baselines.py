"""The mixture baselines on the command line (``fit mog``, ``fit mda2``) and
every unsupervised fit's agreement with the store's own label, checked
against scikit-learn's metrics on the labels the run saved."""

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from infoclust_dask import MDA2, IsotropicGaussianMixture, open_dataset
from infoclust_dask.cli import main


@pytest.fixture(scope="module")
def iris(tmp_path_factory):
    store = tmp_path_factory.mktemp("cli_baselines") / "iris.zarr"
    assert main(["ingest", "iris", str(store)]) == 0
    return store


@pytest.mark.parametrize("method, cls", [("mog", IsotropicGaussianMixture), ("mda2", MDA2)])
def test_fit_the_mixture_baselines(iris, tmp_path, capsys, method, cls, monkeypatch):
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["fit", method, str(iris), "-k", "3", "--seed", "0", "--scheduler", "sync"]) == 0
    summary = json.loads(capsys.readouterr().out)
    ds = open_dataset(iris)
    x, label = ds["x"].values, ds["label"].values
    ref = cls(3, random_state=0, scheduler="sync").fit(*((x, label) if method == "mda2" else (x,)))
    np.testing.assert_allclose(summary["loglik"], ref.loglik_history_[-1], rtol=1e-10)
    assert summary["cluster_sizes"] == np.bincount(ref.labels_, minlength=3).tolist()
    # every method reports it (issue 54: one schema); for the supervised baseline it is its training fit
    assert set(summary["agreement_with_label"]) == {"ari", "nmi"}
    assert Path(summary["run_dir"]).is_dir()


def test_unsupervised_fit_reports_agreement_with_the_stores_label(iris, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["fit", "kmeans", str(iris), "-k", "3", "--seed", "0"]) == 0
    summary = json.loads(capsys.readouterr().out)
    truth = open_dataset(iris)["label"].values
    from infoclust_dask import KMeans

    pred = KMeans(3, random_state=0).fit(open_dataset(iris)["x"].values).labels_
    assert summary["agreement_with_label"] == pytest.approx(
        {"ari": adjusted_rand_score(truth, pred), "nmi": normalized_mutual_info_score(truth, pred)}, rel=1e-12)
    assert 0.6 < summary["agreement_with_label"]["ari"] < 0.8  # K-means on raw iris: ~0.73


FIT_KEYS = {"method", "store", "n_samples", "n_features", "n_clusters", "runner", "seconds", "run_dir",
            "agreement_with_label"}


@pytest.mark.parametrize("method", ["kmeans", "softkmeans", "dc", "mda2", "mog", "smic", "ac", "cmbc"])
def test_every_fit_prints_one_json_schema(method, tmp_path, capsys):
    """Issue 54: the fit JSON differed by method - dc and mda2 omitted the agreement with the store's label,
    smic reported it twice under two names. Every fit now prints the keys of docs/cli.md's schema, the
    agreement as {"ari", "nmi"} of the training clusters against the store's label."""
    from infoclust_dask import write_dataset

    rng = np.random.default_rng(0)
    label = np.repeat([0, 1, 2], 40)
    if method == "cmbc":
        X = (rng.random((120, 12)) < np.where(label[:, None] == np.arange(12) % 3, 0.8, 0.1)).astype(np.uint8)
        store = write_dataset(tmp_path / "s.zarr", X, label=label)
    else:
        X = rng.normal(size=(120, 3)) + 4 * label[:, None]
        extra = {"y": X[:, :2] + rng.normal(scale=0.1, size=(120, 2))} if method == "ac" else {}
        store = write_dataset(tmp_path / "s.zarr", X, label=label, **extra)
    argv = ["fit", method, str(store), "-k", "3", "-q", "--storage", str(tmp_path / "st")]
    if method == "cmbc":
        argv += ["--known", "none"]
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert FIT_KEYS <= set(out), FIT_KEYS - set(out)
    assert set(out["agreement_with_label"]) == {"ari", "nmi"}
    assert not [k for k in out if k.startswith("ari_vs")]
