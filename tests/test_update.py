"""Model versions, the comparison of two versions, and the update flow
(append -> warm-started refit -> comparison -> a new version) over
simulated nights, one of them with a planted drift."""

import json

import numpy as np
import pytest

import infoclust_dask as ic
from infoclust_dask.io.store import open_dataset, write_dataset
from infoclust_dask.update import ModelVersions, compare_models, fixed_sample

CENTERS = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])


def _rows(n, seed, shift=None):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 4, n)
    C = CENTERS.copy()
    if shift is not None:
        C[0] += shift
    return C[z] + rng.normal(size=(n, 2)), z


def _csv(path, X):
    np.savetxt(path, X, delimiter=",", header="a,b", comments="")


def test_versions_are_numbered_kept_and_loadable(tmp_path):
    X, _ = _rows(800, 0)
    v = ModelVersions(tmp_path / "m")
    assert v.versions() == [] and v.latest() is None
    with pytest.raises(FileNotFoundError, match="No model version"):
        v.load()
    a = ic.KMeans(4, random_state=0, scheduler="sync").fit(X)
    b = ic.KMeans(4, random_state=1, scheduler="sync").fit(X[:400])
    assert v.save(a, {"note": "first"}) == 1 and v.save(b, {"note": "second"}) == 2
    assert v.versions() == [1, 2] and v.info(1)["note"] == "first"
    np.testing.assert_array_equal(v.load(1).cluster_centers_, a.cluster_centers_)
    np.testing.assert_array_equal(v.load().cluster_centers_, b.cluster_centers_)
    (tmp_path / "m" / "versions" / ".v0003.tmp-1-x").mkdir()  # a killed save: never a version
    assert v.versions() == [1, 2]


def test_compare_models_against_direct_computation(tmp_path):
    X, _ = _rows(1200, 1)
    a = ic.KMeans(4, random_state=0, scheduler="sync").fit(X)
    same = compare_models(a, a, X[:300])
    assert same["ari"] == 1.0 and max(same["drift"]) == 0.0
    b = ic.KMeans(4, random_state=0, scheduler="sync").fit(X)
    b.cluster_centers_ = b.cluster_centers_[[2, 0, 3, 1]].copy()  # the same prototypes, renumbered
    b.cluster_centers_[0] += [3.0, 4.0]  # and one of them moved by 5
    c = compare_models(a, b, X[:300], X=X)
    moved = int(np.argmax(c["drift"]))
    assert c["drift"][moved] == pytest.approx(5.0) and sorted(c["drift"])[-2] == 0.0
    P = a.cluster_centers_
    gap = min(np.linalg.norm(P[i] - P[j]) for i in range(4) for j in range(4) if i != j)
    assert c["max_relative_drift"] == pytest.approx(5.0 / gap)
    assert c["matching"][moved] == 0  # matched across the renumbering
    assert c["objective_before"] == pytest.approx(a.held_out_score(X)["score"])
    assert c["objective_after"] == pytest.approx(b.held_out_score(X)["score"])
    idx = fixed_sample(1000, 50, seed=3)
    np.testing.assert_array_equal(idx, fixed_sample(1000, 50, seed=3))
    assert idx.max() < 1000 and len(set(idx.tolist())) == 50


@pytest.mark.slow  # 5.5 s on a fresh clone: make test stays under 8 minutes (issue 63's run: 495 s)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_update_flow_over_nights_with_a_planted_drift(prefect_harness, tmp_path):
    from infoclust_pipelines.update import update_flow

    X0, _ = _rows(4000, 10)
    store = tmp_path / "s.zarr"
    write_dataset(store, X0, feature_names=["a", "b"], chunks=1000)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    model = tmp_path / "model"
    kw = {"store": str(store), "model": str(model), "inbox": str(inbox / "*.csv"), "params": {"n_clusters": 4},
          "scheduler": "sync", "sample_size": 500}
    first = update_flow(**kw)
    assert first["version"] == 1 and not first["warm_started"] and "comparison" not in first
    cold_iter = first["n_iter"]
    infos = []
    for night, shift in ((1, None), (2, None), (3, [4.0, 0.0])):  # 5 % more rows a night; night 3 moves cluster 0
        Xn, _ = _rows(200, 100 + night, shift=shift)
        _csv(inbox / f"night{night}.csv", Xn)
        infos.append(update_flow(**kw))
    assert [i["version"] for i in infos] == [2, 3, 4]
    assert [i["rows"] for i in infos] == [4200, 4400, 4600]
    assert all(i["warm_started"] and i["n_iter"] <= cold_iter for i in infos)
    quiet, planted = infos[1]["comparison"], infos[2]["comparison"]
    assert quiet["ari"] > 0.99 and planted["ari"] > 0.95
    assert planted["max_relative_drift"] > 5 * quiet["max_relative_drift"]
    assert planted["objective_before"] <= planted["objective_after"] + 1e-9
    # a rerun finds no new file: nothing appended twice
    again = update_flow(**kw)
    assert again["rows"] == 4600 and again["appended"] == []
    v = ModelVersions(model)
    assert v.versions() == [1, 2, 3, 4, 5]
    for k in v.versions():
        assert v.load(k).cluster_centers_.shape == (4, 2)
    folder = v.path(4)
    assert "ARI to the previous version" in (folder / "report.md").read_text()
    assert (folder / "drift.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((model / "appended.json").read_text())[-1]["rows"] == 200
    assert open_dataset(store).sizes["sample"] == 4600


def test_an_inbox_whose_folder_does_not_exist_is_refused(tmp_path):
    """update_flow with an inbox folder that does not exist refitted as
    usual, so a typo in the pattern went unnoticed night after night (issue
    53): refused naming the folder, before anything is appended or fitted."""
    from infoclust_pipelines.update import update_flow

    with pytest.raises(FileNotFoundError, match=r"names the folder '.*no-such-inbox', which does not exist"):
        update_flow.fn(store=str(tmp_path / "s.zarr"), model=str(tmp_path / "m"),
                       inbox=str(tmp_path / "no-such-inbox" / "*.csv"))
    assert not (tmp_path / "m").exists()


def test_an_empty_crossval_grid_is_refused():
    """crossval_flow(grid={}) swept the default grid without a word (issue 53)."""
    from infoclust_pipelines.crossval import crossval_flow

    with pytest.raises(ValueError, match=r"grid=\{\} names no parameter"):
        crossval_flow.fn("unused.zarr", grid={})


@pytest.mark.parametrize("size", [0, -5, 2.5])
def test_a_sample_size_that_is_not_a_positive_integer_is_refused(tmp_path, size):
    """update_flow(sample_size=0) ended in scikit-learn's "Found array with 0 sample(s)" after the refit
    (issue 53): refused naming the value, before anything is appended or fitted."""
    from infoclust_pipelines.update import update_flow

    with pytest.raises(ValueError, match=rf"sample_size={size!r}: .* give a positive integer"):
        update_flow.fn(store=str(tmp_path / "s.zarr"), model=str(tmp_path / "m"), sample_size=size)
    assert not (tmp_path / "m").exists()
