"""The block-size policy, in one place: how many rows a block of each kind
holds. Every size is a byte target divided by the bytes of a row, with a
floor of rows; the targets were measured (``docs/BENCHMARKS.md``).

- a pass over a numpy array in this process: blocks of :data:`PASS_BLOCK_BYTES`
  (the kernels' working set stays in the caches; 4 MiB), and at least one
  block per thread when each keeps :data:`PARALLEL_MIN_ROWS` rows (a small
  array's pass then uses every core: Letter, 20 000 x 16, is one 4 MiB
  block);
- numpy input handed to dask (a local cluster, a preprocessing graph):
  chunks of :data:`LAZY_CHUNK_BYTES` (64 MiB: few tasks, each long enough);
- a streamed file read (CSV, parquet, .npy by rows): :data:`READ_BLOCK_BYTES`
  of float64 features per block (16 MiB: a CSV block's text, tokens and
  copies are several times this; ``infoclust ingest`` of a 2 GB CSV stays
  near 400 MB);
- a stored chunk: :data:`STORE_CHUNK_BYTES` (64 MiB, the best zarr read),
  at least 8 chunks while they keep :data:`MIN_STORE_CHUNK_BYTES`;
- a generated fold vector: :data:`FOLD_CHUNK_ROWS` rows per chunk.

The engine, ingest, preprocess, the store and the folds ask these functions;
the in-process placement budget (how much data a fit keeps in this
process) is a different question, answered in
:mod:`infoclust_dask.engine.runners`.
"""

from __future__ import annotations

__all__ = ["pass_rows", "PARALLEL_MIN_ROWS", "lazy_rows", "read_rows", "store_chunk_rows", "fold_chunk_rows", "PASS_BLOCK_BYTES",
           "LAZY_CHUNK_BYTES", "READ_BLOCK_BYTES", "STORE_CHUNK_BYTES", "MIN_STORE_CHUNK_BYTES", "FOLD_CHUNK_ROWS"]

PASS_BLOCK_BYTES = 4 * 2**20
PARALLEL_MIN_ROWS = 2048
LAZY_CHUNK_BYTES = 64 * 2**20
READ_BLOCK_BYTES = 16 * 2**20
STORE_CHUNK_BYTES = 64 * 2**20
MIN_STORE_CHUNK_BYTES = 8 * 2**20
FOLD_CHUNK_ROWS = 1 << 20


def pass_rows(row_bytes: int, n_samples: int | None = None, threads: int = 1) -> int:
    """Rows of a numpy block of an in-process pass (at least 256); with
    ``n_samples`` and ``threads`` > 1, small enough that every thread gets a
    block while blocks keep :data:`PARALLEL_MIN_ROWS` rows."""
    rows = max(256, PASS_BLOCK_BYTES // max(8, int(row_bytes)))
    if n_samples is not None and threads > 1:
        if int(n_samples) // int(threads) >= PARALLEL_MIN_ROWS:
            rows = min(rows, -(-int(n_samples) // int(threads)))
    return rows


def lazy_rows(row_bytes: int) -> int:
    """Rows of a dask chunk made from numpy input (at least 256)."""
    return max(256, LAZY_CHUNK_BYTES // max(8, int(row_bytes)))


def read_rows(width: int, itemsize: int = 8) -> int:
    """Rows of a streamed read of ``width`` columns (at least 1024)."""
    return max(1024, READ_BLOCK_BYTES // max(1, int(width) * int(itemsize)))


def store_chunk_rows(n_samples: int, n_features: int, itemsize: int = 8) -> int:
    """Rows per stored chunk: ~64 MiB chunks, but at least 8 chunks when that
    keeps them >= 8 MiB, so that a cluster of a few workers has blocks to
    share; small data sets get one chunk."""
    row = max(1, int(n_features) * int(itemsize))
    rows = max(1024, STORE_CHUNK_BYTES // row)
    if n_samples <= rows * 8:
        rows = max(MIN_STORE_CHUNK_BYTES // row, -(-int(n_samples) // 8), 1024)
    return int(min(rows, n_samples))


def fold_chunk_rows(n_samples: int) -> int:
    """Rows per chunk of a generated fold vector."""
    return max(1, min(int(n_samples), FOLD_CHUNK_ROWS))
