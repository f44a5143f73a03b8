"""Sum and min trees over priorities, as flat float64 arrays, and their batched numba kernels.

Layout: ``leaves`` is a power of two; node ``k`` has children ``2k`` and ``2k + 1``; the root
is node 1 (node 0 is unused) and leaf ``i`` is node ``leaves + i``. Unused leaves hold 0 in
the sum tree and +inf in the min tree, so they are never sampled and never the minimum.

Every kernel rewrites a parent from its two children (``sum = left + right``) instead of
adding a difference to it. The trees are then a pure function of their leaves: rounding
errors cannot pile up over millions of updates (a parent's relative error stays within
``depth`` float64 roundings, ~1e-15), and a tree rebuilt from saved leaves is bit-identical
to the one that was saved, so a restored buffer draws the very same samples.

Batched kernels work level by level over the whole batch: one descent step for every
sample, then the next level, so the cache misses of different samples overlap instead of
waiting on each other; updates write every leaf first, then recompute each dirty parent
once per level.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fastrl.replay.rows import gather_rows


def new_trees(capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """An empty sum tree and min tree with room for ``capacity`` leaves."""
    leaves = 1 << max(capacity - 1, 0).bit_length()
    return np.zeros(2 * leaves), np.full(2 * leaves, np.inf)


@njit(cache=True, nogil=True, inline="always")
def _pull(sums: np.ndarray, mins: np.ndarray, node: int) -> None:
    """Recompute ``node`` of both trees from its children."""
    left, right = 2 * node, 2 * node + 1
    sums[node] = sums[left] + sums[right]
    mins[node] = min(mins[left], mins[right])


@njit(cache=True, nogil=True)
def pull_range(sums: np.ndarray, mins: np.ndarray, first: int, stop: int) -> None:
    """Recompute every ancestor of leaves ``first .. stop - 1``, one range per level."""
    lo, hi = sums.shape[0] // 2 + first, sums.shape[0] // 2 + stop - 1
    while lo > 1:
        lo, hi = lo >> 1, hi >> 1
        for node in range(lo, hi + 1):
            _pull(sums, mins, node)


@njit(cache=True, nogil=True)
def fill_leaves(sums: np.ndarray, mins: np.ndarray, first: int, count: int, capacity: int,
                value: float) -> None:
    """Set ``count`` leaves from ``first`` on (wrapping at ``capacity``) to ``value`` and
    recompute their ancestors: the range new transitions were written to."""
    count = min(count, capacity)
    leaf0 = sums.shape[0] // 2
    for k in range(count):
        node = leaf0 + (first + k) % capacity
        sums[node] = value
        mins[node] = value
    stop = first + count
    if stop <= capacity:
        pull_range(sums, mins, first, stop)
    else:  # the range wrapped: its two pieces
        pull_range(sums, mins, first, capacity)
        pull_range(sums, mins, 0, stop - capacity)


@njit(cache=True, nogil=True)
def check_update(idx: np.ndarray, priorities: np.ndarray, size: int,
                 alpha: float) -> tuple[int, int, int, int]:
    """How many indices lie outside ``0 .. size - 1`` and the first such position, then how
    many priorities are not finite and > 0 (or whose ``priority ** alpha`` is not) and the
    first such position (-1 where none)."""
    bad_idx = bad_prio = 0
    first_idx = first_prio = -1
    for i in range(idx.shape[0]):
        if idx[i] < 0 or idx[i] >= size:
            bad_idx += 1
            if first_idx < 0:
                first_idx = i
        p = priorities[i]
        leaf = p ** alpha
        if not (p > 0 and np.isfinite(p) and leaf > 0 and np.isfinite(leaf)):
            bad_prio += 1
            if first_prio < 0:
                first_prio = i
    return bad_idx, first_idx, bad_prio, first_prio


@njit(cache=True, nogil=True)
def update_leaves(sums: np.ndarray, mins: np.ndarray, row_stamps: np.ndarray, idx: np.ndarray,
                  priorities: np.ndarray, stamps: np.ndarray, alpha: float) -> tuple[int, float]:
    """Set leaf ``idx[i]`` to ``priorities[i] ** alpha`` where ``row_stamps[idx[i]] ==
    stamps[i]`` (the row still holds the transition that was sampled), then recompute each
    dirty ancestor once. Returns how many were applied and their largest priority (0.0 when
    none). Inputs are valid (:func:`check_update`); a repeated index takes its last value."""
    leaf0 = sums.shape[0] // 2
    nodes = np.empty(idx.shape[0], np.int64)
    applied = 0
    top = 0.0
    for i in range(idx.shape[0]):
        if row_stamps[idx[i]] != stamps[i]:
            continue  # overwritten since it was sampled: the priority is stale
        node = leaf0 + idx[i]
        leaf = priorities[i] ** alpha
        sums[node] = leaf
        mins[node] = leaf
        nodes[applied] = node
        applied += 1
        top = max(top, priorities[i])
    if applied == 0:
        return 0, top
    nodes = np.sort(nodes[:applied])
    count = applied
    while nodes[0] > 1:
        # parents of a sorted list are sorted: keep each once, compacting in place
        kept = 0
        for i in range(count):
            parent = nodes[i] >> 1
            if kept == 0 or nodes[kept - 1] != parent:
                nodes[kept] = parent
                kept += 1
                _pull(sums, mins, parent)
        count = kept
    return applied, top


@njit(cache=True, nogil=True)
def sample_prioritized(sums: np.ndarray, mins: np.ndarray, u: np.ndarray, beta: float,
                       idx: np.ndarray, weights: np.ndarray, pairs: tuple) -> None:
    """Stratified sampling of ``len(u)`` rows, their IS weights, and the gather.

    The total mass is split into ``len(u)`` equal strata and stratum ``i`` is hit at
    ``(i + u[i]) / len(u)`` of it. ``weights[i] = (p_i / p_min) ** -beta`` with ``p`` the
    leaves (priority ** alpha) and ``p_min`` the min tree's root: ``(N * P(i)) ** -beta``
    divided by the largest weight any stored row can have, so weights are <= 1. Rows are
    gathered into ``pairs`` as in :func:`gather_rows`.
    """
    batch = u.shape[0]
    leaf0 = sums.shape[0] // 2
    stride = sums[1] / batch
    mass = np.empty(batch)
    for i in range(batch):
        mass[i] = (i + u[i]) * stride
        idx[i] = 1
    level = 1
    while level < leaf0:
        for i in range(batch):
            left = 2 * idx[i]
            below = sums[left]
            # right when the mass lies beyond the left subtree, unless the right one is
            # empty (rounding can put the mass a hair past the last stored leaf)
            right = (mass[i] >= below) & (sums[left + 1] > 0.0)
            mass[i] -= below * right  # branch-free: the outcome is a coin flip
            idx[i] = left + right
        level *= 2
    p_min = mins[1]
    for i in range(batch):
        weights[i] = (sums[idx[i]] / p_min) ** -beta
        idx[i] -= leaf0
    gather_rows(idx, pairs)
