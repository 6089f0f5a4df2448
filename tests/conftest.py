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

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def local_cluster_client():
    """The engine's on-demand LocalCluster (2 worker processes on 127.0.0.1),
    stopped at the end of the session."""
    from infoclust_dask import _scheduler

    client = _scheduler.local_client()
    yield client
    _scheduler.close_local_client()


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
