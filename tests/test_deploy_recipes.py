"""The cluster recipes users copy (deploy/cluster/recipes.py): the worker
environment (one BLAS thread, a writable numba cache, the S3 endpoint, no
credentials), a LocalCluster started with it fitting a store in a bucket,
and a clear message naming each recipe's missing package."""

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

import infoclust_dask as ic

RECIPES = Path(__file__).resolve().parents[1] / "deploy" / "cluster" / "recipes.py"


def _recipes():
    spec = importlib.util.spec_from_file_location("infoclust_recipes", RECIPES)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_worker_environment_has_one_thread_a_cache_and_the_endpoint_but_no_secret(monkeypatch):
    r = _recipes()
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-copy")
    env = r.worker_env(numba_cache="/tmp/nc")
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["NUMBA_CACHE_DIR"] == "/tmp/nc" and env["FSSPEC_S3_ENDPOINT_URL"] == "http://127.0.0.1:9"
    assert "do-not-copy" not in repr(env) and not any("SECRET" in k or "KEY" in k for k in env)


def test_the_worker_environment_carries_the_kernel_choices_set_here(monkeypatch):
    """The BLAS's and numpy's kernel choices of this process go to the
    workers when set (a worker without ``OPENBLAS_CORETYPE`` picks its own
    kernels: on this machine's image, SkylakeX's against the client's
    Haswell, and K-means' centres 1e-15 apart), and only then."""
    r = _recipes()
    for k in r.KERNEL_CHOICES:
        monkeypatch.delenv(k, raising=False)
    assert not set(r.KERNEL_CHOICES) & set(r.worker_env())
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "512")
    monkeypatch.setenv("NPY_DISABLE_CPU_FEATURES", "")
    env = r.worker_env()
    assert env["OPENBLAS_CORETYPE"] == "Haswell" and env["OPENBLAS_L2_SIZE"] == "512"
    assert "NPY_DISABLE_CPU_FEATURES" not in env  # empty: not set


@pytest.mark.parametrize("recipe, package", [("slurm", "dask-jobqueue"), ("pbs", "dask-jobqueue"),
                                             ("kubernetes", "dask-kubernetes"), ("coiled", "coiled")])
def test_each_recipe_names_its_missing_package(recipe, package):
    module = {"dask-jobqueue": "dask_jobqueue", "dask-kubernetes": "dask_kubernetes", "coiled": "coiled"}[package]
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{package} is installed here: the recipe would start real jobs")
    with pytest.raises(ImportError, match=f"pip install {package}"):
        getattr(_recipes(), recipe)()


def test_the_local_recipe_fits_a_store_in_the_bucket_with_workers_elsewhere(s3_bucket, tmp_path):
    X, _, _ = ic.datasets.make_blobs(2000, 3, centers=3, random_state=0, lazy=False)
    url = f"{s3_bucket}/r.zarr"
    ic.write_dataset(url, X, chunks=400)
    elsewhere = tmp_path / "workers"
    elsewhere.mkdir()
    client = _recipes().local(n_workers=1, memory="1GB", local_directory=str(elsewhere))
    try:
        seen = client.run(lambda: (os.environ.get("OMP_NUM_THREADS"), os.environ.get("NUMBA_CACHE_DIR"),
                                   os.environ.get("FSSPEC_S3_ENDPOINT_URL")))
        assert all(v[0] == "1" and v[1] and v[2] == os.environ["FSSPEC_S3_ENDPOINT_URL"] for v in seen.values())
        est = ic.KMeans(3, random_state=0, scheduler=client).fit(url)
    finally:
        client.cluster.close()
        client.close()
    ref = ic.KMeans(3, random_state=0, scheduler="sync").fit(X)
    np.testing.assert_allclose(est.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-10)


def test_the_recipes_heal_every_service_restarts_and_the_scheduler_drops_silent_workers():
    """Issue 64: a dask worker that loses its scheduler in a network blip
    ends for good; the compose file restarts every service, the Kubernetes
    Deployments state restartPolicy Always, and both give the scheduler the
    worker timeout deploy/local/services.py gives it (tests/hosts runs that
    one through cut links)."""
    import yaml
    from helpers import local_services

    ttl = local_services().SCHEDULER_ENV["DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL"]
    root = RECIPES.parent
    compose = yaml.safe_load((root / "docker-compose.yml").read_text())["services"]
    assert {name: svc.get("restart") for name, svc in compose.items()} == dict.fromkeys(compose, "unless-stopped")
    assert compose["dask-scheduler"]["environment"]["DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL"] == ttl
    docs = [d for d in yaml.safe_load_all((root / "kubernetes.yaml").read_text()) if d["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in docs} == {"dask-scheduler", "dask-worker"}
    for d in docs:
        assert d["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    sched = next(d for d in docs if d["metadata"]["name"] == "dask-scheduler")["spec"]["template"]["spec"]
    assert {"name": "DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL", "value": ttl} in sched["containers"][0]["env"]
