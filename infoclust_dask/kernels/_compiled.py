"""Compiled block kernels (numba): one fused loop per block instead of the
numpy kernels' (rows x K) temporaries.

The loops (:mod:`infoclust_dask.kernels._loops`) read a block once, a tile
of rows at a time, transposed, compute their exact squared distances to the
K centres (differences, not the ``|x|^2 - 2 x.m + |m|^2`` expansion), turn
them into what the pass needs (nearest centre, stable softmax memberships,
mixture posteriors) and add the tile's share to float64 sums. float32 rows
are read as they are (no float64 copy of the block) and compared with the
centres in float32 - the input's precision, as scikit-learn does; the
exponentials, normalizers and sums are float64. This module checks and
shapes the arguments (the loops do not check bounds) and returns the
partial sums each pass combines.

Compiled code is cached on disk (numba's ``cache=True``:
``$NUMBA_CACHE_DIR`` when set, else ``__pycache__`` beside this file, or
numba's user cache directory when that is read-only), so a new process
loads it instead of compiling (see ``docs/BENCHMARKS.md`` for the
first-call cost). When none of those folders is writable the kernels are
compiled in each process without a cache (:func:`can_cache`) instead of
failing with numba's "no locator available".

These are the only form of each formula in the package (the method modules
call them, with no other path) but two: Lloyd's step and the moments have
numpy forms (:mod:`infoclust_dask.kernels._numpy_forms`) for passes over
tiny data in this process (:func:`numpy_form`), where loading numba would
cost more than the fit. The plain numpy formulas the tests compare both
with (to 1e-10 for float64 rows) live with the tests
(``tests/reference_kernels.py``), where the benchmarks find them too.

The formulas: MacKay (2003,
ch. 20) eq. 20.3-20.9 for (soft) K-means, Kaski, Sinkkonen & Klami (2005)
eq. (4), (10), (11) for DC, Sinkkonen, Kaski, Nikkilä & Lahti (AC technical
report, §III) for AC, the isotropic mixture E-step, and the annealed E-step
(4.15) of CMBC with its M-step sums (Gondek, Vaithyanathan & Garg 2005) on
dense binary rows.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import numpy as np

__all__ = ["as_rows", "numpy_form", "numpy_form_fits", "light_process", "lloyd_paths", "lloyd_choice", "lloyd", "soft_kmeans", "soft_scatter", "dc_counts", "dc_grad", "ac_counts", "ac_grad",
           "mixture_em", "cmbc_estep", "moments"]


#: in-process passes over data of at most this many bytes may take the numpy
#: forms (:func:`numpy_form`; the engine decides: :mod:`infoclust_dask.engine.passes`)
NUMPY_FORM_MAX_BYTES = 2**20
#: ... for calls of at most this many products (rows x centres x features;
#: rows x features for the moments): a numpy Lloyd step costs ~1 ns a
#: product more than the compiled one, so 100 such calls cost what loading
#: the compiled loops does (0.35-0.45 s; docs/BENCHMARKS.md, ninth session)
NUMPY_FORM_MAX_WORK = 2**21
_NUMPY_FORM: contextvars.ContextVar[bool] = contextvars.ContextVar("infoclust_numpy_form", default=False)


@contextlib.contextmanager
def numpy_form(allowed: bool = True) -> Iterator[None]:
    """Inside this context (in this thread) Lloyd's step and the moments
    (:func:`lloyd`, :func:`lloyd_sums`, :func:`moments`) run as numpy
    (:mod:`infoclust_dask.kernels._numpy_forms`) on calls of at most
    :data:`NUMPY_FORM_MAX_WORK` products, so that a fit on tiny data never
    loads numba; ``allowed=False`` is a no-op."""
    if not allowed:
        yield
        return
    token = _NUMPY_FORM.set(True)
    try:
        yield
    finally:
        _NUMPY_FORM.reset(token)


#: set by :func:`light_process`: this process takes the numpy forms at every size
def numpy_form_fits(nbytes: float) -> bool:
    """Whether data of ``nbytes`` are small enough for the numpy forms
    (at most :data:`NUMPY_FORM_MAX_BYTES`, read at the call)."""
    return nbytes <= NUMPY_FORM_MAX_BYTES


_LIGHT: list[bool] = [False]


@contextlib.contextmanager
def light_process() -> Iterator[None]:
    """Inside this block every thread of this process runs Lloyd's step and
    the moments as numpy at every size and never loads numba (~150 MB with
    LLVM and the cached loops): for a command that makes a few passes only,
    such as ``infoclust ingest`` (its moments pass over the file it writes;
    the passes run on dask's threads, which a context variable would not
    reach). The previous setting comes back at the end, so that a process
    that calls the command in-process (a test, a notebook) fits as before."""
    before = _LIGHT[0]
    _LIGHT[0] = True
    try:
        yield
    finally:
        _LIGHT[0] = before


def _numpy_form(work: int) -> bool:
    return _LIGHT[0] or (work <= NUMPY_FORM_MAX_WORK and _NUMPY_FORM.get())


def _loops():
    """The compiled loops, imported at the first kernel call: importing the
    package (or an estimator) does not load numba and LLVM (~100 MB), the
    first fit does."""
    from . import _loops as loops

    return loops


def _lloyd_loops():
    """Lloyd's compiled loops, imported at the first Lloyd step (as :func:`_loops`)."""
    from . import _lloyd_loops as loops

    return loops


def hamerly(x, w, labels, upper, lower, *, centers, moved, half_gap):
    """One Lloyd step with Hamerly's bounds (:mod:`infoclust_dask.kernels._hamerly_loops`):
    ``labels``/``upper``/``lower`` are the rows' state, updated in place (views of the caller's
    arrays); returns ``(counts, sums, rows decided by their bounds alone)``."""
    from . import _hamerly_loops

    x = as_rows(x)
    n = x.shape[0]
    c = _centres(centers, x)
    k, d = c.shape
    for name, a, dtype in (("labels", labels, np.int64), ("upper", upper, np.float64), ("lower", lower, np.float64)):
        if a.shape != (n,) or a.dtype != dtype or not a.flags.c_contiguous or not a.flags.writeable:
            raise ValueError(f"hamerly: {name} must be a writable contiguous ({n},) {np.dtype(dtype)} array.")
    counts, sums, skipped = np.zeros(k), np.zeros((k, d)), np.zeros(1, dtype=np.int64)
    margin = 8.0 * (d + 4) * float(np.finfo(x.dtype).eps)  # the distances' rounding, generously
    _hamerly_loops._hamerly_rows(x, _weights(w, n), _in(c, x), np.asarray(moved, dtype=np.float64),
                                 np.asarray(half_gap, dtype=np.float64), margin, labels, upper, lower, counts, sums,
                                 skipped)
    return counts, sums, int(skipped[0])


def yinyang(x, w, labels, upper, lower, *, centers, moved, order, start, group_moved):
    """One Lloyd step with Yinyang's grouped bounds (:mod:`infoclust_dask.kernels._yinyang_loops`):
    ``labels``/``upper`` (n,) and ``lower`` (n, groups) are the rows' state, updated in place; group g's
    centres are ``order[start[g]:start[g + 1]]``. Returns ``(counts, sums, rows decided by their bounds
    alone, distances computed)``."""
    from . import _yinyang_loops

    x = as_rows(x)
    n = x.shape[0]
    c = _centres(centers, x)
    k, d = c.shape
    n_groups = len(start) - 1
    for name, a, shape, dtype in (("labels", labels, (n,), np.int64), ("upper", upper, (n,), np.float64),
                                  ("lower", lower, (n, n_groups), np.float64)):
        if a.shape != shape or a.dtype != dtype or not a.flags.c_contiguous or not a.flags.writeable:
            raise ValueError(f"yinyang: {name} must be a writable contiguous {shape} {np.dtype(dtype)} array.")
    order = np.ascontiguousarray(order, dtype=np.int64)
    group_of = np.empty(k, dtype=np.int64)
    for g in range(n_groups):
        group_of[order[start[g]:start[g + 1]]] = g
    cx = _in(c, x)
    if n and labels[0] < 0:  # the first step: the plain step's products give every label and the group bounds
        counts, sums, dmin = np.zeros(k), np.zeros((k, d)), np.empty(n)
        shift = cx.mean(axis=0, dtype=np.float64).astype(x.dtype)
        _lloyd_loops()._gemm_rows(x, _weights(w, n), cx, shift, float(np.finfo(x.dtype).eps) / 2, counts, sums,
                                  labels, dmin, np.zeros(1), True, group_of, lower)
        upper[:] = np.sqrt(dmin)
        return counts, sums, 0, n * k
    counts, sums = np.zeros(k), np.zeros((k, d))
    skipped, measured = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    margin = 8.0 * (d + 4) * float(np.finfo(x.dtype).eps)  # the distances' rounding, generously
    _yinyang_loops._yinyang_rows(x, _weights(w, n), cx, np.asarray(moved, dtype=np.float64), order,
                                 np.ascontiguousarray(start, dtype=np.int64), group_of,
                                 np.asarray(group_moved, dtype=np.float64), margin, labels, upper, lower, counts,
                                 sums, skipped, measured)
    return counts, sums, int(skipped[0]), int(measured[0])


def labelled_inertia(x, w, labels, *, centers):
    """``sum_n w_n |x_n - m_labels[n]|^2`` (float64; the distances as the
    plain step's for many centres computes its chosen centre's)."""
    from . import _yinyang_loops

    x = as_rows(x)
    n = x.shape[0]
    c = _centres(centers, x)
    inertia = np.zeros(1)
    _yinyang_loops._labelled_inertia(x, _weights(w, n), _in(c, x), np.ascontiguousarray(labels, dtype=np.int64),
                                     inertia)
    return float(inertia[0])


def as_rows(x):
    """A block as the kernels take it: float32 or float64, C-contiguous,
    2-D (other dtypes become float64; no copy when already right)."""
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    if x.ndim == 1:
        x = x[:, None]
    return np.ascontiguousarray(x)


def _labels(c):
    """Class labels as int64 (one compiled specialization for every label dtype)."""
    return np.ascontiguousarray(np.asarray(c).astype(np.int64, copy=False))


def _centres(centers, x=None, what="centers"):
    """Centres as C-contiguous float64 (K, d): a centre's features are
    adjacent, so the innermost loop (over features) is one SIMD reduction.
    With the rows ``x``: ``d`` must be their width (the compiled loops do
    not check bounds: centres wider than the rows would read past each row)."""
    c = np.ascontiguousarray(centers, dtype=np.float64)
    if c.ndim != 2 or (x is not None and c.shape[1] != x.shape[1]):
        raise ValueError(f"{what} of shape {c.shape} do not fit rows of {x.shape[1] if x is not None else '?'} "
                         "features (a damaged or foreign model?).")
    return c


def _checked_labels(c, n, n_classes=None, what="labels"):
    """Labels as int64, one per row, in ``0 .. n_classes - 1`` (the compiled
    loops index count tables with them, unchecked)."""
    lab = _labels(c)
    if lab.shape != (n,):
        raise ValueError(f"{what} of shape {lab.shape} for {n} rows.")
    if n_classes is not None and lab.size and (lab.min() < 0 or lab.max() >= n_classes):
        raise ValueError(f"{what} outside 0..{n_classes - 1} (got {lab.min()}..{lab.max()}).")
    return lab


def _in(c, x):
    """Centres in the rows' precision: the distances are computed in it."""
    return c.astype(x.dtype, copy=False)


def _shaped(a, shape, what):
    out = np.ascontiguousarray(a, dtype=np.float64)
    if out.shape != tuple(shape):
        raise ValueError(f"{what} of shape {out.shape}; the kernel needs {tuple(shape)}.")
    return out


_EMPTY = np.zeros(0)
_EMPTY_INT = np.zeros(0, dtype=np.int64)
_EMPTY_2D = np.zeros((0, 0))


def _weights(w, n):
    return _EMPTY if w is None else _shaped(np.asarray(w).reshape(-1), (n,), "sample weights")


#: Lloyd's assignment by BLAS products (:func:`~infoclust_dask.kernels._lloyd_loops._lloyd_rows_gemm`) is a
#: candidate from this many centres; which of it and the exact loops runs is measured in the process that runs
#: the step (:mod:`infoclust_dask.kernels._choice`; both give the same bits). Below 8 centres a tile's product
#: is too short for BLAS to beat the loops (benchmarks/lloyd_products.py: 1.3-1.5x slower at k = 4 here)
LLOYD_PRODUCTS_MIN_K = 8
#: None: the path is measured; "loops" or "products" forces one (tests, benchmarks)
LLOYD_PATH: str | None = None


def lloyd_paths(k: int) -> tuple[str, ...]:
    """The candidate paths of Lloyd's step for ``k`` centres (the forced one
    when :data:`LLOYD_PATH` is set)."""
    if LLOYD_PATH is not None:
        return (LLOYD_PATH,)
    return ("loops", "products") if k >= LLOYD_PRODUCTS_MIN_K else ("loops",)


def lloyd_choice(dtype: str, k: int, d: int) -> dict | None:
    """What this process measured for Lloyd's step on rows of ``dtype``
    (``np.dtype(...).str``) with ``k`` centres and ``d`` features: the
    chosen path and each path's time per row
    (:func:`infoclust_dask.kernels._choice.report`), or None when it has
    not chosen (no call yet, or one path only)."""
    from . import _choice

    return _choice.report("lloyd").get(("lloyd", dtype, k, d))


def lloyd(x, w=None, *, centers, with_sums=True):
    """Nearest centre of every row (ties: the lowest index), the exact
    squared distance to it, and the (weighted) counts and sums per centre of
    the Lloyd update (MacKay 2003, eq. 20.3-20.6). Returns
    ``(labels int64, dmin, counts, sums)``. float32 rows are compared with
    the centres in float32 (the distances carry float32's ~1e-7 relative
    error); the sums are float64."""
    x = as_rows(x)
    n = x.shape[0]
    labels, dmin = np.empty(n, dtype=np.int64), np.empty(n)
    counts, sums, _ = _lloyd_into(x, w, centers, labels, dmin, with_sums)
    return labels, dmin, counts, sums


def lloyd_sums(x, w=None, *, centers, with_sums=True):
    """:func:`lloyd` without the rows' labels and distances: ``(counts,
    sums, inertia)``, the inertia ``sum_n w_n min_k ||x_n - m_k||^2``
    summed in float64 inside the loop (a Lloyd step writes nothing per
    row)."""
    x = as_rows(x)
    return _lloyd_into(x, w, centers, _EMPTY_LABELS, _EMPTY, with_sums)


_EMPTY_LABELS = np.empty(0, dtype=np.int64)


def _lloyd_into(x, w, centers, labels, dmin, with_sums):
    n = x.shape[0]
    c = _centres(centers, x)
    k, d = c.shape
    # float32 rows: distances in float32 (the assignment), counts and sums in float64
    cx = _in(c, x)
    if _numpy_form(n * k * d):
        from ._numpy_forms import lloyd_into

        return lloyd_into(x, _weights(w, n), cx, labels, dmin, with_sums)
    wn = _weights(w, n)

    def run(path):
        counts, sums, inertia = np.zeros(k), np.zeros((k, d) if with_sums else (0, 0)), np.zeros(1)
        if path == "products":  # the products by BLAS; near ties decided by the exact differences (same bits)
            shift = cx.mean(axis=0, dtype=np.float64).astype(x.dtype)
            _lloyd_loops()._lloyd_rows_gemm(x, wn, cx, shift, float(np.finfo(x.dtype).eps) / 2, counts, sums,
                                            labels, dmin, inertia, with_sums)
        else:
            _lloyd_loops()._lloyd_rows(x, wn, cx, counts, sums, labels, dmin, inertia, with_sums)
        return counts, sums, np.array(inertia[0])

    from . import _choice

    return _choice.choose(("lloyd", x.dtype.str, k, d), lloyd_paths(k), n, run)


#: from this many centres soft K-means' step takes its distances and sums from BLAS products
#: (:mod:`infoclust_dask.kernels._soft_products`), whatever the features. A rule of k, the same on every machine:
#: the two paths round differently (the same-answer contract forbids a choice by time). Issue 63 re-measured it
#: (``python benchmarks/soft_products.py``, docs/BENCHMARKS.md): from k = 16 the products took 0.37-1.04x the
#: loops at every d in 2..128, both dtypes and regimes; the former second condition (k x d >= 2048) kept the
#: loops where they were up to 2.1x slower. At k = 8 neither wins everywhere (products 0.61-1.44x).
SOFT_GEMM_MIN_K = 16


def soft_kmeans(x, w=None, *, centers, beta):
    """``R``, ``S`` and ``sum w log Z`` of one soft K-means step (MacKay 2003,
    eq. 20.7-20.9, ``d = ||x - m||^2 / 2``)."""
    x = as_rows(x)
    c = _centres(centers, x)
    k, d = c.shape
    R, S, lz = np.zeros(k), np.zeros((k, d)), np.zeros(1)
    cx = _in(c, x)
    if k >= SOFT_GEMM_MIN_K:  # the distances and sums by BLAS products
        from ._soft_products import _soft_rows_gemm

        shift = cx.mean(axis=0, dtype=np.float64).astype(x.dtype)
        _soft_rows_gemm(x, _weights(w, x.shape[0]), cx, shift, -0.5 * float(beta), R, S, lz)
    else:
        _loops()._soft_rows(x, _weights(w, x.shape[0]), cx, -0.5 * float(beta), R, S, lz)
    return {"R": R, "S": S, "log_z": np.array(lz[0])}


def soft_scatter(x, w=None, *, centers, beta):
    """``R`` and the responsibility-weighted scatter about each centre
    ``Q[k] = sum_n w_n r_k^(n) (x_n - m_k)(x_n - m_k)^T`` (the posterior
    covariance ``Q[k] / R[k]`` of Rose 1998, section III; MacKay 2003, eq.
    20.7 for ``r``)."""
    x = as_rows(x)
    c = _centres(centers, x)
    k, d = c.shape
    R, Q = np.zeros(k), np.zeros((k, d, d))
    _loops()._scatter_rows(x, _weights(w, x.shape[0]), _in(c, x), c, -0.5 * float(beta), R, Q)
    return {"R": R, "Q": Q}


def dc_counts(x, c, *, centers, sigma, n_classes):
    """Smoothed counts (10) of DC, Kaski et al. (2005): ``n[j, i] = sum over
    rows of class i of y_j(x)`` with the memberships (4)."""
    x = as_rows(x)
    m = _centres(centers, x)
    counts = np.zeros((m.shape[0], int(n_classes)))
    _loops()._dc_count_rows(x, _checked_labels(c, x.shape[0], int(n_classes)), _in(m, x), -0.5 / float(sigma) ** 2, counts)
    return {"counts": counts}


def dc_grad(x, c, *, centers, sigma, L):
    """Gradient sums (11) of DC: ``WX = W^T X`` and ``W = sum_x W(x)`` with
    ``W_j(x) = y_j(x) [L_{j,c(x)} - sum_l y_l(x) L_{l,c(x)}]``."""
    x = as_rows(x)
    m = _centres(centers, x)
    k, d = m.shape
    L = np.ascontiguousarray(L, dtype=np.float64)
    if L.ndim != 2 or L.shape[0] != k:
        raise ValueError(f"L of shape {L.shape} for {k} prototypes.")
    WX, Ws = np.zeros((k, d)), np.zeros(k)
    _loops()._dc_grad_rows(x, _checked_labels(c, x.shape[0], L.shape[1]), _in(m, x), -0.5 / float(sigma) ** 2, L, WX, Ws)
    return {"WX": WX, "W": Ws}


def _paired(x, y):
    x, y = as_rows(x), as_rows(y)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{x.shape[0]} x rows but {y.shape[0]} y rows: the views must be paired.")
    return x, y


def ac_counts(x, y, *, mx, my, sx, sy):
    """Smoothed cross counts ``n_ij = sum_r g_i(x_r) g_j(y_r)`` of AC."""
    x, y = _paired(x, y)
    mx, my = _centres(mx, x, "x prototypes"), _centres(my, y, "y prototypes")
    counts = np.zeros((mx.shape[0], my.shape[0]))
    _loops()._ac_count_rows(x, y, _in(mx, x), _in(my, y), -0.5 / float(sx) ** 2, -0.5 / float(sy) ** 2, counts)
    return {"counts": counts}


def ac_grad(x, y, *, mx, my, sx, sy, psi, psi_x, psi_y, lam_x, lam_y):
    """Gradient sums of log BF'' of AC (see :func:`infoclust_dask.kernels.ac.ac_grad_stats`)."""
    x, y = _paired(x, y)
    mx, my = _centres(mx, x, "x prototypes"), _centres(my, y, "y prototypes")
    (k, dx), (l_, dy) = mx.shape, my.shape
    out = {"WX": np.zeros((k, dx)), "Wx": np.zeros(k), "WY": np.zeros((l_, dy)), "Wy": np.zeros(l_)}
    _loops()._ac_grad_rows(x, y, _in(mx, x), _in(my, y), -0.5 / float(sx) ** 2, -0.5 / float(sy) ** 2, _shaped(psi, (k, l_), "psi"),
                  float(lam_x) * _shaped(psi_x, (k,), "psi_x"), float(lam_y) * _shaped(psi_y, (l_,), "psi_y"),
                  out["WX"], out["Wx"], out["WY"], out["Wy"])
    return out


def mixture_em(x, c=None, *, means, variances, log_weights, log_psi=None, n_classes=0):
    """E-step responsibilities of an isotropic Gaussian mixture (optionally
    times ``psi_{j, c}``) and the M-step sums ``R``, ``S``, ``Q``, the log
    likelihood and, with classes, ``N`` (see
    :func:`infoclust_dask.kernels.mixture.mixture_em_stats`)."""
    x = as_rows(x)
    mu = _centres(means, x, "means")
    k, d = mu.shape
    v = _shaped(variances, (k,), "variances")
    const = _shaped(log_weights, (k,), "log weights") - 0.5 * d * np.log(2 * np.pi * v)
    R, S, Q, ll = np.zeros(k), np.zeros((k, d)), np.zeros(k), np.zeros(1)
    with_c = c is not None
    N = np.zeros((k, int(n_classes))) if with_c else _EMPTY_2D
    lp = _shaped(log_psi, (k, int(n_classes)), "log_psi") if (with_c and log_psi is not None) else _EMPTY_2D
    labels = _checked_labels(c, x.shape[0], int(n_classes)) if with_c else _EMPTY_INT
    _loops()._mixture_rows(x, labels, _in(mu, x), const, 1.0 / (2.0 * v), lp, R, S, Q, N, ll)
    out = {"R": R, "S": S, "Q": Q, "loglik": np.array(ll[0])}
    if with_c:
        out["N"] = N
    return out


def cmbc_estep(y, *, log_theta, log_1m_theta, temperature):
    """The annealed E-step (4.15) of CMBC on dense rows ``y`` (bool, any
    integer or float type, read as they are) and its M-step sums (see
    :func:`infoclust_dask.kernels.cmbc.estep_stats`): per row the
    log-likelihoods (A.2) over the nonzero features only."""
    y = np.asarray(y)
    if y.dtype == np.bool_:
        y = y.view(np.uint8)
    y = np.ascontiguousarray(y)
    lt = np.asarray(log_theta, dtype=np.float64)
    l1 = np.asarray(log_1m_theta, dtype=np.float64)
    m, k = lt.shape
    if y.ndim != 2 or y.shape[1] != m or l1.shape != (m, k):
        raise ValueError(f"rows of shape {y.shape} and parameters of shapes {lt.shape}, {l1.shape} do not fit "
                         "(a damaged or foreign model?).")
    S1, R, out = np.zeros((m, k)), np.zeros(k), np.zeros(2)
    _loops()._cmbc_rows(y, np.ascontiguousarray(lt - l1), l1.sum(axis=0), 1.0 / float(temperature), S1, R, out)
    return {"S1": S1, "R": R, "loglik": np.array(out[0]), "hard": np.array(out[1])}


def moments(x, w=None, *, shift=None, plain=False):
    """Count, weighted sums and sums of squares of ``x - shift`` per feature
    (float64) and the number of non-finite entries, left out of the sums:
    one loop over the block as it is (float32 rows are not copied to
    float64); a block whose sums come out non-finite is summed again,
    skipping and counting its non-finite entries. ``plain``: the numpy
    form at every size."""
    x = as_rows(x)
    n, d = x.shape
    sh = _EMPTY if shift is None else _shaped(np.asarray(shift).reshape(-1), (d,), "shift")
    ww = _weights(w, n)
    if plain or _numpy_form(n * d):
        from ._numpy_forms import moments as numpy_moments

        s1, s2, out = numpy_moments(x, ww, sh)
        return {"n": np.array(n, dtype=np.int64), "n_bad": np.array(int(out[1]), dtype=np.int64),
                "w": np.array(out[0]), "s1": s1, "s2": s2}
    s1, s2, out = np.zeros(d), np.zeros(d), np.zeros(2)
    _loops()._moments_rows(x, ww, sh, s1, s2, out, False)
    if not (np.all(np.isfinite(s1)) and np.all(np.isfinite(s2))):
        s1[:], s2[:] = 0.0, 0.0
        _loops()._moments_rows(x, ww, sh, s1, s2, out, True)
    return {"n": np.array(n, dtype=np.int64), "n_bad": np.array(int(out[1]), dtype=np.int64),
            "w": np.array(out[0]), "s1": s1, "s2": s2}
