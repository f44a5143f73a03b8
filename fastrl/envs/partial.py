"""CartPole with its velocities hidden: the partially observed task of the bench's
``solve`` scenario, raced against sb3-contrib's RecurrentPPO on this very class.

Gymnasium's CartPole-v1 (its dynamics, rewards and 500-step limit) observing only the cart
position and the pole angle, as the RL Zoo's ``CartPoleNoVel-v1`` that its
``ppo_lstm.yml`` tunes RecurrentPPO on: a policy must infer the velocities from what it
saw before. Importing this module registers it as the Gymnasium id
``fastrl.envs.partial:CartPoleNoVel-v1``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control import CartPoleEnv

SEEN = [0, 2]  # cart position, pole angle


class CartPoleNoVel(CartPoleEnv):
    """CartPole observing ``[x, theta]`` only."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        high = np.array([self.x_threshold * 2, self.theta_threshold_radians * 2], np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)

    def reset(self, **kwargs: Any):
        """Gymnasium's reset, the velocities left out."""
        obs, info = super().reset(**kwargs)
        return obs[SEEN], info

    def step(self, action: int):
        """Gymnasium's step, the velocities left out."""
        obs, reward, terminated, truncated, info = super().step(action)
        return obs[SEEN], reward, terminated, truncated, info


gym.register("CartPoleNoVel-v1", entry_point=CartPoleNoVel, max_episode_steps=500)
