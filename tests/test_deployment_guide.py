"""The deployment guide as a test: ``docs/deployment.md``'s "From the
embedded default to a cluster" run as written, in a fresh project folder
(the package's ``pipelines/`` and ``deploy/`` linked in), with the services
``deploy/local/up.sh --pool infoclust-pool --memory-limit 1GB`` starts (a
Prefect server with its process worker, a dask scheduler and two workers,
each worker in its own folder; free ports on 127.0.0.1), the CLI's relative
store paths included; then ``prefect deploy`` of ``deploy/prefect.yaml``
and a run of every shipped deployment with its default parameters, each
ending Completed with its artifacts; then ``down.sh``.

About 4.5 minutes (2026-11-29: the demo on the cluster 119 s, the guide's
90-cell sweep on Letter 48 s, the nightly sweep's other 30 cells 28 s, the
weekly bootstrap's 50 AC replicates 22 s - each fit of a fold or a replicate
runs whole on a worker since issue 61; before, a round trip per pass made
them 5.5-8 min, 864 s and 676 s): ``make test-deploy`` alone; CI runs it within ``make test-slow``, started first. Each step's seconds
are printed (``pytest -s``)."""

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


def _sourced(env_sh: Path) -> dict:
    """The ``export NAME=VALUE`` lines of ``env.sh`` (what `source` sets)."""
    out = {}
    for line in env_sh.read_text().splitlines():
        if line.startswith("export "):
            k, v = line[len("export "):].split("=", 1)
            out[k] = v
    return out


@pytest.mark.slow
@pytest.mark.deploy
@pytest.mark.first  # make test-slow starts it in one process while the other runs the rest
@pytest.mark.timeout(1800)  # the whole guide: ~4.5 min on the Xeon, 1226 s in make test-slow on the 2-core EPYC
def test_the_deployment_guide_runs_as_written(tmp_path):
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
            deadline = time.monotonic() + 1800
            while True:
                fr = json.loads(urllib.request.urlopen(f"{api}/flow_runs/{flow_run}", timeout=30).read())  # noqa: S310
                if fr["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") or time.monotonic() > deadline:
                    break
                time.sleep(3)
            log = Path(next(p["log"] for p in state["processes"] if p["name"] == "prefect-worker")).read_text()
            assert fr["state_type"] == "COMPLETED", f"{name}: {fr['state_type']}\n{log[-4000:]}"
            arts = _api(api, "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run]}}})
            assert arts, f"{name} published no artifact"
            print(f"[deployment guide] {time.monotonic() - t0:7.1f} s  deployment {name}", flush=True)
    finally:
        r = subprocess.run(["deploy/local/down.sh"], capture_output=True, text=True, env=env, cwd=project, timeout=120)
    assert r.returncode == 0 and "dask-worker-0" in r.stdout and "prefect-worker" in r.stdout, r.stdout + r.stderr
