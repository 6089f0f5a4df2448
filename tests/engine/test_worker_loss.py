"""Worker loss: a real `dask scheduler` and three `dask worker` processes on
127.0.0.1 (started here, stopped by PID); one worker is killed with SIGKILL
in the middle of a fit on in-memory (numpy) data, whose blocks were scattered
to the workers. The fit must end with the result of an undisturbed run (the
driver sends the lost blocks again), and a worker that joins later is used."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from distributed import Client, get_task_stream
from helpers import worker_info

from infoclust_dask import DiscriminativeClustering, KMeans
from infoclust_dask.engine.choose import Distributed
from infoclust_dask.engine.cluster_runner import SCATTER_KEY_PREFIX


@pytest.fixture
def real_cluster(tmp_path):
    sched_file = tmp_path / "scheduler.json"
    exe = str(Path(sys.executable).with_name("dask"))
    procs = [subprocess.Popen([exe, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sched_file)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]

    def worker():
        p = subprocess.Popen([exe, "worker", "--scheduler-file", str(sched_file), "--nthreads", "1", "--no-nanny",
                              "--host", "127.0.0.1", "--no-dashboard", "--memory-limit", "2GB"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        return p

    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = [worker() for _ in range(3)]
        client = Client(scheduler_file=str(sched_file), timeout=30, set_as_default=False)
        client.wait_for_workers(3, timeout=60)
        yield client, workers, worker
        client.close()
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()


def _kill_later(client, seconds, done):
    """Kill, after ``seconds``, a worker that holds scattered blocks."""
    pids = client.run(os.getpid)

    def kill():
        holder = next(w for w, keys in client.has_what().items() if any(str(k).startswith(SCATTER_KEY_PREFIX) for k in keys))
        os.kill(pids[holder], signal.SIGKILL)
        done.set()

    t = threading.Timer(seconds, kill)
    t.start()
    return t


@pytest.mark.slow  # 32 s: run by `make test-slow` in .ci/run (keeps `make test` under 8 minutes)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_kmeans_and_dc_survive_a_killed_worker_with_numpy_input(real_cluster, monkeypatch):
    client, workers, start_worker = real_cluster
    # pass by pass, its blocks scattered (data that fit one worker would run there as one task: see below)
    monkeypatch.setattr(Distributed, "loop_budget", lambda self: 0)
    rng = np.random.default_rng(0)
    n = 800_000
    lab = rng.integers(0, 8, n)
    X = rng.normal(size=(n, 8)) + 3.0 * lab[:, None] * (np.arange(8) % 3 == 0)
    km = dict(n_init=1, max_iter=25, tol=0.0, random_state=0)
    ref = KMeans(8, scheduler=client, **km).fit(X)
    t0 = time.perf_counter()
    KMeans(8, scheduler=client, **km).fit(X)
    undisturbed = time.perf_counter() - t0
    killed = threading.Event()
    _kill_later(client, undisturbed * 0.4, killed)
    got = KMeans(8, scheduler=client, **km).fit(X)
    assert killed.is_set(), "the worker was killed after the fit ended: make the fit longer"
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-10)
    assert got.n_iter_ == ref.n_iter_

    # DC: a fresh worker joins, another is killed mid-fit
    new = start_worker()
    client.wait_for_workers(3, timeout=60)
    assert len(worker_info(client)) == 3
    Xd, yd = X[:250_000], lab[:250_000] % 3
    dc = dict(sigma=1.0, max_iter=15, random_state=0)
    new_address = next(w for w, pid in client.run(os.getpid).items() if pid == new.pid)
    with get_task_stream(client) as stream:
        ref = DiscriminativeClustering(4, scheduler=client, **dc).fit(Xd, yd)
    assert any(t["worker"] == new_address for t in stream.data), "the worker that joined ran no task"
    t0 = time.perf_counter()
    DiscriminativeClustering(4, scheduler=client, **dc).fit(Xd, yd)
    undisturbed = time.perf_counter() - t0
    killed.clear()
    _kill_later(client, undisturbed * 0.4, killed)
    got = DiscriminativeClustering(4, scheduler=client, **dc).fit(Xd, yd)
    assert killed.is_set()
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-10)


@pytest.mark.slow  # ~20 s: run by `make test-slow` in .ci/run
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_whole_fit_on_a_worker_survives_that_workers_loss(real_cluster):
    """Data that fit one worker: the fit runs there as one task; killing
    that worker mid-fit makes the scheduler run the task again on another,
    with the same result."""
    client, workers, _ = real_cluster
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300_000, 8)) + 4.0 * rng.integers(0, 6, 300_000)[:, None]
    km = dict(n_init=1, max_iter=40, tol=0.0, random_state=0)
    ref = KMeans(6, scheduler="sync", **km).fit(X)
    first = KMeans(6, scheduler=client, **km).fit(X)
    assert "whole_fit_on" in first.runner_
    pids = client.run(os.getpid)
    killed = []

    stop = threading.Event()

    def kill():  # the first worker seen running the fit (polled: a timer set from the first fit's time let a
        # faster second fit finish before it fired)
        while not stop.is_set():
            busy = [w for w, tasks in client.processing().items() if any("run_on_worker" in str(t) for t in tasks)]
            if busy:
                os.kill(pids[busy[0]], signal.SIGKILL)
                killed.append(busy[0])
                return
            stop.wait(0.02)

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    try:
        got = KMeans(6, scheduler=client, **km).fit(X)
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was running the fit when the timer fired: make the fit longer"
    assert got.runner_["whole_fit_on"] != killed[0]
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=1e-10)


@pytest.mark.slow  # ~22 s: a TLS scheduler and workers of their own (make test-slow, run by .ci/run)
def test_tls_example_config_works_and_plain_clients_are_refused(tmp_path):
    """deploy/tls: certificates from make-certs.sh and the dask-tls.yaml
    settings give a scheduler and worker on 127.0.0.1 that infoclust reaches
    by tls://; a client without the certificates is refused."""
    import yaml

    root = Path(__file__).resolve().parents[2]
    certs = tmp_path / "tls"
    subprocess.run(["bash", str(root / "deploy/tls/make-certs.sh"), str(certs)], check=True, capture_output=True)
    cfg = yaml.safe_load((root / "deploy/tls/dask-tls.yaml").read_text())
    tls = cfg["distributed"]["comm"]["tls"]
    for part in ("scheduler", "worker", "client"):  # the example's paths, rooted in this test's folder
        tls[part] = {k: str(certs / Path(v).name) for k, v in tls[part].items()}
    tls["ca-file"] = str(certs / "ca.pem")
    conf_dir = tmp_path / "dask-config"
    conf_dir.mkdir()
    (conf_dir / "tls.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "DASK_CONFIG": str(conf_dir)}
    exe = str(Path(sys.executable).with_name("dask"))
    sched_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([exe, "scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        import json as _json

        address = _json.loads(sched_file.read_text())["address"]
        assert address.startswith("tls://127.0.0.1:")
        procs.append(subprocess.Popen([exe, "worker", address, "--nthreads", "1", "--host", "127.0.0.1",
                                       "--no-dashboard", "--no-nanny"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        X = np.random.default_rng(0).normal(size=(2000, 3))
        code = ("import numpy as np, sys; from infoclust_dask import KMeans; "
                "X = np.random.default_rng(0).normal(size=(2000, 3)); "
                f"m = KMeans(3, n_init=1, random_state=0, scheduler={address!r}).fit(X); "
                "print(repr(m.cluster_centers_.tolist()))")
        r = subprocess.run([sys.executable, "-c", code], env={**env, "INFOCLUST_CONNECT_TIMEOUT": "30"},
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        ref = KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(X)
        np.testing.assert_allclose(np.array(eval(r.stdout.strip())), ref.cluster_centers_, atol=1e-10)
        plain = subprocess.run([sys.executable, "-c", code], env={**os.environ, "INFOCLUST_CONNECT_TIMEOUT": "5"},
                               capture_output=True, text=True, timeout=120)
        assert plain.returncode != 0 and "Could not connect to the dask scheduler" in plain.stderr
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait()


@pytest.mark.slow  # ~30 s: three CLI processes on one cluster (make test-slow, run by .ci/run)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_three_concurrent_cli_fits_on_one_store_and_scheduler(real_cluster, tmp_path):
    """Three `infoclust fit` processes on the same store and scheduler at once
    end with the results each gets alone."""
    from infoclust_dask import write_dataset
    from infoclust_dask.runs import load_model

    client, _, _ = real_cluster
    rng = np.random.default_rng(3)
    lab = rng.integers(0, 5, 200_000)
    store = write_dataset(tmp_path / "s.zarr", rng.normal(size=(200_000, 5)) + 2.0 * lab[:, None], label=lab % 2,
                          chunks=25_000)
    address = client.scheduler.address
    runs = [("kmeans", ["-k", "5", "--n-init", "1", "--seed", "1"]), ("kmeans", ["-k", "4", "--n-init", "1", "--seed", "2"]),
            ("dc", ["-k", "3", "--sigma", "2.0", "--max-iter", "10"])]
    procs = [subprocess.Popen([sys.executable, "-m", "infoclust_dask.cli", "fit", m, str(store), *extra,
                               "--scheduler", address, "--storage", str(tmp_path / f"st{i}")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i, (m, extra) in enumerate(runs)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    from infoclust_dask import open_dataset

    ds = open_dataset(store)
    alone = [KMeans(5, n_init=1, random_state=1, scheduler=client).fit(ds["x"]),
             KMeans(4, n_init=1, random_state=2, scheduler=client).fit(ds["x"]),
             DiscriminativeClustering(3, sigma=2.0, max_iter=10, random_state=0, scheduler=client).fit(ds["x"],
                                                                                                    ds["label"])]
    for i, ref in enumerate(alone):
        got = load_model(next((tmp_path / f"st{i}" / "runs").glob("*/model.json")))
        np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-10)
