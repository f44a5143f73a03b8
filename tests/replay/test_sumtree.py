"""fastrl.replay.sumtree: the trees' kernels against numpy references, and their drift."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastrl.replay.sumtree import fill_leaves, new_tree, pull_range, update_leaves


def rebuilt(tree: np.ndarray) -> np.ndarray:
    """Both trees recomputed from their leaves by numpy, level by level."""
    tree = tree.copy()
    width = tree.shape[0] // 2
    while width > 1:
        left, right = tree[width:2 * width:2], tree[width + 1:2 * width:2]
        tree[width // 2:width, 0] = left[:, 0] + right[:, 0]
        tree[width // 2:width, 1] = np.minimum(left[:, 1], right[:, 1])
        width //= 2
    return tree


@settings(deadline=None, max_examples=80)
@given(capacity=st.integers(1, 70), ops=st.lists(
    st.tuples(st.booleans(), st.integers(0, 200), st.floats(0.01, 100.0)), max_size=30),
    seed=st.integers(0, 2**16))
def test_sums_and_mins_match_a_reference_after_random_fills_and_updates(capacity, ops, seed):
    """Fills (new rows at one priority, wrapping) and batched updates (with repeated
    indices and stale stamps) in any order."""
    rng = np.random.default_rng(seed)
    tree = new_tree(capacity)
    leaf0 = tree.shape[0] // 2
    leaves = np.zeros(capacity)  # the reference: the priority ** alpha of every row
    stamps = np.full(capacity, -1, np.int64)
    cursor = size = inserted = 0
    for is_fill, count, value in ops:
        if is_fill or size == 0:
            fill_leaves(tree, cursor, count, capacity, value)
            for k in range(count):
                row = (cursor + k) % capacity
                leaves[row], stamps[row] = value, inserted + k
            cursor, size, inserted = (cursor + count) % capacity, min(size + count, capacity), \
                inserted + count
            continue
        idx = rng.integers(size, size=count % 40 + 1)
        prio = rng.uniform(0.01, 100.0, idx.size)
        given_stamps = np.where(rng.random(idx.size) < 0.2, -5, stamps[idx])
        powered = prio ** 0.7
        applied, top, _ = update_leaves(tree, stamps, size, idx, prio, powered, given_stamps)
        fresh = given_stamps == stamps[idx]
        for i in np.flatnonzero(fresh):  # in order: a repeated index keeps its last value
            leaves[idx[i]] = powered[i]
        assert applied == fresh.sum()
        assert top == (prio[fresh].max() if fresh.any() else 0.0)
    assert np.array_equal(tree[leaf0:leaf0 + capacity, 0], leaves)
    assert math.isclose(tree[1, 0], math.fsum(leaves), rel_tol=1e-12)
    assert tree[1, 1] == (leaves[:size].min() if size else np.inf)
    assert np.array_equal(tree, rebuilt(tree))


def test_drift_stays_below_1e6_after_two_million_updates():
    """Parents are recomputed from their children, so the root stays the leaves' sum."""
    capacity, batch = 1000, 250
    tree = new_tree(capacity)
    fill_leaves(tree, 0, capacity, capacity, 1.0)
    stamps = np.arange(capacity, dtype=np.int64)
    rng = np.random.default_rng(0)
    idx = rng.integers(capacity, size=(8_000, batch))
    # priorities spanning 12 orders of magnitude make a lossy running sum drift quickly
    prio = 10.0 ** rng.uniform(-6, 6, size=(8_000, batch))
    for i in range(8_000):
        update_leaves(tree, stamps, capacity, idx[i], prio[i], prio[i], stamps[idx[i]])
    leaves = tree[tree.shape[0] // 2:][:capacity, 0]
    exact = math.fsum(leaves)
    assert abs(tree[1, 0] - exact) / exact < 1e-6
    assert tree[1, 1] == leaves.min()
    assert np.array_equal(tree, rebuilt(tree))


def test_a_rebuild_from_the_leaves_is_bit_identical():
    tree = new_tree(100)
    fill_leaves(tree, 0, 100, 100, 0.3)
    rng = np.random.default_rng(1)
    stamps = np.arange(100, dtype=np.int64)
    for _ in range(50):
        idx = rng.integers(100, size=32)
        prio = rng.uniform(0, 9, 32) + 1e-3
        update_leaves(tree, stamps, 100, idx, prio, prio ** 0.6, stamps[idx])
    leaf0 = tree.shape[0] // 2
    copy = new_tree(100)
    copy[leaf0:] = tree[leaf0:]
    pull_range(copy, 0, leaf0)
    assert np.array_equal(copy, tree)
