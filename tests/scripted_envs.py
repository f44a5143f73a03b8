"""Small deterministic envs for tests; importable by spawned workers as 'scripted_envs:...'.

The tests put this folder on PYTHONPATH so that ``gymnasium.make("scripted_envs:Count-v0")``
imports this module (registering the ids) in every process.
"""

from __future__ import annotations

import os
import time

import gymnasium as gym
import numpy as np


class CountEnv(gym.Env):
    """Observation ``[100 * episode + t]``; reward 1 every real step; terminates after
    ``terminate_at`` steps (never when 0). Truncation comes from ``max_episode_steps``."""

    metadata: dict = {"render_modes": []}

    def __init__(self, terminate_at: int = 0, fail_at_step: int = 0, hang_at_step: int = 0,
                 hang_marker: str = "", hang_once: bool = False):
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.terminate_at = terminate_at
        self.fail_at_step = fail_at_step
        self.hang_at_step = hang_at_step
        self.hang_marker = hang_marker
        self.hang_once = hang_once  # hang only while hang_marker does not exist yet
        self.episode = -1
        self.t = 0
        self.total = 0

    def _obs(self):
        return np.array([100 * self.episode + self.t], np.float32)

    def _claim_hang(self) -> bool:
        """Create the marker (tells the test we are stuck now). With ``hang_once`` only the
        env that creates it hangs: an exclusive create, since envs in other workers reach
        the same step at the same moment."""
        if not self.hang_marker:
            return True
        if not self.hang_once:
            open(self.hang_marker, "a").close()
            return True
        try:
            os.close(os.open(self.hang_marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return False
        return True

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.total += 1
        if self.fail_at_step and self.total >= self.fail_at_step:
            raise RuntimeError(f"scripted failure at step {self.total}")
        if self.hang_at_step and self.total >= self.hang_at_step and self._claim_hang():
            try:
                time.sleep(3600)  # a simulator that stopped answering
            finally:  # only an exception gets here (SIGTERM via the worker), never SIGKILL
                if self.hang_marker:
                    open(self.hang_marker + ".interrupted", "a").close()
        terminated = bool(self.terminate_at and self.t >= self.terminate_at)
        return self._obs(), 1.0, terminated, False, {}


class WrongShapeEnv(CountEnv):
    """Declares a (1,) observation but returns (3,)."""

    def _obs(self):
        return np.zeros(3, np.float32)


gym.register("Count-v0", entry_point=CountEnv)
gym.register("Faulty-v0", entry_point=CountEnv, kwargs={"fail_at_step": 300})
gym.register("Hang-v0", entry_point=CountEnv, kwargs={"hang_at_step": 300})
gym.register("WrongShape-v0", entry_point=WrongShapeEnv)
