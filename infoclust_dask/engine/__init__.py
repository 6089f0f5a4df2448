"""The map-reduce engine: the only package that builds dask graphs and computes.

It runs the passes the kernels declare (:class:`~infoclust_dask.kernels.Pass`):

- :func:`map_reduce` (``kind="reduce"``): the chunk kernel over aligned row
  blocks, partial results tree-combined with the pass's combine, one
  ``compute`` per call;
- :func:`map_blocks` (``kind="map"``): one output row per input row, lazily
  for dask input;
- :func:`fold_blocks` (``kind="fold"``): a small state threaded block after
  block (on-line algorithms stream over data of any size);
- :func:`block_pairs`: every query block against every data block, combined
  per query block (all-pairs k nearest neighbours);
- :func:`partition_pairs`: rows split into the parts of a coarse partition,
  each part built and answered where it is gathered, answers sent back to
  the row blocks (the approximate neighbour search).

Inputs are numpy arrays, dask arrays or xarray DataArrays (store paths are
opened one layer up, by :mod:`infoclust_dask._inputs`). Small
parameters travel once per call, as one key every block task depends on.
Task keys carry the pass's name and a token of the pass, its parameters and
its inputs (``dc_count_stats-<token>-<block>``), so the dashboard shows what
runs and a key never names two different tasks.

Where passes run is a runner (:mod:`.choose`: in this process, or a
``distributed`` scheduler), chosen once per fit by ``engine.installed(
scheduler, data=X)`` - a named scheduler, else the data's size
(:func:`place`) - and every engine call below it that is given no
scheduler runs there; the engine's modules ask the runner (compute,
persist, broadcast, keep, apply), never a scheduler name. Results do not depend on the
chunking beyond float64 round-off.
"""

from __future__ import annotations

from .blocks import (
    DEFAULT_BLOCK_BYTES,
    INLINE_LOAD_BYTES,
    as_array,
    as_lazy,
    build_reduction,
    is_lazy,
    n_rows,
)
from .choose import (
    Distributed,
    InProcess,
    Runner,
    check_task,
    compute,
    current_runner,
    data_bytes,
    entry_point,
    in_process_budget,
    installed,
    place,
    resolve_scheduler,
    runner_for,
    whole_call,
)
from .clients import close_local_client, local_client
from .execute import ChecksumError, NoWorkersError, one_blas_thread
from .pairs import block_pairs, cross_pairs, partition_pairs
from .passes import fold_blocks, generate, map_blocks, map_reduce, n_blocks, rows_at
from .placement import persist, persist_all, prepare, source_of, streams, take_rows
from .pressure import WorkerMemoryError
from .rowblocks import RowBlocks, exchange

__all__ = [
    "ChecksumError",
    "WorkerMemoryError",
    "check_task",
    "rows_at",
    "NoWorkersError",
    "map_reduce",
    "map_blocks",
    "fold_blocks",
    "block_pairs",
    "cross_pairs",
    "partition_pairs",
    "exchange",
    "RowBlocks",
    "generate",
    "build_reduction",
    "n_blocks",
    "as_array",
    "as_lazy",
    "resolve_scheduler",
    "current_runner",
    "entry_point",
    "installed",
    "local_client",
    "close_local_client",
    "Runner",
    "InProcess",
    "Distributed",
    "place",
    "runner_for",
    "whole_call",
    "data_bytes",
    "in_process_budget",
    "persist",
    "persist_all",
    "prepare",
    "source_of",
    "streams",
    "compute",
    "one_blas_thread",
    "n_rows",
    "is_lazy",
    "take_rows",
    "DEFAULT_BLOCK_BYTES",
    "INLINE_LOAD_BYTES",
]
