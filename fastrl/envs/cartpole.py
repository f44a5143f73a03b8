"""CartPole-v1 as a numba-compiled batched simulator: Gymnasium's dynamics, one call per step.

Same constants, Euler integration, termination bounds, reward (1 on every step, including
the terminating one) and 500-step truncation as ``gymnasium.make("CartPole-v1")``. The state
is float64 as in Gymnasium; observations are float32. Resets draw each state component
uniformly from [-0.05, 0.05) with a per-env splitmix64 stream seeded from the env's seed.
``spin_iters`` adds fastrl.envs.heavy's fixed CPU work to every env step: the batched twin of
``fastrl/HeavyCartPole-v1``.
"""

from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces
from numba import njit

from fastrl.envs.batched import (
    SlotRows,
    StepRows,
    WritesRows,
    checked_discrete_actions,
    own_rows,
)
from fastrl.envs.heavy import spin
from fastrl.envs.rng import uniform

GRAVITY, MASSCART, MASSPOLE, LENGTH, FORCE_MAG, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL_MASS = MASSCART + MASSPOLE
POLEMASS_LENGTH = MASSPOLE * LENGTH
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4


@njit(cache=True, nogil=True)
def _reset_one(state: np.ndarray, rng: np.ndarray, i: int) -> None:
    for k in range(4):
        state[i, k] = -0.05 + 0.1 * uniform(rng, i)


@njit(cache=True, nogil=True)
def _reset_all(state, rng, steps, obs) -> None:
    for i in range(state.shape[0]):
        _reset_one(state, rng, i)
        steps[i] = 0
        for k in range(4):
            obs[i, k] = state[i, k]


@njit(cache=True, nogil=True)
def _step(state, rng, steps, actions, max_steps, spin_iters, sink, obs, reward, terminated,
          truncated, final):
    for i in range(state.shape[0]):
        if spin_iters:
            sink[i] = spin(spin_iters, i)  # (stored: work whose result is unused may be dropped)
        x, x_dot, theta, theta_dot = state[i, 0], state[i, 1], state[i, 2], state[i, 3]
        force = FORCE_MAG if actions[i] == 1 else -FORCE_MAG
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + POLEMASS_LENGTH * theta_dot * theta_dot * sintheta) / TOTAL_MASS
        thetaacc = (GRAVITY * sintheta - costheta * temp) / (
            LENGTH * (4.0 / 3.0 - MASSPOLE * costheta * costheta / TOTAL_MASS)
        )
        xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
        x += TAU * x_dot
        x_dot += TAU * xacc
        theta += TAU * theta_dot
        theta_dot += TAU * thetaacc
        state[i, 0], state[i, 1], state[i, 2], state[i, 3] = x, x_dot, theta, theta_dot
        steps[i] += 1
        term = x < -X_THRESHOLD or x > X_THRESHOLD or theta < -THETA_THRESHOLD \
            or theta > THETA_THRESHOLD
        trunc = steps[i] >= max_steps  # as gymnasium's TimeLimit: both flags can be set
        reward[i] = 1.0
        terminated[i] = term
        truncated[i] = trunc
        if term or trunc:
            for k in range(4):
                final[i, k] = state[i, k]
            _reset_one(state, rng, i)
            steps[i] = 0
        for k in range(4):
            obs[i, k] = state[i, k]


@njit(cache=True, nogil=True)
def _rollout(state, rng, steps, actions, max_steps, spin_iters, sink, obs, next_obs, reward,
             terminated, truncated, final):
    last = actions.shape[0] - 1
    for t in range(last + 1):
        out = next_obs if t == last else obs[t + 1]
        _step(state, rng, steps, actions[t], max_steps, spin_iters, sink, out, reward[t],
              terminated[t], truncated[t], final[t])


class BatchedCartPole(WritesRows):
    """``len(seeds)`` CartPole-v1 envs in one numba kernel (a :class:`BatchedEnv` with
    ``step``, ``step_into`` and ``rollout_into``)."""

    def __init__(self, seeds: list[int], max_episode_steps: int = 500,
                 spin_iters: int = 0) -> None:
        high = np.array([X_THRESHOLD * 2, np.inf, THETA_THRESHOLD * 2, np.inf], np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.num_envs = n = len(seeds)
        self.max_episode_steps = max_episode_steps
        self.spin_iters = spin_iters
        self.seeds = list(seeds)
        self.state = np.zeros((n, 4), np.float64)
        self._rng = np.array(seeds, np.uint64)
        self._steps = np.zeros(n, np.int64)
        self._sink = np.zeros(n, np.uint64)
        self._rows = own_rows(n, (4,), np.dtype(np.float32))

    def reset(self) -> np.ndarray:
        """Reset every env from its seed; returns the first observations ``[n, 4]``."""
        self._rng[:] = np.array(self.seeds, np.uint64)
        _reset_all(self.state, self._rng, self._steps, self._rows.obs)
        return self._rows.obs

    def step_into(self, actions: np.ndarray, out: StepRows) -> None:
        """Step every env into ``out``; ended episodes reset in the same call (see
        BatchedEnv)."""
        actions = checked_discrete_actions(actions, (self.num_envs,), 2, "BatchedCartPole")
        _step(self.state, self._rng, self._steps, actions, self.max_episode_steps,
              self.spin_iters, self._sink, *out)

    def rollout_into(self, actions: np.ndarray, out: SlotRows) -> None:
        """``len(actions)`` steps in one kernel call, written into ``out`` (see BatchedEnv)."""
        actions = checked_discrete_actions(actions, np.shape(actions)[:1] + (self.num_envs,),
                                           2, "BatchedCartPole")
        _rollout(self.state, self._rng, self._steps, actions, self.max_episode_steps,
                 self.spin_iters, self._sink, *out)

    def close(self) -> None:
        """Nothing to free."""

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self.__dict__.setdefault("spin_iters", 0)  # (parked before spin_iters existed)
        self.__dict__.setdefault("_sink", np.zeros(self.num_envs, np.uint64))
