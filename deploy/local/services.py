"""Start and stop a real Prefect server, a real dask scheduler and dask
workers on 127.0.0.1 (never another address), and with ``--s3`` an
S3-protocol server (moto's) holding a bucket, for tests and for trying the
cluster set-up on one machine.

    python deploy/local/services.py up   [--state-dir DIR] [--workers 2] [--memory-limit 2GB] [--no-prefect]
                                         [--no-ui] [--pool infoclust-pool] [--s3 [--bucket infoclust]] [--no-dask]
    python deploy/local/services.py status [--state-dir DIR]
    python deploy/local/services.py down [--state-dir DIR]
    python deploy/local/services.py supervise --name NAME -- CMD ...   # restart CMD whenever it ends

``up`` uses fixed ports by default - the scheduler 8786, the Prefect server
4200 (``--scheduler-port``/``--prefect-port``, ``$INFOCLUST_SCHEDULER_PORT``/
``$INFOCLUST_PREFECT_PORT``; 0 picks a free one), so that after a restart the
deployments still name the right scheduler - and a free port for the S3
server (``--s3-port``). It starts each service in its own process group,
waits until the Prefect API answers ``/api/health`` and the scheduler sees
every worker, and writes ``services.json`` (PIDs, addresses, log files) and
``env.sh`` (``export DASK_SCHEDULER_ADDRESS=... PREFECT_API_URL=...``; with
``--s3`` also the endpoint - ``FSSPEC_S3_ENDPOINT_URL``, ``AWS_ENDPOINT_URL`` -,
the test server's throw-away keys and ``INFOCLUST_STORAGE=s3://BUCKET/storage``)
into the state folder (default ``storage/services``). The Prefect server
serves its UI (flow runs, logs, the artifacts the flows publish) at
``prefect_ui_url`` unless ``--no-ui``; ``--pool NAME`` also creates that
process work pool and starts a ``prefect worker`` for it, so that the
deployments' schedules run and ``down`` stops the worker too. The dask workers
started beside the S3 server read the same endpoint from their
environment. ``down`` stops them by PID
(SIGTERM to the process group, SIGKILL after a grace period). Each dask
worker runs in its own folder (``STATE/worker-N``, also its local
directory) with the memory limit given, as workers of a real cluster do:
the client's relative paths mean nothing there. Each worker runs under
``supervise``: one that ends (a worker that lost the scheduler in a network
blip closes for good) is started again; the scheduler removes a worker
silent for 60 s (:data:`SCHEDULER_ENV`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HOST = "127.0.0.1"
DEFAULT_STATE = Path(os.environ.get("INFOCLUST_STORAGE", "storage")) / "services"


#: the ports ``up`` uses unless told otherwise (flags or these environment variables): fixed, so that a
#: restart keeps the addresses the deployments were made with; 0 picks a free port (the tests' choice)
DEFAULT_PORTS = {"scheduler": ("INFOCLUST_SCHEDULER_PORT", 8786), "prefect": ("INFOCLUST_PREFECT_PORT", 4200),
                 "s3": ("INFOCLUST_S3_PORT", 0)}


def default_port(service: str) -> int:
    env, port = DEFAULT_PORTS[service]
    return int(os.environ.get(env, port))


def _port(wanted: int | None, service: str, flag: str) -> int:
    """``wanted`` (None or 0: a free port), refused with the fix when taken."""
    if not wanted:
        return free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, int(wanted)))
        except OSError:
            env = DEFAULT_PORTS[service][0]
            raise RuntimeError(f"port {wanted} on {HOST} for the {service} is taken (another {service} running? "
                               f"`services.py status`); choose another with {flag} PORT or ${env}, or 0 for a "
                               "free one (then deploy again: the address changes).") from None
    return int(wanted)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _bin(name: str) -> str:
    """The console script ``name`` next to this interpreter (the project's venv)."""
    cand = Path(sys.executable).with_name(name)
    return str(cand) if cand.exists() else name


def _spawn(cmd, log: Path, env=None, cwd: Path | None = None) -> int:
    """Start ``cmd`` in its own process group, its output in ``log``, in the
    folder ``cwd`` (default: the log's folder)."""
    fh = open(log, "ab")  # noqa: SIM115 - the child keeps it open
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                            cwd=str(cwd or log.parent))
    fh.close()
    return proc.pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of this process counts as dead
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def _wait(check, what: str, timeout: float, pids=(), logs=()):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        for pid, log in zip(pids, logs, strict=False):
            if not _alive(pid):
                tail = Path(log).read_text(errors="replace")[-2000:] if Path(log).exists() else ""
                raise RuntimeError(f"{what}: process {pid} exited during start-up. Log {log}:\n{tail}")
        try:
            if check():
                return time.monotonic() - t0
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{what} was not healthy after {timeout:.0f} s; see the logs in {Path(logs[0]).parent}.")


def _prefect_healthy(url: str) -> bool:
    with urllib.request.urlopen(f"{url}/health", timeout=2) as r:  # noqa: S310 - 127.0.0.1 only
        return r.status == 200


_COUNT_WORKERS = ("import sys; from distributed import Client\n"
                  "with Client(sys.argv[1], timeout='3s', set_as_default=False) as c:\n"
                  "    print(len(c.scheduler_info(n_workers=-1)['workers']))")


def _n_workers(address: str) -> int:
    """The scheduler's worker count, asked from a child process with a time
    limit: a client made and closed in the caller every half second while
    polling once hung for good inside distributed's loop start-up (seen in a
    test process holding other clients)."""
    out = subprocess.run([sys.executable, "-c", _COUNT_WORKERS, address], capture_output=True, text=True,
                         timeout=30, check=True)
    return int(out.stdout.strip().splitlines()[-1])


#: moto accepts any key; these name the local test server's and nothing else
S3_TEST_KEYS = {"AWS_ACCESS_KEY_ID": "infoclust-local", "AWS_SECRET_ACCESS_KEY": "infoclust-local-secret",
                "AWS_DEFAULT_REGION": "us-east-1"}


def _port_open(port: int) -> bool:
    socket.create_connection((HOST, port), 0.5).close()
    return True


def _make_bucket(url: str, bucket: str) -> None:
    req = urllib.request.Request(f"{url}/{bucket}", method="PUT")
    with urllib.request.urlopen(req, timeout=5):  # noqa: S310 - 127.0.0.1 only
        pass


def start(state_dir=DEFAULT_STATE, *, n_workers: int = 2, memory_limit: str = "2GB", threads: int = 1,
          prefect: bool = True, timeout: float = 120.0, s3: bool = False, bucket: str = "infoclust",
          dask: bool = True, ui: bool = True, pool: str | None = None, ports: dict | None = None) -> dict:
    """Start the services; return the state dict (also written to ``services.json``).
    ``ports``: ``{"scheduler": 8786, "prefect": 4200, "s3": 0}`` (0 or
    missing: a free port)."""
    ports = ports or {}
    state_dir = Path(state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    if (state_dir / "services.json").exists():
        old = json.loads((state_dir / "services.json").read_text())
        if any(_alive(p["pid"]) for p in old["processes"]):
            raise RuntimeError(f"Services from {state_dir} are still running; run `down` first.")
    env = dict(os.environ)
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    env.pop("PREFECT_API_URL", None)
    procs: list[dict] = []
    state = {"state_dir": str(state_dir), "processes": procs}
    s3_env: dict = {}
    try:
        if s3:
            port = _port(ports.get("s3"), "s3", "--s3-port")
            log = state_dir / "s3-server.log"
            pid = _spawn([sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)], log, env)
            procs.append({"name": "s3-server", "pid": pid, "log": str(log)})
            url = f"http://{HOST}:{port}"
            _wait(lambda: _port_open(port), "S3 server", timeout, [pid], [str(log)])
            _make_bucket(url, bucket)
            s3_env = {"FSSPEC_S3_ENDPOINT_URL": url, "AWS_ENDPOINT_URL": url, **S3_TEST_KEYS,
                      "INFOCLUST_STORAGE": f"s3://{bucket}/storage"}
            env.update(s3_env)  # the workers below read the bucket through the same endpoint
            state["s3_endpoint_url"] = url
            state["storage"] = s3_env["INFOCLUST_STORAGE"]
        if prefect:
            port = _port(ports.get("prefect"), "prefect", "--prefect-port")
            home = state_dir / "prefect-home"
            home.mkdir(exist_ok=True)
            penv = {**env, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                    "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}"}
            log = state_dir / "prefect-server.log"
            pid = _spawn([_bin("prefect"), "server", "start", "--host", HOST, "--port", str(port),
                          "--analytics-off"] + ([] if ui else ["--no-ui"]), log, penv)
            procs.append({"name": "prefect-server", "pid": pid, "log": str(log)})
            state["prefect_api_url"] = f"http://{HOST}:{port}/api"
            if ui:
                state["prefect_ui_url"] = f"http://{HOST}:{port}"
        if not dask:
            raise _Done
        sport = _port(ports.get("scheduler"), "scheduler", "--scheduler-port")
        log = state_dir / "dask-scheduler.log"
        pid = _spawn([_bin("dask"), "scheduler", "--host", HOST, "--port", str(sport),
                      "--dashboard-address", f"{HOST}:0", "--no-show"], log, {**env, **SCHEDULER_ENV})
        procs.append({"name": "dask-scheduler", "pid": pid, "log": str(log)})
        address = f"tcp://{HOST}:{sport}"
        state["scheduler_address"] = address
        _wait(lambda: _n_workers(address) >= 0, "dask scheduler", timeout, [pid], [str(log)])
        for i in range(n_workers):
            log = state_dir / f"dask-worker-{i}.log"
            home = state_dir / f"worker-{i}"  # each worker in its own folder, as on a real cluster
            home.mkdir(exist_ok=True)
            # supervised: a worker that lost the scheduler (a network blip) ends, nanny and all; it comes back
            wpid = _spawn(supervised(f"worker-{i}", [_bin("dask"), "worker", address, "--host", HOST, "--nthreads",
                                                      str(threads), "--memory-limit", memory_limit,
                                                      "--dashboard-address", f"{HOST}:0", "--name", f"worker-{i}",
                                                      "--local-directory", str(home)]), log, env, cwd=home)
            procs.append({"name": f"dask-worker-{i}", "pid": wpid, "log": str(log)})
        state["startup_seconds"] = {}
        state["startup_seconds"]["dask"] = round(_wait(
            lambda: _n_workers(address) >= n_workers, f"{n_workers} dask workers", timeout,
            [p["pid"] for p in procs if p["name"].startswith("dask")],
            [p["log"] for p in procs if p["name"].startswith("dask")]), 1)
        raise _Done
    except _Done:
        pass
    except BaseException:
        stop_processes(procs)
        raise
    try:  # the server started first; its health is checked last (it takes longest)
        if prefect:
            server = next(p for p in procs if p["name"] == "prefect-server")
            state.setdefault("startup_seconds", {})["prefect"] = round(_wait(
                lambda: _prefect_healthy(state["prefect_api_url"]), "prefect server", timeout,
                [server["pid"]], [server["log"]]), 1)
            if pool:
                procs.append(_start_prefect_worker(pool, state, penv, state_dir, timeout))
    except BaseException:
        stop_processes(procs)
        raise
    (state_dir / "services.json").write_text(json.dumps(state, indent=1))
    exports = [f"export DASK_SCHEDULER_ADDRESS={state['scheduler_address']}"] if dask else []
    if prefect:
        exports.append(f"export PREFECT_API_URL={state['prefect_api_url']}")
    exports += [f"export {k}={v}" for k, v in s3_env.items()]
    (state_dir / "env.sh").write_text("\n".join(exports) + "\n")
    return state


def _start_prefect_worker(pool: str, state: dict, penv: dict, state_dir: Path, timeout: float) -> dict:
    """Create the process work pool ``pool`` (if missing) on the server just
    started and start a ``prefect worker`` polling it."""
    wenv = {**penv, "PREFECT_API_URL": state["prefect_api_url"]}
    made = subprocess.run([_bin("prefect"), "work-pool", "create", pool, "--type", "process"], env=wenv,
                          capture_output=True, text=True, timeout=timeout, check=False)
    if made.returncode != 0 and "already exists" not in made.stdout + made.stderr:
        raise RuntimeError(f"could not create the work pool {pool!r}:\n{made.stdout}{made.stderr}")
    log = state_dir / "prefect-worker.log"
    pid = _spawn([_bin("prefect"), "worker", "start", "--pool", pool, "--name", f"{pool}-local"], log, wenv)
    state["prefect_pool"] = pool
    return {"name": "prefect-worker", "pid": pid, "log": str(log)}


#: the scheduler's settings for workers that go silent (docs/deployment.md, "When the network fails"): a worker
#: whose heartbeats stop for 60 s is removed and its tasks run elsewhere (distributed's default: 5 minutes)
SCHEDULER_ENV = {"DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL": "60s"}

#: a supervised command that ran at least this long is restarted after the shortest pause again
SUPERVISE_STABLE = 60.0
#: pauses before a restart: the first, and the longest (doubling while the command keeps ending early)
SUPERVISE_PAUSES = (1.0, 30.0)


def supervised(name: str, cmd: list[str]) -> list[str]:
    """``cmd`` run under :func:`supervise` (this script's ``supervise``
    action), restarted whenever it ends until it is stopped."""
    return [sys.executable, str(Path(__file__).resolve()), "supervise", "--name", name, "--", *cmd]


def supervise(name: str, cmd: list[str]) -> int:
    """Run ``cmd`` and start it again whenever it ends - a dask worker whose
    connection to the scheduler broke (a network blip) closes, nanny and
    all, and would leave the cluster one worker short for good - after a
    pause of 1 s, doubling to 30 s while it keeps ending within 60 s of its
    start. SIGTERM or SIGINT stop the command (SIGTERM, then SIGKILL after
    15 s) and end the supervision with its exit code. One line per restart
    on stdout (the service's log). ``docker compose``'s and Kubernetes'
    restart policies do the same for the recipes in deploy/cluster."""
    stopping = []

    def stop(signum, _frame):
        stopping.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    child = None
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    pause = SUPERVISE_PAUSES[0]
    while True:
        started = time.monotonic()
        child = subprocess.Popen(cmd)
        while True:
            try:
                code = child.wait(timeout=15.0 if stopping else None)
                break
            except subprocess.TimeoutExpired:
                child.kill()
        if stopping:
            return code
        ran = time.monotonic() - started
        pause = SUPERVISE_PAUSES[0] if ran >= SUPERVISE_STABLE else min(2 * pause, SUPERVISE_PAUSES[1])
        print(f"supervise: {name} ended with exit code {code} after {ran:.0f} s; starting it again in {pause:.0f} s",
              flush=True)
        deadline = time.monotonic() + pause
        while time.monotonic() < deadline and not stopping:
            time.sleep(0.2)
        if stopping:
            return code


class _Done(Exception):
    """The processes asked for are started."""


def stop_processes(procs, grace: float = 15.0) -> list[str]:
    """SIGTERM each process group (workers first, server last), then SIGKILL
    what is still alive after ``grace`` seconds. Returns what was stopped."""
    order = sorted(procs, key=lambda p: (p["name"] == "prefect-server", p["name"] == "dask-scheduler"))
    stopped = []
    for p in order:
        if _alive(p["pid"]):
            try:
                os.killpg(p["pid"], signal.SIGTERM)
            except ProcessLookupError:
                continue
            stopped.append(f"{p['name']} (pid {p['pid']})")
    t0 = time.monotonic()
    while any(_alive(p["pid"]) for p in order) and time.monotonic() - t0 < grace:
        time.sleep(0.2)
    for p in order:
        if _alive(p["pid"]):
            try:
                os.killpg(p["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
    t0 = time.monotonic()  # a killed process is gone only once the kernel (and its parent) let it go
    while any(_alive(p["pid"]) for p in order) and time.monotonic() - t0 < 10.0:
        time.sleep(0.1)
    return stopped


def stop(state_dir=DEFAULT_STATE, *, grace: float = 15.0) -> list[str]:
    """Stop the services recorded in ``state_dir/services.json`` by PID
    (SIGTERM, then SIGKILL after ``grace`` seconds)."""
    f = Path(state_dir) / "services.json"
    if not f.exists():
        return []
    state = json.loads(f.read_text())
    stopped = stop_processes(state["processes"], grace=grace)
    f.unlink()
    (Path(state_dir) / "env.sh").unlink(missing_ok=True)
    return stopped


def status(state_dir=DEFAULT_STATE) -> dict:
    f = Path(state_dir) / "services.json"
    if not f.exists():
        return {"running": False}
    state = json.loads(f.read_text())
    state["alive"] = {p["name"]: _alive(p["pid"]) for p in state["processes"]}
    return state


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["supervise"]:  # supervise --name NAME -- CMD ...
        sp = argparse.ArgumentParser(prog="services.py supervise", description=supervise.__doc__.splitlines()[0])
        sp.add_argument("--name", default="service")
        sp.add_argument("cmd", nargs=argparse.REMAINDER)
        a = sp.parse_args(argv[1:])
        cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
        if not cmd:
            sp.error("give the command to supervise after --")
        raise SystemExit(supervise(a.name, cmd))
    p = argparse.ArgumentParser(description="Local Prefect server + dask scheduler/workers on 127.0.0.1")
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--state-dir", default=str(DEFAULT_STATE))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default="2GB")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-prefect", action="store_true", help="only the dask scheduler and workers")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--s3", action="store_true", help="also an S3-protocol server (moto) with a bucket")
    p.add_argument("--bucket", default="infoclust", help="the bucket --s3 creates (default: infoclust)")
    p.add_argument("--no-dask", action="store_true", help="no dask scheduler or workers")
    p.add_argument("--no-ui", action="store_true", help="start the Prefect server without its web UI")
    p.add_argument("--pool", default=None, metavar="NAME",
                   help="also create this process work pool and start a prefect worker for it (stopped by down)")
    p.add_argument("--scheduler-port", type=int, default=default_port("scheduler"),
                   help="dask scheduler port (default $INFOCLUST_SCHEDULER_PORT or 8786; 0: a free port)")
    p.add_argument("--prefect-port", type=int, default=default_port("prefect"),
                   help="Prefect server port (default $INFOCLUST_PREFECT_PORT or 4200; 0: a free port)")
    p.add_argument("--s3-port", type=int, default=default_port("s3"),
                   help="S3 server port (default $INFOCLUST_S3_PORT or 0: a free port)")
    a = p.parse_args(argv)
    if a.action == "up":
        st = start(a.state_dir, n_workers=a.workers, memory_limit=a.memory_limit, threads=a.threads,
                   prefect=not a.no_prefect, timeout=a.timeout, s3=a.s3, bucket=a.bucket, dask=not a.no_dask,
                   ui=not a.no_ui, pool=a.pool,
                   ports={"scheduler": a.scheduler_port, "prefect": a.prefect_port, "s3": a.s3_port})
        print(json.dumps(st, indent=1))
        if st.get("prefect_ui_url"):
            print(f"\nPrefect UI (flow runs, logs, artifacts): {st['prefect_ui_url']}")
        print(f"\nsource {Path(a.state_dir) / 'env.sh'}   # to point flows and the CLI at these services")
    elif a.action == "down":
        stopped = stop(a.state_dir)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    else:
        print(json.dumps(status(a.state_dir), indent=1))


if __name__ == "__main__":
    main()
