"""A fit on a distributed scheduler whose data fit one worker runs its whole
loop there, as one task (issue 37): its passes then cost the kernel, not a
scheduler round trip each (~20 ms here, more than a pass over small data).

:func:`whole_fit_bytes` decides (the runner's :meth:`~infoclust_dask.engine.Runner.loop_budget`:
an eighth of the smallest worker's memory limit, at most 1 GiB, and at most
the estimator's ``_whole_fit_max_bytes`` (SMIC: 1 MiB); numpy input,
a store path, or lazy (dask) input of known shape; a run folder only where
the workers see it - an object store, or workers on this machine);
:func:`gathered` computes the lazy arguments (one compute on the cluster)
so that they travel in the task; :func:`fit_whole` is the task (the
estimator's undecorated ``fit`` under the worker's own threads, lazy
arguments given back to it as dask arrays over the gathered rows, so that
its per-sample results stay lazy - dask in, dask out - its journal
recorded there); :func:`adopt` copies the fitted attributes back.

Lazy input used to stay pass by pass: a cross-validation cell (a fold of
Letter's stored rows, DC at sigma=1, 10 clusters, 204 iterations) took
20.2 s on a 2-worker LocalCluster against 0.7 s in this process - a round
trip per pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import engine

__all__ = ["whole_fit_bytes", "gathered", "fit_whole", "adopt", "for_worker"]


def _nbytes(value: Any, first: bool) -> int | None:
    """Bytes of one argument of a fit, or None when it cannot travel as it
    is (lazy arrays, zarr arrays, xarray objects backed by dask)."""
    from .._inputs import is_path, open_input

    if value is None or isinstance(value, (bool, int, float, np.generic)):
        return 0
    if first and is_path(value):
        try:
            return int(open_input(value).nbytes)
        except Exception:  # noqa: BLE001 - the fit itself reports what is wrong with the store
            return None
    if isinstance(value, str):  # a variable name, an option
        return 0
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if engine.is_lazy(value):  # gathered before the task; unknown chunk sizes: no size to compare
        a = engine.as_array(value)
        return None if any(np.isnan(s) for s in a.shape) else int(a.nbytes)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str, np.generic)) for v in value):
        return 8 * len(value)
    return None


def whole_fit_bytes(runner: Any, X: Any, args: tuple, kwargs: dict, folder: Any, max_bytes: int | None = None
                    ) -> tuple[int, int] | None:
    """``(bytes of the fit's data, the runner's loop budget)`` when the
    whole fit should run as one task on a worker of ``runner``; None when
    it runs here, pass by pass. ``max_bytes``: the estimator's own cap
    (``_whole_fit_max_bytes``). The rule is
    :func:`infoclust_dask.engine.whole_call` (where a fit runs is decided in
    the engine's one module); this measures what it needs: the arguments'
    bytes and whether the run folder is an object store."""
    from ..storage.paths import is_url

    def sizes():
        return [_nbytes(value, first=i == 0) for i, value in enumerate((X, *args, *kwargs.values()))]

    return engine.whole_call(runner, sizes, folder_given=folder is not None,
                             folder_is_url=folder is not None and is_url(folder), max_bytes=max_bytes)


class Gathered:
    """The rows of a lazy argument, computed here, with the row blocks it
    had: the task gives the fit ``dask.array.from_array(values, chunks)``,
    so that the fit sees lazy input as it would here."""

    def __init__(self, values: np.ndarray, chunks: tuple) -> None:
        self.values, self.chunks = values, chunks

    def lazy(self) -> Any:
        import dask.array as da

        return da.from_array(self.values, chunks=self.chunks)


def gathered(X: Any, args: tuple, kwargs: dict) -> tuple[Any, tuple, dict]:
    """``(X, args, kwargs)`` with every lazy value replaced by a
    :class:`Gathered` (all computed in one call of the installed runner, on
    the cluster); the rest as they are."""
    values = [X, *args, *kwargs.values()]
    lazy = [i for i, v in enumerate(values) if engine.is_lazy(v)]
    if not lazy:
        return X, args, kwargs
    arrays = [engine.as_array(values[i]) for i in lazy]
    got = engine.compute(arrays)
    for i, a, g in zip(lazy, arrays, got, strict=True):
        values[i] = Gathered(np.asarray(g), a.chunks)
    return values[0], tuple(values[1:1 + len(args)]), dict(zip(kwargs, values[1 + len(args):], strict=True))


def _given_back(v: Any) -> Any:
    return v.lazy() if isinstance(v, Gathered) else v


def for_worker(est: Any) -> Any:
    """A copy of ``est``'s parameters (not deep: no client is copied) with
    no scheduler named: on the worker the installed runner is the worker's
    own threads."""
    return type(est)(**{**est.get_params(deep=False), "scheduler": None})


def fit_whole(est: Any, X: Any, args: tuple, kwargs: dict, folder: Any, fingerprint: Any, resume: bool
              ) -> tuple[Any, Any]:
    """The task: the estimator's undecorated ``fit`` (the runner is installed
    by :meth:`~infoclust_dask.engine.Runner.run_whole`), its passes recorded
    in ``folder`` when given. Returns ``(fitted estimator, passes replayed
    from the journal or None)``."""
    raw = type(est).fit.__wrapped__
    X, args, kwargs = _given_back(X), tuple(map(_given_back, args)), {k: _given_back(v) for k, v in kwargs.items()}
    if folder is None:
        raw(est, X, *args, **kwargs)
        return est, None
    from ..journal import recording

    with recording(folder, fingerprint, resume=resume) as j:
        raw(est, X, *args, **kwargs)
    return est, (j.replayed if resume and j is not None else None)


def adopt(est: Any, fitted: Any) -> None:
    """``est`` takes ``fitted``'s fitted attributes (its parameters stay its
    own; fitted attributes of an earlier fit that this one did not set go)."""
    params = set(est.get_params(deep=False))
    new = {k: v for k, v in vars(fitted).items() if k not in params}
    for k in [k for k in vars(est) if k.endswith("_") and k not in params and k not in new]:
        delattr(est, k)
    for k, v in new.items():
        setattr(est, k, v)
