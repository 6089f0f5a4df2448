"""Pieces every block kernel shares, and the pass blueprint.

Nothing in :mod:`infoclust_dask.kernels` imports dask: a kernel acts on ONE
row block (numpy arrays) and returns partial results that are exact to
combine across blocks (float64 / int64 sums, or lists merged by a declared
combine). A :class:`Pass` declares, next to its kernel, everything the
engine needs to run it over a data set: the chunk kernel, how partial
results combine, an optional finalize, the names of its row-aligned inputs,
whether it honours the train/validation row subset and whether it needs the
global index of the block's first row. In the spirit of flox's
``Aggregation`` (Cherian et al., flox ``aggregations.py``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = [
    "Pass",
    "run_chunk",
    "run_fold_step",
    "combine_sum",
    "combine_concat",
    "subblocks",
    "in_sub_blocks",
    "sq_distances",
    "softmax",
    "row_hash_uniform",
    "subset_rows",
    "SUBBLOCK_BYTES",
    "SUB_ROWS",
]


# --------------------------------------------------------------------------
# combines
# --------------------------------------------------------------------------
def combine_sum(parts):
    """Add dicts of partial sums key by key (the default combine)."""
    out = dict(parts[0])
    for p in parts[1:]:
        for key, value in p.items():
            out[key] = out[key] + value
    return out


def combine_concat(parts):
    """Concatenate along axis 0, key by key (for small per-block lists)."""
    return {key: np.concatenate([p[key] for p in parts], axis=0) for key in parts[0]}


# --------------------------------------------------------------------------
# the blueprint
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Pass:
    """One pass over row-aligned data, declared once next to its kernel.

    Parameters
    ----------
    name : str
        Task-name prefix in dask's dashboard and task stream
        (``dc_count_stats-<token>``).
    chunk : callable
        ``chunk(*blocks, **params)``; with ``start=True`` also ``start=`` (the
        global index of the block's first row). For ``kind="fold"`` the first
        argument is the state threaded through the blocks.
    kind : {"reduce", "map", "fold"}
        ``"reduce"``: partial results tree-combined into one (a dict of sums
        by default); ``"map"``: one output row per input row (labels,
        distances); ``"fold"``: a small state threaded block after block
        (on-line algorithms).
    combine : callable, default=:func:`combine_sum`
        Associative merge of a list of partial results (``kind="reduce"``).
    finalize : callable, optional
        Applied once to the combined result, where it was reduced.
    inputs : tuple of str
        Names of the row-aligned inputs, in the order the chunk takes them;
        a trailing input may be passed as None (e.g. absent sample weights).
    subset : bool, default=False
        The pass honours ``params["subset"] = (seed, fraction, side)``: only
        the rows of a hashed train/validation split reach the chunk
        (:func:`subset_rows`); the rule is applied here, once, for every pass.
    start : bool, default=False
        The chunk takes ``start=`` (counter-based random numbers, hashed
        folds, global row numbers).
    dtype : numpy dtype, default=float64
        Output dtype of a ``"map"`` pass.
    """

    name: str
    chunk: Callable[..., Any]
    kind: str = "reduce"
    combine: Callable[[list], Any] = combine_sum
    finalize: Callable[[Any], Any] | None = None
    inputs: tuple[str, ...] = ("x",)
    subset: bool = False
    start: bool = False
    dtype: Any = field(default=np.float64)

    def __post_init__(self):
        if self.kind not in ("reduce", "map", "fold"):
            raise ValueError(f"Pass {self.name!r}: kind must be 'reduce', 'map' or 'fold'; got {self.kind!r}.")


def _select(blocks, params, start, bp):
    if not bp.subset:
        return blocks, params
    params = dict(params)
    subset = params.pop("subset", None)
    if subset is None:
        return blocks, params
    n = np.asarray(next(b for b in blocks if b is not None)).shape[0]
    if n <= SUBSET_CACHE_ROWS:
        rows = _subset_indices(n, start, *subset)
        return [None if b is None else np.asarray(b).take(rows, axis=0) for b in blocks], params
    keep = subset_rows(n, start, subset)
    return [None if b is None else np.asarray(b)[keep] for b in blocks], params


#: blocks of at most this many rows keep their subset's row numbers (:func:`_subset_indices`): a held-out
#: search on small data runs thousands of passes over the same blocks
SUBSET_CACHE_ROWS = 1 << 16


@functools.lru_cache(maxsize=32)
def _subset_indices(n: int, start: int, seed: int, frac: float, side: str) -> np.ndarray:
    """The row numbers of :func:`subset_rows`' mask, kept for the next pass
    over the same block (at most 32 x 512 KiB); read-only. Taking them
    costs ~45 us a pass on a 6435 x 36 block against ~110 us for hashing and
    masking again (satimage's DC width search: ~8 900 passes)."""
    rows = np.flatnonzero(subset_rows(n, start, (seed, frac, side)))
    rows.setflags(write=False)
    return rows


def run_chunk(bp: Pass, start: int, blocks: Any, params: dict) -> Any:
    """Call ``bp``'s chunk kernel on one block: the row subset applied if
    the pass honours it, ``start`` given if the kernel takes it."""
    blocks, params = _select(list(blocks), params, start, bp)
    if bp.start:
        return bp.chunk(*blocks, start=start, **params)
    return bp.chunk(*blocks, **params)


def run_fold_step(bp: Pass, start: int, state: Any, blocks: Any, params: dict) -> Any:
    """One step of a ``kind="fold"`` pass: ``state -> chunk(state, *blocks)``."""
    blocks, params = _select(list(blocks), params, start, bp)
    if bp.start:
        return bp.chunk(state, *blocks, start=start, **params)
    return bp.chunk(state, *blocks, **params)


# --------------------------------------------------------------------------
# sub-blocks
# --------------------------------------------------------------------------
#: float64 bytes per sub-block: kernels walk a block in cache-sized pieces
#: (converting float32 input piece by piece), measured ~2x faster than whole
#: 64 MB blocks.
SUBBLOCK_BYTES = 2**20

#: rows per sub-block of kernels whose temporaries are (rows x bases) or
#: (rows x training rows) (SMIC, LSMI): a store chunk of 500 000 rows is
#: processed in pieces, so worker memory stays bounded
SUB_ROWS = 8192


def subblocks(x, w=None):
    """Yield ``(x_sub, w_sub)`` float64, C-contiguous pieces of ~1 MB.

    ``w`` is any row-aligned companion (weights, labels, a second view) or
    None."""
    x = np.asarray(x)
    rows = max(256, SUBBLOCK_BYTES // (8 * max(1, x.shape[1] if x.ndim > 1 else 1)))
    for i in range(0, x.shape[0], rows):
        xs = np.ascontiguousarray(x[i : i + rows], dtype=np.float64)
        ws = None if w is None else np.ascontiguousarray(w[i : i + rows], dtype=np.float64)
        yield xs, ws


def in_sub_blocks(rows_kernel, arrays, start, **params):
    """``rows_kernel`` over sub-blocks of at most :data:`SUB_ROWS` rows of the
    row-aligned ``arrays``, partial sums added with :func:`combine_sum`."""
    n = np.asarray(arrays[0]).shape[0]
    return combine_sum([rows_kernel(*(a[i:i + SUB_ROWS] for a in arrays), start=start + i, **params)
                        for i in range(0, max(n, 1), SUB_ROWS)])


# --------------------------------------------------------------------------
# geometry and the one softmax
# --------------------------------------------------------------------------
def sq_distances(x: np.ndarray, centers: np.ndarray, x_sq: np.ndarray | None = None) -> np.ndarray:
    """Squared Euclidean distances ``||x_n - m_k||^2`` of shape (n, k).

    One GEMM; the expansion ``|x|^2 - 2 x.m + |m|^2`` is clipped at 0 to
    remove negative round-off.
    """
    x = np.asarray(x, dtype=np.float64)
    centers = np.asarray(centers, dtype=np.float64)
    if x_sq is None:
        x_sq = np.einsum("ij,ij->i", x, x)
    d = x @ (-2.0 * centers.T)
    d += np.einsum("ij,ij->i", centers, centers)[None, :]
    d += x_sq[:, None]
    np.maximum(d, 0.0, out=d)
    return d


def softmax(e, *, out=False, log_z=False):
    """Stable softmax of ``e`` along its last axis: ``exp(e - max) / sum``.

    The one softmax of the package (soft K-means responsibilities (MacKay
    2003, eq. 20.7), DC memberships (Kaski et al. 2005, eq. 4), mixture
    posteriors). ``out=True`` overwrites ``e``; ``log_z=True`` also returns
    ``log sum exp(e)`` along the last axis.
    """
    e = np.asarray(e, dtype=np.float64)
    emax = e.max(axis=-1, keepdims=True)
    r = np.subtract(e, emax, out=e if out else None)
    np.exp(r, out=r)
    z = r.sum(axis=-1, keepdims=True)
    r /= z
    if log_z:
        return r, (np.log(z) + emax)[..., 0]
    return r


# --------------------------------------------------------------------------
# counter-based random numbers and the row subset rule
# --------------------------------------------------------------------------
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def row_hash_uniform(seed, start, n):
    """Uniform [0, 1) numbers for global rows ``start .. start+n-1``.

    A counter-based generator (splitmix64 of ``seed`` and the row index), so a
    row gets the same number whatever the chunking or the worker.
    """
    idx = np.arange(start, start + n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = idx * _GOLDEN + np.uint64(seed % (1 << 64)) * _M2 + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def subset_rows(n, start, subset):
    """Rows of a block in a hashed train/validation split: ``subset`` is
    ``(seed, fraction, side)``; a row is in "train" when its hashed uniform
    number is below ``fraction``, else in "valid". None keeps every row."""
    if subset is None:
        return None
    seed, frac, side = subset
    u = row_hash_uniform(seed, start, n)
    return u < frac if side == "train" else u >= frac
