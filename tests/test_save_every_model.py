"""Every estimator that `fit` can save predicts after save_model / load_model
(top-level names) exactly what the fitted one predicts; the CLI predicts
from a saved AssociativeClustering (its x-view clusters)."""

import json

import numpy as np
import pytest

import infoclust_dask as ic
from infoclust_dask.cluster import MDA2, IsotropicGaussianMixture


def _data():
    rng = np.random.default_rng(0)
    c = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    z = rng.integers(0, 3, 600)
    X = c[z] + rng.normal(size=(600, 2))
    return X, z, X[:, ::-1] + rng.normal(scale=0.2, size=X.shape)


CASES = {
    "KMeans": lambda X, z, Y: (ic.KMeans(3, random_state=0, scheduler="sync").fit(X), "predict", X),
    "SoftKMeans": lambda X, z, Y: (ic.SoftKMeans(3, random_state=0, scheduler="sync").fit(X), "predict", X),
    "DiscriminativeClustering": lambda X, z, Y: (
        ic.DiscriminativeClustering(3, random_state=0, scheduler="sync").fit(X, z), "predict", X),
    "AssociativeClustering": lambda X, z, Y: (
        ic.AssociativeClustering((3, 3), n_init=1, random_state=0, scheduler="sync").fit(X, Y), "predict_x", X),
    "CMBC": lambda X, z, Y: (ic.CMBC(2, random_state=0, scheduler="sync").fit((X > 1).astype(np.uint8), known=z),
                             "predict", (X > 1).astype(np.uint8)),
    "IsotropicGaussianMixture": lambda X, z, Y: (IsotropicGaussianMixture(3, random_state=0, scheduler="sync").fit(X),
                                                 "predict", X),
    "MDA2": lambda X, z, Y: (MDA2(3, random_state=0, scheduler="sync").fit(X, z), "predict", X),
}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("name", sorted(CASES))
def test_save_load_predict(name, tmp_path):
    X, z, Y = _data()
    est, method, rows = CASES[name](X, z, Y)
    ic.save_model(est, tmp_path / "m.json")
    back = ic.load_model(tmp_path / "m.json")
    assert type(back) is type(est)
    np.testing.assert_array_equal(np.asarray(getattr(back, method)(rows)), np.asarray(getattr(est, method)(rows)))


def test_the_cli_predicts_from_a_saved_associative_clustering(tmp_path, capsys):
    from infoclust_dask.cli import main

    X, z, Y = _data()
    store = ic.write_dataset(tmp_path / "p.zarr", X, y=Y)
    est = ic.AssociativeClustering((3, 3), n_init=1, random_state=0, scheduler="sync").fit(X, Y)
    ic.save_model(est, tmp_path / "ac.json")
    assert main(["predict", str(tmp_path / "ac.json"), str(store), "--out", str(tmp_path / "l.npy"),
                 "--scheduler", "sync"]) == 0
    out = json.loads(capsys.readouterr().out)
    np.testing.assert_array_equal(np.load(tmp_path / "l.npy"), np.asarray(est.predict_x(X)))
    assert sum(out["cluster_sizes"]) == 600
