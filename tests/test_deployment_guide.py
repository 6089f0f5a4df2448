"""The deployment guide as a test: ``docs/deployment.md``'s "From the
embedded default to a cluster" run as written, in a fresh project folder
(the package's ``pipelines/`` and ``deploy/`` linked in), with the services
``deploy/local/up.sh --pool infoclust-pool --memory-limit 1GB`` starts (a
Prefect server with its process worker, a dask scheduler and two workers,
each worker in its own folder; free ports on 127.0.0.1), the CLI's relative
store paths included; then ``prefect deploy`` of ``deploy/prefect.yaml``
and a run of every shipped deployment with its default parameters, each
ending Completed with its artifacts; then ``down.sh``.

About 4.5 minutes on 2026-11-29 (the demo on the cluster 119 s, the guide's
90-cell sweep on Letter 48 s, the nightly sweep's other 30 cells 28 s, the
weekly bootstrap's 50 AC replicates 22 s - each fit of a fold or a replicate
runs whole on a worker since issue 61; before, a round trip per pass made
them 5.5-8 min, 864 s and 676 s): ``make test-deploy`` alone; CI runs it within ``make test-slow``, started first. Each step's seconds
are printed (``pytest -s``). Alone on the Xeon on 2026-12-06: 406 and 461 s
(the guide's sweep 80-121 s, the demo 155-172 s, the nightly sweep 35-42 s,
the bootstrap 32-54 s). A deployment still running 26 minutes in fails with
what it was doing (:func:`_what_ran`): CI on f7dfa1d hit pytest's timeout
inside the bootstrap with nothing to go on (the nightly sweep had taken
415 s), most likely fits sent pass by pass by the old whole-fit budget
(``Distributed.loop_budget``, now from the workers' limits)."""

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DEPLOYMENTS = ["infoclust-ingest/ingest-letter", "infoclust-demo/demo", "infoclust-crossval/nightly-crossval",
               "infoclust-ac-bootstrap/weekly-ac-bootstrap", "infoclust-update/nightly-update"]


def _sh(cmd, env, cwd, timeout=1800):
    t0 = time.monotonic()
    r = subprocess.run(cmd if isinstance(cmd, list) else shlex.split(cmd), capture_output=True, text=True, env=env,
                       cwd=cwd, timeout=timeout)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    print(f"[deployment guide] {time.monotonic() - t0:7.1f} s  {cmd}", flush=True)  # where the minutes go (pytest -s)
    return r


def _api(url, path, body=None):
    req = urllib.request.Request(url + path, data=json.dumps(body or {}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:  # noqa: S310 - 127.0.0.1 only
        return json.loads(r.read())


def _what_ran(api: str, flow_run: str, state: dict, scheduler: str) -> str:
    """What a deployment that did not complete was doing: its task runs by
    state and the longest ones, the dask workers' memory and tasks now, and
    the tails of the Prefect worker's and the dask workers' logs."""
    lines = []
    try:
        runs = _api(api, "/task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run]}}, "limit": 200})
        states: dict = {}
        for r in runs:
            states[r["state_type"]] = states.get(r["state_type"], 0) + 1
        lines.append(f"task runs by state: {states}")
        for r in sorted(runs, key=lambda r: -(r.get("total_run_time") or 0))[:8]:
            lines.append(f"  {r['name']}: {r['state_type']}, {r.get('total_run_time') or 0:.0f} s")
    except OSError as e:
        lines.append(f"task runs: not read ({e})")
    try:
        from distributed import Client

        with Client(scheduler, timeout=20) as client:
            info = client.scheduler_info(n_workers=-1)["workers"]
            processing = client.processing()
        for address, w in info.items():
            lines.append(f"dask worker {w.get('name')}: {w['metrics']['memory'] / 2**20:.0f} MB of "
                         f"{w['memory_limit'] / 2**20:.0f}, status {w.get('status')}, "
                         f"processing {len(processing.get(address, ()))} tasks")
    except (OSError, TimeoutError) as e:
        lines.append(f"dask workers: not reached ({e})")
    for p in state["processes"]:
        if p["name"] == "prefect-worker" or p["name"].startswith("dask-worker"):
            lines.append(f"--- {p['name']} (last 2500 characters)\n{Path(p['log']).read_text()[-2500:]}")
    return "\n".join(lines)


def _sourced(env_sh: Path) -> dict:
    """The ``export NAME=VALUE`` lines of ``env.sh`` (what `source` sets)."""
    out = {}
    for line in env_sh.read_text().splitlines():
        if line.startswith("export "):
            k, v = line[len("export "):].split("=", 1)
            out[k] = v
    return out


#: seconds the whole guide may take (pytest's timeout; the deployments' own deadline is 4 minutes earlier)
GUIDE_TIMEOUT = 1800


@pytest.mark.slow
@pytest.mark.deploy
@pytest.mark.first  # make test-slow starts it in one process while the other runs the rest
@pytest.mark.timeout(GUIDE_TIMEOUT)  # the whole guide: 406-461 s alone on the Xeon, 1226 s in test-slow on the EPYC
def test_the_deployment_guide_runs_as_written(tmp_path):
    # a deployment still running this close to pytest's timeout fails with what the cluster was doing
    deadline = time.monotonic() + GUIDE_TIMEOUT - 240
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pipelines", "deploy"):
        (project / name).symlink_to(ROOT / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DASK_", "INFOCLUST_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", PYTHON=sys.executable,
               INFOCLUST_SCHEDULER_PORT="0", INFOCLUST_PREFECT_PORT="0",  # free ports: never a user's services
               PREFECT_HOME=str(tmp_path / "prefect-client"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    _sh("deploy/local/up.sh --pool infoclust-pool --memory-limit 1GB --no-ui", env, project, timeout=300)
    state = json.loads((project / "storage" / "services" / "services.json").read_text())
    try:
        workers = [p for p in state["processes"] if p["name"].startswith("dask-worker")]
        assert len(workers) == 2 and all(Path(p["log"]).parent == project / "storage" / "services" for p in workers)
        env.update(_sourced(project / "storage" / "services" / "env.sh"))  # source storage/services/env.sh
        api = env["PREFECT_API_URL"]
        assert api.startswith("http://127.0.0.1:") and env["DASK_SCHEDULER_ADDRESS"].startswith("tcp://127.0.0.1:")

        # the guide's commands, relative paths as written
        _sh("infoclust ingest letter storage/datasets/letter.zarr --standardize --folds 10", env, project)
        out = _sh("infoclust crossval storage/datasets/letter.zarr --method dc --grid sigma=0.5,1,2 "
                  "--grid n_clusters=2,5,10 --fold-kind stored", env, project).stdout
        sweep = json.loads(out[out.index("{\n"):])
        assert sweep["cells"] == 90 and Path(sweep["run_dir"]).is_absolute(), sweep
        env["INFOCLUST_PROJECT_DIR"] = str(project)
        _sh("prefect --no-prompt deploy --all --prefect-file deploy/prefect.yaml", env, project, timeout=600)

        # what the default parameters of nightly-update point at: a store and an inbox of new files
        rng = np.random.default_rng(0)
        (project / "storage" / "inbox" / "mine").mkdir(parents=True)
        first = project / "mine-start.csv"
        for path, n in ((first, 3000), (project / "storage" / "inbox" / "mine" / "day1.csv", 500)):
            rows = rng.normal(size=(n, 4)) + rng.integers(0, 3, (n, 1)) * 4
            path.write_text("a,b,c,d\n" + "\n".join(",".join(f"{v:.5f}" for v in r) for r in rows) + "\n")
        _sh(f"infoclust ingest {first.name} storage/datasets/mine.zarr", env, project)

        for name in DEPLOYMENTS:
            t0 = time.monotonic()
            run = _sh(f"prefect deployment run {name}", env, project, timeout=120).stdout
            flow_run = next(ln.split()[-1] for ln in run.splitlines() if "UUID" in ln)
            while True:
                fr = json.loads(urllib.request.urlopen(f"{api}/flow_runs/{flow_run}", timeout=30).read())  # noqa: S310
                if fr["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") or time.monotonic() > deadline:
                    break
                time.sleep(3)
            assert fr["state_type"] == "COMPLETED", (f"{name}: {fr['state_type']} after {time.monotonic() - t0:.0f} s\n"
                                                     + _what_ran(api, flow_run, state, env["DASK_SCHEDULER_ADDRESS"]))
            arts = _api(api, "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run]}}})
            assert arts, f"{name} published no artifact"
            print(f"[deployment guide] {time.monotonic() - t0:7.1f} s  deployment {name}", flush=True)
    finally:
        r = subprocess.run(["deploy/local/down.sh"], capture_output=True, text=True, env=env, cwd=project, timeout=120)
    assert r.returncode == 0 and "dask-worker-0" in r.stdout and "prefect-worker" in r.stdout, r.stdout + r.stderr
