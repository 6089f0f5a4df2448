"""numpy forms of the two loops every K-means fit calls - Lloyd's
assignment and sums (Lloyd 1982; MacKay 2003, algorithm 20.2) and the
per-feature moments - for calls on data so small that loading the
compiled loops costs more than the fit: numba's import and the first
load of its cached machine code take 0.35-0.45 s once per process, while
K-means on iris (150 x 4, k = 3) does its ~10 Lloyd steps in microseconds
(``docs/BENCHMARKS.md``, ninth session).

:mod:`infoclust_dask.kernels._compiled` takes these forms only inside
:func:`~infoclust_dask.kernels._compiled.numpy_form` (the engine opens it
for in-process passes over data of at most
:data:`~infoclust_dask.kernels._compiled.NUMPY_FORM_MAX_BYTES`) and only
for calls of at most
:data:`~infoclust_dask.kernels._compiled.NUMPY_FORM_MAX_WORK` products.
They return what the compiled loops return, with the same precision:
distances in the rows' precision (float32 rows: float32 distances), ties
to the lowest centre index, counts, sums, inertia and moments in float64;
the tests hold both forms to the plain reference formulas and to each
other (1e-10 for float64 rows).
"""

from __future__ import annotations

import numpy as np

__all__ = ["lloyd_into", "moments"]


def lloyd_into(x, w, cx, labels, dmin, with_sums):
    """The compiled ``_lloyd_rows``' results for rows ``x`` (C-contiguous
    float32/float64) and centres ``cx`` in their precision: ``labels`` and
    ``dmin`` written when not empty, ``(counts, sums, inertia)`` returned
    (``sums`` of shape ``(0, 0)`` without ``with_sums``)."""
    n, d = x.shape
    k = cx.shape[0]
    d2 = np.empty((k, n), dtype=x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # as the compiled loop: no warnings
        for j in range(k):  # one centre at a time: the temporary is one (n, d) difference
            diff = x - cx[j]
            np.einsum("ij,ij->i", diff, diff, out=d2[j])
    best = np.argmin(d2, axis=0)  # ties: the lowest index
    near = d2[best, np.arange(n)].astype(np.float64)
    if labels.shape[0]:
        labels[:] = best
        dmin[:] = near
    wt = None if w.shape[0] == 0 else w
    counts = np.bincount(best, weights=wt, minlength=k).astype(np.float64)
    inertia = float(near.sum() if wt is None else wt @ near)
    if not with_sums:
        return counts, np.zeros((0, 0)), np.array(inertia)
    member = np.zeros((n, k))
    member[np.arange(n), best] = 1.0 if wt is None else wt
    return counts, member.T @ x.astype(np.float64, copy=False), np.array(inertia)


def moments(x, w, shift):
    """The compiled ``_moments_rows``' results: ``(s1, s2, [sum of w,
    non-finite entries])`` of ``x - shift`` per feature in float64
    (``w``, ``shift``: empty for none). A block whose sums come out
    non-finite is summed again without its non-finite entries, which are
    counted."""
    n, d = x.shape
    v = x.astype(np.float64)
    wt = np.ones(n) if w.shape[0] == 0 else w
    bad = 0
    with np.errstate(over="ignore", invalid="ignore"):  # as the compiled loop: non-finite sums, no warnings
        if shift.shape[0]:
            v -= shift
        s1, s2 = wt @ v, wt @ (v * v)
        if not (np.all(np.isfinite(s1)) and np.all(np.isfinite(s2))):
            finite = np.isfinite(v)
            bad = int(v.size - np.count_nonzero(finite))
            v = np.where(finite, v, 0.0)
            s1, s2 = wt @ v, wt @ (v * v)
    return s1, s2, np.array([float(wt.sum()), float(bad)])
