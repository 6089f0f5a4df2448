"""A fit on a distributed scheduler whose data fit one worker runs its whole
loop there, as one task (issue 37): its passes then cost the kernel, not a
scheduler round trip each (~20 ms here, more than a pass over small data).

:func:`whole_fit_bytes` decides (the runner's :meth:`~infoclust_dask.engine.Runner.loop_budget`:
an eighth of the smallest worker's memory limit, at most 1 GiB; numpy input
or a store path; a run folder only where the workers see it - an object
store, or workers on this machine); :func:`fit_whole` is the task (the
estimator's undecorated ``fit`` under the worker's own threads, its journal
recorded there); :func:`adopt` copies the fitted attributes back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["whole_fit_bytes", "fit_whole", "adopt", "for_worker"]


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
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str, np.generic)) for v in value):
        return 8 * len(value)
    return None


def whole_fit_bytes(runner: Any, X: Any, args: tuple, kwargs: dict, folder: Any) -> tuple[int, int] | None:
    """``(bytes of the fit's data, the runner's loop budget)`` when the
    whole fit should run as one task on a worker of ``runner``; None when
    it runs here, pass by pass (a runner of this process, data above the
    budget or lazy, a run folder the workers cannot see)."""
    from ..storage.paths import is_url

    budget = runner.loop_budget()
    if budget <= 0:
        return None
    if folder is not None and not (is_url(folder) or runner.files_shared()):
        return None
    total = 0
    for i, value in enumerate((X, *args, *kwargs.values())):
        n = _nbytes(value, first=i == 0)
        if n is None:
            return None
        total += n
    return (total, budget) if total <= budget else None


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
