"""PrioritizedReplayBuffer: proportional prioritized replay (Schaul et al. 2016) over the
n-step storage of :class:`~fastrl.replay.buffer.ReplayBuffer`, on the sum and min trees of
:mod:`fastrl.replay.sumtree`."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from fastrl.replay.buffer import ReplayBuffer, ReplayError
from fastrl.replay.sumtree import (
    fill_leaves,
    new_tree,
    pull_range,
    sample_prioritized,
    tree_shape,
    update_leaves,
)


class PrioritizedReplayBuffer(ReplayBuffer):
    """Rows are drawn with probability ``P(i) = p_i ** alpha / sum_k p_k ** alpha``.

    New transitions enter at the largest priority given so far (1.0 before any), so each is
    likely to be seen at least once. ``eps`` is what :meth:`td_priorities` adds to ``|td|``
    so that no priority is 0.
    """

    kind = "prioritized"

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype,
                 act_shape: tuple[int, ...], act_dtype, num_envs: int, n_step: int = 1,
                 gamma: float = 0.99, alpha: float = 0.6, eps: float = 1e-6) -> None:
        if not (math.isfinite(alpha) and alpha >= 0):
            raise ReplayError(f"alpha must be finite and >= 0 (0: uniform), got {alpha!r}")
        if not (math.isfinite(eps) and eps > 0):
            raise ReplayError(f"eps must be finite and > 0, got {eps!r}")
        super().__init__(capacity, obs_shape, obs_dtype, act_shape, act_dtype, num_envs,
                         n_step, gamma)
        self.alpha, self.eps = float(alpha), float(eps)
        self.max_priority = 1.0
        self._tree = new_tree(self.capacity)

    @classmethod
    def nbytes(cls, capacity: int, obs_shape: tuple[int, ...], obs_dtype,
               act_shape: tuple[int, ...], act_dtype, num_envs: int, n_step: int = 1) -> int:
        """As :meth:`ReplayBuffer.nbytes`, plus the float64 sum/min tree."""
        rows, pair = tree_shape(capacity)
        return super().nbytes(capacity, obs_shape, obs_dtype, act_shape, act_dtype, num_envs,
                              n_step) + rows * pair * 8

    def priority_leaves(self) -> np.ndarray:
        """The stored rows' ``priority ** alpha``, in row order (a view of the sum tree's
        leaves)."""
        return self._leaves()[:self._size, 0]

    def _leaves(self) -> np.ndarray:
        """Every leaf of both trees (``[leaves, 2]``), a view."""
        return self._tree[self._tree.shape[0] // 2:]

    def add_slot(self, slot: Mapping[str, np.ndarray]) -> int:
        """As :meth:`ReplayBuffer.add_slot`; the new rows get the largest priority so far."""
        first = self._cursor
        count = super().add_slot(slot)
        fill_leaves(self._tree, first, count, self.capacity, self.max_priority ** self.alpha)
        return count

    def sample(self, batch_size: int, rng: np.random.Generator,  # type: ignore[override]
               beta: float) -> dict[str, np.ndarray]:
        """``batch_size`` rows by stratified proportional sampling (one uniform draw in
        each of ``batch_size`` equal slices of the total priority).

        Keys as :meth:`ReplayBuffer.sample`; ``weights`` are the importance-sampling
        weights ``(N * P(i)) ** -beta`` normalised by the largest weight any stored row can
        have, the one of the smallest priority: ``w_i = (p_i / p_min) ** -beta`` with
        ``p = priority ** alpha`` and ``p_min`` from the min tree. Reused arrays as there.
        """
        if not 0.0 <= beta <= 1.0:
            raise ReplayError(f"beta must be in [0, 1], got {beta!r}")
        out, u, dst = self._batch(batch_size)
        rng.random(out=u)
        sample_prioritized(self._tree, self._size, u, beta, out["indices"], out["weights"],
                           self._store_args, dst)
        return dict(out)

    def td_priorities(self, td_errors) -> np.ndarray:
        """Priorities from TD errors: ``|td| + eps`` (float64)."""
        return np.abs(np.asarray(td_errors, np.float64)) + self.eps

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray,
                          stamps: np.ndarray) -> int:
        """Set the priorities of sampled rows; returns how many were applied.

        ``indices`` and ``stamps`` are a sample's; an update for a row whose stamp changed
        since (it was overwritten by a newer transition) is dropped. Priorities must be
        finite and > 0, as must ``priority ** alpha``; otherwise nothing is applied and
        :class:`ReplayError` says how many were not and shows one.
        """
        idx = np.ascontiguousarray(indices, np.int64)
        prio = np.ascontiguousarray(priorities, np.float64)
        stamps = np.ascontiguousarray(stamps, np.int64)
        if not (idx.ndim == 1 and idx.shape == prio.shape == stamps.shape):
            raise ReplayError(f"indices, priorities and stamps must be 1-D of one length, got "
                              f"shapes {idx.shape}, {prio.shape}, {stamps.shape}")
        with np.errstate(all="ignore"):  # bad priorities are reported below, by name
            leaves = np.power(prio, self.alpha)
        applied, top, (bad_idx, first_idx, bad_prio, first_prio) = update_leaves(
            self._tree, self.storage["stamp"], self._size, idx, prio, leaves, stamps)
        if bad_idx:
            raise ReplayError(f"{bad_idx} of {idx.size} indices are not stored rows (0 .. "
                              f"{self._size - 1}), e.g. {int(idx[first_idx])}")
        if bad_prio:
            raise ReplayError(
                f"{bad_prio} of {idx.size} priorities are not finite and > 0 (with "
                f"priority ** {self.alpha} finite and > 0 too), e.g. {float(prio[first_prio])!r}"
                f" for index {int(idx[first_prio])}; td_priorities(td_errors) gives |td| + eps")
        self.max_priority = max(self.max_priority, top)
        return applied

    # -- state ----------------------------------------------------------------------------

    def _config(self) -> dict[str, object]:
        return {**super()._config(), "alpha": self.alpha}

    def _counters(self) -> dict[str, int | float]:
        return {**super()._counters(), "max_priority": self.max_priority}

    def _arrays(self, size: int) -> dict[str, np.ndarray]:
        return {**super()._arrays(size), "priority_leaves": self._leaves()[:size, 0]}

    def _restore_counters(self, counters: dict[str, int | float]) -> None:
        super()._restore_counters(counters)
        self.max_priority = float(counters["max_priority"])

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        """As :meth:`ReplayBuffer.load_state_dict`; the trees are rebuilt from the saved
        leaves, bit-identical to the saved buffer's (see :mod:`fastrl.replay.sumtree`)."""
        super().load_state_dict(state)
        leaves = self._leaves()
        leaves[self._size:] = (0.0, np.inf)
        leaves[:self._size, 1] = leaves[:self._size, 0]
        pull_range(self._tree, 0, leaves.shape[0])
