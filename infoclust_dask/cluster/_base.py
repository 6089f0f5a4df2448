"""Pieces shared by the estimators: the constraints of the parameters every
estimator takes, the Voronoi labels of the prototype-based ones, and the
checkpoint/resume wrapper of ``fit``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import engine
from .._validation import RANDOM_STATE, SAMPLE_DIM, VARIABLES, Anything, Interval
from ..journal import recording
from ..kernels.kmeans import ASSIGN

__all__ = ["SHARED_CONSTRAINTS", "voronoi_labels", "journaled"]

#: constraints of the parameters every estimator takes (merged into each
#: estimator's ``_parameter_constraints``, as scikit-learn's ``_BaseKMeans`` does)
SHARED_CONSTRAINTS = {
    "random_state": RANDOM_STATE,
    "scheduler": [Anything()],
    "sample_dim": SAMPLE_DIM,
    "variables": VARIABLES,
    "verbose": [Interval(int, 0)],
}


def voronoi_labels(X, centers, *, scheduler=None, lazy=True):
    """Nearest-prototype label of every row: a lazy dask array when ``lazy``
    (the caller's input was lazy), else computed into a numpy array."""
    labels = engine.map_blocks(ASSIGN, X, params={"centers": centers})
    return labels if lazy else np.asarray(engine.compute(labels, scheduler=scheduler))


def journaled(fit):
    """(Warnings raised in a decorated ``fit`` use one more stack level, for
    this wrapper's frame, so that they point at the caller's line.)

    Give an estimator's ``fit`` the keywords ``checkpoint=FOLDER`` (record
    every pass there) and ``resume=FOLDER`` (replay that journal, then go on
    recording into it); see the module docstring."""
    import functools

    from ._xarray import prepare_call

    @functools.wraps(fit)
    def wrapper(self, X, *args, checkpoint=None, resume=None, **kwargs):
        if checkpoint is not None and resume is not None and Path(checkpoint) != Path(resume):
            raise ValueError("Pass checkpoint= (a new fit) or resume= (continue one), not two different folders.")
        X, args, kwargs, finish = prepare_call(self, "fit", X, args, kwargs)  # xarray in: see _xarray
        folder = resume if resume is not None else checkpoint
        if folder is None:
            return finish(fit(self, X, *args, **kwargs))
        with recording(folder, _fingerprint(self, X), resume=resume is not None) as j:
            out = fit(self, X, *args, **kwargs)
        if resume is not None:
            self.resumed_passes_ = j.replayed  # passes taken from the journal, not from the data
        return finish(out)

    wrapper.__wrapped_xarray__ = True

    wrapper.__doc__ = (fit.__doc__ or "") + """
        checkpoint : path, optional (keyword)
            Record every pass of this fit in that folder (see
            :mod:`infoclust_dask.journal`), so that a killed fit can resume.
        resume : path, optional (keyword)
            Continue the fit recorded in that folder: recorded passes are
            replayed without reading the data, the rest run; the result equals
            an uninterrupted fit's when ``random_state`` is an int.
        """
    return wrapper


def _fingerprint(est, X) -> dict:
    from .._validation import is_path, open_input

    A = open_input(X, variable="x") if is_path(X) else engine.as_array(X)
    params = {k: v for k, v in est.get_params().items() if k not in ("scheduler", "verbose")}
    return {"estimator": type(est).__name__, "params": json.loads(json.dumps(params, default=repr)),
            "shape": [int(s) for s in getattr(A, "shape", ())]}
