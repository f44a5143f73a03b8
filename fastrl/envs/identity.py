"""sb3-contrib's masked identity task, seeded: the masked task of the bench's ``solve``
scenario, raced against sb3-contrib's MaskablePPO on this very class.

Each step shows a state ``s`` in ``Discrete(dim)``; the action ``s`` earns 1, any other 0;
``n_invalid`` other actions are illegal at that step (``action_masks()``, sb3-contrib's
convention). An episode lasts ``ep_length`` steps. The dynamics are those of
``sb3_contrib.common.envs.InvalidActionEnvDiscrete``, whose draws come from unseeded global
generators (two envs reset with one seed differ, which fastrl's env contract refuses);
here every draw comes from the env's own ``np_random``. Importing this module registers it
as the Gymnasium id ``fastrl.envs.identity:MaskedIdentity-v0``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class MaskedIdentity(gym.Env):
    """Name the state shown, among the actions legal at that step."""

    metadata: dict = {"render_modes": []}

    def __init__(self, dim: int = 80, n_invalid: int = 60, ep_length: int = 100) -> None:
        if not 0 <= n_invalid < dim:
            raise ValueError(f"n_invalid={n_invalid}: must be in 0..{dim - 1} (dim={dim})")
        self.dim, self.n_invalid, self.ep_length = dim, n_invalid, ep_length
        self.observation_space = spaces.Discrete(dim)
        self.action_space = spaces.Discrete(dim)
        self._legal = np.ones(dim, bool)
        self.state, self.t = 0, 0

    def _next_state(self) -> int:
        self.state = int(self.np_random.integers(self.dim))
        others = np.delete(np.arange(self.dim), self.state)
        self._legal[:] = True
        self._legal[self.np_random.choice(others, self.n_invalid, replace=False)] = False
        return self.state

    def action_masks(self) -> np.ndarray:
        """The actions legal at this step (True where legal)."""
        return self._legal.copy()

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[int, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return self._next_state(), {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        reward = 1.0 if int(action) == self.state else 0.0
        self.t += 1
        return self._next_state(), reward, False, self.t >= self.ep_length, {}


gym.register("MaskedIdentity-v0", entry_point=MaskedIdentity)
