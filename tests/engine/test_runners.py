"""The runners and the placement rule (engine/choose.py): where a fit runs
is decided once, from a named scheduler or the data's size, and every
runner gives the same results."""

import time

import dask.array as da
import numpy as np
import pytest
from helpers import CountLocalComputes, worker_info

from infoclust_dask import KMeans, SoftKMeans, engine
from infoclust_dask.engine import choose as runners


@pytest.fixture
def X():
    rng = np.random.default_rng(0)
    return np.vstack([rng.normal(c, 0.7, size=(700, 3)) for c in (0.0, 3.0, 6.0)])


def test_small_lazy_input_runs_in_this_process_without_a_graph_per_pass(X, monkeypatch):
    """Below the budget: one read of the store into memory, then the passes
    run on numpy blocks (no dask compute after the first read)."""
    monkeypatch.setenv("INFOCLUST_IN_PROCESS_BYTES", str(X.nbytes))
    lazy = da.from_array(X, chunks=500)
    with CountLocalComputes() as local:
        km = KMeans(3, random_state=0).fit(lazy)
    assert km.runner_["runner"].startswith("in-process")
    assert "fit the in-process budget" in km.runner_["reason"]
    assert local.n <= 2  # the read (and the first row for the moments' shift), not one per pass
    assert isinstance(km.labels_, da.Array)  # dask in, dask out


def test_lazy_input_above_the_budget_goes_to_the_local_cluster(X, monkeypatch, local_cluster_client):
    monkeypatch.setenv("INFOCLUST_IN_PROCESS_BYTES", str(X.nbytes - 1))
    lazy = da.from_array(X, chunks=500)
    with CountLocalComputes() as local:
        km = KMeans(3, random_state=0).fit(lazy)
    assert km.runner_["runner"].startswith("distributed") and "exceed the in-process budget" in km.runner_["reason"]
    assert local.n == 0
    ref = KMeans(3, random_state=0, scheduler="sync").fit(X)
    np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-10)


def test_numpy_input_stays_in_this_process_and_a_named_scheduler_is_honoured(X, monkeypatch):
    monkeypatch.setenv("INFOCLUST_IN_PROCESS_BYTES", "0")
    assert KMeans(3, random_state=0).fit(X).runner_["reason"].startswith("numpy input")
    km = KMeans(3, random_state=0, scheduler="sync").fit(da.from_array(X, chunks=X.shape[0]))  # one whole block
    assert km.runner_ == {"runner": "in-process (1 thread)", "reason": "scheduler='sync' named",
                          "data": "49.2 kiB of lazy input stream from the store at every pass (above the "
                                  "in-process budget of 0 bytes)"}


def test_the_budget_comes_from_the_environment_or_free_memory(monkeypatch):
    import psutil

    monkeypatch.delenv("INFOCLUST_IN_PROCESS_BYTES", raising=False)
    budget = runners.in_process_budget()
    assert 0 < budget <= min(runners.IN_PROCESS_MAX_BYTES, psutil.virtual_memory().total // 8)
    monkeypatch.setenv("INFOCLUST_IN_PROCESS_BYTES", "1e6")
    assert runners.in_process_budget() == 1_000_000
    for bad, match in (("lots", "not a number"), ("-5", ">= 0")):
        monkeypatch.setenv("INFOCLUST_IN_PROCESS_BYTES", bad)
        with pytest.raises(ValueError, match=match):
            runners.in_process_budget()


def test_the_workers_hold_lazy_input_up_to_a_quarter_of_their_memory(X, monkeypatch, local_cluster_client):
    """The distributed runner's persist budget: a quarter of the workers'
    memory limits (and of this machine's available memory, the workers
    being here), or $INFOCLUST_PERSIST_BYTES. Below it a lazy input is read
    once into the workers' memory (it no longer streams), above it streams;
    the fit is the same either way: the same seeding, the same centres in
    the same order (issue 62: streamed input used to seed on a sample)."""
    import psutil

    r = runners.Distributed(local_cluster_client)
    # pass by pass, as for data above the whole-fit budget (small lazy input would run whole on a worker)
    monkeypatch.setattr(runners.Distributed, "loop_budget", lambda self: 0)
    monkeypatch.delenv("INFOCLUST_PERSIST_BYTES", raising=False)
    limits = [w["memory_limit"] for w in worker_info(local_cluster_client).values()]
    budget = r.persist_budget()
    assert budget <= sum(limits) // 4
    assert budget >= min(sum(limits) // 4, psutil.virtual_memory().available // 4) * 0.8  # the memory moves
    lazy = da.from_array(X, chunks=500)
    assert engine.streams(lazy, scheduler=r)
    held = r.prepare(lazy)
    assert not engine.streams(held, scheduler=r)
    monkeypatch.setenv("INFOCLUST_PERSIST_BYTES", str(X.nbytes - 1))
    assert r.persist_budget() == X.nbytes - 1
    assert r.prepare(lazy) is lazy and engine.streams(r.prepare(lazy), scheduler=r)
    streamed = KMeans(3, random_state=0, scheduler=local_cluster_client).fit(lazy)
    monkeypatch.setenv("INFOCLUST_PERSIST_BYTES", str(X.nbytes))
    assert not engine.streams(r.prepare(lazy), scheduler=r)
    kept = KMeans(3, random_state=0, scheduler=local_cluster_client).fit(lazy)
    assert "stream from the store at every pass" in streamed.runner_["data"]
    assert "read once and held in the workers' memory" in kept.runner_["data"]
    assert streamed.seeding_ == kept.seeding_ == "k-means++ (4 passes)"  # the data decide, not where they live
    np.testing.assert_allclose(kept.cluster_centers_, streamed.cluster_centers_, rtol=1e-10)  # in the same order
    np.testing.assert_array_equal(*(engine.compute(m.labels_, scheduler=local_cluster_client) for m in (kept, streamed)))


@pytest.mark.parametrize("estimator", [
    lambda s: KMeans(3, random_state=0, scheduler=s),
    lambda s: SoftKMeans(3, beta=2.0, random_state=0, scheduler=s),
])
def test_every_runner_gives_the_same_fit(X, estimator, local_cluster_client):
    """sync, threads, the placed default (in-process, store read into
    memory) and a LocalCluster: the same centres to 1e-10."""
    lazy = da.from_array(X, chunks=400)
    ref = estimator("sync").fit(X).cluster_centers_
    for s, data in (("threads", X), (None, lazy), (None, X), (local_cluster_client, lazy),
                    (local_cluster_client, X)):
        got = estimator(s).fit(data).cluster_centers_
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12, err_msg=str(s))


def test_runners_answer_the_verbs_the_same_way(X, local_cluster_client):
    from infoclust_dask.kernels.stats import MOMENTS

    lazy = da.from_array(X, chunks=300)
    outs = []
    for r in (runners.InProcess(1), runners.InProcess(2), runners.Distributed(local_client := local_cluster_client)):
        assert r.workers()
        placed = r.prepare(lazy)
        if r.in_this_process():
            assert isinstance(placed, np.ndarray)  # read once, into this process
        st = engine.map_reduce(MOMENTS, placed, params={"shift": None}, scheduler=r)
        outs.append(st["s2"])
        np.testing.assert_allclose(r.compute(lazy.sum(axis=0)), X.sum(axis=0), rtol=1e-12)
        assert r.compute((1, 2)) == (1, 2)
    assert local_client is local_cluster_client
    for o in outs[1:]:
        np.testing.assert_allclose(o, outs[0], rtol=1e-10)


def test_a_pass_in_process_costs_the_kernel_plus_little(X):
    """One map_reduce over 150 rows in this process: well under a
    millisecond above the kernel (the target is ~50 us; a loose bound here,
    benchmarks/pass_overhead.py measures it)."""
    import time

    from infoclust_dask.kernels.kmeans import SOFT_KMEANS, soft_kmeans_stats

    x = X[:150]
    c = x[:3].copy()
    r = runners.InProcess()
    for _ in range(20):
        engine.map_reduce(SOFT_KMEANS, x, None, params={"centers": c, "beta": 1.0}, scheduler=r)
    n = 300
    t0 = time.perf_counter()
    for _ in range(n):
        engine.map_reduce(SOFT_KMEANS, x, None, params={"centers": c, "beta": 1.0}, scheduler=r)
    per_pass = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        soft_kmeans_stats(x, None, centers=c, beta=1.0)
    kernel = (time.perf_counter() - t0) / n
    assert per_pass - kernel < 1e-3, (per_pass, kernel)


def test_unknown_chunk_sizes_are_reported_by_the_fit_not_the_placement(X):
    lazy = da.from_array(X, chunks=500)
    lazy = lazy[lazy[:, 0] > -100]  # unknown chunk sizes
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        KMeans(3).fit(lazy)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_in_process_read_writes_each_chunk_into_its_place(dtype):
    """A lazy input read into this process: each chunk's rows land where
    they belong in one array (uneven chunks, a column-split chunking, an
    empty input), equal to computing it."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1003, 7)).astype(dtype)
    r = runners.InProcess(threads=2)
    for lazy in (da.from_array(X, chunks=(250, 7)), da.from_array(X, chunks=((1, 500, 2, 500), (3, 4))),
                 da.from_array(X[:0], chunks=(10, 7))):
        got = r.prepare(lazy, limit=1 << 30)
        assert isinstance(got, np.ndarray) and got.dtype == dtype
        np.testing.assert_array_equal(got, lazy.compute())


@pytest.mark.parametrize("n_items", [2, 3, 17])
def test_in_process_each_keeps_order_runs_at_most_its_threads_and_raises_the_first_error(n_items):
    """``each`` on 2 threads: the calling thread and one of the pool take the
    items in turn; the results come back in the items' order, never more
    than 2 run at once (``each`` inside a fit must not oversubscribe the
    cores), and an error in an item is raised in the caller after the
    others stopped taking items."""
    import threading
    import time

    from infoclust_dask.engine.in_process import InProcess

    runner = InProcess(2)
    lock, running, peak, threads = threading.Lock(), [0], [0], set()
    other_started = threading.Event()

    def work(i):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            threads.add(threading.get_ident())
        if i == 0:  # runs until another item has started: the two run at once, on two threads
            assert other_started.wait(30)
        else:
            other_started.set()
        time.sleep(0.002)
        with lock:
            running[0] -= 1
        return i * i

    assert runner.each(work, list(range(n_items))) == [i * i for i in range(n_items)]
    assert peak[0] <= 2 and threading.get_ident() in threads and len(threads) == 2

    done = []

    def fails(i):
        if i == 1:
            raise ValueError(f"item {i} is bad")
        time.sleep(0.002)
        done.append(i)
        return i

    with pytest.raises(ValueError, match="item 1 is bad"):
        runner.each(fails, list(range(n_items)))
    assert len(done) < n_items  # the items after the failure were not all run
    assert InProcess(1).each(work, [1, 2, 3]) == [1, 4, 9]


def test_entry_point_installs_the_named_runner_once_and_keeps_numpy_data_here():
    """``engine.entry_point``: the scheduler a public function is given is
    installed for its whole call (the helpers inside see it without being
    handed it); ``data_here`` arguments given as numpy run in this process,
    on threads, whatever is named; nothing named installs nothing."""
    import dask.array as da

    from infoclust_dask import engine

    seen = []

    @engine.entry_point(data_here=("x",))
    def public(x, *, scheduler=None):
        seen.append(engine.resolve_scheduler(None))  # what a helper inside asks for

    public(np.ones(3), scheduler="sync")
    assert isinstance(seen[-1], engine.InProcess) and seen[-1].threads != 1  # numpy: a thread pool, not "sync"
    public(da.ones(3, chunks=1), scheduler="sync")
    assert isinstance(seen[-1], engine.InProcess) and seen[-1].threads == 1  # lazy: the named runner
    with engine.installed("sync") as outer:
        public(da.ones(3, chunks=1))  # nothing named: the enclosing runner
        assert seen[-1] is outer

    @engine.entry_point
    def plain(*, scheduler=None):
        return engine.resolve_scheduler(None)

    assert plain(scheduler="sync").threads == 1

    with pytest.raises(TypeError, match="takes no scheduler"):
        engine.entry_point(lambda x: x)


def test_the_workers_seen_by_the_engine_never_drop_out_under_the_clients_periodic_poll(local_cluster_client):
    """``client.scheduler_info()["workers"]`` is a cache that the client's
    own poll (asking for no workers) may overwrite between its refresh and
    its return: an empty dict about once in 20 calls at a 5 ms poll here
    (the flaky whole-fit test of issue 61). The engine asks the scheduler
    directly: the workers, the whole-fit budget and the held-data budget are
    the same at every call."""
    import dask
    from distributed import Client

    with dask.config.set({"distributed.client.scheduler-info-interval": "5ms"}):
        client = Client(local_cluster_client.scheduler.address, set_as_default=False)
    try:
        r = runners.Distributed(client)
        expected = r.workers()
        assert len(expected) == 2
        seen = [r.workers() for _ in range(1500)]
        assert all(w == expected for w in seen), sum(w != expected for w in seen)
        assert min(r.loop_budget() for _ in range(300)) > 0  # never "no worker: run pass by pass"
    finally:
        client.close()


def test_every_registered_scheduler_name_makes_its_runner_and_says_why():
    """The registry of scheduler names (``choose.NAMED_RUNNERS``): each name
    and alias makes the runner of its kind, with the name in its reason;
    an unknown name is refused with the names that work."""
    for name in ("sync", "synchronous", "single-threaded", "threads", "threading", "threaded"):
        runner = runners.resolve_scheduler(name)
        assert runner.in_this_process() and "named" in runner.reason
    assert runners.resolve_scheduler("sync").parallel_blocks() == 1
    assert set(runners.NAMED_RUNNERS) >= {"sync", "threads", "local", "distributed", "localcluster"}
    with pytest.raises(ValueError, match="Unknown scheduler 'nope'.*'sync', 'threads', 'local'"):
        runners.resolve_scheduler("nope")


class _Budget(runners.InProcess):
    """A runner with a given loop budget and file visibility (the rule's inputs)."""

    def __init__(self, budget, shared):
        super().__init__(1, "test")
        self._budget, self._shared = budget, shared

    def loop_budget(self):
        return self._budget

    def files_shared(self):
        return self._shared


def test_the_whole_call_rule():
    """``choose.whole_call``: a whole fit goes to one worker only with a loop
    budget, every argument of known size, all within the budget, and a run
    folder the workers see."""
    assert runners.whole_call(_Budget(0, True), lambda: [10]) is None  # no budget: this process
    assert runners.whole_call(_Budget(100, True), lambda: [10, 20]) == (30, 100)
    assert runners.whole_call(_Budget(100, True), lambda: [60, 41]) is None  # above the budget
    assert runners.whole_call(_Budget(100, True), lambda: [10, None]) is None  # an argument that cannot travel
    assert runners.whole_call(_Budget(100, False), lambda: [10], folder_given=True) is None  # folder not seen there
    assert runners.whole_call(_Budget(100, False), lambda: [10], folder_given=True, folder_is_url=True) == (10, 100)
    assert runners.whole_call(_Budget(100, False), lambda: [10]) == (10, 100)  # no folder: nothing to see


def test_the_whole_fit_budget_comes_from_the_memory_limits_not_from_what_the_workers_hold_now(local_cluster_client):
    """``Distributed.loop_budget`` (a fit whose data are within it runs whole
    on a worker): an eighth of the smallest worker's room under its limit
    once a whole fit has loaded the estimators there, the same while a worker
    holds 400 MB more. The rule used to subtract the process memory of the
    moment: a 1 GB worker holding 600 MB for a moment sent the next fit pass
    by pass (the deployment guide in CI); here the old rule's budget drops
    while the 400 MB are held (checked)."""
    from infoclust_dask.engine.in_process import IN_PROCESS_MAX_BYTES
    from infoclust_dask.engine.pressure import WHOLE_FIT_BASE_BYTES, worker_capacity_bytes

    r = runners.Distributed(local_cluster_client)
    info = worker_info(local_cluster_client)
    limits = [w["memory_limit"] for w in info.values()]
    before = r.loop_budget()
    assert before == min(IN_PROCESS_MAX_BYTES, (int(0.6 * min(limits)) - WHOLE_FIT_BASE_BYTES) // 8) > 0
    address = next(iter(info))
    used = info[address]["metrics"]["memory"]
    held = local_cluster_client.scatter(np.ones(400 * 2**20, np.uint8), workers=[address])
    try:
        deadline = time.monotonic() + 30
        while worker_info(local_cluster_client)[address]["metrics"]["memory"] < used + 300 * 2**20:
            assert time.monotonic() < deadline, "the worker's process memory never showed the 400 MB"
            time.sleep(0.2)
        assert r.loop_budget() == before
    finally:
        del held
    # the rule's pieces: no limit counts as a large worker, a limit below the base leaves nothing
    assert worker_capacity_bytes({"memory_limit": 0, "metrics": {"memory": 10**9}}) > 2**30
    assert worker_capacity_bytes({"memory_limit": 500 * 2**20}, WHOLE_FIT_BASE_BYTES) == 0
    one_gb = {"memory_limit": 10**9, "metrics": {"memory": 600 * 2**20}}
    assert worker_capacity_bytes(one_gb, WHOLE_FIT_BASE_BYTES) == int(0.6 * 10**9) - WHOLE_FIT_BASE_BYTES
