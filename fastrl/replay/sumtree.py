"""A sum tree and a min tree over priorities in one flat float64 array, and their batched
numba kernels.

Layout: ``tree[k, 0]`` is node ``k`` of the sum tree and ``tree[k, 1]`` the same node of the
min tree, so one cache line holds a pair of siblings of both trees and an update touches
one line per level, not two. ``leaves`` is a power of two; node ``k`` has children ``2k``
and ``2k + 1``; the root is node 1 (node 0 is unused) and leaf ``i`` is node
``leaves + i``. Unused leaves hold 0 in the sum tree and +inf in the min tree, so they are
never sampled and never the minimum.

Every kernel rewrites a parent from its two children (``sum = left + right``) instead of
adding a difference to it. The trees are then a pure function of their leaves: rounding
errors cannot pile up over millions of updates (a parent's relative error stays within
``depth`` float64 roundings, ~1e-15), and a tree rebuilt from saved leaves is bit-identical
to the one that was saved, so a restored buffer draws the very same samples.

Batched kernels work level by level over the whole batch: one descent step for every
sample, then the next level, so that the cache misses of different samples overlap
instead of waiting on each other; an update writes every leaf first, then recomputes each
parent of the level's dirty nodes once, before moving up a level.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fastrl.replay.rows import gather_rows


def tree_shape(capacity: int) -> tuple[int, int]:
    """``(2 * leaves, 2)``: a sum and a min tree over ``capacity`` rounded up to a power of 2."""
    return 2 * (1 << max(capacity - 1, 0).bit_length()), 2


def new_tree(capacity: int) -> np.ndarray:
    """An empty sum and min tree (float64) with room for ``capacity`` leaves."""
    tree = np.zeros(tree_shape(capacity))
    tree[:, 1] = np.inf
    return tree


@njit(cache=True, nogil=True)
def pull_range(tree: np.ndarray, first: int, stop: int) -> None:
    """Recompute every ancestor of leaves ``first .. stop - 1``, one range per level."""
    lo, hi = tree.shape[0] // 2 + first, tree.shape[0] // 2 + stop - 1
    while lo > 1:
        lo, hi = lo >> 1, hi >> 1
        for node in range(lo, hi + 1):
            tree[node, 0] = tree[2 * node, 0] + tree[2 * node + 1, 0]
            tree[node, 1] = min(tree[2 * node, 1], tree[2 * node + 1, 1])


@njit(cache=True, nogil=True)
def fill_leaves(tree: np.ndarray, first: int, count: int, capacity: int, value: float) -> None:
    """Set ``count`` leaves from ``first`` on (wrapping at ``capacity``) to ``value`` and
    recompute their ancestors: the range new transitions were written to."""
    count = min(count, capacity)
    leaf0 = tree.shape[0] // 2
    for k in range(count):
        node = leaf0 + (first + k) % capacity
        tree[node, 0] = value
        tree[node, 1] = value
    stop = first + count
    if stop <= capacity:
        pull_range(tree, first, stop)
    else:  # the range wrapped: its two pieces
        pull_range(tree, first, capacity)
        pull_range(tree, 0, stop - capacity)


@njit(cache=True, nogil=True)
def _check_update(idx, priorities, size, leaves):
    """How many indices lie outside ``0 .. size - 1`` and the first such position, then how
    many priorities are not finite and > 0 (or their leaf is not) and the first such position
    (-1 where none)."""
    bad_idx = bad_prio = 0
    first_idx = first_prio = -1
    for i in range(idx.shape[0]):
        if idx[i] < 0 or idx[i] >= size:
            bad_idx += 1
            if first_idx < 0:
                first_idx = i
        p = priorities[i]
        if not (p > 0 and np.isfinite(p) and leaves[i] > 0 and np.isfinite(leaves[i])):
            bad_prio += 1
            if first_prio < 0:
                first_prio = i
    return bad_idx, first_idx, bad_prio, first_prio


@njit(cache=True, nogil=True)
def update_leaves(tree: np.ndarray, row_stamps: np.ndarray, size: int, idx: np.ndarray,
                  priorities: np.ndarray, leaves: np.ndarray,
                  stamps: np.ndarray) -> tuple[int, float, tuple[int, int, int, int]]:
    """Set leaf ``idx[i]`` to ``leaves[i]`` where ``row_stamps[idx[i]] == stamps[i]`` (the
    row still holds the transition that was sampled), then recompute each dirty ancestor
    once. A repeated index takes its last value. ``leaves`` is ``priorities ** alpha``,
    computed by the caller with numpy's vectorised power (a scalar pow per element here cost
    three times as much).

    Returns how many were applied, their largest priority (0.0 when none), and the check of
    the inputs: (indices outside ``0 .. size - 1``, the first one's position, priorities
    that are not finite and > 0 or whose ``** alpha`` is not, the first one's position;
    positions -1 where none). Nothing is applied unless both counts are 0.
    """
    check = _check_update(idx, priorities, size, leaves)
    if check[0] or check[2]:
        return 0, 0.0, check
    leaf0 = tree.shape[0] // 2
    nodes = np.empty(idx.shape[0], np.int64)  # the dirty nodes of the current level
    count = 0
    top = 0.0
    for i in range(idx.shape[0]):
        if row_stamps[idx[i]] != stamps[i]:
            continue  # overwritten since it was sampled: the priority is stale
        node = leaf0 + idx[i]
        tree[node, 0] = leaves[i]
        tree[node, 1] = leaves[i]
        nodes[count] = node
        count += 1
        top = max(top, priorities[i])
    applied = count
    level = leaf0
    while level > 1:
        # Parents, each kept once: a sum is never negative, so -1 marks a parent already
        # taken this level, in the very cache line the recompute needs next (no sort).
        kept = 0
        for i in range(count):
            parent = nodes[i] >> 1
            if tree[parent, 0] >= 0.0:
                tree[parent, 0] = -1.0
                nodes[kept] = parent
                kept += 1
        for i in range(kept):
            # written out: a helper taking the array made these loops several times slower
            node = nodes[i]
            tree[node, 0] = tree[2 * node, 0] + tree[2 * node + 1, 0]
            tree[node, 1] = min(tree[2 * node, 1], tree[2 * node + 1, 1])
        count = kept
        level >>= 1
    return applied, top, check


@njit(cache=True, nogil=True)
def sample_prioritized(tree: np.ndarray, size: int, u: np.ndarray, beta: float,
                       idx: np.ndarray, weights: np.ndarray, src: tuple, dst: tuple) -> None:
    """Stratified sampling of ``len(u)`` of the ``size`` stored rows, their IS weights, and
    the gather.

    The total mass is split into ``len(u)`` equal strata and stratum ``i`` is hit at
    ``(i + u[i]) / len(u)`` of it. ``weights[i] = (p_i / p_min) ** -beta`` with ``p`` the
    leaves (priority ** alpha) and ``p_min`` the min tree's root: ``(N * P(i)) ** -beta``
    divided by the largest weight any stored row can have, so weights are <= 1. Rows are
    gathered from ``src`` into ``dst`` as in :func:`gather_rows`.
    """
    batch = u.shape[0]
    leaf0 = tree.shape[0] // 2
    stride = tree[1, 0] / batch
    mass = np.empty(batch)
    for i in range(batch):
        mass[i] = (i + u[i]) * stride
        idx[i] = 1
    level = 1
    while level < leaf0:
        for i in range(batch):
            left = 2 * idx[i]
            below = tree[left, 0]
            right = mass[i] >= below
            mass[i] -= below * right  # branch-free: the outcome is a coin flip
            idx[i] = left + right
        level *= 2
    p_min = tree[1, 1]
    power = np.float32(-beta)  # float32 powers: the weights are float32, at half the cost
    for i in range(batch):
        # Rounding can carry the mass a hair past the last stored row into the empty
        # leaves; that row is the one it meant. (Clamping here instead of checking the
        # right sibling at every level made the descent a third faster.)
        idx[i] = min(idx[i] - leaf0, size - 1)
        weights[i] = np.float32(tree[leaf0 + idx[i], 0] / p_min) ** power
    gather_rows(idx, src, dst)
