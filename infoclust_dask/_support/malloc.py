"""Large buffers go back to the operating system when they are freed.

glibc's ``malloc`` serves a request above its mmap threshold (128 KiB at
start) by ``mmap`` and returns it on ``free``; but each such free raises the
threshold to the freed size (up to 32 MiB), so from then on the chunk-sized
buffers of a streaming command (a parse block, a store chunk and its copies)
come from the heap, where freed memory is reused but rarely returned: the
resident size of ``infoclust ingest`` kept growing with the work done, to
719 MB for a 0.27 GB CSV. Setting the threshold explicitly
(``mallopt(M_MMAP_THRESHOLD, ...)``, glibc's documented interface, the
in-process form of the ``MALLOC_MMAP_THRESHOLD_`` environment variable)
turns the dynamic rule off: the same ingest then peaks at 439-483 MB
(``benchmarks/ingest_rss.py``). Elsewhere (macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["return_large_blocks", "LARGE_BLOCK_BYTES"]

#: allocations of at least this size are mapped and unmapped by themselves
LARGE_BLOCK_BYTES = 4 << 20
_M_MMAP_THRESHOLD = -3  # glibc's <malloc.h>


def return_large_blocks(threshold: int = LARGE_BLOCK_BYTES) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes for this process;
    True when it took effect (Linux with glibc), False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(_M_MMAP_THRESHOLD, int(threshold)) == 1
