"""The method registry: every entry builds a valid estimator from its
command-line defaults, every entry has a demo step, cross-validation and the
CLI take their method lists from it, and a method registered from tests/
runs through all of them."""

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from infoclust_dask import crossval, registry
from infoclust_dask.cli import build_parser


@pytest.mark.parametrize("name", sorted(registry.METHODS))
def test_cli_defaults_build_a_valid_estimator(name):
    m = registry.METHODS[name]
    args = build_parser().parse_args(["fit", name, "store.zarr", "-k", "3"])
    params = m.params_from_options(vars(args))
    cls = m.estimator_class()
    est = cls(**params)
    assert set(params) <= set(est.get_params())
    assert args.func.__name__ == "_cmd_fit" and args.method == name


def test_every_method_has_a_demo_step():
    from infoclust_pipelines.demo import DEMO_STEPS, methods_table

    assert set(DEMO_STEPS) == set(registry.METHODS)
    table = "\n".join(methods_table())
    for name, m in registry.METHODS.items():
        assert f"`{m.estimator}`" in table and f"`{name}`" in table


def test_crossval_methods_are_the_scored_registry_entries():
    assert set(crossval.cv_methods()) == {n for n, m in registry.METHODS.items() if m.cross_validated}
    with pytest.raises(ValueError, match="Unknown method 'nope'; choose one of"):
        registry.get_method("nope")
    with pytest.raises(ValueError, match="has no held-out score"):
        crossval._check_method("smic")


def test_auto_or_parses_and_names_bad_values(capsys):
    parse = registry.auto_or(float)
    assert parse("auto") == "auto" and parse("0.5") == 0.5
    with pytest.raises(SystemExit):
        build_parser().parse_args(["fit", "dc", "s.zarr", "--sigma", "abc"])
    assert "--sigma" in capsys.readouterr().err


def test_flows_load_by_name():
    for name in registry.FLOWS:
        assert callable(registry.load_flow(name))
    p = crossval.add_arguments(argparse.ArgumentParser())
    assert p.parse_args(["s.zarr", "--method", "ac"]).method == "ac"


@pytest.fixture
def toy_method():
    """The toy method of tests/toymethod registered for one test, then removed."""
    from toymethod import METHOD

    registry.register(METHOD)
    try:
        yield METHOD
    finally:
        registry.unregister(METHOD.name)
    assert METHOD.name not in registry.METHODS


def _one_lloyd_step(X, k):
    start = X[:k]
    near = ((X[:, None] - start[None]) ** 2).sum(-1).argmin(1)
    return np.array([X[near == j].mean(0) if (near == j).any() else start[j] for j in range(k)])


def test_a_method_registered_from_tests_runs_through_fit_crossval_and_the_demo_table(tmp_path, capsys, toy_method):
    """Adding a method is one kernels module, one objectives module, one
    estimator module (tests/toymethod/) and one registry entry: the command
    fits it and saves a model that predicts, cross-validation scores it, and
    the demo's method table lists it. Its centres equal one Lloyd step
    computed here in numpy."""
    from infoclust_dask.cli import main
    from infoclust_dask.runs import load_model
    from infoclust_pipelines.demo import methods_table

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(c, 0.3, size=(100, 2)) for c in ((0, 0), (5, 0), (0, 5))])[rng.permutation(300)]
    np.save(tmp_path / "t.npy", X)
    store = tmp_path / "t.zarr"
    assert main(["ingest", str(tmp_path / "t.npy"), str(store)]) == 0
    capsys.readouterr()
    assert main(["fit", "onestep", str(store), "-k", "3", "--scheduler", "sync", "--storage", str(tmp_path / "s")]) == 0
    out, _ = capsys.readouterr()
    run = Path(json.loads(out)["run_dir"])
    summary = json.loads((run / "summary.json").read_text())
    model = load_model(run / "model.json")
    np.testing.assert_allclose(model.cluster_centers_, _one_lloyd_step(X, 3), rtol=1e-12)
    assert sum(summary["cluster_sizes"]) == 300 and summary["method"] == "onestep"
    assert main(["predict", str(run / "model.json"), str(store), "--out", str(tmp_path / "p.npy"),
                 "--scheduler", "sync"]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), np.load(run / "labels.npy"))

    assert "onestep" in crossval.cv_methods()
    cell = crossval.run_cell(str(store), "onestep", {"n_clusters": 3}, 0, 3, scheduler="sync")
    rows = np.arange(300)
    train, test = X[rows >= 100], X[rows < 100]  # fold 0 of 3 row ranges
    ref = _one_lloyd_step(train, 3)
    np.testing.assert_allclose(cell["vq_cost"], ((test[:, None] - ref[None]) ** 2).sum(-1).min(1).mean(), rtol=1e-10)
    assert cell["score"] == pytest.approx(-cell["vq_cost"])

    table = "\n".join(methods_table())
    assert "| `onestep` | `OneStepMeans` |" in table and "not shown by the demo" in table
    with pytest.raises(ValueError, match="registered already"):
        registry.register(toy_method)


def test_crossval_help_names_the_cross_validated_methods():
    """``infoclust crossval --help`` names the methods without importing the
    estimators (fast start): the names it gives are the registry's
    cross-validated ones."""
    help_text = " ".join(crossval.add_arguments(argparse.ArgumentParser()).format_help().split())
    named = help_text.split("a registered method with a held-out score:")[1].split(", or")[0]
    assert {n.strip() for n in named.split(",")} == set(crossval.cv_methods())
