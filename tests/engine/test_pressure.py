"""The memory watch of a pass (infoclust_dask.engine.pressure) on the
workers' states as the scheduler reports them: a pause that lasts, workers
that keep leaving near their limit, KilledWorker after such deaths; and
the placement's free-memory rule."""

import pytest

from infoclust_dask.engine.pressure import (
    WORKER_BASE_BYTES,
    Watch,
    WorkerMemoryError,
    limit_to_take,
    worker_free_bytes,
    worker_room_bytes,
)

MB = 2**20


def worker(status="running", mem=300, limit=500):
    return {"status": status, "memory_limit": limit * MB, "metrics": {"memory": mem * MB}}


def test_a_pause_that_lasts_the_timeout_ends_the_pass_naming_the_worker():
    w = Watch(held=25 * MB, timeout=60)
    w.see({"a": worker(), "b": worker()}, now=0)
    w.see({"a": worker("paused", 390), "b": worker()}, now=10)
    w.see({"a": worker("paused", 390), "b": worker()}, now=69)  # 59 s paused: not yet
    w.see({"a": worker("running", 350), "b": worker()}, now=70)  # resumed: the clock starts again
    w.see({"a": worker("paused", 390), "b": worker()}, now=80)
    with pytest.raises(WorkerMemoryError) as err:
        w.see({"a": worker("paused", 390), "b": worker()}, now=140)
    msg = str(err.value)
    assert "worker a has been paused for 60 s at 390 MB of its 500 MB limit" in msg
    assert "2 workers: 500 MB memory limit each, using 390 MB and 300 MB" in msg
    assert "the fit holds 25 MB of data on the workers" in msg and "--memory-limit" in msg


def test_workers_leaving_near_their_limit_end_the_pass_and_explain_killed_worker():
    w = Watch(timeout=30)
    w.see({"a": worker(mem=470), "b": worker()}, now=0)
    w.see({"c": worker(mem=100), "b": worker()}, now=5)  # a left at 470 of 500 MB: a nanny's kill
    assert w.killed(RuntimeError("other")) is None
    w.see({"c": worker(mem=480), "b": worker()}, now=10)
    w.see({"d": worker(mem=100), "b": worker()}, now=20)  # the second death, 15 s after the first
    killed = type("KilledWorker", (Exception,), {})("task x, all those workers died")
    err = w.killed(killed)
    assert isinstance(err, WorkerMemoryError) and "2 workers left the cluster near their memory limit" in str(err)
    with pytest.raises(WorkerMemoryError, match="the last, c, at 480 MB of 500 MB"):
        w.see({"d": worker(mem=100), "b": worker()}, now=36)


def test_a_pass_cancelled_after_deaths_near_the_limit_is_a_memory_error():
    """Workers restarted by their nanny took a scattered block with them, so
    dask cancels the pass ("already forgotten") before any KilledWorker: the
    user is told about memory, not about a cancelled future (seen: a 60 000-row
    SMIC cell on a 400 MB worker, 2026-11-29). Without such deaths a
    cancellation is not a memory error."""
    cancelled = type("FutureCancelledError", (Exception,), {})("list-1 cancelled for reason: already forgotten.")
    w = Watch(timeout=60)
    w.see({"a": worker(mem=300)}, now=0)
    assert w.killed(cancelled) is None
    w.see({"b": worker(mem=290)}, now=3)  # a left at 300 of 500 MB (60 %): near its limit
    err = w.killed(cancelled)
    assert isinstance(err, WorkerMemoryError)
    assert "1 workers left the cluster near their memory limit (the last, a, at 300 MB of 500 MB" in str(err)
    assert "already forgotten" in str(err) and "To fix it: give each worker more memory" in str(err)


def test_a_worker_lost_with_room_to_spare_is_not_a_memory_error():
    w = Watch(timeout=1)
    w.see({"a": worker(mem=150), "b": worker()}, now=0)
    w.see({"b": worker()}, now=5)  # killed by someone, not near its limit
    w.see({"b": worker()}, now=50)
    assert w.killed(type("KilledWorker", (Exception,), {})()) is None


def test_free_memory_and_room_count_what_a_worker_uses():
    assert worker_free_bytes(worker(mem=100, limit=1000)) == int(0.6 * 1000 * MB) - WORKER_BASE_BYTES
    assert worker_free_bytes(worker(mem=700, limit=1000)) == 0
    assert worker_room_bytes(worker(mem=500, limit=1000)) == int(0.8 * 1000 * MB) - 500 * MB
    assert worker_free_bytes({"memory_limit": 0}) == worker_room_bytes({"memory_limit": None}) > 10**9


def test_the_limit_named_for_a_refused_task_counts_what_the_worker_holds_now():
    """The 1e7-row SMIC fit on 3 GB workers holding the store was told "a
    memory limit of at least 2.21 GiB" - below the 2.79 GiB they had - from
    the task alone plus the base. The limit named is the one at which the
    worker's room (what it uses now counted) would take the task: above
    the limit a refused worker has, and exactly enough."""
    held = worker(mem=870, limit=2861)  # 3 GB, holding its half of the store
    task = 1526 * MB
    assert worker_room_bytes(held) < task  # refused
    need = limit_to_take(held, task)
    assert need > held["memory_limit"]
    assert worker_room_bytes({**held, "memory_limit": need}) >= task
    assert worker_room_bytes({**held, "memory_limit": need - 2}) < task
    fresh = worker(mem=100, limit=2861)  # a worker below the base: the base counts
    assert limit_to_take(fresh, task) == -(-(task + WORKER_BASE_BYTES) // 0.8)
    for mem in range(0, 3000, 97):  # refused exactly when the limit named is above the worker's own
        for size in range(1, 3000, 89):
            w = worker(mem=mem, limit=1500)
            assert (worker_room_bytes(w) < size * MB) == (limit_to_take(w, size * MB) > w["memory_limit"]), (mem, size)


def test_a_task_no_worker_can_take_is_refused_naming_the_limit_that_would_do(local_cluster_client):
    """engine.check_task on a cluster: a task within a worker's room passes,
    one beyond every worker's room ends in one WorkerMemoryError naming it,
    the workers, the memory limit that would hold it and the caller's other
    fix; in this process nothing is refused (the fit's own memory is the
    machine's)."""
    from infoclust_dask import engine

    with engine.installed(local_cluster_client):
        engine.check_task(2**20, "a small task", "shrink it")
        with pytest.raises(WorkerMemoryError) as err:
            engine.check_task(2**40, "the big task", "split it")
    message = str(err.value)
    assert message.startswith("the big task needs about 1.02e+03 GiB in one task, more than any worker can take")
    assert "memory limit of at least 1.28e+03 GiB" in message and message.endswith("or split it.")
    with engine.installed("sync"):
        engine.check_task(2**50, "anything", "-")


def test_the_cluster_names_the_limit_from_what_its_workers_hold(local_cluster_client, monkeypatch):
    """The 1e7-row SMIC refusal: 3 GB workers each holding ~870 MB of the
    store, a cell task of ~1.49 GiB. The message names the limit at which
    the worker would take it - 2.92 GiB, above the 2.79 GiB they have -
    where it named 2.21 GiB (the task and the base only)."""
    from infoclust_dask import engine
    from infoclust_dask.engine import execute

    monkeypatch.setattr(execute, "_worker_info", lambda client: {"a": worker(mem=870, limit=2861),
                                                                   "b": worker(mem=900, limit=2861)})
    with engine.installed(local_cluster_client):
        with pytest.raises(WorkerMemoryError) as err:
            engine.check_task(1526 * MB, "the cell", "fewer rows")
    assert "memory limit of at least 2.92 GiB" in str(err.value), str(err.value)
