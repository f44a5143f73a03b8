"""Recall: a memory task as a numba-compiled batched simulator (``fastrl/Recall-v0``).

A cue, one of ``cues``, is shown at an episode's first step only; ``delay`` blank steps
follow; then a query step asks for it: naming the cue there earns 1, anything else 0, and
the episode ends (``delay + 2`` steps). Observations are float32 ``[cues + 1]``: the cue
one-hot at the first step, the last element 1 at the query, zeros between. Actions before
the query earn nothing. What the query step shows is the same for every cue, so a policy
without memory scores ``1 / cues`` at best; one that remembers the cue scores 1.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from numba import njit

from fastrl.envs.batched import StepRows, WritesRows, checked_discrete_actions, own_rows
from fastrl.envs.rng import uniform


@njit(cache=True, nogil=True)
def _show(cue, t, obs, delay: int, i: int) -> None:
    obs[i] = 0.0
    if t[i] == 0:
        obs[i, cue[i]] = 1.0
    elif t[i] == delay + 1:
        obs[i, obs.shape[1] - 1] = 1.0


@njit(cache=True, nogil=True)
def _new_episode(cue, t, rng, cues: int, i: int) -> None:
    cue[i] = min(int(uniform(rng, i) * cues), cues - 1)
    t[i] = 0


@njit(cache=True, nogil=True)
def _reset_all(cue, t, rng, obs, cues: int, delay: int) -> None:
    for i in range(cue.shape[0]):
        _new_episode(cue, t, rng, cues, i)
        _show(cue, t, obs, delay, i)


@njit(cache=True, nogil=True)
def _step(cue, t, rng, actions, obs, reward, terminated, final, cues: int,
          delay: int) -> None:
    for i in range(cue.shape[0]):
        query = t[i] == delay + 1
        reward[i] = 1.0 if query and actions[i] == cue[i] else 0.0
        terminated[i] = query
        t[i] += 1
        if query:
            final[i] = 0.0  # (the episode is over: nothing more is shown)
            _new_episode(cue, t, rng, cues, i)
        _show(cue, t, obs, delay, i)


class BatchedRecall(WritesRows):
    """``len(seeds)`` Recall envs in one numba kernel (a :class:`BatchedEnv` with ``step``
    and ``step_into``): ``cues`` cues, ``delay`` blank steps before the query."""

    def __init__(self, seeds: list[int], cues: int = 4, delay: int = 6) -> None:
        if cues < 2 or delay < 0:
            raise ValueError(f"Recall takes cues >= 2 and delay >= 0, got cues={cues}, "
                             f"delay={delay}")
        self.cues, self.delay = int(cues), int(delay)
        self.observation_space = spaces.Box(0.0, 1.0, (cues + 1,), np.float32)
        self.action_space = spaces.Discrete(cues)
        self.num_envs = n = len(seeds)
        self.max_episode_steps = delay + 2  # (episodes end by the query; none is truncated)
        self.seeds = list(seeds)
        self._cue = np.zeros(n, np.int64)
        self._t = np.zeros(n, np.int64)
        self._rng = np.array(seeds, np.uint64)
        self._rows = own_rows(n, (cues + 1,), np.dtype(np.float32))

    def reset(self) -> np.ndarray:
        """Reset every env from its seed; returns the first observations ``[n, cues + 1]``."""
        self._rng[:] = np.array(self.seeds, np.uint64)
        _reset_all(self._cue, self._t, self._rng, self._rows.obs, self.cues, self.delay)
        return self._rows.obs

    def step_into(self, actions: np.ndarray, out: StepRows) -> None:
        """Step every env into ``out``; ended episodes reset in the same call (see
        BatchedEnv)."""
        actions = checked_discrete_actions(actions, (self.num_envs,), self.cues,
                                           "BatchedRecall")
        out.truncated[...] = False
        _step(self._cue, self._t, self._rng, actions.astype(np.int64), out.obs, out.reward,
              out.terminated, out.final_obs, self.cues, self.delay)

    def close(self) -> None:
        """Nothing to free."""
