"""Every compute goes through the engine and the chosen scheduler.

With a real ``distributed`` cluster (2 worker processes on 127.0.0.1) the
chunk tasks of a store->store ingest, of ``write_dataset`` of a dask array
and of ``metrics.lsmi`` must appear in the scheduler's task stream, run by
its workers, and dask's local schedulers must not run at all in the calling
process. With ``scheduler=None``, ``dask.config.set(scheduler="synchronous")``
is honoured.
"""

import threading

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import get_task_stream
from helpers import CountLocalComputes, worker_info

from infoclust_dask import engine, metrics, open_dataset, write_dataset
from infoclust_dask.datasets import make_smic_toy
from infoclust_dask.engine import choose as runners
from infoclust_dask.io.ingest import ingest
from infoclust_dask.kernels import Pass
from infoclust_dask.kernels.stats import MOMENTS


def _prefixes(stream):
    return {dask.utils.key_split(t["key"]) for t in stream.data}


def _workers(client):
    return set(worker_info(client))


@pytest.fixture
def source_store(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 6))
    return write_dataset(tmp_path / "src.zarr", x, label=rng.integers(0, 3, 3000), chunks=500)


def test_ingest_store_to_store_runs_on_the_workers(local_cluster_client, source_store, tmp_path):
    client = local_cluster_client
    with CountLocalComputes() as local, get_task_stream(client) as stream:
        path, report = ingest(source_store, tmp_path / "out.zarr", standardize=True, pca=3, n_folds=4,
                              scheduler=client)
    assert local.n == 0, "a graph ran on dask's local scheduler in the calling process"
    names = _prefixes(stream)
    assert {"moments_stats", "gram_stats"} <= names, names
    assert any("store" in n for n in names), names  # the zarr chunk writes
    assert {t["worker"] for t in stream.data} <= _workers(client)
    out = open_dataset(path)
    x = out["x"].values
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-10)
    assert x.shape == (3000, 3) and report["n_folds"] == 4


def test_write_dataset_of_a_dask_array_runs_on_the_workers(local_cluster_client, tmp_path):
    client = local_cluster_client
    x = da.random.default_rng(1).normal(size=(4000, 5), chunks=(700, 5))
    ref = x.compute(scheduler="sync")
    with CountLocalComputes() as local, get_task_stream(client) as stream:
        path = write_dataset(tmp_path / "w.zarr", x, chunks=1000, scheduler=client)
    assert local.n == 0
    names = _prefixes(stream)
    assert "moments_stats" in names, names  # the finiteness check
    assert any("store" in n for n in names), names
    np.testing.assert_array_equal(open_dataset(path)["x"].values, ref)


def test_lsmi_runs_on_the_workers(local_cluster_client):
    client = local_cluster_client
    X, y = make_smic_toy("four_blobs", 400, random_state=0)
    ref = metrics.lsmi(X, y, random_state=3, scheduler="sync")
    with CountLocalComputes() as local, get_task_stream(client) as stream:
        got = metrics.lsmi(da.from_array(X, chunks=(90, 2)), y, random_state=3, scheduler=client)
    assert local.n == 0
    assert "lsmi_stats" in _prefixes(stream)
    assert got == pytest.approx(ref, rel=1e-10)


def _thread_trace(x):
    return {"threads": np.array([threading.get_ident()])}


def _concat(parts):
    return {"threads": np.concatenate([p["threads"] for p in parts])}


TRACE = Pass("thread_trace", _thread_trace, combine=_concat)


def test_configured_synchronous_scheduler_is_honoured():
    x = da.from_array(np.arange(4000.0).reshape(-1, 2), chunks=(100, 2))
    with dask.config.set(scheduler="synchronous"):
        assert runners.resolve_scheduler(None).kind == "sync"
        got = engine.map_reduce(TRACE, x)
    assert set(got["threads"]) == {threading.get_ident()}  # every block on the calling thread
    assert runners.resolve_scheduler(None).kind == "threads"
    got = engine.map_reduce(TRACE, x)
    assert threading.get_ident() not in set(got["threads"])


def test_task_keys_are_unique_per_inputs_and_params():
    x = da.from_array(np.ones((100, 2)), chunks=50)
    a = engine.build_reduction(MOMENTS, x, params={"shift": None})
    b = engine.build_reduction(MOMENTS, x, params={"shift": np.ones(2)})
    c = engine.build_reduction(MOMENTS, x + 1, params={"shift": None})
    assert len({a.key, b.key, c.key}) == 3
    assert a.key == engine.build_reduction(MOMENTS, x, params={"shift": None}).key  # deterministic


def test_lazy_results_keep_the_data_a_fit_persisted(local_cluster_client):
    """fit persists small lazy input (engine.prepare) in a local variable;
    the lazy labels_ built on it must keep those futures alive after fit
    returns (a graph optimization that drops them loses the data)."""
    import gc

    from infoclust_dask import KMeans

    client = local_cluster_client
    X = da.random.default_rng(2).normal(size=(3000, 2), chunks=500)
    km = KMeans(3, random_state=0, scheduler=client).fit(X)
    gc.collect()
    labels = engine.compute(km.labels_, scheduler=client)
    np.testing.assert_array_equal(labels, km.predict(X.compute(scheduler="sync")))


def test_a_fit_resolves_its_scheduler_once_and_every_pass_runs_there(local_cluster_client, monkeypatch):
    """The estimator's ``scheduler=`` is resolved once per fit and installed:
    every pass below it (the moments, the K-means start of DC, CG's
    objective passes, the contingency table) runs on the cluster, none in
    this process, though no helper is handed the scheduler; afterwards
    nothing stays installed."""
    from infoclust_dask import DiscriminativeClustering

    seen = []
    real = runners.resolve_scheduler

    def counting(scheduler=None):
        if scheduler is not None and not isinstance(scheduler, runners.Runner):
            seen.append(scheduler)
        return real(scheduler)

    monkeypatch.setattr(runners, "resolve_scheduler", counting)
    rng = np.random.default_rng(0)
    X = da.from_array(np.vstack([rng.normal(c, 1.0, size=(400, 3)) for c in (0, 4)]), chunks=200)
    y = da.from_array(np.repeat([0, 1], 400), chunks=200)
    with CountLocalComputes() as local:
        dc = DiscriminativeClustering(2, sigma=1.0, max_iter=5, random_state=0,
                                      scheduler=local_cluster_client).fit(X, y)
    assert local.n == 0 and dc.contingency_.sum() == 800
    assert seen == [local_cluster_client]  # once, by the fit
    assert runners._INSTALLED.get() is None


def test_installed_schedulers_nest_and_stay_in_their_thread():
    outer = []
    with engine.installed("sync") as s:
        assert engine.resolve_scheduler() is s and s.kind == "sync"
        with engine.installed("threads"):
            assert engine.resolve_scheduler().kind == "threads"
        assert engine.resolve_scheduler() is s
        t = threading.Thread(target=lambda: outer.append(engine.resolve_scheduler().kind))
        t.start()
        t.join()
    assert outer == ["threads"]  # another thread sees the default, not this thread's installed scheduler
    assert runners._INSTALLED.get() is None


@pytest.mark.parametrize("payload, said", [(b"\x00garbage\xff" * 100, "does not speak dask's protocol"),
                                           (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                                            "does not speak dask's protocol"),
                                           ((2**62).to_bytes(8, "little") * 4, "does not speak dask's protocol")])
def test_a_listener_that_is_not_a_scheduler_is_one_clear_line(payload, said, monkeypatch):
    import socket
    import threading
    import time


    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            try:
                c.sendall(payload)
                time.sleep(0.5)
            except OSError:
                pass
            finally:
                c.close()

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setenv("INFOCLUST_CONNECT_TIMEOUT", "4")
    address = f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    X = np.random.default_rng(0).normal(size=(50, 2))
    try:
        t0 = time.monotonic()
        # what the handshake meets first depends on timing: the bytes, or the wait for them
        with pytest.raises(ConnectionError, match=rf"Could not connect to the dask scheduler at '{address}': "
                                                  rf"something listens there but ({said}|gave no dask handshake)"):
            from infoclust_dask import KMeans

            KMeans(2, scheduler=address).fit(X)
        assert time.monotonic() - t0 < 60
    finally:
        srv.close()


def test_a_process_whose_scheduler_died_exits_quickly_without_a_traceback(tmp_path):
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dask_bin = os.path.join(os.path.dirname(sys.executable), "dask")
    sched = subprocess.Popen([dask_bin, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                              "--dashboard-address", "127.0.0.1:0", "--no-show"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    child = None
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the dask scheduler did not start"
                time.sleep(0.2)
        code = ("import sys\nfrom infoclust_dask.engine import choose as runners\n"
                f"runners.resolve_scheduler('tcp://127.0.0.1:{port}')\nprint('connected', flush=True)\n"
                "sys.stdin.readline()\n")
        child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        assert child.stdout.readline().strip() == "connected"
        os.killpg(sched.pid, signal.SIGKILL)  # the scheduler dies under the connected client
        sched.wait(10)
        time.sleep(1.0)
        t0 = time.monotonic()
        _, err = child.communicate("\n", timeout=60)
        assert time.monotonic() - t0 < 10, err
        assert "Traceback" not in err and "TimeoutError" not in err, err
    finally:
        if child is not None and child.poll() is None:
            child.kill()
        if sched.poll() is None:
            os.killpg(sched.pid, signal.SIGKILL)


@pytest.mark.slow  # make test took 532-544 s on a fresh clone on 2026-11-29: in make test-slow (5.4 s the tcp case)
@pytest.mark.parametrize("scheme", ["tcp", "tls"])
def test_cli_on_a_silent_listener_or_tls_without_settings_prints_one_line(scheme, tmp_path):
    """A listener that accepts and never answers (tcp://), or a tls://
    address without TLS settings: the command's whole stderr is one line
    (no "Exception ignored in Client.__del__" traceback 20 s later)."""
    import os
    import socket
    import subprocess
    import sys

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)  # accepted by the kernel, never answered
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DASK_", "INFOCLUST_"))}
        env.update(INFOCLUST_CONNECT_TIMEOUT="2", INFOCLUST_STORAGE=str(tmp_path / "storage"))
        from infoclust_dask import write_dataset

        write_dataset(tmp_path / "x.zarr", np.random.default_rng(0).normal(size=(40, 2)))
        address = f"{scheme}://127.0.0.1:{srv.getsockname()[1]}"
        r = subprocess.run([sys.executable, "-m", "infoclust_dask.cli", "fit", "kmeans", "x.zarr", "-k", "2",
                            "--scheduler", address], capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=120)
    finally:
        srv.close()
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    said = "gave no dask handshake" if scheme == "tcp" else "it uses TLS, but this process has no TLS settings"
    assert said in lines[0] and address in lines[0], lines[0]
