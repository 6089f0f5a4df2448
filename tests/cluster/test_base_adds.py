"""What the estimator base adds to each estimator, and that each estimator
says it where it is defined: every constructor parameter's constraint in
the class's own ``_parameter_constraints`` (the shared ones spelled
``**SHARED_CONSTRAINTS`` in its own file), the journal's ``fit`` keywords
in ``fit``'s docstring, the shared parameters' text written once and put
into each docstring by ``@shared_parameters`` on the class."""

import inspect

import pytest

from infoclust_dask import cluster
from infoclust_dask.cluster._base import SHARED_CONSTRAINTS

CLASSES = [cluster.KMeans, cluster.SoftKMeans, cluster.DiscriminativeClustering, cluster.AssociativeClustering,
           cluster.CMBC, cluster.SMIC, cluster.IsotropicGaussianMixture, cluster.MDA2]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_constraints_are_declared_in_the_estimators_own_file(cls):
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert set(cls._parameter_constraints) == params
    assert set(SHARED_CONSTRAINTS) <= params
    owner = next(c for c in cls.__mro__ if "_parameter_constraints" in c.__dict__)
    assert "**SHARED_CONSTRAINTS" in inspect.getsource(inspect.getmodule(owner))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_fit_says_what_the_journal_adds(cls):
    doc = cls.fit.__doc__
    assert "Other Parameters" in doc
    for keyword in ("checkpoint :", "resume :", "init :"):
        assert keyword in doc, keyword
    assert "scheduler :" in cls.__doc__ or "Parameters are those of" in cls.__doc__


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_docstring_holds_the_shared_parameters_and_the_methods_their_decorators(cls):
    """Written where they are used: ``@shared_parameters`` on the class
    (its docstring's ``{shared_parameters}`` line becomes the shared text,
    which ``help()`` and the site then show; the source holds the text once,
    in ``_base.py``), ``data_method`` on every data method,
    ``installs_runner`` on ``run_summary`` and ``held_out_score``, each
    parameter assigned by name in ``__init__``."""
    from infoclust_dask.cluster import _base
    from infoclust_dask.cluster._base import SHARED_PARAMETERS_DOC, SHARED_PARAMETERS_MARK
    from infoclust_dask.cluster._xarray import OTHERS, PER_SAMPLE

    if "Parameters are those of" not in cls.__doc__:
        assert SHARED_PARAMETERS_DOC in cls.__doc__
        assert SHARED_PARAMETERS_MARK.strip() not in cls.__doc__
        owner = next(c for c in cls.__mro__ if c.__doc__ and SHARED_PARAMETERS_DOC in c.__doc__)
        source = inspect.getsource(owner)
        assert "@shared_parameters" in inspect.getsource(inspect.getmodule(owner)) and SHARED_PARAMETERS_MARK in source
    package = [inspect.getsource(m) for m in vars(cluster).values() if inspect.ismodule(m)] + [
        inspect.getsource(_base)]
    assert sum(src.count(SHARED_PARAMETERS_DOC) for src in package) <= 1  # the text once, in _base.py
    for name in PER_SAMPLE + OTHERS:
        f = getattr(cls, name, None)
        if f is not None and f.__module__.startswith("infoclust_dask"):
            assert getattr(f, "__wrapped_xarray__", False), f"{cls.__name__}.{name} lacks @data_method"
    for name in ("run_summary", "held_out_score"):
        f = getattr(cls, name, None)
        if f is not None:
            assert getattr(f, "__installs_runner__", False), f"{cls.__name__}.{name} lacks @installs_runner"
    src = inspect.getsource(cls.__init__)
    for p in set(inspect.signature(cls.__init__).parameters) - {"self"}:
        assert f"self.{p} = {p}" in src, p


def test_shared_parameters_refuses_a_docstring_without_its_line():
    from infoclust_dask.cluster._base import SHARED_PARAMETERS_DOC, shared_parameters

    with pytest.raises(TypeError, match="needs one line"):
        @shared_parameters
        class NoLine:
            """Parameters
            ----------
            k : int
            """

    @shared_parameters
    class WithLine:
        """Parameters
    ----------
    k : int
    {shared_parameters}
    """

    assert SHARED_PARAMETERS_DOC in WithLine.__doc__ and "{shared_parameters}" not in WithLine.__doc__
