"""Shared fixtures: schedulers (sync, threads, a real LocalCluster), Prefect
without a server, small data sets."""

import os
import sys
import tempfile

# tests/ holds helpers.py, shared by the test modules of every sub-folder
sys.path.insert(0, os.path.dirname(__file__))

# Prefect must see its settings before it is first imported (measured: deploy/README.md).
_PREFECT_HOME = tempfile.mkdtemp(prefix="infoclust-prefect-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.pop("DASK_SCHEDULER_ADDRESS", None)


def _free_port():
    """A free port on 127.0.0.1 below the kernel's ephemeral range. The S3
    server takes it only when the first object-store test runs, minutes
    later; a port the kernel hands out for ``bind(0)`` could meanwhile go to
    a dask scheduler or worker (CI, 2026-11-29: the S3 tests' requests were
    answered in dask's protocol), while ports below the range are never
    handed out on their own."""
    import random
    import socket

    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default range starts here
    rng = random.Random(os.getpid())
    for _ in range(200):
        port = rng.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # every port tried is taken: the kernel's choice, as before
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The S3-protocol server of the object-store tests (moto, started on demand by the ``s3_server``
# fixture) listens on 127.0.0.1 only. Its address and fake credentials are in the environment before
# anything imports fsspec, so that this process, the CLI's subprocesses and the LocalCluster's worker
# processes all find them the standard way (fsspec's FSSPEC_S3_* configuration, AWS_* variables).
# once, if imported twice; each pytest-xdist worker (PYTEST_XDIST_WORKER, set before this runs) starts a server of
# its own, so each keeps a port of its own: the variable its controller set is inherited by every worker
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
_PORT_VAR = f"INFOCLUST_TEST_S3_PORT_{_XDIST_WORKER}" if _XDIST_WORKER else "INFOCLUST_TEST_S3_PORT"
S3_PORT = int(os.environ.setdefault(_PORT_VAR, str(_free_port())))
S3_SECRET = f"infoclust-test-secret-{os.getpid()}-{S3_PORT}"
os.environ["FSSPEC_S3_ENDPOINT_URL"] = f"http://127.0.0.1:{S3_PORT}"
os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{S3_PORT}"  # botocore's own setting: no request leaves 127.0.0.1
os.environ["AWS_ACCESS_KEY_ID"] = "infoclust-test-key"
os.environ["AWS_SECRET_ACCESS_KEY"] = S3_SECRET
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
for _var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
    os.environ.pop(_var, None)
if "fsspec" in sys.modules:  # a pytest plugin imported it first: fsspec reads FSSPEC_* only at import
    sys.modules["fsspec"].config.conf.setdefault("s3", {})["endpoint_url"] = os.environ["FSSPEC_S3_ENDPOINT_URL"]

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1:S3_PORT, stopped (by PID) at the end of the session."""
    import socket
    import subprocess
    import time

    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(S3_PORT)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:  # it could not listen there (another process has the port)
                raise RuntimeError(f"moto's S3 server did not start on 127.0.0.1:{S3_PORT} (exit {proc.returncode})")
            try:
                socket.create_connection(("127.0.0.1", S3_PORT), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto's S3 server did not start on 127.0.0.1:{S3_PORT}") from None
                time.sleep(0.1)
        time.sleep(0.3)
        if proc.poll() is not None:  # the connection reached another listener, and moto gave up
            raise RuntimeError(f"moto's S3 server did not start on 127.0.0.1:{S3_PORT} (exit {proc.returncode}): "
                               "another process listens there")
        yield f"http://127.0.0.1:{S3_PORT}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def s3_bucket(s3_server):
    """A new, empty bucket on the test server: ``s3://NAME``."""
    import uuid

    import fsspec

    name = f"t-{uuid.uuid4().hex[:12]}"
    fs = fsspec.filesystem("s3", endpoint_url=s3_server)
    fs.mkdir(name)
    return f"s3://{name}"


@pytest.fixture(scope="session")
def _shared_cluster():
    """Stops the engine's on-demand LocalCluster at the end of the session."""
    from infoclust_dask.engine import clients as _scheduler

    yield
    _scheduler.close_local_client()


@pytest.fixture
def local_cluster_client(_shared_cluster):
    """The engine's on-demand LocalCluster (2 worker processes on 127.0.0.1),
    shared by the session and checked before every test that uses it: its
    client running and both workers registered and running (waited for up to
    60 s); a cluster that cannot get them back is closed and started again.
    Tests that kill, restart or fill workers start clusters of their own."""
    from infoclust_dask.engine import clients as _scheduler

    client = _scheduler.local_client()  # a new one if the last was closed
    try:
        client.wait_for_workers(len(client.cluster.worker_spec), timeout=60)  # the workers it was started with
    except (OSError, TimeoutError):  # distributed's WorkerStartTimeoutError is both
        _scheduler.close_local_client()
        client = _scheduler.local_client()
        client.wait_for_workers(len(client.cluster.worker_spec), timeout=120)
    return client


@pytest.fixture(params=["sync", "threads", "distributed"])
def scheduler(request):
    """Every scheduler the engine supports."""
    if request.param == "distributed":
        return request.getfixturevalue("local_cluster_client")
    return request.param


@pytest.fixture
def blobs():
    rng = np.random.default_rng(42)
    centers = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 1.0], [0.0, 7.0, -2.0], [5.0, 5.0, 5.0]])
    lab = rng.integers(0, 4, size=2000)
    X = centers[lab] + rng.normal(size=(2000, 3))
    return X, lab, centers


@pytest.fixture(scope="session")
def prefect_harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def pytest_collection_modifyitems(config, items):
    """Tests marked ``first`` (runs of several minutes, each in a file of its
    own) are collected before the others, keeping their order: with
    pytest-xdist's ``--dist loadfile`` (the Makefile) a file goes to a
    process whole, in collection order, so the longest files start at once
    instead of leaving one process running them alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("first") is None)
