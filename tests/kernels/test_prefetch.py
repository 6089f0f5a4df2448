"""The software prefetch (kernels/_prefetch.py): compiled into a numba
loop it changes no value, and on x86-64 it is a prefetch instruction."""

import platform

import numba
import numpy as np

from infoclust_dask.kernels._prefetch import prefetch


@numba.njit
def _sum_prefetching(a, ahead):
    total = 0.0
    for i in range(a.shape[0]):
        if i + ahead < a.shape[0]:
            prefetch(a.ctypes.data + (i + ahead) * a.strides[0])
        total += a[i]
    return total


def test_prefetch_changes_no_value_and_is_an_instruction():
    a = np.random.default_rng(0).random(100_003)
    with_prefetch, without = _sum_prefetching(a, 16), _sum_prefetching(a, a.shape[0])  # ahead past the end: none
    assert with_prefetch == without
    assert abs(with_prefetch - float(a.sum())) < 1e-9
    asm = "".join(_sum_prefetching.inspect_asm().values())
    if platform.machine() in ("x86_64", "AMD64"):
        assert "prefetcht0" in asm
