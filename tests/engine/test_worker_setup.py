"""The workers' mmap threshold (engine/worker_setup.py): distributed's
nanny starts workers with ``MALLOC_TRIM_THRESHOLD_`` set, which turns off
glibc's dynamic mmap threshold, so every product tile above 128 KiB was
mapped and unmapped (3.5-4x slower kernels, docs/BENCHMARKS.md). The
engine registers a worker plugin that fixes the threshold at 4 MiB.

Observed through glibc's own counters (``mallinfo2().hblkhd``: bytes in
chunks that have a mapping of their own), not through timings."""

import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from infoclust_dask import engine
from infoclust_dask.engine import execute
from infoclust_dask.engine.worker_setup import PLUGIN_NAME

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]


def mapped_bytes_of_an_allocation(nbytes: int) -> int:
    """Bytes glibc mapped for one numpy buffer of ``nbytes`` (0: it came from the heap)."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    before = libc.mallinfo2().hblkhd
    a = np.ones(nbytes // 8)
    after = libc.mallinfo2().hblkhd
    del a
    return int(after - before)


def _in_worker(dask_worker):
    return (os.environ.get("MALLOC_TRIM_THRESHOLD_"), getattr(dask_worker, "infoclust_large_blocks", None),
            mapped_bytes_of_an_allocation(2 << 20), mapped_bytes_of_an_allocation(16 << 20))


def test_the_nanny_setting_maps_every_tile_and_the_fixed_threshold_does_not():
    """The cause, in a plain process: with the nanny's variable a 2 MiB
    buffer gets a mapping of its own, even after a larger one was freed
    (the dynamic rule is off); after ``return_large_blocks`` it comes from
    the heap, while a 16 MiB one is still mapped (and returned when freed)."""
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_worker_setup import mapped_bytes_of_an_allocation as mapped
        from infoclust_dask._support.malloc import return_large_blocks
        first = mapped(16 << 20), mapped(2 << 20)
        assert return_large_blocks()
        print(first[0], first[1], mapped(2 << 20), mapped(16 << 20))
    """)
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    big, tile, tile_after, big_after = map(int, out.stdout.split())
    assert big >= 16 << 20 and tile >= 2 << 20  # both mapped under the nanny's setting
    assert tile_after == 0  # a tile from the heap once the threshold is fixed
    assert big_after >= 16 << 20  # large buffers still mapped


def test_every_worker_gets_the_fixed_threshold_also_one_that_joins_later():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, memory_limit="1GB") as cluster, Client(cluster) as client:
        seen = client.run(_in_worker)
        assert [v[0] for v in seen.values()] == ["65536"]  # the nanny's variable, the reason for the plugin
        assert all(v[2] >= 2 << 20 for v in seen.values())  # a tile mapped on its own before the engine came
        engine.Distributed(client)  # what resolving scheduler=client does
        assert PLUGIN_NAME in client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.worker_plugins))
        cluster.scale(2)
        client.wait_for_workers(2, timeout=60)
        seen = client.run(_in_worker)
        assert len(seen) == 2
        for trim, applied, tile, big in seen.values():
            assert trim == "65536" and applied is True
            assert tile == 0, "a 2 MiB tile was mapped on its own: the worker's threshold is not fixed"
            assert big >= 16 << 20


def test_the_plugin_is_registered_once_per_client(local_cluster_client, monkeypatch):
    calls = []
    monkeypatch.setattr(local_cluster_client, "register_plugin", lambda plugin: calls.append(plugin))
    monkeypatch.setattr(execute, "_SET_UP", set())
    for _ in range(3):
        engine.Distributed(local_cluster_client)
    assert len(calls) == 1 and calls[0].name == PLUGIN_NAME
