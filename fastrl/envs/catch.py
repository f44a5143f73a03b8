"""Catch (bsuite's, Osband et al. 2020) as a numba-compiled batched simulator over pixels.

A ball falls from a random column of the top row of a 10x5 board, one row per step; the
paddle on the bottom row moves left, stays or moves right (actions 0, 1, 2). When the ball
reaches the bottom row the episode ends with reward +1 if the paddle is under it, else -1
(9 steps, rewards 0 before). Observations are uint8 frames ``[1, 80, 40]``: each board cell
is an 8x8 block, 255 where the ball or the paddle is, so that the Nature CNN (at least
36x36 pixels) reads them. Random play scores about -0.6; a perfect policy scores 1.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from numba import njit

from fastrl.envs.batched import StepRows, WritesRows, checked_discrete_actions, own_rows
from fastrl.envs.rng import uniform

ROWS, COLS, CELL = 10, 5, 8


@njit(cache=True, nogil=True)
def _reset_one(ball, paddle, rng, i: int) -> None:
    ball[i, 0] = 0
    ball[i, 1] = min(int(uniform(rng, i) * COLS), COLS - 1)
    paddle[i] = COLS // 2


@njit(cache=True, nogil=True)
def _render(ball, paddle, obs, i: int) -> None:
    obs[i] = 0
    r, c = ball[i, 0], ball[i, 1]
    obs[i, 0, r * CELL:(r + 1) * CELL, c * CELL:(c + 1) * CELL] = 255
    p = paddle[i]
    obs[i, 0, (ROWS - 1) * CELL:, p * CELL:(p + 1) * CELL] = 255


@njit(cache=True, nogil=True)
def _reset_all(ball, paddle, rng, obs) -> None:
    for i in range(ball.shape[0]):
        _reset_one(ball, paddle, rng, i)
        _render(ball, paddle, obs, i)


@njit(cache=True, nogil=True)
def _step(ball, paddle, rng, actions, obs, reward, terminated, final) -> None:
    for i in range(ball.shape[0]):
        paddle[i] = min(max(paddle[i] + actions[i] - 1, 0), COLS - 1)
        ball[i, 0] += 1
        done = ball[i, 0] == ROWS - 1
        reward[i] = (1.0 if ball[i, 1] == paddle[i] else -1.0) if done else 0.0
        terminated[i] = done
        if done:
            _render(ball, paddle, final, i)
            _reset_one(ball, paddle, rng, i)
        _render(ball, paddle, obs, i)


class BatchedCatch(WritesRows):
    """``len(seeds)`` Catch envs in one numba kernel (a :class:`BatchedEnv` with ``step``
    and ``step_into``)."""

    def __init__(self, seeds: list[int]) -> None:
        shape = (1, ROWS * CELL, COLS * CELL)
        self.observation_space = spaces.Box(0, 255, shape, np.uint8)
        self.action_space = spaces.Discrete(3)
        self.num_envs = n = len(seeds)
        self.seeds = list(seeds)
        self._ball = np.zeros((n, 2), np.int64)
        self._paddle = np.zeros(n, np.int64)
        self._rng = np.array(seeds, np.uint64)
        self._rows = own_rows(n, shape, np.dtype(np.uint8))

    def reset(self) -> np.ndarray:
        """Reset every env from its seed; returns the first frames ``[n, 1, 80, 40]``."""
        self._rng[:] = np.array(self.seeds, np.uint64)
        _reset_all(self._ball, self._paddle, self._rng, self._rows.obs)
        return self._rows.obs

    def step_into(self, actions: np.ndarray, out: StepRows) -> None:
        """Step every env into ``out``; ended episodes reset in the same call (see
        BatchedEnv)."""
        actions = checked_discrete_actions(actions, (self.num_envs,), 3, "BatchedCatch")
        out.truncated[...] = False  # episodes end only by catching or missing
        _step(self._ball, self._paddle, self._rng, actions.astype(np.int64), out.obs,
              out.reward, out.terminated, out.final_obs)

    def close(self) -> None:
        """Nothing to free."""
