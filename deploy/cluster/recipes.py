"""Cluster recipes to copy: a ``distributed.Client`` on Slurm or PBS
(dask-jobqueue, a shared disk), on Kubernetes (dask-kubernetes' operator) or
on Coiled (a bucket, no shared disk), with the worker settings this project
needs. Every recipe passes the same :func:`worker_env` to its workers:

- one BLAS / OpenMP thread per worker thread (``OMP_NUM_THREADS`` and
  friends): the kernels are single-threaded per block and dask runs one
  task per thread - more BLAS threads only oversubscribe the cores;
- ``NUMBA_CACHE_DIR`` in a folder the worker can write (the compiled
  kernels cache their machine code there; an image whose site-packages is
  read-only, or a container running as another user, cannot cache beside
  the package);
- for an S3-protocol store outside AWS, the endpoint
  (``FSSPEC_S3_ENDPOINT_URL``), copied from this process's environment;
- the BLAS's and numpy's kernel choices set in this process's environment
  (:data:`KERNEL_CHOICES`: ``OPENBLAS_CORETYPE``, ...): a worker without
  them picks its own kernels by the CPU, which may round otherwise (a
  machine image that sets ``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 CPU:
  workers started without it took OpenBLAS' SkylakeX kernels, and
  K-means' centres came out 1e-15 apart from the client's).

Credentials are never in :func:`worker_env`: give them the platform's way
(an IAM role / workload identity, a Kubernetes secret mounted as
``AWS_*`` variables, Coiled's forwarded credentials) so that they are in no
task graph, flow parameter or log. ``tests/test_deploy_recipes.py`` checks
the environment, starts :func:`local` with it and fits a store through it,
and checks that every recipe names its missing package.

    from recipes import slurm                       # this file, copied next to your flow
    client = slurm(n_workers=8, memory="8GB", storage="/shared/infoclust")
    KMeans(10, scheduler=client).fit("/shared/infoclust/datasets/letter.zarr")

In a Prefect work pool, put the same variables in the pool's job variables
(``env``), plus ``DASK_SCHEDULER_ADDRESS`` when the cluster outlives the
flow run, and ``INFOCLUST_STORAGE`` (a shared path or ``s3://bucket/prefix``)
for the run folders.
"""

from __future__ import annotations

import os

#: the endpoint variables copied from this process to the workers (never keys or tokens)
PASSED_THROUGH = ("FSSPEC_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "AWS_REGION",
                  "INFOCLUST_STORAGE")


#: the variables that choose the BLAS's and numpy's kernels, copied from this process to the workers when set: the
#: same kernels round the same way (docs/conventions.md, the same answer everywhere)
KERNEL_CHOICES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS",
                  "NPY_DISABLE_CPU_FEATURES", "NPY_ENABLE_CPU_FEATURES")


def worker_env(numba_cache: str = "/tmp/infoclust-numba-cache") -> dict[str, str]:
    """The environment every dask worker of this project needs (module notes)."""
    env = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                  "NUMBA_NUM_THREADS")}
    env["NUMBA_CACHE_DIR"] = numba_cache
    env.update({k: os.environ[k] for k in PASSED_THROUGH + KERNEL_CHOICES if os.environ.get(k)})
    return env


def _need(module: str, package: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"This recipe needs {package}: pip install {package}") from None


def local(n_workers: int = 2, memory: str = "2GB", local_directory: str | None = None):
    """A LocalCluster on 127.0.0.1 with :func:`worker_env` (one machine; how
    the recipes below are tested)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, memory_limit=memory, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0", env=worker_env(), local_directory=local_directory)
    return Client(cluster)


def slurm(n_workers: int = 4, cores: int = 1, memory: str = "4GB", queue: str | None = None,
          storage: str | None = None, walltime: str = "02:00:00"):
    """Workers as Slurm jobs (dask-jobqueue). The stores and run folders sit
    on the shared disk every node mounts at the same path (``storage``)."""
    return _jobqueue("SLURMCluster", n_workers, cores, memory, queue, storage, walltime)


def pbs(n_workers: int = 4, cores: int = 1, memory: str = "4GB", queue: str | None = None,
        storage: str | None = None, walltime: str = "02:00:00"):
    """Workers as PBS jobs (dask-jobqueue); as :func:`slurm`."""
    return _jobqueue("PBSCluster", n_workers, cores, memory, queue, storage, walltime)


def _jobqueue(kind: str, n_workers: int, cores: int, memory: str, queue: str | None, storage: str | None,
              walltime: str):
    """A dask-jobqueue cluster of ``kind`` whose job scripts export :func:`worker_env`."""
    jq = _need("dask_jobqueue", "dask-jobqueue")
    from distributed import Client

    env = worker_env()
    if storage:
        env["INFOCLUST_STORAGE"] = storage
    cluster = getattr(jq, kind)(cores=cores, processes=cores, memory=memory, queue=queue, walltime=walltime,
                                job_script_prologue=[f"export {k}={v}" for k, v in env.items()])
    cluster.scale(n_workers)
    return Client(cluster)


def kubernetes(n_workers: int = 4, image: str = "infoclust:latest", memory: str = "4G",
               credentials_secret: str | None = "infoclust-s3"):
    """Workers as pods (dask-kubernetes' operator). No shared disk: the
    stores and run folders live in a bucket; ``credentials_secret`` is a
    Kubernetes secret whose keys (``AWS_ACCESS_KEY_ID``, ...) become the
    workers' environment, so the keys never pass through this process."""
    ko = _need("dask_kubernetes.operator", "dask-kubernetes")
    from distributed import Client

    spec = ko.make_cluster_spec(name="infoclust", image=image, n_workers=n_workers, env=worker_env(),
                                resources={"requests": {"memory": memory}, "limits": {"memory": memory}})
    if credentials_secret:  # envFrom: the secret's keys become variables of the worker container
        for container in spec["spec"]["worker"]["spec"]["containers"]:
            container.setdefault("envFrom", []).append({"secretRef": {"name": credentials_secret}})
    cluster = ko.KubeCluster(custom_cluster_spec=spec)
    return Client(cluster)


def coiled(n_workers: int = 4, worker_memory: str = "8GiB", region: str | None = None):
    """Workers on Coiled (a bucket, no shared disk). Coiled forwards this
    machine's cloud credentials as short-lived tokens; nothing else is sent."""
    coiled_mod = _need("coiled", "coiled")
    cluster = coiled_mod.Cluster(n_workers=n_workers, worker_memory=worker_memory, region=region,
                                 environ=worker_env())
    return cluster.get_client()
