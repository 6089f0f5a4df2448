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
        owner = [c for c in cls.__mro__ if c.__module__.startswith("infoclust_dask")
                 and SHARED_PARAMETERS_MARK in inspect.getsource(c)]
        assert owner and "@shared_parameters" in inspect.getsource(inspect.getmodule(owner[0]))
    modules = {m for m in vars(cluster).values() if inspect.ismodule(m)} | {_base}
    assert sum(inspect.getsource(m).count(SHARED_PARAMETERS_DOC) for m in modules) == 1  # the text once: _base.py
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


def test_kmeans_warnings_point_at_the_users_line_directly_and_inside_another_fit():
    """K-means' warnings name the user's line (``_support.stack.user_stacklevel``),
    whether KMeans is fitted directly or by another estimator's fit (DC
    starts from K-means' centres on its own prepared input)."""
    import warnings

    import numpy as np

    from infoclust_dask import DiscriminativeClustering, KMeans
    from infoclust_dask.cluster._kmeans import EmptyClusterWarning

    X = np.repeat(np.arange(4.0)[:, None], 5, axis=0)  # 4 distinct rows, 20 rows: 6 centres leave some empty
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        KMeans(6, init=np.array([[0.0], [0.1], [0.2], [3.0], [3.1], [3.2]]), n_init=1, max_iter=5).fit(X)
    empty = [w for w in seen if issubclass(w.category, EmptyClusterWarning)]
    assert empty and all(w.filename == __file__ for w in empty), [(w.filename, w.lineno) for w in seen]
    rng = np.random.default_rng(0)
    Xd = rng.normal(size=(300, 2))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        DiscriminativeClustering(3, sigma=1.0, max_iter=2, random_state=0).fit(Xd, (Xd[:, 0] > 0).astype(int))
    assert seen and all(w.filename == __file__ for w in seen), [(w.category.__name__, w.filename) for w in seen]
