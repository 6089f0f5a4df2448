"""The cluster of docs/deployment.md on hosts of its own (:mod:`network`):
a dask scheduler, an S3-protocol server (moto's) holding a bucket, and
dask workers - each on its own host, the workers with a memory limit, in
folders of their own, without the client's folder, under
``deploy/local/services.py``'s supervisor (a worker that ends comes back),
the scheduler with the deployment's worker timeout - and the client in
this process on the bridge's address."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from network import Hosts

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "infoclust"
S3_PORT = 9000
SCHEDULER_PORT = 8786
#: moto accepts any key; these name the test server's and nothing else
S3_KEYS = {"AWS_ACCESS_KEY_ID": "infoclust-hosts", "AWS_SECRET_ACCESS_KEY": "infoclust-hosts-secret",
           "AWS_DEFAULT_REGION": "us-east-1"}


def _script(name: str, *parts: str):
    """A file of ``deploy/`` (a script or a file to copy, not part of the package) as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT.joinpath("deploy", *parts))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def services():
    """``deploy/local/services.py`` as a module."""
    return _script("local_services", "local", "services.py")


def _recipes():
    """``deploy/cluster/recipes.py`` as a module."""
    return _script("cluster_recipes", "cluster", "recipes.py")


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _wait(check, what: str, timeout: float, log: Path | None = None) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if check():
                return time.monotonic() - t0
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.3)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise TimeoutError(f"{what} not ready after {timeout:.0f} s{': ' + tail if tail else ''}")


class HostCluster:
    """Start with :meth:`up`, stop with :meth:`down` (also on failure)."""

    def __init__(self, base: Path, n_workers: int = 3, memory_limit: str = "600MB") -> None:
        self.base = Path(base)
        self.client_dir = self.base / "client"
        self.client_dir.mkdir(parents=True, exist_ok=True)
        self.n_workers = n_workers
        self.memory_limit = memory_limit
        self.net = Hosts()
        self.workers: list[str] = []

    def env(self, home: Path) -> dict:
        """A host's environment: nothing of the client's but PATH, the
        deployment's worker settings (one BLAS thread; the BLAS's and
        numpy's kernel choices of the machine's image, as
        ``deploy/cluster/recipes.py::KERNEL_CHOICES`` passes them: this
        machine's sets ``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 CPU, and
        workers without it took other kernels and rounded K-means' centres
        otherwise) and the endpoint and keys of the object store."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", **S3_KEYS,
               "FSSPEC_S3_ENDPOINT_URL": self.s3_url, "AWS_ENDPOINT_URL": self.s3_url}
        env.update({k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                      "NUMBA_NUM_THREADS")})
        if os.environ.get("NUMBA_CACHE_DIR"):
            env["NUMBA_CACHE_DIR"] = os.environ["NUMBA_CACHE_DIR"]
        env.update({k: os.environ[k] for k in _recipes().KERNEL_CHOICES if os.environ.get(k)})
        return env

    def up(self, timeout: float = 120.0) -> HostCluster:
        try:
            self._up(timeout)
        except BaseException:
            self.down()
            raise
        return self

    def _up(self, timeout: float) -> None:
        net, svc = self.net, services()
        s3 = net.add("s3")
        self.s3_url = f"http://{s3}:{S3_PORT}"
        home = self.base / "s3"
        home.mkdir(exist_ok=True)
        log = home / "s3-server.log"
        net.start("s3", [sys.executable, "-m", "moto.server", "-H", s3, "-p", str(S3_PORT)], log=log, cwd=home,
                  env=self.env(home))
        _wait(lambda: socket.create_connection((s3, S3_PORT), 0.5).close() is None, "S3 server", timeout, log)
        with urllib.request.urlopen(urllib.request.Request(f"{self.s3_url}/{BUCKET}", method="PUT"), timeout=10):
            pass
        sched = net.add("sched")
        self.scheduler_address = f"tcp://{sched}:{SCHEDULER_PORT}"
        home = self.base / "scheduler"
        home.mkdir(exist_ok=True)
        self.scheduler_log = home / "dask-scheduler.log"
        net.start("sched", [_bin("dask"), "scheduler", "--host", sched, "--port", str(SCHEDULER_PORT),
                            "--dashboard-address", f"{sched}:0", "--no-show"], log=self.scheduler_log, cwd=home,
                  env={**self.env(home), **svc.SCHEDULER_ENV})
        _wait(lambda: socket.create_connection((sched, SCHEDULER_PORT), 0.5).close() is None, "dask scheduler",
              timeout, self.scheduler_log)
        for i in range(1, self.n_workers + 1):
            name = f"w{i}"
            address = net.add(name)
            home = self.base / f"worker-{i}"
            home.mkdir(exist_ok=True)
            cmd = svc.supervised(name, [_bin("dask"), "worker", self.scheduler_address, "--host", address,
                                        "--nthreads", "1", "--memory-limit", self.memory_limit, "--name", name,
                                        "--dashboard-address", f"{address}:0", "--local-directory", str(home)])
            net.start(name, cmd, log=home / "dask-worker.log", cwd=home, env=self.env(home),
                      hide=(self.client_dir,))
            self.workers.append(name)
        self.wait_workers(self.n_workers, timeout)

    def start_prefect(self, pool: str, timeout: float = 180.0) -> str:
        """A Prefect server on a host of its own and a process worker for
        ``pool`` on another (without the client's folder; the cluster's
        scheduler, the bucket's endpoint and keys in its environment, as the
        work pool's job variables would set them); returns the API's URL."""
        net = self.net
        address = net.add("pfs")
        self.prefect_api = f"http://{address}:4200/api"
        home = self.base / "prefect-server"
        home.mkdir(exist_ok=True)
        penv = {**self.env(home), "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}"}
        log = home / "prefect-server.log"
        net.start("pfs", [_bin("prefect"), "server", "start", "--host", address, "--port", "4200", "--analytics-off",
                          "--no-ui"], log=log, cwd=home, env=penv)
        _wait(lambda: urllib.request.urlopen(f"{self.prefect_api}/health", timeout=2).status == 200,  # noqa: S310
              "Prefect server", timeout, log)
        made = subprocess.run([_bin("prefect"), "work-pool", "create", pool, "--type", "process"],
                              env={**os.environ, "PREFECT_API_URL": self.prefect_api}, capture_output=True, text=True,
                              timeout=120, check=False)
        assert made.returncode == 0 or "already exists" in made.stdout + made.stderr, made.stdout + made.stderr
        net.add("pfw")
        home = self.base / "prefect-worker"
        home.mkdir(exist_ok=True)
        self.prefect_worker_log = home / "prefect-worker.log"
        wenv = {**self.env(home), "PREFECT_API_URL": self.prefect_api, "PREFECT_HOME": str(home / ".prefect"),
                "DASK_SCHEDULER_ADDRESS": self.scheduler_address}
        net.start("pfw", [_bin("prefect"), "worker", "start", "--pool", pool, "--name", "hosts-worker"],
                  log=self.prefect_worker_log, cwd=home, env=wenv, hide=(self.client_dir,))
        return self.prefect_api

    def worker_log(self, name: str) -> str:
        return (self.base / f"worker-{name[1:]}" / "dask-worker.log").read_text(errors="replace")

    def n_workers_now(self) -> int:
        out = subprocess.run([sys.executable, "-c", "import sys; from distributed import Client\n"
                              "with Client(sys.argv[1], timeout='5s', set_as_default=False) as c:\n"
                              "    print(len(c.scheduler_info(n_workers=-1)['workers']))", self.scheduler_address],
                             capture_output=True, text=True, timeout=60, check=True)
        return int(out.stdout.strip().splitlines()[-1])

    def wait_workers(self, n: int, timeout: float) -> float:
        return _wait(lambda: self.n_workers_now() >= n, f"{n} dask workers", timeout, self.scheduler_log)

    def down(self) -> None:
        self.net.close()
