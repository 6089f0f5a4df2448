"""A fit on a distributed scheduler whose data fit one worker runs as one
task there (``cluster/_whole.py``): the same model as in this process
(1e-10), warnings raised here, the journal recorded and resumed; small lazy
input is gathered and travels in the task; data above the budget (numpy
or lazy) and this process' runners keep one pass per round trip."""

import warnings

import dask.array as da
import numpy as np
import pytest
from helpers import worker_info
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning

from infoclust_dask import DiscriminativeClustering, KMeans, SoftKMeans, write_dataset
from infoclust_dask.engine.choose import Distributed, InProcess

X, Y = load_iris(return_X_y=True)

CASES = [
    (KMeans, {"n_clusters": 3}, False),
    (SoftKMeans, {"n_clusters": 3, "beta": 10.0, "beta_schedule": "auto"}, False),
    (DiscriminativeClustering, {"n_clusters": 3, "sigma": 1.0}, True),
]


def _fit(cls, kw, with_y, **extra):
    est = cls(**kw, random_state=0, **extra)
    return est.fit(X, Y) if with_y else est.fit(X)


@pytest.mark.parametrize(("cls", "kw", "with_y"), CASES)
def test_a_small_fit_runs_whole_on_a_worker_with_the_same_result(local_cluster_client, cls, kw, with_y):
    here = _fit(cls, kw, with_y, scheduler="sync")
    there = _fit(cls, kw, with_y, scheduler=local_cluster_client)
    assert there.runner_["whole_fit_on"] in set(worker_info(local_cluster_client))
    assert "one task on worker" in there.runner_["reason"]
    assert there.scheduler is local_cluster_client  # its parameters are its own
    np.testing.assert_allclose(there.cluster_centers_, here.cluster_centers_, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(there.labels_, here.labels_)
    np.testing.assert_array_equal(there.predict(X), here.labels_)


def test_above_the_budget_each_pass_is_a_round_trip(local_cluster_client, monkeypatch):
    monkeypatch.setattr(Distributed, "loop_budget", lambda self: X.nbytes - 1)
    est = KMeans(3, random_state=0, scheduler=local_cluster_client).fit(X)
    assert "whole_fit_on" not in est.runner_
    np.testing.assert_allclose(est.cluster_centers_, KMeans(3, random_state=0, scheduler="sync").fit(X)
                               .cluster_centers_, rtol=1e-10)


@pytest.mark.parametrize(("cls", "kw", "with_y"), CASES)
def test_small_lazy_input_is_gathered_and_fits_whole_on_a_worker_with_lazy_labels(local_cluster_client, cls, kw,
                                                                                   with_y):
    """Lazy rows that fit the budget (a fold of a store, rows the workers
    hold) are computed once and travel in the task, instead of a round trip
    per pass; the fit sees them lazy, so its labels stay lazy (dask in, dask
    out)."""
    lazy_x, lazy_y = da.from_array(X, chunks=40), da.from_array(Y, chunks=40)
    here = _fit(cls, kw, with_y, scheduler="sync")
    est = cls(**kw, random_state=0, scheduler=local_cluster_client)
    there = est.fit(lazy_x, lazy_y) if with_y else est.fit(lazy_x)
    assert there.runner_["whole_fit_on"] in set(worker_info(local_cluster_client))
    assert isinstance(there.labels_, da.Array)
    np.testing.assert_allclose(there.cluster_centers_, here.cluster_centers_, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(there.labels_.compute(), here.labels_)


def test_lazy_input_above_the_budget_and_in_process_runners_stay_pass_by_pass(local_cluster_client, monkeypatch):
    monkeypatch.setattr(Distributed, "loop_budget", lambda self: X.nbytes - 1)
    est = KMeans(3, random_state=0, scheduler=local_cluster_client).fit(da.from_array(X, chunks=50))
    assert "whole_fit_on" not in est.runner_
    np.testing.assert_allclose(est.cluster_centers_, KMeans(3, random_state=0, scheduler="sync").fit(X)
                               .cluster_centers_, rtol=1e-10)
    assert InProcess(2).loop_budget() == 0
    assert "whole_fit_on" not in KMeans(3, random_state=0).fit(X).runner_


def test_a_store_path_is_opened_on_the_worker(local_cluster_client, tmp_path):
    write_dataset(tmp_path / "iris.zarr", X, label=Y)
    est = KMeans(3, random_state=0, scheduler=local_cluster_client).fit(str(tmp_path / "iris.zarr"))
    assert "whole_fit_on" in est.runner_
    ref = KMeans(3, random_state=0, scheduler="sync").fit(str(tmp_path / "iris.zarr"))
    np.testing.assert_allclose(est.cluster_centers_, ref.cluster_centers_, rtol=1e-10)
    np.testing.assert_array_equal(np.asarray(est.labels_), np.asarray(ref.labels_))


def test_warnings_of_the_worker_are_raised_here(local_cluster_client):
    est = SoftKMeans(3, beta_schedule=[0.1, 1.0], max_iter=2, random_state=0, scheduler=local_cluster_client)
    with pytest.warns(ConvergenceWarning, match="did not converge within max_iter=2"):
        est.fit(X)
    assert "whole_fit_on" in est.runner_


def test_the_journal_is_recorded_on_the_worker_and_resumes(local_cluster_client, tmp_path):
    run = tmp_path / "run"
    first = KMeans(3, random_state=0, scheduler=local_cluster_client).fit(X, checkpoint=run)
    assert "whole_fit_on" in first.runner_ and any(run.iterdir())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = KMeans(3, random_state=0, scheduler=local_cluster_client).fit(X, resume=run)
    assert again.resumed_passes_ > 0
    np.testing.assert_array_equal(again.cluster_centers_, first.cluster_centers_)


def test_a_refit_drops_the_attributes_the_new_fit_does_not_set(local_cluster_client):
    est = SoftKMeans(3, beta_schedule="auto", beta=10.0, random_state=0, scheduler=local_cluster_client).fit(X)
    assert hasattr(est, "predicted_critical_path_")
    est.set_params(beta_schedule=[0.5, 10.0]).fit(X)
    assert not hasattr(est, "predicted_critical_path_")


def test_smic_runs_pass_by_pass_above_its_own_cap_with_the_same_labels(local_cluster_client, monkeypatch):
    """SMIC's few heavy passes gain more from the cluster's threads than the
    round trips cost (``SMIC._whole_fit_max_bytes``, measured in its
    comment): above its cap the fit runs pass by pass, below it whole;
    the labels are the same either way. K-means, whose many light passes
    are round-trip bound, keeps the runner's budget for the same rows."""
    from infoclust_dask import SMIC
    from infoclust_dask.cluster._whole import whole_fit_bytes
    from infoclust_dask.engine.choose import resolve_scheduler

    here = SMIC(3, t=5, random_state=0, scheduler="sync").fit(X)
    monkeypatch.setattr(SMIC, "_whole_fit_max_bytes", X.nbytes - 1)
    passes = SMIC(3, t=5, random_state=0, scheduler=local_cluster_client).fit(X)
    assert "whole_fit_on" not in passes.runner_
    monkeypatch.setattr(SMIC, "_whole_fit_max_bytes", X.nbytes)
    whole = SMIC(3, t=5, random_state=0, scheduler=local_cluster_client).fit(X)
    assert whole.runner_["whole_fit_on"] in set(worker_info(local_cluster_client))
    for est in (passes, whole):
        np.testing.assert_array_equal(est.labels_, here.labels_)
        np.testing.assert_allclose(est.eigenvalues_, here.eigenvalues_, rtol=1e-10)
    monkeypatch.undo()
    runner = resolve_scheduler(local_cluster_client)
    rows = np.zeros((2**20 // 128 + 1, 16))  # 1 MiB and a row: above SMIC's cap, far below the budget
    assert whole_fit_bytes(runner, rows, (), {}, None, SMIC._whole_fit_max_bytes) is None
    assert whole_fit_bytes(runner, rows, (), {}, None, KMeans._whole_fit_max_bytes) == (rows.nbytes,
                                                                                        runner.loop_budget())
    assert whole_fit_bytes(runner, rows[:-1], (), {}, None, SMIC._whole_fit_max_bytes) == (rows[:-1].nbytes,
                                                                                           2**20)
