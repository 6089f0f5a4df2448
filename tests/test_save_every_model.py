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


def _smic_store(where):
    from infoclust_dask.datasets import make_smic_toy

    X, _ = make_smic_toy("double_spirals", random_state=0)
    return X, ic.write_dataset(where, X, chunks=100)


@pytest.mark.filterwarnings("ignore:SMIC.*no positive posterior estimate:UserWarning")
@pytest.mark.parametrize("at", ["local", "bucket"])
def test_a_smic_fitted_on_a_store_predicts_after_save_and_load(at, tmp_path, request):
    where = tmp_path / "s.zarr" if at == "local" else request.getfixturevalue("s3_bucket") + "/s.zarr"
    models = tmp_path if at == "local" else request.getfixturevalue("s3_bucket") + "/runs"
    X, store = _smic_store(where)
    est = ic.SMIC(2, t=5, random_state=0, scheduler="sync").fit(store)
    new = X[::7] + 0.01  # new rows near the training rows
    ic.save_model(est, f"{models}/m.json")
    back = ic.load_model(f"{models}/m.json")
    assert back.predicts_from_saved_model
    np.testing.assert_array_equal(np.asarray(back.predict(new)), np.asarray(est.predict(new)))
    np.testing.assert_allclose(back.predict_proba(new), est.predict_proba(new), rtol=0, atol=1e-12)
    # a store changed since the fit is refused: its eigenvectors no longer describe its rows
    ic.append_dataset(store, X[:10])
    with pytest.raises(Exception, match="changed since this SMIC was fitted"):
        ic.load_model(f"{models}/m.json").predict(new)


@pytest.mark.filterwarnings("ignore:SMIC.*no positive posterior estimate:UserWarning")
def test_the_cli_predicts_from_a_saved_smic_and_refuses_one_fitted_on_arrays(tmp_path, capsys):
    from infoclust_dask.cli import main

    X, store = _smic_store(tmp_path / "s.zarr")
    assert main(["fit", "smic", str(store), "-k", "2", "--t", "5", "--scheduler", "sync",
                 "--storage", str(tmp_path / "st")]) == 0
    run = json.loads(capsys.readouterr().out)["run_dir"]
    assert main(["predict", f"{run}/model.json", str(store), "--out", str(tmp_path / "l.npy"),
                 "--scheduler", "sync"]) == 0
    ref = ic.SMIC(2, t=5, random_state=0, scheduler="sync").fit(store)
    np.testing.assert_array_equal(np.load(tmp_path / "l.npy"), np.asarray(ref.predict(X)))
    with pytest.warns(UserWarning, match="fitted on arrays, not on a store.*cannot predict new rows"):
        ic.save_model(ic.SMIC(2, t=5, random_state=0, scheduler="sync").fit(X), tmp_path / "arrays.json")
    assert main(["predict", str(tmp_path / "arrays.json"), str(store), "--out", str(tmp_path / "m.npy"),
                 "--scheduler", "sync"]) == 2
    assert "Fit it on a store" in capsys.readouterr().err
