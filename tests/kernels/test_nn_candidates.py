"""NN-descent's candidates (kernels/_nn_candidates.py) against a plain
Python reading of the rule: every row's new and old reservoirs, its own
entries first, then the rows listing it in row order, each draw a function
of (round seed, row, offer number); old ones only for rows with a new one;
the new entries sampled flagged old. Exactly the same arrays, for any
split of the rows over threads."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from infoclust_dask.kernels._nn_candidates import candidates

M64 = (1 << 64) - 1


def _mix(seed, row, s):
    """The draw for the ``s``-th offer to ``row``'s reservoir: splitmix64's
    finalizer of (seed xor row * C1 xor s * C2) + golden ratio, mod 2**64."""
    z = ((seed ^ ((row * 0xD1B54A32D192ED03) & M64) ^ ((s * 0x8CB92BA72F3D8DD7) & M64)) + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _reference(ids, flags, n_cand, seed):
    n, k = ids.shape
    new = np.full((n, n_cand), -1, dtype=np.int32)
    old = np.full((n, n_cand), -1, dtype=np.int32)
    flags = flags.copy()
    before = flags.copy()  # the reverse neighbours are read as the round began
    for i in range(n):
        for cand, want in ((new, 1), (old, 0)):
            if want == 0 and (new[i] >= 0).sum() == 0:
                break
            own = [int(ids[i, s]) for s in range(k) if ids[i, s] >= 0 and before[i, s] == want]
            rev = [r for r in range(n) for s in range(k) if ids[r, s] == i and before[r, s] == want]
            kept, seen = [], 0
            for number, j in enumerate(own + rev):
                if number >= len(own) and j in kept:
                    continue
                if seen < n_cand:
                    kept.append(j)
                else:
                    slot = _mix(seed, i, seen) % (seen + 1)
                    if slot < n_cand:
                        kept[slot] = j
                seen += 1
            cand[i, :len(kept)] = kept
        for s in range(k):
            if flags[i, s] == 1 and ids[i, s] in new[i]:
                flags[i, s] = 0
    return new, old, flags


def _lists(n, k, seed):
    """Lists with what a round meets: short lists (-1), a hub listed by
    many rows (more offers than slots: the reservoir draws), mutual
    entries (a reverse offer already kept), both flags, rows with nothing
    new."""
    rng = np.random.default_rng(seed)
    ids = np.full((n, k), -1, dtype=np.int32)
    for i in range(n):
        width = k if i % 7 else k // 2
        others = rng.choice(np.delete(np.arange(n), i), width, replace=False)
        if i % 3 == 0 and i != 5:
            others[0] = 5  # row 5: listed by a third of the rows
        ids[i, :width] = others
    ids[5, :3] = [0, 3, 6]  # and listing some of them back
    flags = (rng.random((n, k)) < 0.6).astype(np.uint8)
    flags[ids < 0] = 0
    flags[10:20] = 0  # rows 10..19: nothing new (no old candidates either), though they have old entries
    flags[(ids >= 10) & (ids < 20)] = 0
    return ids, flags


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(("n", "k", "n_cand"), [(300, 6, 6), (200, 8, 4)])
def test_candidates_are_the_rule_read_row_by_row(threads, n, k, n_cand):
    ids, flags = _lists(n, k, seed=n + k)
    seed = 0x1234_5678_9ABC_DEF0
    want_new, want_old, want_flags = _reference(ids, flags, n_cand, seed)
    assert (want_old >= 0).any() and (want_new[5] >= 0).all()
    assert (want_new[10:20] < 0).all() and (want_old[10:20] < 0).all() and (ids[10:20] >= 0).any()
    got_flags = flags.copy()
    with ThreadPoolExecutor(threads) as pool:
        shares = [range(w, 8, threads) for w in range(threads)]
        new, old = candidates(ids, got_flags, n_cand, seed, pool.map, shares, 8)
    np.testing.assert_array_equal(new, want_new)
    np.testing.assert_array_equal(old, want_old)
    np.testing.assert_array_equal(got_flags, want_flags)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_late_round_with_few_new_entries_is_the_rule_too(threads):
    """The last rounds: a few new entries, most rows with no new
    candidate (their reverse lists are not gathered and they are not
    swept). A row active only because another row lists it as new, a row
    active only by its own new entry, and every other row: as the rule."""
    n, k, n_cand = 400, 8, 6
    ids, _ = _lists(n, k, seed=7)
    flags = np.zeros_like(ids, dtype=np.uint8)
    flags[30, 2] = 1  # row 30: its own new entry ...
    target = int(ids[30, 2])
    flags[50, :] = 0
    flags[61, 0] = 1  # ... and row ids[61, 0] listed as new by row 61, with nothing new of its own
    only_reverse = int(ids[61, 0])
    flags[only_reverse] = 0
    flags[ids < 0] = 0
    seed = 0x0F0F_1234_5678_9ABC
    want_new, want_old, want_flags = _reference(ids, flags, n_cand, seed)
    assert (want_new[only_reverse] >= 0).any() and (want_new[30] >= 0).any() and (want_new[target] >= 0).any()
    assert (want_new >= 0).any(axis=1).sum() <= 6  # most rows take no part
    got_flags = flags.copy()
    with ThreadPoolExecutor(threads) as pool:
        new, old = candidates(ids, got_flags, n_cand, seed, pool.map, [range(w, 8, threads) for w in range(threads)], 8)
    np.testing.assert_array_equal(new, want_new)
    np.testing.assert_array_equal(old, want_old)
    np.testing.assert_array_equal(got_flags, want_flags)
