"""The estimators' base: :class:`InfoclustEstimator` (the parameters every
estimator takes - their constraints, documentation and assignment, each
written once - and the context of every data method: where its passes run,
xarray in/out), the fit context :func:`journaled` (the same, plus
checkpoint/resume), and the Voronoi labels of the prototype-based
estimators."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .. import engine
from .._support.validation import RANDOM_STATE, SAMPLE_DIM, VARIABLES, Anything, Interval
from ..journal import recording
from ..kernels.kmeans import ASSIGN
from ..storage.location import pinned
from ._whole import adopt, fit_whole, for_worker, gathered, whole_fit_bytes
from ._xarray import XarrayIO, runner_for_call

__all__ = ["InfoclustEstimator", "SHARED_CONSTRAINTS", "SHARED_PARAMETERS_DOC", "SHARED_PARAMETERS_MARK", "shared_parameters",
           "voronoi_labels", "journaled", "ClusterColumnsOut", "stream_batch"]

#: constraints of the parameters every estimator takes (merged into each
#: estimator's ``_parameter_constraints``, as scikit-learn's ``_BaseKMeans`` does)
SHARED_CONSTRAINTS = {
    "random_state": RANDOM_STATE,
    "scheduler": [Anything()],
    "sample_dim": SAMPLE_DIM,
    "variables": VARIABLES,
    "verbose": [Interval(int, 0)],
}


#: the documentation of the parameters every estimator takes besides ``random_state`` and ``verbose`` (whose
#: meaning differs by method), written once: :func:`shared_parameters` puts it into each estimator's docstring
SHARED_PARAMETERS_DOC = """\
    scheduler : None, str, distributed.Client or dask cluster, default=None
        Where the passes run (see :mod:`infoclust_dask.engine.choose`),
        chosen once per ``fit`` / ``predict`` / ``score`` call and used by
        every pass of it. ``None``: the scheduler at
        ``$DASK_SCHEDULER_ADDRESS``, else the active ``distributed.Client``,
        else the runner of an enclosing call, else the data decide: numpy
        input, and lazy input that fits the in-process budget (an eighth of
        the available memory, at most 1 GiB), run in this process (a store
        read into memory once); larger lazy input on a shared LocalCluster.
        On a distributed scheduler a ``fit`` whose data fit one worker
        (numpy input or a store path, at most an eighth of the smallest
        worker's memory limit and 1 GiB; SMIC: 1 MiB) runs as one task on a worker
        (:mod:`infoclust_dask.cluster._whole`). The fitted ``runner_``
        says where the fit ran and why. Where it runs never changes the
        model: the same data, parameters and ``random_state`` give the same
        bits on every runner, thread count, chunking, worker count and
        memory size (``docs/conventions.md``, "The same answer wherever it
        runs").
    sample_dim : str, optional
        For xarray input: the dim that holds the samples (see
        :mod:`infoclust_dask.cluster._xarray`); outputs are then DataArrays
        over that dim.
    variables : list of str, optional
        For a Dataset: the data variables stacked as features."""


#: the line of an estimator's docstring that :func:`shared_parameters` replaces by :data:`SHARED_PARAMETERS_DOC`
SHARED_PARAMETERS_MARK = "    {shared_parameters}"


def shared_parameters(cls: type) -> type:
    """Class decorator: the line ``{shared_parameters}`` of the class's
    docstring (in its Parameters section, indented as the others) becomes
    :data:`SHARED_PARAMETERS_DOC` - the parameters every estimator shares,
    documented once; ``help()``, the site (autodoc reads ``__doc__``) and
    the numpydoc check see the whole text. A docstring without the line is
    refused (a decorated class must say where the text goes); under
    ``python -OO`` (no docstrings) it does nothing."""
    doc = cls.__doc__
    if doc is None:
        return cls
    if doc.count(SHARED_PARAMETERS_MARK + "\n") != 1:
        raise TypeError(f"{cls.__name__}: @shared_parameters needs one line '{SHARED_PARAMETERS_MARK.strip()}' in "
                        "the docstring's Parameters section, indented as the other parameters.")
    cls.__doc__ = doc.replace(SHARED_PARAMETERS_MARK, SHARED_PARAMETERS_DOC)
    return cls


class InfoclustEstimator(XarrayIO, BaseEstimator):
    """The base of every estimator of the package.

    A subclass declares every parameter's constraint in its own
    ``_parameter_constraints``, starting with ``**SHARED_CONSTRAINTS`` (as
    scikit-learn's ``KMeans`` starts with its base's), writes
    :data:`SHARED_PARAMETERS_DOC` in its docstring (a test checks the text),
    assigns each parameter by name in ``__init__`` and decorates ``fit``
    with :func:`journaled`, its data methods (``predict``, ``score``, ...)
    with :func:`~._xarray.data_method` (xarray in/out, passes where the
    estimator says) and ``run_summary`` / ``held_out_score`` with
    :func:`installs_runner`. Special
    inputs are declared as class attributes (``_y_is_second_view``,
    ``_label_keywords``), never recognised by class name.

    Methods a subclass may add: ``run_summary(data)`` (facts of a fit on a
    store for its run's ``summary.json``) and ``held_out_score(X, aux)``
    (scores of held-out rows, ``"score"`` higher is better: the method is
    then cross-validated)."""

    #: a model saved by ``infoclust fit`` (``model.json``) predicts new rows without the training data
    predicts_from_saved_model = True
    #: the most bytes of data a fit runs with as one task on a worker (:mod:`._whole`), below the runner's
    #: budget; None: the budget alone. Estimators whose fit is a few heavy passes set it (SMIC): one worker's
    #: threads instead of the cluster's cost them more than the round trips they save
    _whole_fit_max_bytes: int | None = None




def installs_runner(method):
    """``method`` with the estimator's runner installed for its passes
    (placed by its first argument's size when no scheduler is named);
    ``run_summary`` says where the fit ran (``runner_``)."""
    import functools

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        data = args[0] if args else None
        if data is not None and hasattr(data, "data_vars") and "x" in data.data_vars:
            data = data["x"]
        with runner_for_call(self, data):
            out = method(self, *args, **kwargs)
        if method.__name__ == "run_summary" and isinstance(out, dict) and hasattr(self, "runner_"):
            out = {**out, "runner": dict(self.runner_)}
        return out

    setattr(wrapper, "__installs_runner__", True)  # noqa: B010 - a marker attribute on a function
    return wrapper


def voronoi_labels(X, centers, *, lazy=None):
    """Nearest-prototype label of every row, lazy for lazy ``X`` (numpy for
    numpy); ``lazy`` overrides that: ``True`` (the caller of a fit gave lazy
    input, which the fit may have read into memory) gives a dask array,
    ``False`` a numpy array."""
    # lazy labels of data the workers hold: on the graph the data came from (engine.source_of), so that
    # ``labels_.compute()`` works on any scheduler, not only on the client whose workers hold the copy
    labels = engine.map_blocks(ASSIGN, engine.source_of(X) if lazy is not False else X, params={"centers": centers})
    if lazy is None:
        return labels
    return engine.as_lazy(labels) if lazy else np.asarray(engine.compute(labels))


#: the keywords :func:`journaled` adds to every ``fit``, as a numpydoc section of its docstring
JOURNALED_KEYWORDS_DOC = """Other Parameters
----------------
checkpoint : path, optional (keyword)
    Record every pass of this fit in that folder (see
    :mod:`infoclust_dask.journal`), so that a killed fit can resume.
resume : path, optional (keyword)
    Continue the fit recorded in that folder: recorded passes are
    replayed without reading the data, the rest run; the result equals
    an uninterrupted fit's when ``random_state`` is an int.
init : fitted estimator, run folder or model.json, optional (keyword)
    Warm start: start from that earlier fit of the same class (its
    prototypes, and its chosen widths instead of a new search)
    instead of a fresh seeding, e.g. after new rows were appended.
    The estimator's parameters are the same after the fit;
    ``warm_started_`` says where the start came from."""


def journaled(fit):
    """(Warnings raised in a decorated ``fit`` use one more stack level, for
    this wrapper's frame, so that they point at the caller's line.)

    The context of every estimator's ``fit``: the estimator's ``scheduler=``
    resolved once and installed (:func:`infoclust_dask.engine.installed`)
    for every pass of the fit, xarray in and out (:mod:`._xarray`), and the
    keywords ``checkpoint=FOLDER`` (record every pass there) and
    ``resume=FOLDER`` (replay that journal, then go on recording into it);
    see the module docstring."""
    import functools

    from ._xarray import prepare_call

    @functools.wraps(fit)
    def wrapper(self, X, *args, checkpoint=None, resume=None, init=None, **kwargs):
        # local paths absolute here, where the caller's folder is known: the whole fit may run on a worker
        X, checkpoint, resume, init = pinned(X), pinned(checkpoint), pinned(resume), pinned(init)
        if checkpoint is not None and resume is not None and Path(checkpoint) != Path(resume):
            raise ValueError("Pass checkpoint= (a new fit) or resume= (continue one), not two different folders.")
        # one frame between the fit and its caller (the warnings' stack levels count on it)
        with runner_for_call(self, X) as runner, _warm_started(self, init):  # chosen once: every pass runs there
            self.runner_ = runner.describe()  # where the fit runs, and why
            X, args, kwargs, finish = prepare_call(self, "fit", X, args, kwargs)  # xarray in: see _xarray
            folder = resume if resume is not None else checkpoint
            whole = whole_fit_bytes(runner, X, args, kwargs, folder, self._whole_fit_max_bytes)
            if whole is not None:  # a distributed scheduler, data that fit one worker: the loop runs there
                nbytes, budget = whole
                fingerprint = _fingerprint(self, X) if folder is not None else None
                X, args, kwargs = gathered(X, args, kwargs)  # lazy rows travel in the task
                (fitted, replayed), where = runner.run_whole(fit_whole, for_worker(self), X, args, kwargs, folder,
                                                             fingerprint, resume is not None)
                adopt(self, fitted)
                self.runner_ = {**runner.describe(), "whole_fit_on": where,
                                "reason": f"{runner.reason}; the whole fit ran as one task on worker {where}: its "
                                          f"data ({nbytes} bytes) fit one worker's budget ({budget} bytes)"}
                if replayed is not None:
                    self.resumed_passes_ = replayed
                return finish(self)
            if folder is None:
                out = fit(self, X, *args, **kwargs)
            else:
                with recording(folder, _fingerprint(self, X), resume=resume is not None) as j:
                    out = fit(self, X, *args, **kwargs)
                if resume is not None and j is not None:
                    self.resumed_passes_ = j.replayed  # passes taken from the journal, not from the data
            self.runner_ = runner.describe()  # and where the fit's data lived (runner.prepare's notes)
            return finish(out)

    setattr(wrapper, "__wrapped_xarray__", True)  # noqa: B010 - a marker attribute on a function

    wrapper.__doc__ = inspect.cleandoc(fit.__doc__ or "") + "\n\n" + JOURNALED_KEYWORDS_DOC
    return wrapper


@contextlib.contextmanager
def _warm_started(est, init):
    """During one fit: ``est``'s parameters overridden by its
    ``_warm_start_params(previous)`` (the previous fit's prototypes as the
    start, see each estimator), restored afterwards."""
    if init is None:
        yield
        return
    previous = init
    if isinstance(init, (str, os.PathLike)):
        from .._models import read_model

        path = Path(init)

        def own_class(name):  # a warm start reads a model of the class being fitted, nothing else
            if name != type(est).__name__:
                raise TypeError(f"init= must be a fitted {type(est).__name__} (or its run folder / model.json); "
                                f"'{path}' holds a {name}.")
            return type(est)

        previous = read_model(path / "model.json" if path.is_dir() else path, own_class)
    if type(previous) is not type(est):
        raise TypeError(f"init= must be a fitted {type(est).__name__} (or its run folder / model.json); got "
                        f"{type(previous).__name__}.")
    if not callable(getattr(est, "_warm_start_params", None)):
        raise TypeError(f"{type(est).__name__} has no warm start.")
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(previous)
    except NotFittedError:
        raise NotFittedError(f"init= is an unfitted {type(previous).__name__}: a warm start begins from a fitted "
                             "model's prototypes. Fit it first, or pass its run folder / model.json.") from None
    overrides = est._warm_start_params(previous)
    saved = {k: v for k, v in est.get_params(deep=False).items() if k in overrides}
    est.set_params(**overrides)
    try:
        yield
    finally:
        est.set_params(**saved)
    est.warm_started_ = str(init) if isinstance(init, (str, os.PathLike)) else f"a fitted {type(previous).__name__}"


def _fingerprint(est, X) -> dict:
    from .._inputs import is_path, open_input

    A = open_input(X, variable="x") if is_path(X) else engine.as_array(X)
    params = {k: v for k, v in est.get_params().items() if k not in ("scheduler", "verbose")}
    return {"estimator": type(est).__name__, "params": json.loads(json.dumps(params, default=repr)),
            "shape": [int(s) for s in getattr(A, "shape", ())]}


class ClusterColumnsOut:
    """``get_feature_names_out`` for estimators whose ``transform`` has one
    column per cluster (K-means' distances, soft K-means' memberships):
    ``<class name in lower case><cluster>``, as scikit-learn names the
    columns of its own clustering transforms. With it, scikit-learn's
    ``set_output(transform="pandas")`` works on the estimator and in a
    Pipeline."""

    n_clusters: int
    n_features_in_: int

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Output column names of ``transform``: ``kmeans0``, ``kmeans1``, ...
        ``input_features`` (the input's column names) is checked against
        the fitted input and otherwise unused."""
        check_is_fitted(self)
        if input_features is not None:
            given = list(input_features)
            known = getattr(self, "feature_names_in_", None)
            if len(given) != self.n_features_in_ or (known is not None and given != list(known)):
                raise ValueError(f"input_features={given[:5]}{'...' if len(given) > 5 else ''} does not match the "
                                 f"{self.n_features_in_} features seen in fit"
                                 + (f" ({list(known)[:5]}...)" if known is not None else "") + "; leave it out.")
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self.n_clusters)], dtype=object)


def stream_batch(est: Any, X: Any, sample_weight: Any, first: bool | None = None) -> tuple:
    """One batch of ``partial_fit``: a dask block computed (small by intent), the parameters validated
    and the features recorded on the first call (``est`` has no ``counts_`` yet), checked like ``fit``'s
    input. Returns ``(X, info or None, rows as float64, weights as float64, first)``."""
    from .._inputs import check_sample_weight, prepare_input
    from .._support.validation import validate_params

    if engine.is_lazy(X) and not hasattr(X, "sizes"):
        X = np.asarray(engine.compute(X))
    if first is None:  # the estimator's own running counts mark a stream already started
        first = not hasattr(est, "counts_")
    if first:
        validate_params(est)
    X, info = prepare_input(est, X, reset=first, need_moments=first)
    w = check_sample_weight(sample_weight, X)
    # on a cluster the first batch is placed on the workers (prepare_input, for its moments): gathered back
    # through the engine, never by numpy's conversion (which would compute a graph of scattered keys locally)
    rows = np.asarray(engine.compute(X) if engine.is_lazy(X) else X, dtype=np.float64)
    weights = np.ones(len(rows)) if w is None else np.asarray(engine.compute(w), dtype=np.float64)
    return X, info, rows, weights, first
