"""Generic statistics of row blocks: moments, Gram and cross-Gram matrices,
per-label sums, projections and fold numbers. Each pass is declared once
below its kernel (:class:`~infoclust_dask.kernels._common.Pass`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _compiled
from ._common import Pass, combine_concat, row_hash_uniform

__all__ = [
    "moments_stats", "MOMENTS",
    "gram_stats", "GRAM",
    "cross_gram_stats", "CROSS_GRAM",
    "label_sum_stats", "LABEL_SUMS",
    "weighted_sum_stats", "WEIGHTED_SUM",
    "sum_sq_stats", "SUM_SQ",
    "project_rows", "PROJECT",
    "hashed_fold_ids", "HASHED_FOLDS",
    "range_fold_ids", "RANGE_FOLDS",
    "count_true", "COUNT_TRUE",
    "label_values", "LABEL_VALUES",
    "encode_labels", "ENCODE_LABELS",
    "on_grid", "ON_GRID",
]


def moments_stats(x: np.ndarray, w: np.ndarray | None = None, *, shift: np.ndarray | None = None,
                  plain: bool = False) -> dict[str, np.ndarray]:
    """Count, weighted sums, sums of squares and the number of non-finite
    entries of a block: the basis of mean/variance and of input validation.

    With ``shift`` (e.g. one row of the data) the sums are of ``x - shift``,
    which keeps the variance accurate for data far from the origin.
    Non-finite entries are left out of the sums and counted. One compiled
    loop over the block as it is
    (:func:`infoclust_dask.kernels._compiled.moments`: float32 rows are not
    copied to float64), so that validating a store costs about a read of
    it. ``plain``: the numpy form of the loop at every size (the moments a
    store's preprocessing keeps: the same bits in a process that never
    loads the compiled loops, ``infoclust ingest``, and in any other)."""
    out = _compiled.moments(x, w, shift=shift, plain=plain)
    if np.ndim(x) == 1:  # one column: scalar sums
        out["s1"], out["s2"] = np.array(out["s1"][0]), np.array(out["s2"][0])
    return out


MOMENTS = Pass("moments_stats", moments_stats, inputs=("x", "w"))


def gram_stats(x: Any) -> dict[str, np.ndarray]:
    """Count, sum and ``X^T X`` of a block (covariance / principal axes);
    ``scipy.sparse`` rows stay sparse."""
    if hasattr(x, "tocsr"):
        x = x.tocsr().astype(np.float64)
        return {"n": np.array(x.shape[0], dtype=np.int64), "s1": np.asarray(x.sum(axis=0)).ravel(),
                "xtx": np.asarray((x.T @ x).todense())}
    x = np.asarray(x, dtype=np.float64)
    return {"n": np.array(x.shape[0], dtype=np.int64), "s1": x.sum(axis=0), "xtx": x.T @ x}


GRAM = Pass("gram_stats", gram_stats)


def cross_gram_stats(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """Count, sums, ``X^T X``, ``Y^T Y`` and ``X^T Y`` of a paired block
    (canonical correlation analysis of two views)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return {"n": np.array(x.shape[0], dtype=np.int64), "sx": x.sum(axis=0), "sy": y.sum(axis=0),
            "xtx": x.T @ x, "yty": y.T @ y, "xty": x.T @ y}


CROSS_GRAM = Pass("cross_gram_stats", cross_gram_stats, inputs=("x", "y"))


def label_sum_stats(x: np.ndarray, labels: np.ndarray, *, k: int) -> dict[str, np.ndarray]:
    """Per-label sums and counts of a block's rows (cluster means)."""
    lab = np.asarray(labels).astype(np.intp)
    x = np.asarray(x, dtype=np.float64)
    s = np.zeros((k, x.shape[1]))
    np.add.at(s, lab, x)
    return {"s": s, "n": np.bincount(lab, minlength=k).astype(np.float64)}


LABEL_SUMS = Pass("label_sum_stats", label_sum_stats, inputs=("x", "labels"))


def weighted_sum_stats(x: np.ndarray, w: np.ndarray) -> dict[str, np.ndarray]:
    """``sum_n w_n x_n`` and ``sum_n w_n`` (a weighted mean)."""
    w = np.asarray(w, dtype=np.float64)
    return {"s": w @ np.asarray(x, dtype=np.float64), "w": np.array(w.sum())}


WEIGHTED_SUM = Pass("weighted_sum_stats", weighted_sum_stats, inputs=("x", "w"))


def sum_sq_stats(x: np.ndarray, w: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """``sxx = sum_n w_n ||x_n||^2`` of a block."""
    x = np.asarray(x, dtype=np.float64)
    xx = np.einsum("ij,ij->i", x, x)
    return {"sxx": np.array(xx.sum() if w is None else np.asarray(w, dtype=np.float64) @ xx)}


SUM_SQ = Pass("sum_sq_stats", sum_sq_stats, inputs=("x", "w"))


def project_rows(x: np.ndarray, *, mean: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``(x - mean) @ W`` of a block (a linear projection)."""
    return (np.asarray(x, dtype=np.float64) - mean) @ W


PROJECT = Pass("project_rows", project_rows, kind="map")


def hashed_fold_ids(x: np.ndarray, *, start: int = 0, seed: int, n_folds: int) -> np.ndarray:
    """Fold number (0 .. n_folds-1) of each row of a block: the row's hashed
    uniform number times ``n_folds``, so folds are random, about equal in size
    and independent of the chunking."""
    u = row_hash_uniform(seed, start, np.asarray(x).shape[0])
    return np.minimum((u * n_folds).astype(np.int16), n_folds - 1)


HASHED_FOLDS = Pass("hashed_fold_ids", hashed_fold_ids, kind="map", start=True, dtype=np.int16)


def range_fold_ids(x: np.ndarray, *, start: int = 0, n_total: int, n_folds: int) -> np.ndarray:
    """Fold number of each row when fold f is the index range
    ``[f n / k, (f + 1) n / k)`` (contiguous folds; no shuffling)."""
    rows = np.arange(start, start + np.asarray(x).shape[0], dtype=np.int64)
    return ((rows * n_folds) // n_total).astype(np.int16)


RANGE_FOLDS = Pass("range_fold_ids", range_fold_ids, kind="map", start=True, dtype=np.int16)


def count_true(keep: np.ndarray) -> dict[str, np.ndarray]:
    """Number of true entries of a boolean block, as a one-entry list."""
    return {"n": np.array([np.count_nonzero(np.asarray(keep))], dtype=np.int64)}


COUNT_TRUE = Pass("count_true", count_true, combine=combine_concat, inputs=("keep",))


def label_values(y: np.ndarray) -> dict[str, np.ndarray]:
    """The distinct values of a block of labels (sorted)."""
    return {"values": np.unique(np.asarray(y))}


def _union_values(parts):
    return {"values": np.unique(np.concatenate([p["values"] for p in parts]))}


LABEL_VALUES = Pass("label_values", label_values, combine=_union_values, inputs=("y",))


def encode_labels(y: np.ndarray, *, classes: np.ndarray) -> np.ndarray:
    """Codes ``0 .. len(classes)-1`` of a block of labels (``classes`` sorted);
    a value outside ``classes`` is an error naming it."""
    y = np.asarray(y)
    codes = np.searchsorted(classes, y)
    bad = (codes >= len(classes)) | (classes[np.minimum(codes, len(classes) - 1)] != y)
    if bad.any():
        raise ValueError(f"y holds labels {np.unique(y[bad])[:5].tolist()} that are not among the classes "
                         f"{np.asarray(classes)[:10].tolist()}.")
    return codes.astype(np.int32)


ENCODE_LABELS = Pass("encode_labels", encode_labels, kind="map", inputs=("y",), dtype=np.int32)


#: bits of the fixed grid of :func:`on_grid`: values in units of the data's overall spread, to 2**-20 (about 1e-6)
GRID_BITS = 20


def on_grid(x: np.ndarray, *, mean: np.ndarray, scale: float, bits: int = GRID_BITS) -> np.ndarray:
    """A block standardized - centred by ``mean``, divided by the overall
    spread ``scale`` - and rounded to multiples of ``2**-bits``: rows that
    differ by less than about ``scale * 2**-bits`` (a change of units, an
    offset, a rounding of the input) become the same numbers, except with a
    probability of about (difference / grid step) per value. Used where a
    chaotic optimizer's result decides a discrete choice (DC's held-out
    width search)."""
    step = float(2.0 ** int(bits))
    return np.rint((np.asarray(x, dtype=np.float64) - mean) / float(scale) * step) / step


ON_GRID = Pass("on_grid", on_grid, kind="map", inputs=("x",), dtype=np.float64)
