"""Models saved by the previous release (the code before the fourth shape
step: modules at the package root, parameters kept from ``locals()``) load
and predict as they did; the public names and the old module attributes
still resolve."""

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from infoclust_dask._support.moved import MOVED

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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the warning itself: the tests below
        _old_attributes_resolve(infoclust_dask)


def _old_attributes_resolve(infoclust_dask):
    for old, new in (("store", "infoclust_dask.io.store"), ("append", "infoclust_dask.io.append"),
                     ("ingest", "infoclust_dask.io.ingest"), ("folds", "infoclust_dask.io.folds"),
                     ("eigen", "infoclust_dask.solvers.eigen"), ("optimize", "infoclust_dask.solvers.optimize")):
        assert getattr(infoclust_dask, old).__name__ == new
    assert infoclust_dask.store.verify_store is infoclust_dask.io.verify.verify_store


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_old_module_paths_import_the_moved_module_with_a_deprecation_warning(old, new, monkeypatch):
    parent, _, leaf = old.rpartition(".")
    monkeypatch.delitem(sys.modules, old, raising=False)  # imported by an earlier test: import it afresh
    if leaf in vars(sys.modules[parent]):  # (hasattr would import it through the package's __getattr__)
        monkeypatch.delattr(sys.modules[parent], leaf)
    with pytest.warns(DeprecationWarning, match=f"The module '{old}' moved to '{new}'; import it from there") as rec:
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)  # the same object: a patch of one is a patch of the other
    assert module.__spec__.name == new  # the moved module's own spec is untouched
    assert rec[0].filename == __file__  # the warning points at the importing line, not at the package


def test_a_users_script_sees_the_warning_at_its_import_line(tmp_path):
    """In a script (``__main__``), Python shows DeprecationWarnings by default:
    the warning must be attributed to the script's line, and ``from OLD import
    NAME`` must give the moved module's function."""
    script = tmp_path / "old_paths.py"
    script.write_text("from infoclust_dask.store import open_dataset\n"
                      "import infoclust_dask\n"
                      "assert open_dataset is infoclust_dask.io.store.open_dataset\n"
                      "infoclust_dask.optimize\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"{script}:1: DeprecationWarning: The module 'infoclust_dask.store' moved to " \
           "'infoclust_dask.io.store'" in r.stderr, r.stderr
    assert f"{script}:4: DeprecationWarning: The module 'infoclust_dask.optimize' moved to " \
           "'infoclust_dask.solvers.optimize'" in r.stderr, r.stderr
