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
    # the supervised baseline is fitted with the label: no "agreement" with what it was given
    assert ("agreement_with_label" in summary) == (method == "mog")
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
