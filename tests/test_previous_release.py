"""Models saved by the previous release (the code before the fourth shape
step: modules at the package root, parameters kept from ``locals()``) load
and predict as they did; the public names and the old module attributes
still resolve."""

from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data"


def test_models_saved_by_the_previous_release_load_and_predict_the_same():
    from infoclust_dask.runs import load_model

    X = np.load(DATA / "models-session12-X.npy")
    expected = np.load(DATA / "models-session12-labels.npy")
    for i, name in enumerate(("kmeans-0.1.0-session12.json", "dc-0.1.0-session12.json")):
        model = load_model(DATA / name)
        np.testing.assert_array_equal(np.asarray(model.predict(X)), expected[i], err_msg=name)


def test_public_names_and_old_module_attributes_resolve():
    import infoclust_dask

    for name in infoclust_dask.__all__:
        assert getattr(infoclust_dask, name) is not None, name
    for old, new in (("store", "infoclust_dask.io.store"), ("append", "infoclust_dask.io.append"),
                     ("ingest", "infoclust_dask.io.ingest"), ("folds", "infoclust_dask.io.folds"),
                     ("eigen", "infoclust_dask.solvers.eigen"), ("optimize", "infoclust_dask.solvers.optimize")):
        assert getattr(infoclust_dask, old).__name__ == new
    assert infoclust_dask.store.verify_store is infoclust_dask.io.verify.verify_store
