"""The env benchmarks/chaos.py runs its job on: ``chaos_env:Chaos-v0`` wraps the Gymnasium
env ``FASTRL_CHAOS_ENV`` names and, once chaos.py drops a trigger file (``raise`` or
``nan``) into the folder ``FASTRL_CHAOS_TRIGGERS`` names, the first env to see it claims it
and, a random number of steps later, raises or returns a NaN reward. Workers import this
module by its name, so chaos.py puts this folder on their PYTHONPATH."""

from __future__ import annotations

import os
import random

import gymnasium as gym

#: steps between two looks for a trigger file (a look is a failed rename: a system call)
LOOK_EVERY = 256
#: a claimed fault strikes within this many steps
WITHIN_STEPS = 200
KINDS = ("raise", "nan")


class ChaosEnv(gym.Wrapper):
    """``FASTRL_CHAOS_ENV`` (CartPole-v1 by default), raising or returning a NaN reward
    where chaos.py asks for it."""

    def __init__(self, **kwargs) -> None:
        super().__init__(gym.make(os.environ.get("FASTRL_CHAOS_ENV", "CartPole-v1"), **kwargs))
        self.triggers = os.environ.get("FASTRL_CHAOS_TRIGGERS")
        self.steps = 0
        self.armed: str | None = None
        self.countdown = 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.armed is None and self.triggers and self.steps % LOOK_EVERY == 0:
            self.armed = self._claim()
        if self.armed is not None:
            self.countdown -= 1
            if self.countdown <= 0:
                kind, self.armed = self.armed, None
                if kind == "raise":
                    raise RuntimeError("chaos: the env raised in step()")
                reward = float("nan")
        return obs, reward, terminated, truncated, info

    def _claim(self) -> str | None:
        """The fault of a trigger file this env took (renamed away: no other env takes it),
        or None."""
        for kind in KINDS:
            path = os.path.join(self.triggers, kind)
            try:
                os.rename(path, f"{path}.taken-{os.getpid()}-{id(self)}")
            except FileNotFoundError:
                continue
            self.countdown = random.randint(1, WITHIN_STEPS)
            return kind
        return None


gym.register("Chaos-v0", entry_point=ChaosEnv)
