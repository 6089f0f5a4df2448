"""The multi-host cluster (:mod:`cluster`) for ``make test-hosts``: started
once for the module that asks for it, stopped - every process by process
group, every namespace, link and the bridge removed - at its end, also when
a test fails. Skipped, with the reason, where the machine does not allow
network namespaces (not root, no iproute2)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import S3_KEYS, HostCluster  # noqa: E402
from network import unavailable  # noqa: E402


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    why = unavailable()
    if why:
        pytest.skip(f"multi-host tests: {why}")
    c = HostCluster(tmp_path_factory.mktemp("hosts")).up()
    try:
        yield c
    finally:
        c.down()


@pytest.fixture(scope="module")
def on_hosts(hosts):
    """This process as the cluster's client for the module: the bucket's
    endpoint and keys (in the environment, and in fsspec's configuration,
    which it reads at its import), the client's folder as the working folder."""
    import fsspec

    with pytest.MonkeyPatch.context() as mp:
        for k, v in {"FSSPEC_S3_ENDPOINT_URL": hosts.s3_url, "AWS_ENDPOINT_URL": hosts.s3_url, **S3_KEYS}.items():
            mp.setenv(k, v)
        mp.setitem(fsspec.config.conf.setdefault("s3", {}), "endpoint_url", hosts.s3_url)
        mp.chdir(hosts.client_dir)
        yield hosts
