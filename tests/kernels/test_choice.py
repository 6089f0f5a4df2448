"""Kernel paths chosen by measurement where they run (issue 63,
:mod:`infoclust_dask.kernels._choice`)."""

import threading
import time

import numpy as np
import pytest

from infoclust_dask.kernels import _choice, _compiled


@pytest.fixture(autouse=True)
def _fresh():
    _choice.forget()
    yield
    _choice.forget()


def test_the_faster_path_is_chosen_after_each_has_been_timed():
    """Each candidate runs once untimed (its first call may compile), then
    TIMED times; from then on the one with the least time per row runs every
    call of that class, and the report holds both figures."""
    calls = []

    def run(path):
        calls.append(path)
        time.sleep(0.004 if path == "slow" else 0.0005)
        return path

    key = ("test", "<f8", 4, 2)
    outs = [_choice.choose(key, ("slow", "fast"), 1000, run) for _ in range(12)]
    measuring = 2 * (1 + _choice.TIMED)
    assert sorted(calls[:measuring]) == ["fast"] * (measuring // 2) + ["slow"] * (measuring // 2)
    assert outs == calls and set(calls[measuring:]) == {"fast"}
    got = _choice.report("test")[key]
    assert got["path"] == "fast" and got["ns_per_row"]["slow"] > got["ns_per_row"]["fast"] > 0
    assert _choice.report("other") == {}


def test_one_candidate_is_never_timed_and_classes_are_separate():
    key_a, key_b = ("test", "<f4", 8, 3), ("test", "<f4", 9, 3)
    assert _choice.choose(key_a, ("only",), 10, lambda p: p) == "only"
    assert _choice.report() == {}
    for _ in range(2 * (1 + _choice.TIMED)):
        _choice.choose(key_b, ("a", "b"), 10, lambda p: time.sleep(0.002 if p == "a" else 0.0))
    assert set(_choice.report()) == {key_b}


def test_threads_share_one_choice():
    """The in-process passes call kernels from several threads: every
    candidate still gets its timed calls, one choice is made and kept."""
    key = ("test", "<f8", 5, 5)
    seen = []

    def run(path):
        time.sleep(0.003 if path == "b" else 0.0005)
        return path

    def work():
        for _ in range(10):
            seen.append(_choice.choose(key, ("a", "b"), 100, run))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 30 and _choice.report()[key]["path"] == "a" and seen[-10:] == ["a"] * 10


def test_a_timed_call_that_ends_after_the_choice_re_decides_it():
    """With several threads a timed call of one path may still run when the
    other timed calls decide: its time counts. A CI run kept Lloyd's
    products at 67.3 ns a row while such a late call of the loops took 55.1
    ns: the choice must follow the least median time the report shows."""
    key, paths = ("test", "<f8", 16, 16), ("loops", "products")
    entry = {"calls": {p: 4 for p in paths}, "times": {p: [] for p in paths}, "chosen": None}
    _choice._CLASSES[key] = entry
    assert _choice.TIMED == 3
    for path, ns in [("loops", 70.0), ("products", 68.0), ("loops", 72.0), ("products", 69.0), ("loops", 60.0)]:
        _choice._record(entry, paths, path, ns * 1e-9)
        assert entry["chosen"] is None  # products lack their third time
    _choice._record(entry, paths, "products", 67.3e-9)
    assert _choice.report()[key] == {"path": "products", "ns_per_row": {"loops": 70.0, "products": 68.0}}
    _choice._record(entry, paths, "loops", 55.1e-9)  # the late call: the loops' median is now 65 ns
    assert _choice.report()[key] == {"path": "loops", "ns_per_row": {"loops": 65.0, "products": 68.0}}


def test_one_lucky_call_does_not_choose_a_slower_path():
    """The CI run that kept Lloyd's products (k = 16, 3e5 x 16 float32,
    overlapping) by their best call, 49.7 ns a row against the loops' 50,
    and then fitted 1.27-1.36x slower than the loops: a path is judged by
    its typical (median) call, so one fast call of a path whose other calls
    take 85-90 ns does not beat a path steady at 50-52 ns."""
    key, paths = ("test", "<f4", 16, 16), ("loops", "products")
    entry = {"calls": {p: 4 for p in paths}, "times": {p: [] for p in paths}, "chosen": None}
    _choice._CLASSES[key] = entry
    for loops, products in [(50.0, 49.7), (52.0, 85.0), (51.0, 90.0)]:
        _choice._record(entry, paths, "loops", loops * 1e-9)
        _choice._record(entry, paths, "products", products * 1e-9)
    assert _choice.report()[key] == {"path": "loops", "ns_per_row": {"loops": 51.0, "products": 85.0}}


def test_lloyd_measures_its_two_paths_and_gives_the_same_bits(monkeypatch):
    """Lloyd's step for many centres weighs the exact loops against the
    products (both give the same labels, distances, counts, sums and
    inertia: so the choice changes the time only); below
    LLOYD_PRODUCTS_MIN_K centres, and when LLOYD_PATH forces one, nothing
    is measured."""
    assert _compiled.lloyd_paths(_compiled.LLOYD_PRODUCTS_MIN_K - 1) == ("loops",)
    assert _compiled.lloyd_paths(_compiled.LLOYD_PRODUCTS_MIN_K) == ("loops", "products")
    rng = np.random.default_rng(0)
    c = rng.normal(scale=2, size=(24, 8))
    x = c[rng.integers(0, 24, 20_000)] + rng.normal(size=(20_000, 8))
    results = [_compiled.lloyd(x[i * 2000:(i + 1) * 2000], centers=c) for i in range(10)]
    decided = _choice.report("lloyd")[("lloyd", "<f8", 24, 8)]
    assert decided["path"] in ("loops", "products") and set(decided["ns_per_row"]) == {"loops", "products"}
    for path in ("loops", "products"):
        monkeypatch.setattr(_compiled, "LLOYD_PATH", path)
        assert _compiled.lloyd_paths(24) == (path,)
        for i, got in enumerate(results):
            want = _compiled.lloyd(x[i * 2000:(i + 1) * 2000], centers=c)
            for a, b in zip(got, want, strict=True):
                np.testing.assert_array_equal(a, b)
