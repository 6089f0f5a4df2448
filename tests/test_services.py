"""Against real services on 127.0.0.1: a `prefect server`, a `dask scheduler`
and two `dask worker` processes started by deploy/local/services.py (free
ports), stopped by PID at the end. The cross-validation CLI/flow runs
against them, and deploy/prefect.yaml is deployed to that server."""

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import local_services

ROOT = Path(__file__).resolve().parents[1]
# ~14 s, most of it starting the services (make test-slow, run by .ci/run; make test-deploy starts them too)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    svc = local_services()
    state_dir = tmp_path_factory.mktemp("services")
    state = svc.start(state_dir, n_workers=2, memory_limit="1GB", timeout=180, pool="infoclust-pool")
    pids = [p["pid"] for p in state["processes"]]
    try:
        yield state
    finally:
        # 5 s of grace: inside the whole suite (not when this module runs alone: 1.6 s) one of the five
        # outlived SIGTERM by the full 15 s, and the stop's SIGKILL is what this teardown needs
        stopped = svc.stop(state_dir, grace=5.0)
        assert len(stopped) == 5, stopped  # scheduler, 2 workers, prefect server and prefect worker
        assert not any(svc._alive(p) for p in pids)


def _env(state, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_API_URL=state["prefect_api_url"], DASK_SCHEDULER_ADDRESS=state["scheduler_address"],
               PREFECT_HOME=str(tmp_path / "prefect-client"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               INFOCLUST_STORAGE=str(tmp_path / "storage"), INFOCLUST_PROJECT_DIR=str(ROOT))
    return env


def _api(state, path, body=None):
    """POST to the server's API; a 503 (the server busy under the whole suite: its SQLite locked) is
    asked again, up to 10 times in 20 s."""
    import urllib.error

    for attempt in range(10):
        req = urllib.request.Request(state["prefect_api_url"] + path, data=json.dumps(body or {}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:  # noqa: S310 - 127.0.0.1 only
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            if exc.code != 503 or attempt == 9:
                raise
            time.sleep(2)


def _executed(client):
    """Tasks each worker has executed so far."""
    return client.run(lambda dask_worker: dask_worker.state.executed_count)


def test_services_listen_on_loopback_only(services):
    assert services["scheduler_address"].startswith("tcp://127.0.0.1:")
    assert services["prefect_api_url"].startswith("http://127.0.0.1:")
    out = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
    pids = {str(p["pid"]) for p in services["processes"]}
    mine = [ln for ln in out.splitlines() if any(f"pid={p}," in ln for p in pids)]
    assert mine and all("127.0.0.1:" in ln.split()[3] for ln in mine), mine


def test_prefect_ui_is_served_and_the_pool_has_a_worker(services):
    assert services["prefect_ui_url"] == services["prefect_api_url"].removesuffix("/api")
    with urllib.request.urlopen(services["prefect_ui_url"], timeout=30) as r:  # noqa: S310 - 127.0.0.1 only
        assert r.status == 200 and b"<!DOCTYPE html>" in r.read(200)
    worker = next(p for p in services["processes"] if p["name"] == "prefect-worker")
    assert services["prefect_pool"] == "infoclust-pool"
    pools = _api(services, "/work_pools/filter")
    assert [p["type"] for p in pools if p["name"] == "infoclust-pool"] == ["process"]
    assert worker["pid"] > 0


@pytest.mark.slow  # ~40 s: a whole sweep through the real server (make test-slow, run by .ci/run)
def test_crossval_flow_against_real_scheduler_and_server(services, tmp_path):
    from distributed import Client

    from infoclust_dask.io.ingest import ingest

    store, _ = ingest("wine", tmp_path / "wine.zarr", standardize=True, n_folds=3, chunks=60)
    with Client(services["scheduler_address"], set_as_default=False) as c:
        before = _executed(c)
    cmd = [sys.executable, "-m", "infoclust_dask.cli", "crossval", str(store), "--method", "dc",
           "--grid", "sigma=0.5,2", "--grid", "n_clusters=2,3", "--grid", "max_iter=10", "--folds", "3",
           "--fold-kind", "stored"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(services, tmp_path), cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout[r.stdout.index("{\n"):])
    assert out["cells"] == 12 and out["reused"] == 0
    run = Path(out["run_dir"])
    lines = (run / "summary.csv").read_text().splitlines()
    assert len(lines) == 5 and "score_mean" in lines[0]
    assert len((run / "cells.csv").read_text().splitlines()) == 13
    # the passes ran on the real scheduler ...
    with Client(services["scheduler_address"], set_as_default=False) as c:
        after = _executed(c)
    assert len(after) == 2 and all(after[w] > before[w] + 50 for w in after), (before, after)  # both workers
    # ... and the flow run, its 12 cell tasks and its artifact are on the real server
    flows = _api(services, "/flow_runs/filter", {"flow_runs": {"state": {"type": {"any_": ["COMPLETED"]}}}})
    assert any(f["name"] and f["state_type"] == "COMPLETED" for f in flows)
    tasks = _api(services, "/task_runs/filter", {"task_runs": {"name": {"like_": "cv-cell"}}})
    assert len(tasks) >= 12
    arts = _api(services, "/artifacts/filter", {"artifacts": {"key": {"any_": ["crossval-dc"]}}})
    assert arts and arts[0]["type"] == "table"


@pytest.mark.slow  # ~29 s, the longest call of `make test` (8-9.6 min in all): `prefect deploy` of every deployment
def test_prefect_yaml_deploys_with_nightly_schedule(services, tmp_path):
    env = _env(services, tmp_path)
    prefect = str(Path(sys.executable).with_name("prefect"))  # the work pool: made by `up --pool`
    r = subprocess.run([prefect, "--no-prompt", "deploy", "--all", "--prefect-file", "deploy/prefect.yaml"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    deps = {d["name"]: d for d in _api(services, "/deployments/filter")}
    assert {"nightly-crossval", "weekly-ac-bootstrap", "nightly-update", "ingest-letter", "demo"} <= set(deps)
    update = deps["nightly-update"]
    assert [s["schedule"].get("cron") for s in update["schedules"]] == ["30 1 * * *"]
    assert update["parameters"]["method"] == "kmeans" and update["parameters"]["params"] == {"n_clusters": 8}
    nightly = deps["nightly-crossval"]
    assert nightly["work_pool_name"] == "infoclust-pool"
    assert nightly["parameters"]["grid"]["n_clusters"] == [2, 5, 10]
    crons = [s["schedule"].get("cron") for s in nightly["schedules"]]
    assert crons == ["0 2 * * *"]
    weekly = deps["weekly-ac-bootstrap"]
    assert [s["schedule"].get("cron") for s in weekly["schedules"]] == ["0 3 * * 0"]
    assert weekly["parameters"]["n_boot"] == 50
    assert nightly["pull_steps"][0]["prefect.deployments.steps.set_working_directory"]["directory"] == str(ROOT)
    # the scheduler address comes from the deploying environment (up.sh's env.sh), not a hard-coded port
    assert nightly["job_variables"]["env"]["DASK_SCHEDULER_ADDRESS"] == services["scheduler_address"]

    # pausing and resuming the schedules, as deploy/README.md says
    def active():
        deps = {d["name"]: d for d in _api(services, "/deployments/filter")}
        return {s["active"] for name in ("nightly-crossval", "nightly-update") for s in deps[name]["schedules"]}

    for action, expected in (("pause", {False}), ("resume", {True})):
        r = subprocess.run([prefect, "--no-prompt", "deployment", "schedule", action, "--all"],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert active() == expected

    # one deployment run end to end: the worker `up --pool` started picks it up and runs it against the
    # local services. The store is already there, written by the README's own CLI ingest with the
    # deployment's options: the run keeps it instead of failing on "A store already exists".
    from infoclust_dask import open_dataset
    from infoclust_dask.io.ingest import ingest

    dest = tmp_path / "wine.zarr"
    ingest("wine", dest, standardize=True, n_folds=3, chunks=60)
    created = open_dataset(dest).attrs["provenance"]["created"]
    r = subprocess.run([prefect, "deployment", "run", "infoclust-ingest/ingest-letter", "--param", "source=wine",
                        "--param", f"dest={dest}", "--param", "n_folds=3"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    deadline = time.monotonic() + 300
    while True:
        runs = _api(services, "/flow_runs/filter", {"deployments": {"id": {"any_": [deps["ingest-letter"]["id"]]}}})
        if [fr["state_type"] for fr in runs] in (["COMPLETED"], ["FAILED"], ["CRASHED"]) or time.monotonic() > deadline:
            break
        time.sleep(2)
    worker_log = Path(next(p["log"] for p in services["processes"] if p["name"] == "prefect-worker"))
    assert [fr["state_type"] for fr in runs] == ["COMPLETED"], worker_log.read_text()[-3000:]
    ds = open_dataset(dest)
    assert ds["x"].shape == (178, 13) and ds.attrs["n_folds"] == 3
    assert ds.attrs["provenance"]["created"] == created  # kept, not rewritten


def test_flows_refuse_credential_urls_before_prefect_records_them(services, tmp_path):
    """Issue 53: a secret in a flow's URL parameter never reaches Prefect's database - neither through a
    direct call of the flow (refused before the run is created) nor through a deployment run (the
    deployment's parameter schema refuses it on the server)."""
    import urllib.error

    from infoclust_pipelines.crossval import crossval_flow

    env = _env(services, tmp_path)
    call = ("from infoclust_pipelines.crossval import crossval_flow\n"
            "crossval_flow('s3://AKIAFLOW:SECRETDIRECT@bucket/s.zarr', storage='s3://bucket/r?X-Amz-Signature=SIGDIRECT')")
    r = subprocess.run([sys.executable, "-c", call], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode != 0
    assert "carries credentials" in r.stderr and "SECRETDIRECT" not in r.stderr + r.stdout, r.stderr[-2000:]

    flow_id = _api(services, "/flows/", {"name": crossval_flow.name})["id"]
    deployment = _api(services, "/deployments/", {
        "name": "credential-check", "flow_id": flow_id, "enforce_parameter_schema": True,
        "parameter_openapi_schema": crossval_flow.parameters.model_dump()})
    refused = []
    for store in ("s3://AKIADEPLOY:SECRETDEPLOY@bucket/s.zarr", "https://h/s.zarr?X-Amz-Signature=SIGDEPLOY",
                  "s3://bucket/s.zarr?a=1&sessionToken=TOKENDEPLOY"):
        with pytest.raises(urllib.error.HTTPError) as err:
            _api(services, f"/deployments/{deployment['id']}/create_flow_run", {"parameters": {"store": store}})
        refused.append(err.value.code)
    assert set(refused) == {409}, refused
    fine = _api(services, f"/deployments/{deployment['id']}/create_flow_run",
                {"parameters": {"store": "s3://bucket/s.zarr?versionId=3"}})  # a query without credentials passes
    assert fine["parameters"]["store"] == "s3://bucket/s.zarr?versionId=3"
    recorded = json.dumps(_api(services, "/flow_runs/filter", {}))
    assert "versionId=3" in recorded
    for secret in ("SECRETDIRECT", "SIGDIRECT", "SECRETDEPLOY", "SIGDEPLOY", "TOKENDEPLOY"):
        assert secret not in recorded
