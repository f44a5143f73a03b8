"""sb3-contrib's action masks as PettingZoo's: an env's ``action_masks()`` method becomes
the ``action_mask`` key of its observations (fastrl.models.masks reads the key).

fastrl stores a mask with the observation it belongs to, so that the learner sees the mask
each action was chosen under; a method called beside the ring would have nowhere to put
it. :func:`with_action_masks` wraps an env that has the method (MaskablePPO's convention)
so that its masks travel the same way as those of an env that already puts them in its
observations (PettingZoo's).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from fastrl.memory.records import MASK_KEY

OBSERVATION_KEY = "observation"  # where a non-Dict observation goes (PettingZoo's key)


class ActionMasksAsObservation(gym.ObservationWrapper):
    """An env with an ``action_masks()`` method and ``Discrete(n)`` actions, its
    observations a Dict with the mask under ``action_mask`` (``n`` int8 flags) beside its
    own keys, or beside ``observation`` for a non-Dict observation."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._masks = env.get_wrapper_attr("action_masks")
        mask = spaces.Box(0, 1, (int(env.action_space.n),), np.int8)
        inner = env.observation_space
        self._dict = isinstance(inner, spaces.Dict)
        keys = dict(inner.spaces) if self._dict else {OBSERVATION_KEY: inner}
        self.observation_space = spaces.Dict({**keys, MASK_KEY: mask})

    def observation(self, observation: Any) -> dict:
        """The env's observation with its current action mask."""
        mask = np.asarray(self._masks(), np.int8)
        if self._dict:
            return {**observation, MASK_KEY: mask}
        return {OBSERVATION_KEY: observation, MASK_KEY: mask}


def with_action_masks(env: gym.Env) -> gym.Env:
    """``env``, its ``action_masks()`` moved into its observations when it has the method,
    Discrete actions (fastrl masks those only; sb3-contrib's MultiDiscrete and MultiBinary
    masks are left unused, as before) and no ``action_mask`` key already."""
    if not isinstance(env.action_space, spaces.Discrete):
        return env
    try:
        env.get_wrapper_attr("action_masks")
    except AttributeError:
        return env
    space = env.observation_space
    if isinstance(space, spaces.Dict) and MASK_KEY in space.spaces:
        return env
    return ActionMasksAsObservation(env)
