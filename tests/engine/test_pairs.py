"""The engine's block-pairs primitive running the kNN pass (SMIC's kernel (7))
against brute force, for numpy and chunked input; the SMIC toy generators of
§4.1."""

import dask
import dask.array as da
import numpy as np
import pytest

from infoclust_dask import engine
from infoclust_dask.cluster._smic import _neighbour_lists
from infoclust_dask.datasets import SMIC_TOYS, make_smic_toy
from infoclust_dask.kernels.knn import KNN


def brute_knn(X, t):
    d2 = ((X[:, None, :] - X[None]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    idx = np.argsort(d2, axis=1, kind="stable")[:, :t]
    return np.take_along_axis(d2, idx, 1), idx


@pytest.mark.parametrize("chunks", [None, 37, 500])
def test_knn_matches_brute_force(chunks, scheduler):
    X = np.random.default_rng(0).normal(size=(300, 3))
    ref_d, ref_i = brute_knn(X, 7)
    data = X if chunks is None else da.from_array(X, chunks=(chunks, 3))
    d2, idx = engine.block_pairs(KNN, data, params={"t": 7}, outputs=((np.float64, (7,)), (np.int64, (7,))),
                                 min_rows=8, scheduler=scheduler)
    assert engine.is_lazy(d2) == (chunks is not None)
    if chunks is not None:
        d2, idx = engine.compute((d2, idx), scheduler=scheduler)
    np.testing.assert_array_equal(idx, ref_i)
    np.testing.assert_allclose(d2, ref_d, rtol=1e-10, atol=1e-12)


def test_knn_errors():
    with pytest.raises(ValueError, match="t must be between 1 and n_samples - 1 = 9"):
        _neighbour_lists(np.zeros((10, 2)), 10)


def test_block_pairs_task_names_carry_the_kernel():
    X = da.from_array(np.random.default_rng(1).normal(size=(100, 2)), chunks=25)
    d2, _ = engine.block_pairs(KNN, X, params={"t": 3}, outputs=((np.float64, (3,)), (np.int64, (3,))), min_rows=4)
    prefixes = {dask.utils.key_split(k) for k in dict(d2.__dask_graph__())}
    assert "knn_block" in prefixes and "knn_block-combine" in prefixes, prefixes


@pytest.mark.parametrize("name", SMIC_TOYS)
def test_smic_toys(name):
    X, y = make_smic_toy(name, random_state=0)
    assert X.shape == (200, 2) and len(y) == 200
    np.testing.assert_allclose(X.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(X.std(0), 1, atol=1e-12)
    assert np.all(np.bincount(y) == 200 // len(np.unique(y)))
    with pytest.raises(ValueError, match="Unknown toy set"):
        make_smic_toy("moons")


def test_partition_builds_start_costliest_first(local_cluster_client):
    """``costs``: the parts' builds get dask priorities ranked by their
    costs (without costs all 0: the parts in key order), and on a cluster
    the answers are those without costs. Which worker takes which build is
    the scheduler's choice, so the order the builds start in is not
    asserted (it was, and one CI run in three saw {2, 5} start first).
    Costs of the wrong length are refused."""
    from infoclust_dask.kernels.knn import KNN_CELLS

    client = local_cluster_client
    rng = np.random.default_rng(5)
    X = rng.normal(size=(4000, 4))
    parts, t = 6, 5
    params = {"t": t, "centers": X[:parts], "groups": np.arange(parts), "radii": np.full(parts, np.inf)}
    out = ((np.float64, (t,)), (np.int64, (t,)))
    costs = [1.0, 2.0, 3.0, 4.0, 6.0, 5.0]  # the last parts the costliest: the order of the keys would start 0, 1

    def run(costs):
        data = da.from_array(X, chunks=1000)
        d2, idx = engine.partition_pairs(KNN_CELLS, data, n_parts=parts, outputs=out, params=params,
                                         build_params={"t": t, "exact_rows": 10_000}, join_params={"t": t},
                                         costs=costs, scheduler=client)
        priority = {int(name.split("-build-")[1].split("-")[0]): layer.annotations["priority"]
                    for name, layer in d2.__dask_graph__().layers.items() if "-build-" in name}
        return engine.compute((d2, idx), scheduler=client), [priority[g] for g in range(parts)]

    from distributed.diagnostics.plugin import SchedulerPlugin

    class Restrictions(SchedulerPlugin):
        """Each build's worker restrictions as it starts (the function sent to the scheduler is a copy: it
        keeps its record in the plugin, read back by name)."""

        name = "test-restrictions"

        def __init__(self, scheduler):
            self.scheduler = scheduler
            self.seen = {}

        def transition(self, key, start, finish, *args, **kwargs):
            if finish == "processing" and "-build-" in str(key):
                ts = self.scheduler.tasks[key]
                self.seen[int(str(key).split("-build-")[1].split("-")[0])] = (
                    sorted(ts.worker_restrictions or ()), bool(ts.loose_restrictions))

    def add(dask_scheduler):
        dask_scheduler.add_plugin(Restrictions(dask_scheduler), name=Restrictions.name)

    def taken(dask_scheduler):
        seen = dict(dask_scheduler.plugins[Restrictions.name].seen)
        dask_scheduler.plugins[Restrictions.name].seen.clear()
        return seen

    def remove(dask_scheduler):
        dask_scheduler.remove_plugin(name=Restrictions.name)

    client.run_on_scheduler(add)
    try:
        plain, flat = run(None)
        unplaced = client.run_on_scheduler(taken)
        got, ranks = run(costs)
        seen = client.run_on_scheduler(taken)
    finally:
        client.run_on_scheduler(remove)
    assert flat == [0] * parts
    assert ranks == [0, 1, 2, 3, 5, 4]  # the costliest part (4, cost 6.0) the highest
    # without costs the scheduler places the builds; with them each is placed by the LPT rule, loosely
    assert unplaced == {g: ([], False) for g in range(parts)}
    where = engine.pairs.placed(costs, {str(k): (int(v), 2**40) for k, v in client.nthreads().items()})
    assert len(set(where)) == 2
    assert seen == {g: ([where[g]], True) for g in range(parts)}
    np.testing.assert_array_equal(got[1], plain[1])
    np.testing.assert_array_equal(got[0], plain[0])
    with pytest.raises(ValueError, match="costs has 2 numbers; there are n_parts = 6"):
        engine.partition_pairs(KNN_CELLS, X, n_parts=parts, outputs=out, params=params, costs=[1.0, 2.0],
                               scheduler=client)


def test_placed_spreads_the_costliest_first_over_the_workers_threads():
    """:func:`~infoclust_dask.engine.pairs.placed` (longest processing time
    first, Graham 1969) against the schedule worked by hand, ties to the
    first part and the first address; nothing placed with one worker."""
    from infoclust_dask.engine.pairs import placed

    # the 2e6-row SMIC search's cells: two of twice the rows; each worker gets one of them and three others
    costs = [8.5, 8.5, 8.5, 17.0, 8.5, 17.0, 8.5, 8.5]
    big = 2**40
    slots = {"tcp://b:2": (1, big), "tcp://a:1": (1, big)}
    where = placed(costs, slots)
    assert where == ["tcp://a:1", "tcp://b:2", "tcp://a:1", "tcp://a:1", "tcp://b:2", "tcp://b:2",
                     "tcp://a:1", "tcp://b:2"]
    for w in slots:
        assert sum(c for c, p in zip(costs, where) if p == w) == 42.5
    # a worker of 3 threads takes 3 of 4 equal parts (the third a tie: 3 / 3 against 1 / 1); a negative cost is 0
    assert placed([1.0, 1.0, 1.0, 1.0], {"a": (3, big), "b": (1, big)}) == ["a", "a", "a", "b"]
    assert placed([-1.0, 0.0, 2.0], {"a": (1, big), "b": (1, big)}) == ["b", "b", "a"]
    assert placed([5.0, 4.0, 3.0, 3.0, 3.0], {"a": (1, big), "b": (1, big)}) == ["a", "b", "b", "a", "b"]
    assert placed([1.0, 2.0], {"a": (4, big)}) == [None, None]
    assert placed([1.0, 2.0], {}) == [None, None]
    # room: the two large parts (800 MB) only on b, the worker of 1 GB; a part no worker has room for: the
    # scheduler's (None); the small parts then fill a first
    mb = 2**20
    assert placed([17.0, 17.0, 8.5, 8.5, 3.0], {"a": (1, 500 * mb), "b": (1, 1000 * mb)},
                  needs=[800 * mb, 800 * mb, 100 * mb, 100 * mb, 2000 * mb]) == ["b", "b", "a", "a", None]
