"""A software prefetch for compiled kernels: :func:`prefetch` asks the CPU
to bring the cache line at an address into every cache level, without
waiting for it (LLVM's ``llvm.prefetch`` intrinsic: ``prefetcht0`` on
x86-64, ``prfm pldl1keep`` on ARM64; a no-op where a CPU has none).

For loops whose next rows are known ahead but scattered over arrays larger
than the caches (NN-descent's list updates: a row's heap read a few
updates before it is pushed), so the misses overlap instead of stalling
one after another. Correctness never depends on it: a prefetch changes no
value, only when memory arrives.

Built with numba's public extension API (``numba.extending.intrinsic``)
and llvmlite's IR builder.
"""

from __future__ import annotations

from typing import Callable, cast

import numba
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from ._cache import can_cache

__all__ = ["prefetch", "prefetch_item", "prefetch_row"]


@intrinsic
def _prefetch(typingctx, address):  # pragma: no cover - compiled
    """Prefetch (for reading, kept in all cache levels) the line holding
    byte ``address`` (an integer, e.g. ``a.ctypes.data + row *
    a.strides[0]``). Usable inside numba-compiled functions only."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]))
        # (address, read = 0, locality = 3: keep in all levels, data cache = 1)
        builder.call(fn, [builder.inttoptr(args[0], i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(address), codegen


#: typed for callers: numba passes the typing context itself
prefetch = cast(Callable[[int], None], _prefetch)


@numba.njit(cache=can_cache(), nogil=True)
def prefetch_item(a, i):  # pragma: no cover - compiled
    """The line of the first byte of ``a[i]`` (an entry of a 1-d array,
    the start of a row of a C-ordered one) asked for."""
    prefetch(a.ctypes.data + i * a.strides[0])


@numba.njit(cache=can_cache(), nogil=True)
def prefetch_row(a, r):  # pragma: no cover - compiled
    """Row ``r`` of the C-ordered array ``a`` asked for: the lines of its
    first and last byte (a row of up to 64 bytes may straddle two)."""
    at = a.ctypes.data + r * a.strides[0]
    prefetch(at)
    prefetch(at + a.strides[0] - 1)
