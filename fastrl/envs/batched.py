"""The interface between workers and anything that steps many envs at once."""

from __future__ import annotations

from typing import Protocol

import numpy as np
from gymnasium import spaces


class BatchedEnv(Protocol):
    """``num_envs`` envs stepped by one call, arrays in and arrays out.

    ``observation_space`` / ``action_space`` are the spaces of *one* env. ``step`` resets
    each env whose episode ended in that same call (so no step is ever a fake autoreset
    transition) and returns ``(obs, reward, terminated, truncated, final_obs)``: ``obs`` is
    the next observation (a fresh one where an episode ended), ``final_obs[i]`` the real
    last observation where env ``i`` ended (anything elsewhere). Returned arrays may be
    reused by the next call. fastrl's :class:`~fastrl.envs.source.EnvGroup` (Gymnasium envs)
    and :class:`~fastrl.envs.cartpole.BatchedCartPole` (numba) both implement it.
    """

    observation_space: spaces.Space
    action_space: spaces.Space
    num_envs: int

    def reset(self) -> np.ndarray:
        """Reset every env with its seed; returns the first observations ``[n, *obs]``."""
        ...

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step every env once (see the class doc for the returned arrays)."""
        ...

    def close(self) -> None:
        """Free the simulator's resources."""
        ...


def checked_discrete_actions(actions: np.ndarray, num_envs: int, n: int,
                             simulator: str) -> np.ndarray:
    """``actions`` as an array of ``num_envs`` classes in ``0..n-1``; a ValueError naming
    ``simulator`` and what it got otherwise (fastrl's own numba simulators check here)."""
    actions = np.asarray(actions)
    if actions.shape != (num_envs,) or actions.min() < 0 or actions.max() >= n:
        classes = ", ".join(str(a) for a in range(n))
        raise ValueError(f"{simulator} takes {num_envs} actions in {{{classes}}}, got shape "
                         f"{actions.shape} values {np.unique(actions)[:5]}")
    return actions
