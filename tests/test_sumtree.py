"""fastrl.replay.sumtree: the trees' kernels against numpy references, and their drift."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastrl.replay.sumtree import fill_leaves, new_trees, pull_range, update_leaves


def rebuilt(sums: np.ndarray, mins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both trees recomputed from their leaves by numpy, level by level."""
    sums, mins = sums.copy(), mins.copy()
    width = sums.shape[0] // 2
    while width > 1:
        parents = slice(width // 2, width)
        sums[parents] = sums[width:2 * width:2] + sums[width + 1:2 * width:2]
        mins[parents] = np.minimum(mins[width:2 * width:2], mins[width + 1:2 * width:2])
        width //= 2
    return sums, mins


@settings(deadline=None, max_examples=80)
@given(capacity=st.integers(1, 70), ops=st.lists(
    st.tuples(st.booleans(), st.integers(0, 200), st.floats(0.01, 100.0)), max_size=30),
    seed=st.integers(0, 2**16))
def test_sums_and_mins_match_a_reference_after_random_fills_and_updates(capacity, ops, seed):
    """Fills (new rows at one priority, wrapping) and batched updates (with repeated
    indices and stale stamps) in any order."""
    rng = np.random.default_rng(seed)
    sums, mins = new_trees(capacity)
    leaf0 = sums.shape[0] // 2
    leaves = np.zeros(capacity)  # the reference: the priority ** alpha of every row
    stamps = np.full(capacity, -1, np.int64)
    cursor = size = inserted = 0
    for is_fill, count, value in ops:
        if is_fill or size == 0:
            fill_leaves(sums, mins, cursor, count, capacity, value)
            for k in range(count):
                row = (cursor + k) % capacity
                leaves[row], stamps[row] = value, inserted + k
            cursor, size, inserted = (cursor + count) % capacity, min(size + count, capacity), \
                inserted + count
            continue
        idx = rng.integers(size, size=count % 40 + 1)
        prio = rng.uniform(0.01, 100.0, idx.size)
        given_stamps = np.where(rng.random(idx.size) < 0.2, -5, stamps[idx])
        applied, top = update_leaves(sums, mins, stamps, idx, prio, given_stamps, 0.7)
        fresh = given_stamps == stamps[idx]
        for i in np.flatnonzero(fresh):  # in order: a repeated index keeps its last value
            leaves[idx[i]] = prio[i] ** 0.7
        assert applied == fresh.sum()
        assert top == (prio[fresh].max() if fresh.any() else 0.0)
    assert np.array_equal(sums[leaf0:leaf0 + capacity], leaves)
    assert math.isclose(sums[1], math.fsum(leaves), rel_tol=1e-12)
    filled_min = leaves[:size].min() if size else np.inf
    assert mins[1] == filled_min
    want_sums, want_mins = rebuilt(sums, mins)
    assert np.array_equal(sums, want_sums) and np.array_equal(mins, want_mins)


def test_drift_stays_below_1e6_after_two_million_updates():
    """Parents are recomputed from their children, so the root stays the leaves' sum."""
    capacity, batch = 1000, 250
    sums, mins = new_trees(capacity)
    fill_leaves(sums, mins, 0, capacity, capacity, 1.0)
    stamps = np.arange(capacity, dtype=np.int64)
    rng = np.random.default_rng(0)
    idx = rng.integers(capacity, size=(8_000, batch))
    # priorities spanning 12 orders of magnitude make a lossy running sum drift quickly
    prio = 10.0 ** rng.uniform(-6, 6, size=(8_000, batch))
    for i in range(8_000):
        update_leaves(sums, mins, stamps, idx[i], prio[i], stamps[idx[i]], 1.0)
    leaf0 = sums.shape[0] // 2
    exact = math.fsum(sums[leaf0:leaf0 + capacity])
    assert abs(sums[1] - exact) / exact < 1e-6
    assert mins[1] == sums[leaf0:leaf0 + capacity].min()
    want_sums, want_mins = rebuilt(sums, mins)
    assert np.array_equal(sums, want_sums) and np.array_equal(mins, want_mins)


def test_a_rebuild_from_the_leaves_is_bit_identical():
    sums, mins = new_trees(100)
    fill_leaves(sums, mins, 0, 100, 100, 0.3)
    rng = np.random.default_rng(1)
    stamps = np.arange(100, dtype=np.int64)
    for _ in range(50):
        idx = rng.integers(100, size=32)
        update_leaves(sums, mins, stamps, idx, rng.uniform(0, 9, 32) + 1e-3, stamps[idx], 0.6)
    leaf0 = sums.shape[0] // 2
    copy_sums, copy_mins = new_trees(100)
    copy_sums[leaf0:] = sums[leaf0:]
    copy_mins[leaf0:] = mins[leaf0:]
    pull_range(copy_sums, copy_mins, 0, leaf0)
    assert np.array_equal(copy_sums, sums) and np.array_equal(copy_mins, mins)
