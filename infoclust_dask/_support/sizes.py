"""The block-size policy, in one place: how many rows a block of each kind
holds. Every size is a byte target divided by the bytes of a row, with a
floor of rows; the targets were measured (``docs/BENCHMARKS.md``).

- the logical row blocks of every pass (:func:`logical_rows`), the same
  wherever it runs: blocks of :data:`PASS_BLOCK_BYTES` (the kernels' working
  set stays in the caches; 4 MiB), and a small array cut into up to
  :data:`LOGICAL_PARTS` blocks while each keeps :data:`LOGICAL_MIN_ROWS`
  rows (its pass then uses the cores of a machine of up to 8: Letter,
  20 000 x 16, is 2 blocks of 10 000 rows; a block costs ~20 us more than
  its rows, so blocks stay above 8 192 rows). They depend on the number of
  rows and their width only - never on threads, chunks or workers - so
  every pass sums the same blocks in the same order everywhere (the
  same-answer contract, ``docs/conventions.md``);
- dask chunks and stored chunks are whole multiples of the logical blocks
  (a chunk holds several; an input in other chunks is rechunked on
  them);
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
:mod:`infoclust_dask.engine.choose`.
"""

from __future__ import annotations

__all__ = ["logical_rows", "aligned_rows", "LOGICAL_PARTS", "LOGICAL_MIN_ROWS", "lazy_rows", "read_rows",
           "store_chunk_rows", "fold_chunk_rows", "PASS_BLOCK_BYTES",
           "LAZY_CHUNK_BYTES", "READ_BLOCK_BYTES", "STORE_CHUNK_BYTES", "MIN_STORE_CHUNK_BYTES", "FOLD_CHUNK_ROWS"]

PASS_BLOCK_BYTES = 4 * 2**20
LAZY_CHUNK_BYTES = 64 * 2**20
READ_BLOCK_BYTES = 16 * 2**20
STORE_CHUNK_BYTES = 64 * 2**20
MIN_STORE_CHUNK_BYTES = 8 * 2**20
FOLD_CHUNK_ROWS = 1 << 20
LOGICAL_PARTS = 8
LOGICAL_MIN_ROWS = 8192


def logical_rows(n_samples: int, row_bytes: int) -> int:
    """Rows of a logical block of ``n_samples`` rows of ``row_bytes`` bytes
    of float64 (8 x the values per row, whatever the dtype): ~4 MiB, and a
    small array cut into ``min(LOGICAL_PARTS, n // LOGICAL_MIN_ROWS)``
    equal blocks. Every pass computes its partial results per logical
    block and combines them in one fixed tree, so the result is the same
    bits for any runner, thread count, chunking or worker count."""
    n = max(int(n_samples), 0)
    rows = max(256, PASS_BLOCK_BYTES // max(8, int(row_bytes)))
    parts = min(LOGICAL_PARTS, n // LOGICAL_MIN_ROWS)
    if parts > 1:
        rows = min(rows, -(-n // parts))
    return max(1, min(rows, n) if n else rows)


def aligned_rows(rows: int, logical: int) -> int:
    """``rows`` rounded down to a whole multiple of ``logical`` (at least one):
    the rows of a chunk that holds whole logical blocks."""
    return max(1, int(rows) // int(logical)) * int(logical)


def lazy_rows(row_bytes: int, n_samples: int | None = None) -> int:
    """Rows of a dask chunk made from numpy input (at least 256); with
    ``n_samples``, a whole multiple of its logical blocks (:func:`logical_rows`)."""
    rows = max(256, LAZY_CHUNK_BYTES // max(8, int(row_bytes)))
    if n_samples is None:
        return rows
    return aligned_rows(rows, logical_rows(n_samples, row_bytes))


def read_rows(width: int, itemsize: int = 8) -> int:
    """Rows of a streamed read of ``width`` columns (at least 1024)."""
    return max(1024, READ_BLOCK_BYTES // max(1, int(width) * int(itemsize)))


def store_chunk_rows(n_samples: int, n_features: int, itemsize: int = 8) -> int:
    """Rows per stored chunk: ~64 MiB chunks, but at least 8 chunks when that
    keeps them >= 8 MiB, so that a cluster of a few workers has blocks to
    share; small data sets get one chunk. A chunk holds whole logical
    blocks (:func:`logical_rows`), so passes over the store need no rechunk."""
    row = max(1, int(n_features) * int(itemsize))
    rows = max(1024, STORE_CHUNK_BYTES // row)
    if n_samples <= rows * 8:
        rows = max(MIN_STORE_CHUNK_BYTES // row, -(-int(n_samples) // 8), 1024)
    if rows >= n_samples:
        return int(max(n_samples, 1))
    block = logical_rows(n_samples, 8 * max(1, int(n_features)))
    return int(min(max(1, round(rows / block)) * block, n_samples))  # the nearest whole number of blocks


def fold_chunk_rows(n_samples: int) -> int:
    """Rows per chunk of a generated fold vector."""
    return max(1, min(int(n_samples), FOLD_CHUNK_ROWS))
