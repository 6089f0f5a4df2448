"""What every worker of a distributed cluster gets before it runs a pass:
glibc's mmap threshold fixed at
:data:`~infoclust_dask._support.malloc.LARGE_BLOCK_BYTES`
(:func:`~infoclust_dask._support.malloc.return_large_blocks`).

Why: distributed's nanny starts each worker with ``MALLOC_TRIM_THRESHOLD_=65536``
(``distributed.nanny.pre-spawn-environ``, to give freed memory back to
the system). Setting that variable also turns off glibc's dynamic mmap
threshold, so every buffer above 128 KiB is mapped on ``malloc`` and
unmapped on ``free``: a kernel that makes a 2 MB product tile a few
thousand times pays page faults on every one. Measured on the 2-core AMD
EPYC of ``docs/BENCHMARKS.md``, one thread: the brute-force neighbour
search of 2000 rows against one 262 144-row block (SMIC's recall check)
took 3.5-4.1 s with the nanny's setting against 0.97-1.0 s once the mmap
threshold is fixed at 4 MiB (1.0-1.4 s without either). Buffers of 4 MiB
and more (row blocks, store chunks) are still mapped and returned when
freed; smaller ones come from the heap, whose free top is still trimmed
above the nanny's 64 KiB. Results do not change: only where memory comes
from."""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from .._support.malloc import return_large_blocks

__all__ = ["LargeBlocks", "PLUGIN_NAME"]

#: the name the plugin is registered under (once per scheduler: ``idempotent``)
PLUGIN_NAME = "infoclust-large-blocks"


class LargeBlocks(WorkerPlugin):
    """Fix glibc's mmap threshold in each worker process, including workers
    that join later (the scheduler hands registered plugins to them)."""

    idempotent = True
    name = PLUGIN_NAME

    def setup(self, worker: Any) -> None:
        """distributed's hook, run in each worker process: records on the
        worker whether the threshold took effect (glibc only)."""
        worker.infoclust_large_blocks = return_large_blocks()
