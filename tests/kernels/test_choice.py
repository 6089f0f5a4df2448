"""Kernel paths chosen by measurement where they run (issue 63,
:mod:`infoclust_dask.kernels._choice`)."""

import math
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


def test_the_faster_path_is_chosen_after_timed_pairs_and_pairs_then_grow_rare():
    """The first call runs every candidate untimed (a first call may
    compile); the next TIMED calls each run both on the same rows, timed,
    the order turning; then the faster one runs alone, with a pair after
    EXPLORE_FIRST calls and after gaps that double while the pairs agree."""
    runs = []

    def run(path):
        runs.append(path)
        time.sleep(0.004 if path == "slow" else 0.0005)
        return path

    key = ("test", "<f8", 4, 2)
    outs = [_choice.choose(key, ("slow", "fast"), 1000, run) for _ in range(1 + _choice.TIMED + 12)]
    assert _choice.TIMED == 3 and _choice.EXPLORE_FIRST == 4
    pairs = ["slow", "fast", "fast", "slow", "slow", "fast", "fast", "slow"]  # the untimed pair, then 3 timed
    assert runs[:8] == pairs and outs[:4] == ["fast", "slow", "fast", "slow"]  # a pair returns its last run
    # calls 5-7 alone, the 8th a pair (the 4th timed: fast first), 9-15 alone, the 16th a pair (slow first)
    assert runs[8:] == ["fast"] * 3 + ["fast", "slow"] + ["fast"] * 7 + ["slow", "fast"]
    got = _choice.report("test")[key]
    assert got["path"] == "fast" and got["pairs"] == 5 and got["times_chosen"]["slow"] > 4
    assert got["ns_per_row"]["slow"] > got["ns_per_row"]["fast"] > 0
    assert _choice.report("other") == {}


def test_one_candidate_is_never_timed_and_classes_are_separate():
    key_a, key_b = ("test", "<f4", 8, 3), ("test", "<f4", 9, 3)
    assert _choice.choose(key_a, ("only",), 10, lambda p: p) == "only"
    assert _choice.report() == {}
    for _ in range(1 + _choice.TIMED):
        _choice.choose(key_b, ("a", "b"), 10, lambda p: time.sleep(0.002 if p == "a" else 0.0))
    assert set(_choice.report()) == {key_b}


def test_threads_share_one_choice():
    """The in-process passes call kernels from several threads: one choice
    is made and kept, and every thread runs it. Each call is judged by the
    paths it ran (a pair after the choice runs both and returns its last
    run's result, which may be either label), so the test does not depend
    on how the threads interleave (CI on 4161837 failed on a pair's
    ``"b"`` among the last six returned labels)."""
    key = ("test", "<f8", 5, 5)
    local = threading.local()
    calls = []  # (the path chosen before this call began, the paths this call ran)

    def run(path):
        local.ran.append(path)
        time.sleep(0.003 if path == "b" else 0.0005)
        return path

    def work():
        for _ in range(10):
            local.ran = []
            before = _choice.report().get(key, {}).get("path")
            assert _choice.choose(key, ("a", "b"), 100, run) in ("a", "b")
            calls.append((before, tuple(local.ran)))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 30 and _choice.report()[key]["path"] == "a"
    after = [ran for before, ran in calls if before is not None]
    assert len(after) >= 10 and all(before == "a" for before, _ in calls if before is not None)
    # after the choice a call runs the chosen path alone, or is one of the rare pairs (both, once each)
    assert all(ran == ("a",) or sorted(ran) == ["a", "b"] for ran in after)
    assert sum(ran == ("a",) for ran in after) >= len(after) - 3


def _pairs(key, sequence):
    """Record timed pairs (ns per row of each path) in a fresh class."""
    paths = ("loops", "products")
    entry = _choice._CLASSES[key] = _choice._new_entry(paths)
    for loops, products in sequence:
        _choice._record(entry, paths, {"loops": loops * 1e-9, "products": products * 1e-9})
    return entry


def test_one_lucky_call_does_not_choose_a_slower_path():
    """The CI run that kept Lloyd's products (k = 16, 3e5 x 16 float32,
    overlapping) by their best call, 49.7 ns a row against the loops' 50,
    and then fitted 1.27-1.36x slower than the loops: the median ratio of
    the pairs decides, so one fast call does not."""
    key = ("test", "<f4", 16, 16)
    _pairs(key, [(50.0, 49.7), (52.0, 85.0), (51.0, 90.0)])
    assert _choice.report()[key] == {"path": "loops", "ns_per_row": {"loops": 51.0, "products": 85.0},
                                     "times_chosen": {"products": round(85.0 / 52.0, 3)}, "pairs": 3}


def test_a_choice_made_in_a_busy_spell_is_corrected_by_later_pairs():
    """The CI run that chose Lloyd's products from calls made while another
    process was busy (the loops' median 179 ns a row, the products' 118)
    and kept them in every later fit at 1.25-1.6x the loops' time: later
    pairs outvote the first ones, and the gap to the next pair stays short
    while they disagree with the choice."""
    key = ("test", "<f4", 16, 16)
    entry = _pairs(key, [(179.0, 118.0), (185.0, 120.0), (170.0, 116.0)])
    assert entry["chosen"] == "products" and entry["every"] == _choice.EXPLORE_FIRST
    quiet = [(52.0, 80.0), (50.0, 85.0), (55.0, 78.0)]
    entry = _pairs(key, [(179.0, 118.0), (185.0, 120.0), (170.0, 116.0)] + quiet)
    assert entry["chosen"] == "products" and entry["every"] == _choice.EXPLORE_FIRST  # 3 against 3: kept
    entry = _pairs(key, [(179.0, 118.0), (185.0, 120.0), (170.0, 116.0)] + quiet + [(51.0, 88.0)])
    assert entry["chosen"] == "loops" and entry["every"] == _choice.EXPLORE_FIRST


def test_busy_pairs_either_way_do_not_move_a_right_choice():
    """On a shared machine a call takes its usual time or 3-4x it, whichever
    path it runs (this Xeon with another process busy: the loops 36-201 ns a
    row, the products 49-240): one slowed loops call in a pair, or two,
    among agreeing pairs, do not move the choice; the gaps double to
    EXPLORE_MOST while the pairs agree."""
    key = ("test", "<f4", 16, 16)
    entry = _pairs(key, [(50.0, 80.0), (190.0, 82.0), (52.0, 79.0), (48.0, 240.0), (175.0, 85.0), (51.0, 83.0)])
    assert entry["chosen"] == "loops"
    entry = _pairs(key, [(50.0, 80.0)] * 3 + [(50.0, 80.0)] * 10)
    assert entry["every"] == _choice.EXPLORE_MOST == 256


def test_paths_within_the_margin_neither_swap_nor_keep_pairing():
    """Two paths within MARGIN of each other are a tie that pairs decide at
    random: the chosen path stays, and the gaps still double. The rule this
    replaced swapped on every median crossing and went back to a pair every
    4 calls after each pair the other path won (each pair runs the other
    path once more): 1.075-1.104x the faster path's work at a tie, simulated
    in ``benchmarks/choice_rule.py``, against 1.026-1.039x now."""
    key = ("test", "<f4", 64, 16)
    first = [(50.0, 60.0), (50.0, 60.0), (50.0, 60.0)]  # loops chosen
    tie = [(50.0, 49.0), (50.0, 51.0), (50.0, 48.5), (50.0, 49.5)] * 3  # products 0-3 % faster
    entry = _pairs(key, first + tie)
    assert entry["chosen"] == "loops"
    assert math.exp(_choice._log_ratio(entry, "loops", "products")) < 1  # the median says products, by < MARGIN
    assert entry["every"] == _choice.EXPLORE_MOST


def test_a_path_faster_by_more_than_the_margin_takes_over_and_lost_pairs_halve_the_gap():
    key = ("test", "<f4", 64, 16)
    entry = _pairs(key, [(50.0, 60.0)] * 3 + [(50.0, 60.0)] * 4)  # loops, the gap doubled 4 times
    assert entry["chosen"] == "loops" and entry["every"] == 64
    entry = _pairs(key, [(50.0, 60.0)] * 7 + [(50.0, 45.0)])  # products 10 % faster in one pair: halved
    assert entry["chosen"] == "loops" and entry["every"] == 32
    entry = _pairs(key, [(50.0, 60.0)] * 7 + [(50.0, 45.0)] * 5)  # ... in 5 of the last 9: replaced
    assert entry["chosen"] == "products" and entry["every"] == _choice.EXPLORE_FIRST
    entry = _pairs(key, [(50.0, 60.0)] * 7 + [(50.0, 48.0)] * 9)  # 4 % faster in all 9: within the margin
    assert entry["chosen"] == "loops" and entry["every"] == _choice.EXPLORE_MOST


def test_pairs_after_the_choice_are_few(monkeypatch):
    """Agreeing pairs: in 2000 calls after the choice, a pair at calls 4, 12,
    28, 60, 124, 252, 508, 764, ..., 1788 (gaps 4, 8, ..., 256, 256, ...):
    12 pairs, so a right choice pays one extra run of the other path in
    ~170 calls."""
    key = ("test", "<f8", 3, 3)
    runs = []

    def run(path):
        runs.append(path)
        return path

    real = _choice._record
    # the pairs' clock readings replaced: b takes twice a's time in every pair
    monkeypatch.setattr(_choice, "_record", lambda e, c, seconds: real(e, c, {"a": 1e-8, "b": 2e-8}))
    for _ in range(1 + _choice.TIMED):
        _choice.choose(key, ("a", "b"), 10, run)
    assert _choice.report()[key]["path"] == "a" and runs.count("b") == 1 + _choice.TIMED
    runs.clear()
    for _ in range(2000):
        _choice.choose(key, ("a", "b"), 10, run)
    at, gap, want = 0, _choice.EXPLORE_FIRST, []
    while at + gap <= 2000:
        at += gap
        want.append(at)
        gap = min(2 * gap, _choice.EXPLORE_MOST)
    assert want[:7] == [4, 12, 28, 60, 124, 252, 508] and len(want) == 12
    assert runs.count("b") == len(want) and len(runs) == 2000 + len(want)
    assert _choice.report()[key]["path"] == "a" and _choice.report()[key]["pairs"] == _choice.TIMED + 12


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
    assert decided["pairs"] >= _choice.TIMED and set(decided["times_chosen"]) == {"loops", "products"} - {decided["path"]}
    for path in ("loops", "products"):
        monkeypatch.setattr(_compiled, "LLOYD_PATH", path)
        assert _compiled.lloyd_paths(24) == (path,)
        for i, got in enumerate(results):
            want = _compiled.lloyd(x[i * 2000:(i + 1) * 2000], centers=c)
            for a, b in zip(got, want, strict=True):
                np.testing.assert_array_equal(a, b)
