"""The method registry: every entry builds a valid estimator from its
command-line defaults, every entry has a demo step, cross-validation and the
CLI take their method lists from it."""

import argparse

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
    assert set(crossval.cv_methods()) == {n for n, m in registry.METHODS.items() if m.score is not None}
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
