"""CartPole with a fixed amount of extra CPU work per step: an env where stepping dominates.

``spin_iters`` iterations of an integer hash are done on every step, so the cost is the same
work in every process (not a wall-clock sleep); :func:`spin_iters_for` converts a target
cost in microseconds into iterations on this machine.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv
from numba import njit


@njit(cache=True, nogil=True)
def spin(iters: int, seed: int = 0) -> int:
    """Deterministic CPU work the compiler can neither remove nor shorten: a xorshift64
    chain from ``seed``, each iteration depending on the last (the result is returned). It
    costs the same per iteration called from Python or inlined into a kernel looping over
    envs (a kernel passes each env its own seed, so that no two chains are the same
    computation); a linear congruential chain did not (LLVM shortened it ~10x inside the
    batched CartPole)."""
    h = np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(seed)
    for _ in range(iters):
        h ^= h << np.uint64(13)
        h ^= h >> np.uint64(7)
        h ^= h << np.uint64(17)
    return h


def spin_iters_for(micros: float) -> int:
    """Iterations of :func:`spin` that take about ``micros`` µs here (median of 5)."""
    spin(10)
    probe = 200_000
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        spin(probe)
        times.append(time.perf_counter() - t0)
    per_iter = sorted(times)[2] / probe
    return max(1, round(micros * 1e-6 / per_iter))


class HeavyCartPole(CartPoleEnv):
    """CartPole-v1 dynamics plus ``spin_iters`` of work per step."""

    def __init__(self, spin_iters: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.spin_iters = spin_iters

    def step(self, action):
        spin(self.spin_iters)
        return super().step(action)


gym.register("fastrl/HeavyCartPole-v1", entry_point=HeavyCartPole, max_episode_steps=500)
